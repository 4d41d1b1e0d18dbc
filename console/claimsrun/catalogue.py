"""The article's claims C1–C10: each in a plain sentence, the article's figure, the verdict
rule beside it, and the function that measures it.

The rules are the thresholds a measured figure must reach; where the article gives a
number the *reproduced* band sits around it, where it gives only a direction the band
asks for a clear effect (≥ 10 %). *Partly* means the direction holds but the size (or
one half of a two-part claim) does not. The rules are fixed here, before any run, and
are not tuned to what the emulator produces: the article is what is tested.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from console.claimsrun import (
    measure_endpoints,
    measure_fabric,
    measure_inference,
    measure_latency,
    measure_storage,
)
from console.claimsrun.model import Measurement, Settings, Tick
from console.claimsrun.verdict import INF, Band, Condition, Rule, at_least, at_most

Measure = Callable[[Settings, Tick], Measurement]
PCT = "{:.0%}"


@dataclass(frozen=True)
class Part:
    """One row of the table: one checkable statement of a claim."""

    key: str  # the key of its PartResult in the measurement
    sentence: str  # the claim in one plain sentence
    article: str  # the article's figure, as it gives it
    rule: Rule


@dataclass(frozen=True)
class Claim:
    """An article claim, its rows and how it is measured."""

    id: str
    title: str
    parts: tuple[Part, ...]
    measure: Measure
    #: roughly what share of the full run this claim costs (for the progress bar)
    weight: float = 1.0


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "C1",
        "GPUDirect RDMA",
        (
            Part(
                "latency",
                "GPUDirect RDMA (the NIC reads GPU memory) is faster and cheaper in "
                "CPU than copying through host memory",
                "lower latency and CPU cost (no figure)",
                Rule(
                    (
                        at_least("latency_reduction", 0.10, 0.01, "latency reduction", PCT),
                        at_least("cpu_reduction", 0.10, 0.01, "host CPU reduction", PCT),
                    )
                ),
            ),
        ),
        measure_endpoints.measure_c1,
        0.3,
    ),
    Claim(
        "C2",
        "IBGDA",
        (
            Part(
                "dispatch",
                "GPU-initiated posting (IBGDA) speeds up MoE all-to-all against a CPU proxy thread",
                "key for MoE all-to-all (no figure)",
                Rule((at_least("dispatch_reduction", 0.20, 0.05, "dispatch time reduction", PCT),)),
            ),
        ),
        measure_endpoints.measure_c2,
        2.0,
    ),
    Claim(
        "C3",
        "IBGDA version check",
        (
            Part(
                "check",
                "mismatched driver/CUDA/library versions make IBGDA posts fail or hang, "
                "and a 2-GPU all-to-all bring-up check catches it",
                "posts fail or communication hangs",
                Rule(
                    (
                        at_least("healthy_passes", 1, 1, "matched versions pass"),
                        at_least(
                            "mismatch_detected", 1.0, 0.5, "share of mismatch modes detected", PCT
                        ),
                    )
                ),
            ),
        ),
        measure_endpoints.measure_c3,
        0.5,
    ),
    Claim(
        "C4",
        "NVMe over RDMA",
        (
            Part(
                "vs-tcp",
                "NVMe over RDMA cuts storage access latency by more than 80 % "
                "against a kernel-TCP path",
                "latency −80 % or more",
                Rule((at_least("latency_reduction", 0.80, 0.40, "4 KiB read p50 reduction", PCT),)),
            ),
            Part(
                "vs-local",
                "remote NVMe over RDMA is close to local NVMe",
                "“close to local”",
                Rule((at_most("remote_over_local", 1.25, 1.6, "remote / local p50 latency"),)),
            ),
        ),
        measure_storage.measure_c4,
        0.3,
    ),
    Claim(
        "C5",
        "NFS over RDMA",
        (
            Part(
                "util",
                "NFS over RDMA keeps training GPUs more than 95 % busy, where NFS over "
                "TCP leaves them near 55 %",
                "GPU utilisation ~55 % → > 95 %",
                Rule(
                    (
                        at_least(
                            "rdma_utilisation", 0.95, 0.85, "GPU utilisation on NFS/RDMA", PCT
                        ),
                        # "near 55 %": within 10 points; below 95 % at least shows the gap
                        Condition(
                            "tcp_utilisation",
                            Band(0.45, 0.65),
                            Band(high=0.95),
                            "GPU utilisation on NFS/TCP",
                            PCT,
                        ),
                    )
                ),
            ),
            Part(
                "step",
                "NFS over RDMA shortens a training step by 30–60 %",
                "round time −30 % to −60 %",
                Rule(
                    (
                        Condition(
                            "step_reduction",
                            Band(0.30, 0.60),
                            Band(0.10, INF),
                            "step time reduction",
                            PCT,
                        ),
                    )
                ),
            ),
        ),
        measure_storage.measure_c5,
        2.0,
    ),
    Claim(
        "C6",
        "XDS",
        (
            Part(
                "zero-copy",
                "XDS moves storage data straight into GPU memory, with no copy through host memory",
                "zero copy (no figure)",
                Rule(
                    (
                        at_most(
                            "xds_host_bytes_per_byte", 0.0, 1.0, "host-memory bytes per byte on XDS"
                        ),
                        at_least("restore_reduction", 0.10, 0.0, "restore time reduction", PCT),
                    )
                ),
            ),
        ),
        measure_storage.measure_c6,
        0.5,
    ),
    Claim(
        "C7",
        "latency",
        (
            Part(
                "3-switch",
                "over three switches the native fabric's latency is about 63 % "
                "lower than RoCE's for messages of 4 KB and more",
                "−63 % (3 hops, ≥ 4 KB)",
                Rule(
                    (
                        Condition(
                            "gap_3sw_ge_4k",
                            Band(0.53, 0.73),
                            Band(0.20, INF),
                            "mean 3-switch gap over 4 KiB–1 MiB",
                            PCT,
                        ),
                    )
                ),
            ),
            Part(
                "sub-microsecond",
                "a switch hop takes nanoseconds and a message arrives end "
                "to end in under a microsecond",
                "< 1 µs end to end",
                Rule(
                    (
                        at_most(
                            "native_1sw_small_s",
                            1e-6,
                            2e-6,
                            "native 1-switch small-message latency (s)",
                        ),
                    )
                ),
            ),
        ),
        measure_latency.measure_c7,
        0.3,
    ),
    Claim(
        "C8",
        "lossless without PFC",
        (
            Part(
                "deadlock",
                "the native fabric is lossless without PFC and cannot deadlock, "
                "while RoCE's PFC can deadlock on a cyclic buffer dependency",
                "lossless; PFC can deadlock",
                Rule(
                    (
                        at_most("native_dropped_bytes", 0.0, 0.0, "native bytes dropped"),
                        at_most("native_deadlocks", 0.0, 0.0, "native deadlocks"),
                        at_least("roce_deadlocks", 1.0, 0.0, "RoCE deadlocks"),
                    )
                ),
            ),
        ),
        measure_fabric.measure_c8,
        2.0,
    ),
    Claim(
        "C9",
        "TTFT",
        (
            Part(
                "ttft",
                "an RDMA KV-cache path improves time to first token by about 20–30 % against TCP",
                "TTFT −20 % to −30 %",
                Rule(
                    (
                        Condition(
                            "ttft_reduction",
                            Band(0.15, 0.35),
                            Band(0.05, INF),
                            "TTFT p50 reduction",
                            PCT,
                        ),
                    )
                ),
            ),
            Part(
                "share",
                "in prefill/decode disaggregation the KV transfer's share of TTFT "
                "grows with context length",
                "share grows with context",
                Rule(
                    (
                        at_least(
                            "share_rise_fraction",
                            1.0,
                            0.5,
                            "share of context steps where the share rises",
                            PCT,
                        ),
                    )
                ),
            ),
        ),
        measure_inference.measure_c9,
        1.0,
    ),
    Claim(
        "C10",
        "next generation",
        (
            Part(
                "800g",
                "800G links carry about twice the traffic of 400G on the same fabric",
                "800G (no figure)",
                Rule((at_least("throughput_ratio", 1.8, 1.2, "800G / 400G throughput"),)),
            ),
            Part(
                "spray",
                "packet spraying shortens the long tail against ECMP hashing",
                "long tail an open problem; spraying (no figure)",
                Rule((at_least("p99_reduction", 0.20, 0.05, "bulk FCT p99 reduction", PCT),)),
            ),
            Part(
                "recovery",
                "the native fabric recovers from a link failure far faster than "
                "RoCE's BFD + ECMP reconvergence",
                "fast route recovery (no figure)",
                Rule((at_least("recovery_ratio", 10.0, 2.0, "RoCE / native recovery time"),)),
            ),
        ),
        measure_fabric.measure_c10,
        2.0,
    ),
)

BY_ID = {c.id: c for c in CLAIMS}


def select(only: str | None) -> tuple[Claim, ...]:
    """The claims ``--only C7,C9`` names (all when None).

    Raises:
        ValueError: an id that is not a claim, naming the known ones.
    """
    if only is None:
        return CLAIMS
    ids = [i.strip().upper() for i in only.split(",") if i.strip()]
    if not ids:
        raise ValueError("--only: give claim ids, e.g. --only C7,C9")
    bad = [i for i in ids if i not in BY_ID]
    if bad:
        raise ValueError(f"--only: unknown claim(s) {', '.join(bad)}; known: {', '.join(BY_ID)}")
    return tuple(c for c in CLAIMS if c.id in ids)
