"""The fault catalogue: every kind has an effect in the snapshot and recovers after clear."""

from __future__ import annotations

import itertools
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_core.commands import ClearFault, CommandError, InjectFault
from fabric_core.faults import recovery
from fabric_core.faults.book import (
    CORE_FAULT_KINDS,
    FAULT_KINDS,
    ON_OFF_KINDS,
    FaultKind,
    goodput_fraction,
    register_fault_kind,
)
from fabric_core.reports.run import report_of
from fabric_core.runtime.fabric import MAX_EVENTS, SOLVERS, Fabric, Solver
from fabric_core.runtime.scenario import ScenarioError, load_scenario, parse_scenario
from fabric_core.runtime.snapshot import LinkStatus, Snapshot

#: Recovery delays shortened so that a test sees whole timelines in a few hundred ticks.
FAST: dict[str, Any] = {
    "reroute_s": 200e-6,
    "bfd_interval_s": 100e-6,
    "ecmp_reconverge_s": 200e-6,
    "credit_watchdog_s": 100e-6,
    "link_retrain_s": 100e-6,
    "sm_resweep_s": 400e-6,
    # an RC QP timeout of 7 (4.096 µs × 2^7): a blackholed sender resends after 524 µs
    "local_ack_timeout_s": 4.096e-6 * 2**7,
}


def tiny(profile: str | None = None, solver: Solver = "compiled", **overrides: Any) -> Fabric:
    """The tiny scenario (8 GPUs, 2 leaves, 2 spines, 1 µs ticks) with fast recovery."""
    scn = load_scenario("tiny", profile=profile)
    scn.profile = scn.profile.with_overrides(**{**FAST, **overrides})
    return Fabric.from_scenario(scn, solver)


