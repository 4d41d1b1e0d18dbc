"""C7: the native fabric's latency against RoCE, over message size, across 1 and 3 switches.

One message alone on an idle two-leaf fabric of each profile (``runs.message_latency``):
serialisation, per-hop forwarding (cut-through or store-and-forward), headers per MTU,
propagation and NIC latency all come from the profiles' parameters.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from console.claimsrun.model import Figure, Measurement, PartResult, Settings, Sweep, Tick
from console.claimsrun.params import profile_params
from console.claimsrun.runs import message_latency, profile
from fabric_core.net.profiles import Profile
from fabric_core.units import format_duration

NATIVE, ROCE = "native-400g", "roce-400g"
FULL_SIZES = (64, 256, 1024, 4096, 16384, 65536, 262144, 1048576)
QUICK_SIZES = (64, 4096, 65536, 1048576)
#: The article's claim is for messages of at least this size.
CLAIM_MIN_BYTES = 4096
#: The article's figure, drawn on the plot for comparison (never used as a result).
ARTICLE_GAP = 0.63
#: Switch port-to-port latencies the sweep runs through: the cited ranges of both parts
#: (no vendor publishes either figure; fabric_core.net.profiles gives the sources).
ROCE_SWITCH_RANGE_S = (250e-9, 400e-9, 550e-9, 700e-9, 850e-9)
NATIVE_SWITCH_RANGE_S = (150e-9, 275e-9, 400e-9)


def switch_latency_sweep(profs: dict[str, Profile], tick: Tick) -> Sweep:
    """The 3-switch gap at 4 KiB as a function of the two switches' latencies: with no
    published figure for either part, what the claim depends on."""
    sweep = Sweep(
        "c7_switch_latency_gap",
        "C7: native lower by, 3 switches, 4 KiB, against the switches' latency",
        "RoCE switch latency",
        "s",
        "native lower by",
        "frac",
        panel="c7switch",
        reference=(ARTICLE_GAP, "article: −63 %"),
    )
    for roce_s in ROCE_SWITCH_RANGE_S:
        roce = message_latency(
            dataclasses.replace(profs[ROCE], switch_latency_s=roce_s), CLAIM_MIN_BYTES, 3
        )
        row = {}
        for native_s in NATIVE_SWITCH_RANGE_S:
            native = message_latency(
                dataclasses.replace(profs[NATIVE], switch_latency_s=native_s), CLAIM_MIN_BYTES, 3
            )
            row[f"native switch {native_s * 1e9:.0f} ns"] = 1 - native / roce
        tick(f"C7 switch latency {roce_s * 1e9:.0f} ns")
        sweep.add(roce_s, row)
    return sweep


#: The receiver's polling costs the small-message latency is run with: the guess's range
POLL_SWEEP_S = (100e-9, 250e-9, 500e-9, 1e-6)


def poll_sweep(native: Profile, size: int, tick: Tick) -> Sweep:
    """The native fabric's one-switch latency of a ``size``-byte message against the
    receiver's polling cost, a guess (``Profile.host_poll_s``) the sub-microsecond part
    depends on."""
    sweep = Sweep(
        "c7_small_latency_vs_poll",
        f"C7: one {size} B message through one switch, native, against the receiver's poll",
        "poll cost",
        "s",
        "latency",
        "s",
        reference=(1e-6, "article: < 1 µs"),
    )
    for poll_s in POLL_SWEEP_S:
        at = dataclasses.replace(native, host_poll_s=poll_s)
        sweep.add(poll_s, {NATIVE: message_latency(at, size, 1)})
        tick(f"C7 poll {poll_s * 1e9:.0f} ns")
    return sweep


def measure_c7(settings: Settings, tick: Tick) -> Measurement:
    """Latency gap vs message size over 1 and 3 switches; the claim's figures at 3."""
    sizes = QUICK_SIZES if settings.quick else FULL_SIZES
    profs = {p: profile(p, settings) for p in (NATIVE, ROCE)}
    sweeps = {}
    gaps: dict[int, dict[int, float]] = {1: {}, 3: {}}
    lat: dict[tuple[int, int], dict[str, float]] = {}
    for hops in (1, 3):
        sw = Sweep(
            f"c7_latency_{hops}sw",
            f"C7: one message over {hops} switch" + ("es" if hops > 1 else ""),
            "message size",
            "B",
            "latency",
            "s",
            log_x=True,
            log_y=True,
            panel="c7",
        )
        gap = Sweep(
            f"c7_gap_{hops}sw",
            f"C7: native lower by, {hops} switch" + ("es" if hops > 1 else ""),
            "message size",
            "B",
            "native lower by",
            "frac",
            log_x=True,
            panel="c7gap",
            reference=(ARTICLE_GAP, "article: −63 % (3 switches, ≥ 4 KB)") if hops == 3 else None,
        )
        for size in sizes:
            v = {p: message_latency(pr, size, hops) for p, pr in profs.items()}
            tick(f"C7 {size} B over {hops}")
            lat[(hops, size)] = v
            gaps[hops][size] = 1 - v[NATIVE] / v[ROCE]
            sw.add(size, v)
            gap.add(size, {"native vs RoCE": gaps[hops][size]})
        sweeps[f"lat{hops}"], sweeps[f"gap{hops}"] = sw, gap
    big = [s for s in sizes if s >= CLAIM_MIN_BYTES]
    mean_gap = float(np.mean([gaps[3][s] for s in big]))
    head = lat[(3, CLAIM_MIN_BYTES)]
    src = "runs.message_latency: Scripted flow finish − start on an idle fabric"
    sizes_text = f"{big[0]:,} B – {big[-1] // 1024:,} KiB"
    parts = {
        "3-switch": PartResult(
            Figure(NATIVE, head[NATIVE], "s", src),
            Figure(ROCE, head[ROCE], "s", src),
            head[ROCE] / head[NATIVE],
            "RoCE / native latency",
            {"gap_3sw_ge_4k": mean_gap},
            f"one 4 KiB message, idle 2-leaf fabric, leaf–spine–leaf; the rule reads the mean "
            f"gap over {sizes_text} ({', '.join(f'{gaps[3][s]:.0%}' for s in big)})",
        ),
        "sub-microsecond": PartResult(
            Figure(NATIVE, lat[(1, sizes[0])][NATIVE], "s", src),
            Figure(ROCE, lat[(1, sizes[0])][ROCE], "s", src),
            lat[(1, sizes[0])][ROCE] / lat[(1, sizes[0])][NATIVE],
            "RoCE / native latency",
            {"native_1sw_small_s": lat[(1, sizes[0])][NATIVE]},
            f"one {sizes[0]} B message through one switch, host to host (post to poll, with "
            f"the NICs' PCIe transfers); per-hop forwarding "
            f"{profs[NATIVE].switch_latency_s * 1e9:.0f} ns native, "
            f"{profs[ROCE].switch_latency_s * 1e9:.0f} ns RoCE",
        ),
    }
    by_switch = switch_latency_sweep(profs, tick)
    by_poll = poll_sweep(profs[NATIVE], sizes[0], tick)
    polls = by_poll.series[NATIVE]
    notes = [
        "no vendor publishes a port-to-port latency for either switch: both are "
        f"assumptions ({profs[NATIVE].switch_latency_s * 1e9:.0f} ns native, "
        f"{profs[ROCE].switch_latency_s * 1e9:.0f} ns RoCE), and the 3-switch gap follows "
        "their difference (the switch-latency sweep)",
        f"over 3 switches the native fabric is lower by {gaps[3][big[0]]:.0%} at "
        f"{big[0]:,} B and by {gaps[3][big[-1]]:.0%} at {big[-1] // 1024:,} KiB: both carry "
        "the same line rate, so serialisation dominates large messages and the fixed per-hop "
        "costs (switch latency, store-and-forward, headers per packet) weigh less",
        f"the host's costs are guesses within ranges (post {profs[NATIVE].host_post_s * 1e9:.0f} "
        f"ns, poll {profs[NATIVE].host_poll_s * 1e9:.0f} ns, PCIe read "
        f"{profs[NATIVE].pcie_read_latency_s * 1e9:.0f} ns and write "
        f"{profs[NATIVE].pcie_write_latency_s * 1e9:.0f} ns): the {sizes[0]} B message takes "
        f"{format_duration(polls[0])} with a {format_duration(POLL_SWEEP_S[0])} poll and "
        f"{format_duration(polls[-1])} with {format_duration(POLL_SWEEP_S[-1])} (the poll "
        f"sweep); it is sent inline (at most {profs[NATIVE].inline_bytes:.0f} B: no DMA read "
        "of the payload)",
    ]
    params = profile_params(
        settings,
        (
            "switch_latency_s",
            "cut_through",
            "nic_latency_s",
            "mtu_bytes",
            "header_bytes",
            "link_bandwidth_Bps",
            "cable_m_leaf_spine",
            "host_post_s",
            "host_poll_s",
            "inline_bytes",
            "pcie_read_latency_s",
            "pcie_write_latency_s",
        ),
        NATIVE,
        ROCE,
    )
    return Measurement(
        parts,
        [sweeps["lat1"], sweeps["lat3"], sweeps["gap1"], sweeps["gap3"], by_switch, by_poll],
        params,
        notes,
        runs=4 * len(sizes)
        + len(ROCE_SWITCH_RANGE_S) * (1 + len(NATIVE_SWITCH_RANGE_S))
        + len(POLL_SWEEP_S),
    )
