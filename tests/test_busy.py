"""Busy ticks run in one compiled call (``fabric_core.runtime.busy``) leave the fabric
exactly as the same ticks run one by one through ``Fabric.step``: the flow table, the link
book, the totals, the histograms, the workloads' state (their tags, counts, arrivals and
generators) and the events, bit for bit. And they are run: most ticks of the default
scenario go through the kernel, and on a credit fabric none while a fault is still being
followed (on RoCE, the kernel follows a link-down itself)."""

from __future__ import annotations

import copy
import dataclasses
from collections import deque
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_core.commands import ClearFault, InjectFault
from fabric_core.faults import recovery
from fabric_core.faults.admission import AdmissionLimits
from fabric_core.net.profiles import NATIVE_400G, ROCE_400G
from fabric_core.net.topology import leaf_spine
from fabric_core.runtime import busy
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.tick.kernels import busy as busy_kernels
from fabric_core.workloads.traffic import AllToAll, Bulk, Incast, Rpc
from tests.test_uneventful import assert_same, state


def full_state(f: Fabric) -> dict[str, Any]:
    """``test_uneventful.state`` and what else the kernel writes back: the flow table's
    counts, the bytes injected, the workloads' own fields, their arrivals and their
    generators (by their next draws, from copies)."""
    out = state(f)
    fl = f.flows
    out["flows.counts"] = (fl.version, fl.n_parents, fl.live_end)
    out["injected"] = f.injected_bytes
    for i, wl in enumerate(f.workloads):
        out[f"workload{i}"] = sorted(
            (k, v) for k, v in vars(wl).items() if isinstance(v, int | float | bool | str)
        )
        arrivals = getattr(wl, "_arrivals", None)
        if arrivals is not None:
            t, at, u, first, last = arrivals.drawn()
            out[f"arrivals{i}"] = (t.tolist(), at.tolist(), u.tolist(), first, last)
            out[f"arrivals{i}.list"] = arrivals._t_list
        if hasattr(wl, "in_flight"):
            out[f"in_flight{i}"] = wl.in_flight.copy()
        for name, h in wl.histograms.items():  # (``state`` has their counts)
            out[f"histogram{i}.{name}"] = (h._stats.tolist(), h._ring.tolist())
    out["workload_rngs"] = [copy.deepcopy(r).random(3).tolist() for r in f._workload_rngs]
    return out


def run_both(
    build: Any, ticks: int, batch: int, monkeypatch: pytest.MonkeyPatch, act: Any = None
) -> int:
    """The fabric ``build()`` makes, run ``ticks`` ticks one by one and in batches of
    ``batch`` (busy ones at once; ``act(fabric, batch_number)`` before each batch on
    both), compared after every batch; returns the ticks run at once."""
    one_by_one, at_once = build(), build()
    counted = [0]
    run = Fabric._run_busy

    def counting(f: Fabric, most: int) -> int:
        ran = run(f, most) if f is at_once else 0
        counted[0] += ran
        return ran

    monkeypatch.setattr(Fabric, "_run_busy", counting)
    done = k = 0
    while done < ticks:
        n = min(batch, ticks - done)
        for f in (one_by_one, at_once):
            if act is not None:
                act(f, k)
            f.run_ticks(n)
        done += n
        k += 1
        assert_same(full_state(one_by_one), full_state(at_once))
    assert at_once.completed_flows > 0
    return counted[0]


