"""Recovery per profile, measured from the fault timelines (never asserted as constants).

Native: local fast reroute (``reroute_s`` after the failure). RoCE: BFD detection
(interval × multiplier) then ECMP reconvergence. IB: subnet-manager resweep.
"recovered" is when the delivered throughput is back near its pre-fault level.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fabric_core.commands import ClearFault, InjectFault
from fabric_core.faults import recovery
from fabric_core.faults.book import Fault
from fabric_core.net.profiles import NATIVE_400G
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import parse_scenario
from fabric_core.runtime.snapshot import LinkStatus
from tests.test_faults import FAST, run_until_recovered, tiny


def _link_down(fabric: Fabric, at_tick: int = 200) -> tuple[Fault, list[float]]:
    """Fail leaf00's busiest uplink and run until recovered; returns the fault and the
    windowed delivered throughput sampled every 20 ticks from the failure on."""
    fabric.run_ticks(at_tick)
    links = fabric.topo.links
    uplinks = [links.index[f"leaf00->spine0{k}"] for k in (0, 1)]
    busiest = max(uplinks, key=lambda i: fabric.link_rate[i])
    fabric.apply(InjectFault(kind="link_down", target=links.name[busiest]))
    rates = []
    f = fabric.faults.faults["f0"]
    # up to 6 ms: on RoCE, DCQCN cuts the senders that the failure congests, and they
    # climb back on its rate-increase timer
    for _ in range(300):
        fabric.run_ticks(20)
        rates.append(
            recovery.delivered_rate(fabric.faults.delivered_history, fabric.sim_time_s, fabric.dt_s)
        )
        if f.recovered_at_s is not None:
            break
    return f, rates


@pytest.fixture(scope="module")
def link_down_runs() -> dict[str, tuple[Fabric, Fault, list[float]]]:
    """leaf00's busiest uplink fails at 200 µs, on a native and on a RoCE fabric."""
    out = {}
    for name, profile in (("native", "native-400g"), ("roce", "roce-400g")):
        # RoCE with BFD at 200 µs × 3 (detected after 600 µs) and 200 µs ECMP reconvergence
        fabric = tiny(profile, **({"bfd_interval_s": 200e-6} if name == "roce" else {}))
        f, rates = _link_down(fabric)
        out[name] = (fabric, f, rates)
    return out


def test_native_fast_reroute_recovers_within_milliseconds_and_before_roce_detects(
    link_down_runs: dict[str, tuple[Fabric, Fault, list[float]]],
) -> None:
    native, fn, rates_n = link_down_runs["native"]
    roce, fr, _ = link_down_runs["roce"]
    p_n, p_r = native.profile, roce.profile
    assert recovery.recovery_mode(p_n) == "fast-reroute"
    assert recovery.recovery_mode(p_r) == "bfd-ecmp"
    dt = native.dt_s
    for f in (fn, fr):
        assert f.detected_at_s is not None and f.mitigated_at_s is not None
        assert f.recovered_at_s is not None
    # native: the port sees the failure at once and reroutes locally
    assert fn.detected_at_s - fn.injected_at_s == pytest.approx(p_n.fault_detect_s, abs=dt)
    assert fn.mitigated_at_s - fn.injected_at_s == pytest.approx(p_n.reroute_s, abs=dt)
    # RoCE: BFD needs `multiplier` missed intervals, then ECMP reconverges
    bfd = p_r.bfd_interval_s * p_r.bfd_multiplier
    assert fr.detected_at_s - fr.injected_at_s == pytest.approx(bfd, abs=dt)
    assert fr.mitigated_at_s - fr.detected_at_s == pytest.approx(p_r.ecmp_reconverge_s, abs=dt)
    # traffic really dropped while the link was down, and came back after the reroute
    assert min(rates_n) < recovery.RECOVERED_FRACTION * (fn.baseline_Bps or 0)
    ttr_n = fn.recovered_at_s - fn.injected_at_s
    ttr_r = fr.recovered_at_s - fr.injected_at_s
    assert fn.recovered_at_s >= fn.mitigated_at_s
    assert fr.recovered_at_s >= fr.mitigated_at_s
    # native is back within its fast-reroute time plus the time the resent bytes and the
    # stalled senders need to fill the measurement window again (with one uplink of two
    # left, the rerouted flows share it: a few windows) ...
    assert ttr_n <= p_n.reroute_s + 3 * recovery.RECOVERY_WINDOW_S
    # ... before RoCE has even detected the failure; RoCE needs detection + reconvergence
    assert ttr_n < bfd < ttr_r
    assert ttr_r >= bfd + p_r.ecmp_reconverge_s