def run_until_recovered(fabric: Fabric, fault_id: str, limit: int = 2000) -> None:
    for _ in range(limit // 10):
        if fabric.faults.faults[fault_id].recovered_at_s is not None:
            return
        fabric.run_ticks(10)


def link(snap: Snapshot, name: str) -> int:
    return snap.links.index[name]


# ------------------------------------------------------------------ every kind
def _down(snap: Snapshot, before: Snapshot) -> bool:
    i = link(snap, "leaf00->spine00")
    j = link(snap, "spine00->leaf00")
    return bool(
        snap.link_state.status[i] == LinkStatus.DOWN
        and snap.link_state.status[j] == LinkStatus.DOWN
        and snap.link_state.link_downed_total[i] == 1
    )


def _flapping(snaps: list[Snapshot]) -> bool:
    seen = {int(s.link_state.status[link(s, "leaf00->spine00")]) for s in snaps}
    return seen == {LinkStatus.UP, LinkStatus.DOWN}


def _degraded(snap: Snapshot, before: Snapshot) -> bool:
    i = link(snap, "leaf00->spine00")
    ls = snap.link_state
    return bool(
        ls.status[i] == LinkStatus.DEGRADED
        and ls.symbol_errors_total[i] > 0
        and ls.link_error_recovery_total[i] > 0
    )


def _switch_down(snap: Snapshot, before: Snapshot) -> bool:
    spine = snap.nodes.index["spine00"]
    mine = (snap.links.src == spine) | (snap.links.dst == spine)
    return bool((snap.link_state.status[mine] == LinkStatus.DOWN).all()) and bool(
        (snap.link_state.status[~mine] == LinkStatus.UP).all()
    )


def _credit_loss(snap: Snapshot, before: Snapshot) -> bool:
    i = link(snap, "leaf00->spine00")
    ls = snap.link_state
    # the sender's view of the downstream buffer shrank: fewer credits than the buffer
    return bool(
        ls.status[i] == LinkStatus.DEGRADED
        and ls.credits_bytes[i] < 0.5 * snap.links.buffer_bytes[i]
        and ls.status[link(snap, "spine00->leaf00")] == LinkStatus.UP
    )


def _pfc_storm(snap: Snapshot, before: Snapshot) -> bool:
    i = link(snap, "leaf00->gpu0000")
    return bool(
        snap.link_state.pause_frames_total[i] > before.link_state.pause_frames_total[i]
        and snap.link_state.pause_seconds_total[i] > 0
    )


def _incast(snap: Snapshot, before: Snapshot) -> bool:
    i = link(snap, "leaf00->gpu0000")
    dt = snap.sim_time_s - before.sim_time_s
    carried = snap.link_state.tx_bytes_total[i] - before.link_state.tx_bytes_total[i]
    waiting = (
        snap.link_state.queue_bytes[link(snap, "spine00->leaf00")]
        + snap.link_state.queue_bytes[link(snap, "gpu0001->leaf00")]
    )
    # the target's link runs near line rate and bytes queue up behind it
    return bool(carried / dt > 0.9 * snap.links.bandwidth_Bps[i] and waiting > 0)


CASES = [
    ("link_down", "leaf00->spine00", {}, {}, _down),
    ("link_flap", "leaf00->spine00", {"period_s": 100e-6}, {}, None),
    ("link_degraded", "leaf00->spine00", {"ber": 1e-5}, {}, _degraded),
    ("switch_down", "spine00", {}, {}, _switch_down),
    (
        "credit_loss",
        "leaf00->spine00",
        {"loss_fraction": 1.0},
        {"credit_watchdog_s": 1e-3},
        _credit_loss,
    ),
    ("pfc_storm", "gpu0000", {}, {"flow_control": "pfc"}, _pfc_storm),
    ("incast", "gpu0000", {"senders": 7}, {}, _incast),
]


def test_every_catalogue_kind_has_a_case() -> None:
    assert {c[0] for c in CASES} == set(CORE_FAULT_KINDS)


@pytest.mark.parametrize(
    ("kind", "target", "params", "profile", "effect"), CASES, ids=[c[0] for c in CASES]
)
def test_fault_has_an_effect_and_recovers_after_clear(
    kind: str, target: str, params: dict[str, float], profile: dict[str, Any], effect: Any
) -> None:
    fabric = tiny(**profile)
    buffers = fabric.buffer_bytes.copy()
    headroom = fabric.roce.pfc.headroom.copy() if fabric.roce else None
    fabric.run_ticks(150)
    before = fabric.snapshot()
    fid = fabric.apply(InjectFault(kind=kind, target=target, params=params))["fault_id"]
    snaps = []
    for _ in range(15):
        fabric.run_ticks(10)
        snaps.append(fabric.snapshot())
    during = snaps[-1]
    if effect is None:
        assert _flapping(snaps)
    else:
        assert effect(during, before), f"{kind}: no effect in the snapshot"
    view = next(f for f in during.active_faults if f.id == fid)
    assert view.kind == kind and view.target == target
    assert any(e.kind == "fault_injected" and e.target == target for e in during.events)
    fabric.apply(ClearFault(fault_id=fid))
    run_until_recovered(fabric, fid)
    after = fabric.snapshot()
    done = next(f for f in after.faults if f.id == fid)
    assert done.state == "cleared"
    assert done.recovered_at_s is not None, f"{kind} never recovered"
    assert done.recovered_at_s >= done.injected_at_s
    assert (after.link_state.status == LinkStatus.UP).all()
    if fabric.roce is None:  # credits: the fault leaves the buffers as they were
        assert np.array_equal(fabric.buffer_bytes, buffers)
    else:  # a shared PFC buffer's limits follow its occupancy; the headroom stays
        assert np.array_equal(fabric.roce.pfc.headroom, headroom)
    assert fabric.faults.pfc_storm_nodes().size == 0
    assert any(e.kind == "fault_recovered" and e.target == target for e in after.events)


# ------------------------------------------------------------------ kinds in detail
def test_credit_loss_leaks_with_traffic_then_the_link_retrains() -> None:
    fabric = tiny(credit_watchdog_s=150e-6, link_retrain_s=50e-6)
    fabric.run_ticks(100)
    # the leak needs traffic: take the busiest leaf->spine link
    names = fabric.topo.links.name
    uplinks = [i for i, n in enumerate(names) if n.startswith("leaf") and "->spine" in n]
    i = max(uplinks, key=lambda li: fabric.link_rate[li])
    fabric.apply(InjectFault(kind="credit_loss", target=names[i], params={"loss_fraction": 0.01}))
    factors = []
    for _ in range(25):
        fabric.run_ticks(10)
        factors.append(float(fabric.faults.buffer_factor[i]))
    f = fabric.faults.faults["f0"]
    # the leak only goes one way until the retrain, then the credits are whole again
    leaking = factors[:14]
    assert all(b <= a for a, b in itertools.pairwise(leaking)) and leaking[-1] < 0.99
    assert f.detected_at_s is not None and f.mitigated_at_s is not None
    assert f.mitigated_at_s - f.detected_at_s == pytest.approx(50e-6, abs=1.5e-6)
    assert factors[-1] == 1.0
    assert f.state in ("mitigated", "recovered")


@pytest.mark.parametrize(
    ("kind", "target", "cut"),
    [
        ("link_down", "gpu0000->leaf00", "gpu0000 has no other link"),
        ("switch_down", "leaf01", "gpu0004, gpu0005, gpu0006 and 1 more have no other link"),
        ("link_down", "leaf00->spine01", None),
    ],
)
def test_a_fault_that_cuts_an_endpoint_off_says_so(kind: str, target: str, cut: str | None) -> None:
    """A GPU's only cable down was "mitigated: traffic rerouted" ("95 flows rerouted
    around gpu0000->leaf00"), while nothing could reach it."""
    fabric = tiny()
    fabric.run_ticks(20)
    fabric.apply(InjectFault(kind=kind, target=target))
    fabric.run_ticks(2500)  # past the reroute (2 ms)
    messages = [e.message for e in fabric.snapshot().events if e.kind == "fault_mitigated"]
    assert len(messages) == 1
    if cut is None:
        assert messages[0].endswith("traffic rerouted")
    else:
        assert f"routing knows, but {cut}: cut off until it is back" in messages[0]


def test_a_leaf_whose_spines_are_all_down_says_its_gpus_reach_only_each_other() -> None:
    """A spine down, then the leaf's link to the other: the second fault said "mitigated:
    traffic rerouted" and "226 flows rerouted", while leaf00's GPUs could reach no other
    leaf and the fabric's throughput stayed at 0 (a review of `fabtop inject`)."""
    fabric = tiny()
    fabric.run_ticks(20)
    fabric.apply(InjectFault(kind="switch_down", target="spine01"))
    fabric.run_ticks(100)
    fabric.apply(InjectFault(kind="link_down", target="leaf00->spine00"))
    fabric.run_ticks(2500)  # past the reroute
    mitigated = {
        e.target: e.message for e in fabric.snapshot().events if e.kind == "fault_mitigated"
    }
    assert mitigated["spine01"].endswith("traffic rerouted")  # leaf00 still had spine00
    assert mitigated["leaf00->spine00"].endswith(
        "routing knows, but leaf00 has no link up to a higher tier: gpu0000, gpu0001, gpu0002"
        " and 1 more reach only the endpoints below leaf00 until one is back"
    )
    assert fabric.faults.faults["f1"].recovered_at_s is None


def test_a_pfc_storm_on_a_credit_fabric_stalls_the_stuck_nic_until_it_is_cleared() -> None:
    """No pause frames (no PFC), but the stuck NIC returns no credits: nothing comes into
    it, and nothing mitigates that (its timeline said "pause frames ignored" and
    "recovered" at +16 µs while the NIC's flows stood still)."""
    fabric = tiny()
    fabric.run_ticks(20)
    gpu = fabric.topo.nodes.index["gpu0003"]
    into = int(np.flatnonzero(fabric.topo.links.dst == gpu)[0])
    fabric.apply(InjectFault(kind="pfc_storm", target="gpu0003"))
    fabric.run_ticks(5)  # the bytes on the wire into it land
    before = int(fabric.snapshot().link_state.tx_bytes_total[into])
    fabric.run_ticks(50)
    snap = fabric.snapshot()
    assert snap.link_state.pause_frames_total.sum() == 0
    assert fabric.faults.pfc_storm_nodes().tolist() == [gpu]
    assert int(snap.link_state.tx_bytes_total[into]) == before  # the NIC takes nothing
    f = fabric.faults.faults["f0"]
    assert f.detected_at_s is not None and f.mitigated_at_s is None
    assert any("no credits come back from the stuck NIC" in e.message for e in snap.events)
    fabric.apply(ClearFault(fault_id="f0"))
    fabric.run_ticks(20)
    assert int(fabric.snapshot().link_state.tx_bytes_total[into]) > before


@pytest.mark.parametrize("solver", SOLVERS)
def test_pfc_storm_is_detected_by_the_pfc_watchdog_and_lasts_until_cleared(solver: Solver) -> None:
    fabric = tiny(flow_control="pfc", pfc_watchdog_s=100e-6, solver=solver)
    fabric.run_ticks(30)  # not at time 0: the watchdog counts from the pause, not the start
    fabric.apply(InjectFault(kind="pfc_storm", target="gpu0003"))
    fabric.run_ticks(120)
    gpu = fabric.topo.nodes.index["gpu0003"]
    f = fabric.faults.faults["f0"]
    # measured from the PFC model: its watchdog fires 100 µs after the queue was paused
    assert f.detected_at_s is not None
    assert 100e-6 <= f.detected_at_s - f.injected_at_s <= 110e-6
    assert f.mitigated_at_s == f.detected_at_s
    # the NIC keeps storming: the PFC model's watchdog decides what to honour
    assert fabric.faults.pfc_storm_nodes().tolist() == [gpu]
    fabric.apply(ClearFault(target="gpu0003"))
    assert fabric.faults.pfc_storm_nodes().size == 0


def test_incast_stops_at_its_duration_and_its_flows_drain() -> None:
    fabric = tiny()
    fabric.apply(
        InjectFault(
            kind="incast",
            target="gpu0005",
            params={"senders": 3, "size_bytes": 65536, "period_s": 10e-6},
            duration_s=50e-6,
        )
    )
    fabric.run_ticks(100)
    f = fabric.faults.faults["f0"]
    assert f.cleared_at_s == pytest.approx(50e-6)
    assert f.sent == 5  # rounds at 0, 10, 20, 30, 40 µs
    run_until_recovered(fabric, "f0")
    assert f.recovered_at_s is not None
    fl = fabric.flows
    assert not (fl.active & (fl.workload == recovery.INCAST_WORKLOAD)).any()


def test_overlapping_faults_on_one_link_keep_it_down_until_both_clear() -> None:
    fabric = tiny()
    a = fabric.apply(InjectFault(kind="link_down", target="leaf01->spine01"))["fault_id"]
    fabric.apply(InjectFault(kind="switch_down", target="spine01"))
    fabric.run_ticks(5)
    fabric.apply(ClearFault(fault_id=a))
    fabric.run_ticks(5)
    i = fabric.topo.links.index["leaf01->spine01"]
    assert fabric.faults.status()[i] == LinkStatus.DOWN
    fabric.apply(ClearFault(target="spine01"))
    fabric.run_ticks(1)
    assert fabric.faults.status()[i] == LinkStatus.UP


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("cmd", "message"),
    [
        (InjectFault(kind="link_dwn", target="leaf00->spine00"), "did you mean 'link_down'"),
        (InjectFault(kind="link_down", target="leaf00-spine00"), "did you mean 'leaf00->spine00'"),
        (InjectFault(kind="switch_down", target="gpu0001"), "targets a switch; 'gpu0001' is a GPU"),
        (InjectFault(kind="incast", target="spine00"), "targets a GPU; 'spine00' is a switch"),
        # (session 43: "unknown link 'leaf00'", as if it were a typo)
        (
            InjectFault(kind="link_down", target="leaf00"),
            "link_down targets a link; 'leaf00' is a switch: name a link, e.g. 'leaf00->",
        ),
        # (a count given as JSON's 100000 arrives as a float: it said "got 100000.0")
        (
            InjectFault(kind="incast", target="gpu0000", params={"senders": 100000.0}),
            "incast: senders must be in [1, 4096], got 100000",
        ),
        (InjectFault(kind="pfc_storm", target="gpu9"), "unknown gpu 'gpu9'"),
        # (session 44: "unknown gpu 'leaf00->gpu0001'", as if it were a typo of a GPU's name)
        (
            InjectFault(kind="pfc_storm", target="leaf00->gpu0001"),
            "pfc_storm targets a GPU; 'leaf00->gpu0001' is a link: name a GPU, e.g. 'gpu0001'",
        ),
        (
            InjectFault(kind="link_flap", target="leaf00->spine00", params={"period_s": 0.0}),
            "period_s must be in",
        ),
        (
            InjectFault(kind="link_degraded", target="leaf00->spine00", params={"ber": "high"}),
            "must be a number",
        ),
        (
            InjectFault(kind="link_down", target="leaf00->spine00", params={"ber": 1e-6}),
            "accepted: none",
        ),
        (ClearFault(fault_id="f99"), "unknown active fault 'f99'"),
        (ClearFault(target="leaf00->spine01"), "no active fault"),
    ],
)
def test_bad_fault_commands_get_specific_errors(cmd: Any, message: str) -> None:
    fabric = tiny()
    with pytest.raises(CommandError, match=re.escape(message)):
        fabric.apply(cmd)
    assert fabric.faults.faults == {}