@pytest.mark.parametrize(
    ("scenario", "profile", "ticks", "batch", "least"),
    [
        ("default", None, 1200, 97, 0.8),  # background bulk, RPC probes, MoE rounds, incast
        ("default", None, 300, 7, 0.5),  # short batches: calls that stop at the batch's end
        ("default", "roce-400g", 1200, 97, 0.8),  # PFC, ECN, DCQCN and its CNPs' draws
        ("tiny", None, 800, 50, 0.5),
        ("planes-2", None, 600, 60, 0.5),  # two planes
        ("storage-kvcache", None, 600, 60, 0.0),  # RPC control messages beside storage
    ],
)
def test_busy_ticks_leave_the_fabric_as_ticks_run_one_by_one(
    scenario: str,
    profile: str | None,
    ticks: int,
    batch: int,
    least: float,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def build() -> Fabric:
        return Fabric.from_scenario(load_scenario(scenario, profile=profile))

    ran = run_both(build, ticks, batch, monkeypatch)
    assert ran >= least * ticks


def test_no_busy_tick_runs_while_a_fault_is_open_and_the_results_still_agree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A link down injected between two batches and cleared two later: the fabric runs
    tick by tick while the fault is open or being recovered from (its detection, reroute
    and recovery are Python's), at once before and after."""
    marks: dict[str, int] = {}

    def act(f: Fabric, k: int) -> None:
        if k == 3:
            f.apply(InjectFault(kind="link_down", target="leaf00->spine01"))
            marks["injected"] = f.tick
        if k == 5:
            f.apply(ClearFault(all=True))

    calls: list[int] = []
    run = Fabric._run_busy_kernel

    def checked(f: Fabric, *args: Any) -> int:
        assert f.faults.settled(), "a busy call while a fault is open"
        calls.append(f.tick)
        return run(f, *args)

    monkeypatch.setattr(Fabric, "_run_busy_kernel", checked)
    run_both(lambda: Fabric.from_scenario(load_scenario("default")), 1000, 100, monkeypatch, act)
    assert any(t < marks["injected"] for t in calls)
    assert any(t >= 600 for t in calls)  # after the fault and its recovery


def test_the_fabric_wide_cap_is_met_as_tick_by_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the fabric-wide cap on flows in flight reached, the flows refused and their
    events are those of ticks run one by one (the kernel leaves such ticks to Python)."""

    def build() -> Fabric:
        f = Fabric.from_scenario(load_scenario("default"))
        f.faults.admission.limits = AdmissionLimits(fabric_flows=140)
        return f

    run_both(build, 600, 60, monkeypatch)


def _fabric(
    leaves: int, gpus: int, size: float, outstanding: int, rate: float, hot: int, seed: int
) -> Fabric:
    topo = leaf_spine(NATIVE_400G, leaves=leaves, spines=2, gpus_per_leaf=gpus)
    workloads = [
        Rpc(name="rpc", traffic_class="rpc", rate_per_s=rate),
        Incast(name="incast", traffic_class="bulk", senders_spec=3, period_s=80e-6),
        Bulk(
            name="bulk",
            traffic_class="bulk",
            size_bytes=size,
            outstanding=outstanding,
            hotspots=hot,
            hotspot_fraction=0.3 if hot else 0.0,
        ),
    ]
    return Fabric(topo, NATIVE_400G, workloads, dt_s=1e-6, seed=seed)


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    leaves=st.integers(2, 4),
    gpus=st.integers(2, 4),
    size=st.sampled_from([3e3, 2e4, 1e5]),
    outstanding=st.integers(1, 2),
    rate=st.sampled_from([2e4, 2e5, 1e6]),
    hot=st.integers(0, 2),
    seed=st.integers(0, 5),
    batch=st.sampled_from([5, 40]),
)
def test_random_fabrics_and_workloads_give_the_same_fabric(
    leaves: int,
    gpus: int,
    size: float,
    outstanding: int,
    rate: float,
    hot: int,
    seed: int,
    batch: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Random leaf-spines, the RPC workload first and the bulk last (the kernel starts
    them in the fabric's order of workloads), an incast between them that Python runs."""

    def build() -> Fabric:
        return _fabric(leaves, gpus, size, outstanding, rate, hot, seed)

    with monkeypatch.context() as m:
        ran = run_both(build, 240, batch, m)
    assert ran > 0


def test_arrivals_that_outrun_a_block_in_one_tick_are_drawn_as_python_draws_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Several hundred RPC messages a tick: a tick's arrivals span blocks of draws, which
    the kernel draws ahead of the tick, the same draws in the same order."""

    def build() -> Fabric:
        topo = leaf_spine(NATIVE_400G, leaves=2, spines=2, gpus_per_leaf=4)
        wl = Rpc(name="rpc", traffic_class="rpc", size_bytes=512, rate_per_s=4e7)
        return Fabric(topo, NATIVE_400G, [wl], dt_s=1e-6, seed=3)

    assert run_both(build, 60, 6, monkeypatch) > 0


def test_a_roce_tick_whose_paused_queue_stops_its_sender_is_finished_by_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hotspot that pauses its leaf's queues on RoCE: a busy call stops after the tick in
    which a paused queue's sender is stopped (the deadlock watch is Python's), and the
    fabric, its PFC queues, DCQCN senders and CNPs are those of ticks run one by one."""
    stops = {"blocked": 0}
    run = busy.run_kernel

    def spied(args: list[Any]) -> busy.BusyRun:
        out = run(args)
        stops["blocked"] += out.stop == busy_kernels.STOP_REPORT and out.tick.blocked
        return out

    monkeypatch.setattr(busy, "run_kernel", spied)

    def build() -> Fabric:
        topo = leaf_spine(ROCE_400G, leaves=4, spines=2, gpus_per_leaf=8)
        workloads = [
            Rpc(name="rpc", traffic_class="rpc", rate_per_s=2e5),
            Bulk(
                name="bulk",
                traffic_class="bulk",
                size_bytes=1e6,
                outstanding=4,
                hotspots=1,
                hotspot_fraction=1.0,
            ),
        ]
        return Fabric(topo, ROCE_400G, workloads, dt_s=1e-6, seed=1)

    assert run_both(build, 2000, 100, monkeypatch) >= 1500
    assert stops["blocked"] > 0


def test_workloads_the_kernel_does_not_know_keep_their_ticks_in_python() -> None:
    """Two bulk workloads (the kernel runs one of a kind), or an RPC before its first
    arrivals are drawn: no call."""
    topo = leaf_spine(NATIVE_400G, leaves=2, spines=1, gpus_per_leaf=3)
    two = [Bulk(name=f"b{i}", traffic_class="bulk", size_bytes=1e4) for i in range(2)]
    assert busy.compiled_workloads(two) is None
    f = Fabric(topo, NATIVE_400G, [Rpc(name="r", traffic_class="bulk")], dt_s=1e-6, seed=1)
    assert busy.compiled_workloads(f.workloads) is None  # nothing drawn, no histogram yet
    f.run_ticks(200)
    found = busy.compiled_workloads(f.workloads)
    assert found is not None and found.rpc_at == 0 and found.bulk_at == -1


def test_the_kernel_runs_the_all_to_all_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default scenario's MoE rounds start and end in the kernel: its ``generate``
    and ``on_complete`` are Python's no more for them (their results are, bit for bit:
    the tests above), each round's length is filed in its histogram, and a round starts
    every period."""
    f = Fabric.from_scenario(load_scenario("default"))
    f.run_ticks(200)  # the first round ends in Python: its histograms are made then
    moe = f.workloads[1]
    assert isinstance(moe, AllToAll)
    found = busy.compiled_workloads(f.workloads)
    assert found is not None and found.alltoall_at == 1
    in_python = {"started": 0, "ended": 0}
    generate, on_complete = AllToAll.generate, AllToAll.on_complete

    def generated(wl: AllToAll, now_s: float, dt_s: float, rng: Any) -> Any:
        req = generate(wl, now_s, dt_s, rng)
        in_python["started"] += len(req) > 0
        return req

    def completed(wl: AllToAll, done: Any, now_s: float) -> None:
        was = wl._busy
        on_complete(wl, done, now_s)
        in_python["ended"] += was and not wl._busy

    monkeypatch.setattr(AllToAll, "generate", generated)
    monkeypatch.setattr(AllToAll, "on_complete", completed)
    rounds = moe.histograms["alltoall_seconds"].freeze().count
    started = moe._round
    f.run_ticks(1500)  # 3 ms: a round every 100 µs
    assert moe._round - started == 30
    ended = moe.histograms["alltoall_seconds"].freeze().count - rounds
    assert ended >= 29
    # (a round due in a tick an incast burst starts in, every fifth, starts in Python)
    assert in_python["started"] <= 7 and in_python["ended"] <= ended // 4, in_python


def test_a_busy_run_is_what_the_benchmarks_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ENABLED`` off, every tick goes through Python: the switch the benchmarks and the
    uneventful tests use to compare the two."""
    calls: list[int] = []
    run = Fabric._run_busy_kernel
    monkeypatch.setattr(Fabric, "_run_busy_kernel", lambda f, *a: calls.append(1) or run(f, *a))
    f = Fabric.from_scenario(load_scenario("default"))
    monkeypatch.setattr(busy, "ENABLED", False)
    f.run_ticks(200)
    assert calls == []
    monkeypatch.setattr(busy, "ENABLED", True)
    f.run_ticks(200)
    assert calls
    assert np.isfinite(f.delivered_bytes)


def test_busy_ticks_run_again_once_a_link_down_is_recovered_and_agree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A link down left open: the fabric runs tick by tick while it is detected, rerouted
    and recovered from (Python's), then at once again with the link still down, and
    both runs stay the same bit for bit, the dead link carrying nothing."""
    marks: dict[str, int] = {}

    def act(f: Fabric, k: int) -> None:
        if k == 2:
            f.apply(InjectFault(kind="link_down", target="leaf00->spine01"))
            marks["injected"] = f.tick

    calls: list[tuple[int, bool]] = []
    run = Fabric._run_busy_kernel

    def checked(f: Fabric, *args: Any) -> int:
        calls.append((f.tick, f.faults.settled()))
        if not f.faults.settled():
            (fault,) = f.faults.open.values()
            assert fault.recovered_at_s is not None, "a busy call before the recovery"
        return run(f, *args)

    monkeypatch.setattr(Fabric, "_run_busy_kernel", checked)
    fabrics: list[Fabric] = []

    def build() -> Fabric:
        fabrics.append(Fabric.from_scenario(load_scenario("default")))
        return fabrics[-1]

    at_once = run_both(build, 3000, 100, monkeypatch, act)
    assert any(not settled for _, settled in calls), "no busy call with the link down"
    assert at_once > 1000
    for f in fabrics:
        (fault,) = f.faults.open.values()
        assert fault.recovered_at_s is not None and fault.cleared_at_s is None
        dead = [f.topo.links.index[n] for n in ("leaf00->spine01", "spine01->leaf00")]
        assert (f.link_book.link_rate[dead] == 0).all()


def test_a_link_down_with_a_duration_ends_where_it_would_tick_by_tick(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A recovered link down with a duration: the busy ticks stop before its end, which
    Python applies at the same tick as it does tick by tick."""

    def act(f: Fabric, k: int) -> None:
        if k == 2:  # at tick 260: recovered by +2.0 ms; it ends at +5 ms
            f.apply(InjectFault(kind="link_down", target="leaf00->spine01", duration_s=5e-3))

    open_calls = [0]
    run = Fabric._run_busy_kernel

    def counted(f: Fabric, *args: Any) -> int:
        open_calls[0] += not f.faults.settled()
        return run(f, *args)

    monkeypatch.setattr(Fabric, "_run_busy_kernel", counted)
    # batches that straddle the end (at tick 2,700): a busy run must stop short of it
    run_both(lambda: Fabric.from_scenario(load_scenario("default")), 4000, 130, monkeypatch, act)
    assert open_calls[0] > 0  # at once between the recovery and the end


def test_a_roce_link_down_is_followed_in_the_kernel_through_its_timeline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A spine link fails under the bulk and RPC workloads on RoCE (BFD and ECMP shortened
    so that the timeline fits in a test, and the ACK timeout shorter than the reroute, so
    senders resend into the dead link and lose again). Busy calls run through it: before
    routing knows of the link, losing what switches forward into the dead port and holding
    its flows; across the flows' resends; and once it is rerouted, measuring its recovery.
    The fabric, its fault's lost bytes, timeline and events are those of ticks run one by
    one (each call stops before the detection, the reroute and the recovery, which are
    Python's)."""
    prof = dataclasses.replace(
        ROCE_400G, bfd_interval_s=100e-6, ecmp_reconverge_s=100e-6, local_ack_timeout_s=80e-6
    )
    calls: dict[str, int] = {"losing": 0, "resending": 0, "recovering": 0}
    run = Fabric._run_busy_kernel

    def spied(f: Fabric, *args: Any) -> int:
        fault = next(iter(f.faults.open.values()), None)
        lost = 0.0 if fault is None else fault.lost_bytes
        resend_s = f.flows.next_resend_s
        ran = run(f, *args)
        if fault is not None and ran:
            calls["losing"] += fault.lost_bytes > lost
            calls["resending"] += f.sim_time_s > resend_s
            calls["recovering"] += fault.mitigated_at_s is not None
        return ran

    monkeypatch.setattr(Fabric, "_run_busy_kernel", spied)

    def act(f: Fabric, k: int) -> None:
        if k == 2:
            f.apply(InjectFault(kind="link_down", target="leaf00->spine01"))

    made: list[Fabric] = []

    def build() -> Fabric:
        topo = leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=4)
        workloads = [
            Rpc(name="rpc", traffic_class="rpc", rate_per_s=2e5),
            Bulk(name="bulk", traffic_class="bulk", size_bytes=2e5, outstanding=2),
        ]
        made.append(Fabric(topo, prof, workloads, dt_s=1e-6, seed=2))
        return made[-1]

    run_both(build, 1000, 100, monkeypatch, act)
    one_by_one, at_once = (next(iter(f.faults.open.values())) for f in made)
    assert at_once.lost_bytes == one_by_one.lost_bytes > 0
    timeline = ("detected_at_s", "mitigated_at_s", "recovered_at_s")
    assert [getattr(at_once, t) for t in timeline] == [getattr(one_by_one, t) for t in timeline]
    assert at_once.recovered_at_s is not None  # rerouted at 400 µs, the run went on past it
    assert min(calls.values()) > 0, calls


@pytest.mark.parametrize("split", [0, 3, 7, 12])
@pytest.mark.parametrize("kept", [5, 9, 64])
def test_the_kernels_recovery_rate_reads_what_the_fault_trackings_history_keeps(
    split: int, kept: int
) -> None:
    """``busy._delivered_rate`` sees the history as the fault tracking's deque holds it at
    each tick, whatever part of it came before the call (``split`` entries) or from the
    call's own ticks, and however few entries the deque keeps: the rate is
    ``recovery.delivered_rate``'s, bit for bit. (A window longer than the deque: the
    first entry it keeps is the start.)"""
    rng = np.random.default_rng(kept + split)
    t = np.cumsum(rng.uniform(8e-6, 12e-6, 14))
    d = np.cumsum(rng.uniform(0.0, 5e4, 14))
    for window_s in (30e-6, 1e-3):
        history: deque[tuple[float, float]] = deque(
            zip(t.tolist(), d.tolist(), strict=True), maxlen=kept
        )
        expected = recovery.delivered_rate(history, float(t[-1]), window_s / 4)
        tail = np.array(list(deque(zip(t[: split + 1], d[: split + 1], strict=True), maxlen=kept)))
        own_t, own_d = t[split + 1 : -1], d[split + 1 : -1]
        got = busy_kernels._delivered_rate(
            tail[:, 0].copy(), tail[:, 1].copy(), own_t.copy(), own_d.copy(), own_t.size,
            float(t[-1]), float(d[-1]), recovery.recovery_window_s(window_s / 4),
            recovery.TIME_EPS_S, kept,
        )  # fmt: skip
        assert got == expected, (window_s, got, expected)