def test_roce_blackholes_traffic_until_rerouted_and_counts_it_native_does_not(
    link_down_runs: dict[str, tuple[Fabric, Fault, list[float]]],
) -> None:
    lost = {}
    for name, (fabric, f, _) in link_down_runs.items():
        i = fabric.topo.links.index[f.target]
        lost[name] = float(fabric.counters["discards_bytes_total"][i])
        assert fabric.counters["retransmitted_bytes_total"].sum() > 0  # resent after reroute
        assert f.lost_bytes > 0
        assert any(
            e.kind == "rerouted" and "lost so far, to be resent" in e.message for e in fabric.events
        )
    assert lost["native"] == 0.0  # no credit, no sending: nothing thrown away
    assert lost["roce"] > 0.0
    # what a fault counts as lost: on the credit fabric the bytes held up behind the
    # failed link, sent again from their source at the reroute (none dropped); on RoCE
    # every byte dropped while the link was down, the blackholed ones among them
    native, fn, _ = link_down_runs["native"]
    roce, fr, _ = link_down_runs["roce"]
    assert native.dropped_bytes == 0.0
    assert fn.lost_bytes == pytest.approx(
        native.counters["retransmitted_bytes_total"].sum(), rel=1e-9
    )
    assert fr.lost_bytes == pytest.approx(roce.dropped_bytes, rel=1e-9)
    assert fr.lost_bytes >= lost["roce"]


def test_sm_resweep_reroutes_after_the_resweep() -> None:
    fabric = tiny(recovery="sm-resweep", sm_resweep_s=200e-6)
    f, _ = _link_down(fabric)
    p = fabric.profile
    assert f.detected_at_s is not None and f.mitigated_at_s is not None
    assert f.mitigated_at_s - f.injected_at_s == pytest.approx(
        p.fault_detect_s + p.sm_resweep_s, abs=fabric.dt_s
    )
    assert f.recovered_at_s is not None and f.recovered_at_s >= f.mitigated_at_s


def test_recovery_is_measured_not_declared_when_capacity_is_missing() -> None:
    """Open-loop cross-leaf streams offer 80 GB/s over two 50 GB/s uplinks: with a spine
    gone only 50 GB/s fit, so traffic cannot get back to its pre-fault level after the
    reroute and the fault stays unrecovered until the spine returns."""
    streams = [
        {
            "name": f"s{i}",
            "kind": "incast",
            "class": "bulk",
            "senders": [i],  # gpu000i (index into the GPUs other than the target)
            "target": 4 + i,  # gpu000(4+i) on the other leaf
            "size": "200KB",
            "period": "10us",  # 20 GB/s each
        }
        for i in range(4)
    ]
    scn = parse_scenario(
        {
            "name": "streams",
            "dt": "1us",
            "topology": {"kind": "leaf-spine", "leaves": 2, "spines": 2, "gpus_per_leaf": 4},
            "workload": streams,
        }
    )
    scn.profile = NATIVE_400G.with_overrides(**FAST)
    fabric = Fabric.from_scenario(scn)
    fabric.run_ticks(150)
    fabric.apply(InjectFault(kind="switch_down", target="spine00"))
    fabric.run_ticks(500)
    f = fabric.faults.faults["f0"]
    assert f.baseline_Bps == pytest.approx(80e9, rel=0.1)
    assert f.mitigated_at_s is not None
    assert f.recovered_at_s is None
    fabric.apply(ClearFault(target="spine00"))
    run_until_recovered(fabric, "f0")
    assert f.recovered_at_s is not None and f.cleared_at_s is not None
    assert f.recovered_at_s >= f.cleared_at_s


