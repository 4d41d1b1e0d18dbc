"""Ticks at once held to the same ticks run one by one, and to figures derived by hand,
where ``tests/test_uneventful.py`` did not reach (issue 23, session 20's mutation runs of
``kernels.uneventful`` and ``uneventful``).

* A tick's start is a product, ``epoch_s + (tick - epoch_tick) * dt``, counted from where
  the current tick length took over (``Fabric.set_dt``); the other tests run at one tick
  length, where ``epoch_tick`` is 0.
* A flow started by hand with a ready time inside a later tick sends only from then on
  (``kernels.slots.start_limits``); the workloads start theirs in the tick they fall in,
  so only such a flow meets a tick run at once before it is ready.
* Bytes dropped past a queue's buffer (too little headroom) in ticks run at once.
* A PFC watchdog shorter than the pause's reaction time fires while the paused queue's
  sender still sends: the one watchdog in a tick with no stopped sender, which ends a call
  of ticks at once by itself.

``scripts/mutate`` runs this file first for both modules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from fabric_core.net.profiles import NATIVE_400G, ROCE_400G
from fabric_core.net.topology import leaf_spine
from fabric_core.runtime.fabric import Fabric
from fabric_core.workloads.traffic import Scripted
from tests.test_uneventful import assert_same, state


def _lockstep(
    build: Callable[[], Fabric],
    batches: list[int],
    monkeypatch: pytest.MonkeyPatch,
    between: Callable[[Fabric], None] | None = None,
) -> tuple[Fabric, int]:
    """Two fabrics from ``build``: one stepped tick by tick, one run ``run_ticks`` (the
    uneventful ticks at once) in ``batches``, the same after every batch (``between``
    called on both before the first). Returns the one run at once and the ticks it ran
    at once."""
    one_by_one, at_once = build(), build()
    counted = [0]
    run = Fabric._run_uneventful

    def counting(f: Fabric, most: int) -> int:
        ran = run(f, most)
        counted[0] += ran if f is at_once else 0
        return ran

    monkeypatch.setattr(Fabric, "_run_uneventful", counting)
    if between is not None:
        between(one_by_one)
        between(at_once)
    for n in batches:
        for _ in range(n):
            one_by_one.step()
        at_once.run_ticks(n)
        assert_same(state(one_by_one), state(at_once))
    return at_once, counted[0]


#: the tick before and after the change, and the tick it is changed at
DT_BEFORE, DT_AFTER, CHANGED_AT = 1e-6, 2e-6, 20


@pytest.mark.parametrize("prof", [NATIVE_400G, ROCE_400G], ids=lambda p: p.name)
def test_after_the_tick_length_changes_ticks_at_once_count_time_from_the_change(
    prof: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flow that ends within the first few ticks, the tick length doubled at tick 20
    (20 µs), then nothing in flight until a second flow starts at 150 µs, which takes some
    30 of the new ticks, and nothing in flight again to tick 170. Tick by tick and at once,
    the fabric is the same after every batch, and tick k starts at
    20 µs + (k - 20) × 2 µs; both the idle ticks and those with the second flow in flight
    ran at once."""
    topo = leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=2)
    idx = topo.nodes.index
    rows = [
        (idx["gpu0000"], idx["gpu0003"], 2e5, 0.0),
        (idx["gpu0001"], idx["gpu0002"], 3e6, 150e-6),
    ]

    def build() -> Fabric:
        wl = Scripted(name="two", traffic_class="bulk", flows=list(rows))
        return Fabric(topo, prof, [wl], dt_s=DT_BEFORE, seed=3)

    one_by_one, at_once = build(), build()
    idle, busy = [0], [0]
    pass_idle, run_at_once = Fabric._pass_idle_ticks, Fabric._run_at_once

    def counting_idle(f: Fabric, *args: Any, **kwargs: Any) -> int:
        ran: int = pass_idle(f, *args, **kwargs)
        idle[0] += ran if f is at_once and f.tick > CHANGED_AT else 0
        return ran

    def counting_busy(f: Fabric, *args: Any, **kwargs: Any) -> int:
        ran: int = run_at_once(f, *args, **kwargs)
        busy[0] += ran if f is at_once and f.tick > CHANGED_AT else 0
        return ran

    monkeypatch.setattr(Fabric, "_pass_idle_ticks", counting_idle)
    monkeypatch.setattr(Fabric, "_run_at_once", counting_busy)
    for _ in range(CHANGED_AT):
        one_by_one.step()
    at_once.run_ticks(CHANGED_AT)
    for f in (one_by_one, at_once):
        assert f.completed_flows == 1  # the first flow is done: nothing in flight
        f.set_dt(DT_AFTER)
    for _ in range(6):
        for _ in range(25):
            one_by_one.step()
        at_once.run_ticks(25)
        assert_same(state(one_by_one), state(at_once))
        assert at_once.sim_time_s == pytest.approx(
            CHANGED_AT * DT_BEFORE + (at_once.tick - CHANGED_AT) * DT_AFTER, rel=1e-12
        )
    assert at_once.tick == CHANGED_AT + 150
    assert at_once.completed_flows == 2
    assert idle[0] >= 100  # 65 ticks to 150 µs, and those after the second flow
    assert busy[0] >= 20  # the second flow's, some 30