def test_credit_loss_needs_credits() -> None:
    fabric = tiny("roce-400g")
    fabric.run_ticks(1)
    with pytest.raises(CommandError, match="credit_loss needs a credit fabric; this one uses pfc"):
        fabric.apply(InjectFault(kind="credit_loss", target="leaf00->spine00"))


def test_register_fault_kind_checks_its_target() -> None:
    with pytest.raises(ValueError, match="target must be one of"):
        register_fault_kind(FaultKind("bogus", "cable", {}, "?"))
    assert "bogus" not in FAULT_KINDS


# ------------------------------------------------------------------ schedules
def _scenario(faults: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": "sched",
        "dt": "1us",
        "topology": {"kind": "leaf-spine", "leaves": 2, "spines": 2, "gpus_per_leaf": 2},
        "workload": [{"name": "bg", "kind": "bulk", "class": "bulk", "size": "256KiB"}],
        "fault": faults,
    }


def test_scenario_schedules_inject_and_clear() -> None:
    scn = parse_scenario(
        _scenario(
            [
                {"at": "20us", "kind": "link_down", "target": "leaf00->spine01"},
                {"at": "60us", "kind": "clear", "target": "leaf00->spine01"},
                {
                    "at": "30us",
                    "kind": "link_degraded",
                    "target": "leaf01->spine00",
                    "params": {"ber": 1e-7},
                },
                {"at": "70us", "kind": "clear", "target": "all"},
                {"at": "80us", "kind": "clear", "target": "spine00"},
            ]
        )
    )
    fabric = Fabric.from_scenario(scn)
    fabric.run_ticks(100)
    faults = fabric.snapshot().faults
    assert [(f.kind, f.injected_at_s, f.cleared_at_s) for f in faults] == [
        ("link_down", pytest.approx(20e-6), pytest.approx(60e-6)),
        ("link_degraded", pytest.approx(30e-6), pytest.approx(70e-6)),
    ]
    # a clear with nothing left to clear is logged, not fatal
    assert any(e.kind == "schedule_skipped" for e in fabric.snapshot().events)