def test_link_flap_reroutes_each_long_down_episode() -> None:
    fabric = tiny(reroute_s=100e-6)
    fabric.run_ticks(10)
    # down 150 µs of every 200 µs: each episode outlasts the 100 µs reroute
    fabric.apply(
        InjectFault(
            kind="link_flap",
            target="leaf00->spine01",
            params={"period_s": 200e-6, "down_fraction": 0.75},
        )
    )
    i = fabric.topo.links.index["leaf00->spine01"]
    status = []
    for _ in range(45):
        fabric.run_ticks(10)
        status.append(int(fabric.faults.status()[i]))
    assert set(status) == {LinkStatus.UP, LinkStatus.DOWN}
    reroutes = [e.time_s for e in fabric.events if e.kind == "rerouted"]
    # 100 µs into each of the episodes that start at 10, 210 and 410 µs
    assert reroutes == pytest.approx([110e-6, 310e-6], abs=1.5e-6)
    assert fabric.faults.faults["f0"].mitigated_at_s == pytest.approx(110e-6, abs=1.5e-6)
    assert fabric.counters["link_downed_total"][i] == 3


def test_unknown_recovery_mode_is_refused() -> None:
    # where a user gives it (a scenario's profile_overrides) ...
    with pytest.raises(ValueError, match="recovery: must be one of auto, fast-reroute"):
        NATIVE_400G.with_overrides(recovery="bgp")
    # ... and by the recovery model, for a profile made in code
    with pytest.raises(ValueError, match="unknown recovery 'bgp'"):
        recovery.recovery_mode(dataclasses.replace(NATIVE_400G, recovery="bgp"))


def test_profile_recovery_parameters_have_sources() -> None:
    documented = {name for name, _unit, _src in NATIVE_400G.parameter_sources()}
    for name in (
        "recovery",
        "bfd_interval_s",
        "bfd_multiplier",
        "ecmp_reconverge_s",
        "sm_resweep_s",
        "credit_watchdog_s",
        "link_retrain_s",
    ):
        assert name in documented
    detect, reroute = recovery.link_delays(NATIVE_400G.with_overrides(flow_control="pfc"))
    p = NATIVE_400G
    assert detect == pytest.approx(p.bfd_interval_s * p.bfd_multiplier)
    assert reroute == pytest.approx(detect + p.ecmp_reconverge_s)


def test_routing_reads_the_down_links_kept_with_the_mask() -> None:
    """The links routing knows are down are kept as ids beside the mask (a start reads
    them instead of looking over every link): set when the reroute makes a failure
    known, gone when the link is back, and new flows keep off the link meanwhile."""
    fabric = tiny()
    fabric.run_ticks(50)
    target = "leaf00->spine00"
    i = fabric.topo.links.index[target]
    fabric.apply(InjectFault(kind="link_down", target=target))
    book = fabric.link_book
    assert book.known_down_ids.size == 0  # not known before the reroute
    while not book.known_down[i]:
        fabric.run_ticks(1)
    # (a failed cable takes both directions down)
    assert i in book.known_down_ids
    assert book.known_down_ids.tolist() == np.flatnonzero(book.known_down).tolist()
    started = fabric.flows.n_parents
    fabric.run_ticks(300)  # the workloads start flows on the fabric with the link down
    assert fabric.flows.n_parents != started or fabric.completed_flows > 0
    live = fabric.flows.active
    assert not np.isin(fabric.flows.path[:, live], book.known_down_ids).any()
    fabric.apply(ClearFault(target=target))
    fabric.run_ticks(5)
    assert not book.known_down.any() and book.known_down_ids.size == 0
