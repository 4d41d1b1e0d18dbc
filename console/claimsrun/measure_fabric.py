"""C8 (lossless without PFC; PFC deadlock) and C10 (800G, spraying, fast recovery).

C8 runs the bundled ``pfc-deadlock`` scenario on both flow-control families, and a
bulk leaf-spine fabric (``fabric_table``: every GPU keeps ``outstanding`` 1 MiB flows
to random peers, RPC probes beside them) over fabric size and load. C10 runs the
same fabric on ``native-800g`` and with each routing mode (the flow-completion tails as
means over several seeds, each routing on the same ones), and the bundled
``chaos-recovery`` scenario (one leaf uplink fails) for the time to recover.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from console.claimsrun.model import Figure, Measurement, PartResult, Settings, Sweep, Tick
from console.claimsrun.params import profile_params
from console.claimsrun.runs import bundled, run_scenario
from fabric_core.units import format_bytes

NATIVE, ROCE, NEXT = "native-400g", "roce-400g", "native-800g"
DEFAULT_LEAVES, DEFAULT_OUTSTANDING = 4, 2
#: Static PFC buffers per priority that C8's deadlock is run with on RoCE: around the
#: scenario's guess of 512 KiB, up to a deep-buffer switch's few MiB
BUFFER_SWEEP = (262144, 524288, 1048576, 2097152, 4194304)
BUFFER_SWEEP_QUICK = (524288, 2097152)


def _size_list(sizes: list[float]) -> str:
    """``256 KiB, 512 KiB or 1 MiB``."""
    names = [format_bytes(b) for b in sizes]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def fabric_table(leaves: int, outstanding: int, routing: str | None = None) -> dict[str, Any]:
    """A leaf-spine fabric (4 GPUs a leaf, 4 spines) under closed-loop bulk + RPC probes."""
    raw: dict[str, Any] = {
        "name": f"bulk-{leaves}x4",
        "dt": "1us",
        "seed": 1,
        "topology": {"kind": "leaf-spine", "leaves": leaves, "spines": 4, "gpus_per_leaf": 4},
        "classes": {"bulk": 0, "rpc": 1},
        "workload": [
            {
                "name": "bulk",
                "kind": "bulk",
                "class": "bulk",
                "senders": "all",
                "size": "1MiB",
                "outstanding": outstanding,
            },
            {"name": "probe", "kind": "rpc", "class": "rpc", "size": "4KiB", "rate_per_s": 20000},
        ],
    }
    if routing is not None:
        raw["profile_overrides"] = {"routing": routing}
    return raw


def _bulk(
    settings: Settings,
    tick: Tick,
    prof: str,
    leaves: int,
    outstanding: int,
    routing: str | None = None,
) -> dict[str, Any]:
    d = 1e-3 if settings.quick else 2e-3
    what = f" routing={routing}" if routing else ""
    return run_scenario(
        fabric_table(leaves, outstanding, routing),
        d,
        settings,
        tick,
        prof=prof,
        cache=True,
        label=f"bulk {leaves} leaves, {outstanding} outstanding, {prof}{what}",
    )


#: Seeds the routing comparison averages over (quick, full): a 1 MiB flow's p99 over 2 ms of
#: 16 GPUs is one of a few hundred completions, and which peers the random draws pair up
#: moves it by ±10 % (eight seeds: ECMP 139–178 µs); the routings run on the same seeds.
ROUTING_SEEDS = (3, 8)


def _p99_over_seeds(
    settings: Settings, tick: Tick, outstanding: int, routing: str
) -> tuple[float, list[float]]:
    """Bulk FCT p99 on the native fabric with ``routing``: the mean over the routing
    seeds (from the settings' seed on, else from 1), and each seed's."""
    first = 1 if settings.seed is None else settings.seed
    n = ROUTING_SEEDS[0] if settings.quick else ROUTING_SEEDS[1]
    each = [
        _p99(
            _bulk(
                dataclasses.replace(settings, seed=first + k),
                tick,
                NATIVE,
                DEFAULT_LEAVES,
                outstanding,
                routing,
            ),
            "bulk",
        )
        for k in range(n)
    ]
    return float(np.mean(each)), each


def _tput(r: dict[str, Any]) -> float:
    return float(r["totals"]["throughput_bytes_per_second"])


def _p99(r: dict[str, Any], cls: str) -> float:
    v = r["classes"].get(cls, {}).get("p99_seconds")
    return float("nan") if v is None else float(v)


def measure_c8(settings: Settings, tick: Tick) -> Measurement:
    """Deadlock and drops on pfc-deadlock; throughput and p99 vs fabric size and load."""
    d = 10e-3 if settings.quick else 20e-3
    dl = {
        p: run_scenario(
            bundled("pfc-deadlock"), d, settings, tick, prof=p, label=f"pfc-deadlock {p}"
        )
        for p in (NATIVE, ROCE)
    }
    sizes = (2, 4) if settings.quick else (2, 4, 8)
    loads = (1, 4) if settings.quick else (1, 2, 4)
    tp_size = Sweep(
        "c8_throughput_vs_size",
        "C8: throughput vs fabric size (bulk, 2 flows per GPU)",
        "GPUs",
        "n",
        "throughput",
        "Bps",
        panel="c8size",
    )
    p99_size = Sweep(
        "c8_p99_vs_size",
        "C8: RPC p99 vs fabric size (4 KiB probes beside bulk)",
        "GPUs",
        "n",
        "RPC p99",
        "s",
        panel="c8size",
    )
    tp_load = Sweep(
        "c8_throughput_vs_load",
        "C8: throughput vs load (16 GPUs)",
        "flows outstanding per GPU",
        "n",
        "throughput",
        "Bps",
        panel="c8load",
    )
    p99_load = Sweep(
        "c8_p99_vs_load",
        "C8: RPC p99 vs load (16 GPUs)",
        "flows outstanding per GPU",
        "n",
        "RPC p99",
        "s",
        panel="c8load",
    )
    for leaves in sizes:
        r = {p: _bulk(settings, tick, p, leaves, DEFAULT_OUTSTANDING) for p in (NATIVE, ROCE)}
        tp_size.add(4 * leaves, {p: _tput(x) for p, x in r.items()})
        p99_size.add(4 * leaves, {p: _p99(x, "rpc") for p, x in r.items()})
    for out in loads:
        r = {p: _bulk(settings, tick, p, DEFAULT_LEAVES, out) for p in (NATIVE, ROCE)}
        tp_load.add(out, {p: _tput(x) for p, x in r.items()})
        p99_load.add(out, {p: _p99(x, "rpc") for p, x in r.items()})
    nat, roce = dl[NATIVE], dl[ROCE]
    src = "report deadlocks (Fabric.deadlocks), totals.dropped_bytes (pfc-deadlock)"
    part = PartResult(
        Figure(NATIVE, float(nat["deadlocks"]), "n", src),
        Figure(ROCE, float(roce["deadlocks"]), "n", src),
        _tput(nat) / _tput(roce),
        "native / RoCE throughput",
        {
            "native_dropped_bytes": float(nat["totals"]["dropped_bytes"]),
            "native_deadlocks": float(nat["deadlocks"]),
            "roce_deadlocks": float(roce["deadlocks"]),
        },
        f"pfc-deadlock: 16 GPUs, two misrouted flows close a cyclic buffer dependency, "
        f"{d * 1e3:g} ms; deadlocks found; dropped native "
        f"{nat['totals']['dropped_bytes'] / 1e6:.3g} MB, RoCE "
        f"{roce['totals']['dropped_bytes'] / 1e6:.3g} MB",
    )
    # the switch's per-priority buffer is a guess (pfc-deadlock.toml): what the deadlock
    # depends on, on RoCE (the native fabric has no PFC to deadlock)
    buffers = BUFFER_SWEEP_QUICK if settings.quick else BUFFER_SWEEP
    by_buffer = Sweep(
        "c8_deadlocks_vs_buffer",
        "C8: RoCE deadlocks on pfc-deadlock against the per-priority PFC buffer",
        "static PFC buffer per priority",
        "B",
        "deadlocks",
        "n",
        log_x=True,
    )
    for size in buffers:
        raw = bundled("pfc-deadlock")
        raw["profile_overrides"] = {**raw["profile_overrides"], "pfc_buffer_bytes": size}
        rep = run_scenario(raw, d, settings, tick, prof=ROCE, label=f"pfc-deadlock {size:g} B")
        by_buffer.add(size, {ROCE: float(rep["deadlocks"])})
    rec = recovery(settings, tick)  # shared with C10 (cached)
    formed = [b for b, n in zip(by_buffer.x, by_buffer.series[ROCE], strict=True) if n > 0]
    spared = [b for b in by_buffer.x if b not in formed]
    where = (
        f"with {_size_list(formed)} and not with {_size_list(spared)}"
        if formed and spared
        else "at every size swept"
        if formed
        else "at no size swept"
    )
    notes = [
        "the scenario's static PFC buffer of 512 KiB per priority is a guess for a "
        "shallow-buffer switch (no vendor publishes a per-priority allotment): in "
        f"{d * 1e3:g} ms RoCE deadlocks {where} (the buffer sweep): a deadlock needs every "
        "buffer of the cycle full at once, which the hot spots do only to a small buffer",
        f"a leaf uplink failing under load (chaos-recovery): the native fabric recovers in "
        f"{rec[NATIVE] * 1e3:.3g} ms (local fast reroute), RoCE in {rec[ROCE]:.3g} s (BFD "
        "detection + ECMP reconvergence, and then the RC ACK timeout of the senders whose "
        "bytes the dead link swallowed); the row is under C10",
    ]
    params = profile_params(
        settings,
        (
            "flow_control",
            "buffer_per_vl_bytes",
            "pfc_buffer_mode",
            "pfc_buffer_bytes",
            "pfc_watchdog_s",
        ),
        NATIVE,
        ROCE,
        scenario="pfc-deadlock",
    )
    return Measurement(
        {"deadlock": part},
        [tp_size, p99_size, tp_load, p99_load, by_buffer],
        params,
        notes,
        runs=4 + 2 * (len(sizes) + len(loads)) + len(buffers),
    )


def recovery(settings: Settings, tick: Tick) -> dict[str, float]:
    """Time to recover from the chaos-recovery link failure, per profile (cached)."""
    out = {}
    for prof, dt, dur in ((NATIVE, "1us", 12e-3), (ROCE, "100us", 1.4)):
        raw = bundled("chaos-recovery")
        raw["dt"] = dt  # RoCE's BFD takes ~1 s: a coarse tick keeps the run short
        rep = run_scenario(
            raw, dur, settings, tick, prof=prof, cache=True, label=f"chaos-recovery {prof}"
        )
        t = rep["faults"][0]["time_to_recover_seconds"] if rep["faults"] else None
        out[prof] = float("nan") if t is None else float(t)
    return out


def measure_c10(settings: Settings, tick: Tick) -> Measurement:
    """800G vs 400G; spraying vs adaptive vs ECMP; link-failure recovery native vs RoCE."""
    sizes = (2, 4) if settings.quick else (2, 4, 8)
    loads = (1, 4) if settings.quick else (1, 2, 4)
    gen = Sweep(
        "c10_throughput_400_800",
        "C10: throughput, 400G vs 800G (bulk, 2 flows per GPU)",
        "GPUs",
        "n",
        "throughput",
        "Bps",
    )
    for leaves in sizes:
        gen.add(
            4 * leaves,
            {
                p: _tput(_bulk(settings, tick, p, leaves, DEFAULT_OUTSTANDING))
                for p in (NATIVE, NEXT)
            },
        )
    routings = ("ecmp", "adaptive", "spray")
    route = Sweep(
        "c10_fct_p99_vs_routing",
        "C10: 1 MiB flow-completion p99 by routing (16 GPUs, mean over seeds)",
        "flows outstanding per GPU",
        "n",
        "bulk FCT p99",
        "s",
    )
    for out in loads:
        route.add(out, {r: _p99_over_seeds(settings, tick, out, r)[0] for r in routings})
    t4 = _tput(_bulk(settings, tick, NATIVE, DEFAULT_LEAVES, DEFAULT_OUTSTANDING))
    t8 = _tput(_bulk(settings, tick, NEXT, DEFAULT_LEAVES, DEFAULT_OUTSTANDING))
    per_seed = {r: _p99_over_seeds(settings, tick, DEFAULT_OUTSTANDING, r) for r in routings}
    p = {r: mean for r, (mean, _) in per_seed.items()}
    # the paired change a seed, spray against ECMP: how much of the difference is the draws'
    paired = 1 - np.array(per_seed["spray"][1]) / np.array(per_seed["ecmp"][1])
    n_seeds = paired.size
    spread = float(paired.std(ddof=1) / np.sqrt(n_seeds)) if n_seeds > 1 else float("nan")
    rec = recovery(settings, tick)
    cond = f"16 GPUs (4 leaves × 4 spines), every GPU keeps {DEFAULT_OUTSTANDING} 1 MiB flows to random peers"
    src_t = "report totals.throughput_bytes_per_second"
    src_p = "report classes.bulk.p99_seconds"
    src_r = "report faults[0].time_to_recover_seconds (chaos-recovery)"
    parts = {
        "800g": PartResult(
            Figure(NEXT, t8, "Bps", src_t),
            Figure(NATIVE, t4, "Bps", src_t),
            t8 / t4,
            "800G / 400G throughput",
            {"throughput_ratio": t8 / t4},
            cond,
        ),
        "spray": PartResult(
            Figure("spray", p["spray"], "s", src_p),
            Figure("ECMP", p["ecmp"], "s", src_p),
            p["ecmp"] / p["spray"],
            "ECMP / spray p99",
            {"p99_reduction": 1 - p["spray"] / p["ecmp"]},
            cond + f", native-400g; the mean p99 over {n_seeds} seeds, the same for each "
            f"routing (a seed's reduction {paired.mean():.0%} ± {spread:.0%}, standard error); "
            f"adaptive {p['adaptive'] * 1e6:.0f} µs",
        ),
        "recovery": PartResult(
            Figure(NATIVE, rec[NATIVE], "s", src_r),
            Figure(ROCE, rec[ROCE], "s", src_r),
            rec[ROCE] / rec[NATIVE],
            "RoCE / native recovery time",
            {"recovery_ratio": rec[ROCE] / rec[NATIVE]},
            "chaos-recovery: leaf00->spine00 fails at 5 ms under bulk + all-to-all; native "
            "local fast reroute vs RoCE BFD + ECMP reconvergence and the RC ACK timeout",
        ),
    }
    params = profile_params(
        settings,
        (
            "link_bandwidth_Bps",
            "routing",
            "reroute_s",
            "bfd_interval_s",
            "bfd_multiplier",
            "ecmp_reconverge_s",
            "local_ack_timeout_s",
        ),
        NATIVE,
        ROCE,
        NEXT,
    )
    n_runs = 2 * len(sizes) + 3 * n_seeds * len({*loads, DEFAULT_OUTSTANDING}) + 2
    return Measurement(parts, [gen, route], params, runs=n_runs)