def test_a_refused_scheduled_fault_stays_in_the_report_after_the_log_has_moved_on() -> None:
    """The report read the refusals from the event log, which keeps the latest 500: a
    busy run's refusal fell out of it and the report said nothing was refused."""
    scn = parse_scenario(_scenario([{"at": "5us", "kind": "clear", "target": "spine00"}]))
    fabric = Fabric.from_scenario(scn)
    fabric.run_ticks(10)
    refusal = "spine00: no active fault on 'spine00' (no fault is active)"
    assert fabric.schedule_skipped == [refusal]
    for i in range(MAX_EVENTS + 1):
        fabric.emit("info", "filler", f"x{i}", "an event of a busy run")
    assert not [e for e in fabric.events if e.kind == "schedule_skipped"]
    assert report_of(fabric, 10, 0, 1.0)["schedule_skipped"] == [refusal]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"at": "1us", "kind": "clear", "target": "leaf00->spine07"}, "unknown clear target"),
        (
            {"at": "1us", "kind": "clear", "target": "all", "duration": "1us"},
            "no params and no duration",
        ),
        (
            {"at": "1us", "kind": "link_down", "target": "leaf00->spine09"},
            "fault\\[0\\]: unknown link",
        ),
    ],
)
def test_bad_schedules_are_refused_when_the_fabric_is_built(
    entry: dict[str, Any], message: str
) -> None:
    scn = parse_scenario(_scenario([entry]))
    with pytest.raises(ScenarioError, match=message):
        Fabric.from_scenario(scn)