@pytest.mark.parametrize("prof", [NATIVE_400G, ROCE_400G], ids=lambda p: p.name)
def test_a_flow_started_by_hand_ready_later_sends_from_then_in_ticks_run_at_once(
    prof: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long flow keeps the fabric busy; after 10 ticks a flow is started by hand, ready
    7.5 ticks later, and 8 ticks are run. They run at once (the fabric has a solution to
    start from; a call runs at least three ticks, so at most the last two of a batch are
    stepped), and the flow sends nothing in the first seven and, in the eighth, at most
    what its uplink carries in the half of the tick it exists: 0.5 × 50 GB/s × 1 µs =
    25 kB (from the start it would send in every tick)."""
    dt = 1e-6
    topo = leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=2)
    idx = topo.nodes.index
    uplink = topo.links.index["gpu0001->leaf00"]

    def build() -> Fabric:
        wl = Scripted(
            name="long", traffic_class="bulk", flows=[(idx["gpu0000"], idx["gpu0003"], 1e7, 0.0)]
        )
        fabric = Fabric(topo, prof, [wl], dt_s=dt, seed=4)
        for _ in range(10):
            fabric.step()
        return fabric

    def start(fabric: Fabric) -> None:
        fabric.start_flows(
            np.array([idx["gpu0001"]], dtype=np.int64),
            np.array([idx["gpu0002"]], dtype=np.int64),
            np.array([3e5]),
            traffic_class=0,
            workload=-1,
            tag=np.array([7]),
            ready_s=np.array([fabric.sim_time_s + 7.5 * dt]),
        )

    at_once, ran = _lockstep(build, [8], monkeypatch, between=start)
    assert ran >= 6
    fl = at_once.flows
    (slot,) = np.flatnonzero(fl.active & (fl.workload == -1) & (fl.tag == 7))
    sent = fl.size[slot] - fl.backlog[0, slot]
    assert 0 < sent <= 0.5 * float(topo.links.bandwidth_Bps[uplink]) * dt * (1 + 1e-12)


def test_bytes_dropped_past_a_buffer_in_ticks_run_at_once_are_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Four GPUs send 1 MiB each to a fifth on one leaf, PFC alone with shallow static
    buffers and 2 kB of headroom (``tests/test_strength_pfc.py``'s lossy incast): bytes
    past the buffer are dropped and resent. Tick by tick and at once, the fabric is the
    same after every batch; at once, the bytes dropped are the discards counted at the
    ports, and every byte arrives once."""
    prof = dataclasses.replace(
        ROCE_400G,
        pfc_buffer_mode="static",
        pfc_buffer_bytes=512 * 1024,
        pfc_headroom_bytes=2000.0,
        congestion_control="none",
    )
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=5)
    idx = topo.nodes.index
    size = 1024**2
    rows = [(idx[f"gpu{k:04d}"], idx["gpu0000"], float(size), 0.0) for k in range(1, 5)]

    def build() -> Fabric:
        wl = Scripted(name="incast", traffic_class="bulk", flows=list(rows))
        return Fabric(topo, prof, [wl], dt_s=1e-6, seed=1)

    at_once, ran = _lockstep(build, [40] * 3, monkeypatch)
    assert ran >= 100
    assert at_once.completed_flows == 4
    assert at_once.dropped_bytes > 0
    discards = np.asarray(at_once.counters["discards_bytes_total"])
    assert discards.sum() == pytest.approx(at_once.dropped_bytes, rel=1e-9)
    assert at_once.delivered_bytes == pytest.approx(4 * size, rel=1e-9)


def test_a_watchdog_that_fires_before_its_sender_stops_is_reported_from_ticks_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """gpu0001 and gpu0002 send to gpu0000, and gpu0002 to gpu0003 too: gpu0001's ingress
    queue at the leaf fills at the 25 GB/s the shared downlink leaves it and pauses,
    gpu0002's (half of it drained to gpu0003) does not. The watchdog, 0.5 µs, fires in
    the first tick (of 0.25 µs) that starts 0.5 µs after the pause, at most 0.75 µs
    after it, before the pause reaches the sender (its reaction time is 1.03 µs): no
    queue's sender is stopped in that tick. Its one event is reported from ticks run at
    once as from ticks run one by one."""
    prof = dataclasses.replace(
        ROCE_400G,
        pfc_watchdog_s=0.5e-6,
        pfc_watchdog_recovery_s=1.0,
        pfc_buffer_mode="static",
        pfc_buffer_bytes=512 * 1024,
        congestion_control="none",
    )
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=4)
    idx = topo.nodes.index
    rows = [
        (idx["gpu0001"], idx["gpu0000"], 1e6, 0.0),
        (idx["gpu0002"], idx["gpu0000"], 1e6, 0.0),
        (idx["gpu0002"], idx["gpu0003"], 1e6, 0.0),
    ]

    def build() -> Fabric:
        wl = Scripted(name="incast", traffic_class="bulk", flows=list(rows))
        return Fabric(topo, prof, [wl], dt_s=0.25e-6, seed=1)

    at_once, ran = _lockstep(build, [50] * 4, monkeypatch)
    assert ran >= 150
    fired = [e for e in at_once.events if e.kind == "pfc_watchdog"]
    assert [e.target for e in fired] == ["gpu0001->leaf00"]
    assert at_once.roce is not None
    assert at_once.roce.pfc.reaction_s.min() > prof.pfc_watchdog_s + at_once.dt_s