def test_bundled_chaos_scenarios_load_and_run() -> None:
    from fabric_core.runtime.scenario import list_scenarios

    chaos = [n for n, _ in list_scenarios() if n.startswith("chaos-")]
    assert chaos
    for name in chaos:
        scn = load_scenario(name)
        assert scn.faults, name
        fabric = Fabric.from_scenario(scn)
        fabric.run_ticks(20)


# ------------------------------------------------------------------ invariants
_TARGETS = {
    "link_down": ["leaf00->spine00", "spine01->leaf01", "gpu0002->leaf00"],
    "link_flap": ["leaf01->spine00"],
    "link_degraded": ["leaf00->spine01", "leaf01->gpu0006"],
    "switch_down": ["spine00", "spine01", "leaf01"],
    "credit_loss": ["leaf00->spine00", "spine00->leaf01"],
    "pfc_storm": ["gpu0001"],
    "incast": ["gpu0004"],
}
_actions = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=40),
        st.one_of(
            st.tuples(
                st.sampled_from(sorted(_TARGETS)),
                st.integers(min_value=0, max_value=2),
                st.one_of(st.none(), st.floats(min_value=1e-6, max_value=80e-6)),
            ),
            st.just(("clear", 0, None)),
        ),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=_actions, pfc=st.booleans())
def test_random_fault_sequences_keep_the_invariants(
    actions: list[tuple[int, tuple[str, int, float | None]]], pfc: bool
) -> None:
    fabric = tiny(**({"flow_control": "pfc"} if pfc else {}))
    physical = fabric.buffer_bytes.copy()
    for ticks, (kind, which, duration) in actions:
        if kind == "clear":
            fabric.apply(ClearFault(all=True))
        else:
            if pfc and kind == "credit_loss":
                continue  # no credits on a PFC fabric (refused: tested above)
            targets = _TARGETS[kind]
            try:
                fabric.apply(
                    InjectFault(
                        kind=kind, target=targets[which % len(targets)], duration_s=duration
                    )
                )
            except CommandError as exc:  # a link or switch down, or a storm, twice
                assert kind in ON_OFF_KINDS and "is already active on" in str(exc)
        fabric.run_ticks(ticks)
        snap = fabric.snapshot()
        t = snap.totals
        # bytes are conserved: everything injected is delivered or still in flight (bytes
        # dropped on a PFC fabric are sent again, so they are in flight too)
        assert t.injected_bytes_total == pytest.approx(
            t.delivered_bytes_total + t.in_flight_bytes + t.cancelled_bytes_total,
            rel=1e-9,
            abs=1.0,
        )
        if not pfc:
            assert t.dropped_bytes_total == 0
        # buffers hold between nothing and their physical size (credit loss shrinks what
        # the sender may use, never what the buffer holds)
        assert (fabric.occupancy >= -1e-6).all()
        assert (fabric.occupancy <= physical * (1 + 1e-6) + 1e-6).all()
        assert (snap.link_state.credits_bytes >= 0).all()
        assert np.isfinite(snap.link_state.tx_bytes_total).all()
        for f in snap.faults:
            stamps = [f.injected_at_s, f.detected_at_s, f.mitigated_at_s]
            seen = [s for s in stamps if s is not None]
            assert seen == sorted(seen)
            if f.recovered_at_s is not None:
                assert f.recovered_at_s >= f.injected_at_s
    fabric.apply(ClearFault(all=True))
    fabric.run_ticks(5)
    assert (fabric.faults.status() == LinkStatus.UP).all()


def test_goodput_under_bit_errors_llr_versus_go_back_n() -> None:
    ber = np.array([0.0, 1e-9, 1e-6])
    llr = goodput_fraction(ber, 4126.0, 1)
    gbn = goodput_fraction(ber, 1106.0, 64)  # RoCE: 1024 B MTU + headers, 64 packets in flight
    assert llr[0] == 1.0 and gbn[0] == 1.0
    # one 4 KB packet in ~30 of 1e-6 is hit; retrying only it costs ~3 %
    assert llr[2] == pytest.approx(1 - (1 - (1 - 1e-6) ** (4126 * 8)), rel=1e-3)
    # go-back-N resends the whole window for every error: far worse at the same BER
    assert gbn[2] < 0.7 * llr[2]
    assert (np.diff(llr) < 0).all() and (np.diff(gbn) < 0).all()


def test_go_back_n_resends_one_derived_round_trip_of_bytes() -> None:
    """RoCE resends a round trip's bytes per bit error. Unless set, that round trip is the
    fabric's own longest path from the profile's figures: 2 NIC pipelines and 2 x tiers - 1
    switches each way, the fibre, and one packet serialised (switches cut through): 6.1 µs
    on a 3-tier roce-400g fat-tree, 3.0 µs on a leaf-spine. A degraded link of a 2-tier
    fabric resends that much; a longer round trip set on the profile resends more, in
    proportion."""
    p = load_scenario("tiny", profile="roce-400g").profile
    packet_s = 4178 / 50e9
    three = 2 * (2 * 142.5e-9 + 5 * 275e-9 + 2 * 133 * 5e-9) + packet_s
    two = 2 * (2 * 142.5e-9 + 3 * 275e-9 + 2 * 33 * 5e-9) + packet_s
    assert p.go_back_n_round_trip_s(3) == pytest.approx(three, rel=1e-9)
    assert p.go_back_n_round_trip_s(2) == pytest.approx(two, rel=1e-9)
    store = p.with_overrides(cut_through=False)  # a packet's time on each of the 4 links
    assert store.go_back_n_round_trip_s(2) == pytest.approx(two + 3 * packet_s, rel=1e-9)
    assert p.with_overrides(go_back_n_rtt_s=20e-6).go_back_n_round_trip_s(2) == 20e-6

    def resent(**overrides: Any) -> float:
        """The bytes resent per byte the degraded cable (both directions) sent: the
        flows' sources resend them and count them on their own links (nothing is lost
        otherwise)."""
        fabric = tiny("roce-400g", **overrides)
        fabric.apply(
            InjectFault(kind="link_degraded", target="leaf00->spine00", params={"ber": 1e-7})
        )
        fabric.run_ticks(200)
        snap = fabric.snapshot()
        cable = [link(snap, "leaf00->spine00"), link(snap, "spine00->leaf00")]
        st = snap.link_state
        assert snap.totals.dropped_bytes_total == 0
        assert (st.retransmitted_bytes_total[cable] == 0).all()
        return float(st.retransmitted_bytes_total.sum() / st.tx_bytes_total[cable].sum())

    derived = resent()
    assert derived == resent(go_back_n_rtt_s=two)  # tiny is a leaf-spine: its 2 tiers
    short, long = resent(go_back_n_rtt_s=1.5e-6), resent(go_back_n_rtt_s=6e-6)
    assert 0 < short < derived < long
    # the bytes resent per byte sent grow with the window: 4 x the round trip, 4 x as many
    assert long / short == pytest.approx(4.0, rel=0.02)
