"""The real survivors of the mutation runs of ``roce`` and ``step`` (issue 23), held to
figures derived by hand.

* ``roce``: the go-back-N drop-hop masks (``share > 0`` where a flow's furthest drop, its
  first byte lost, is found). A drop of at most 1 B on an entry is a drop like any
  other: two queues each overflowing by half a byte in the same tick; and however small,
  it takes back the bytes the flow sent after it, behind the full queue, and keeps those
  past it; a queue whose sender the solver's bound stopped exactly at XOFF (no reaction
  time) is paused; the deadlock watch of the numpy reference reports the pfc-deadlock
  scenario's ring.
* ``step``: the fallback of the credit factor when Newton has not converged (rare: no
  bundled scenario reaches it), here forced by allowing Newton no iteration; also for
  a buffer fed less than 1 B/s; and when inside a tick an entry finishes
  (``finish_within_tick``): a last hop at line rate, not faster; two sharing a link;
  one beside an entry held down elsewhere, with what that one leaves, however little;
  capacity that credits took is offered again once, in the second pass, not a third.

* ``kernels.slots``: a flow that starts inside a tick sends for the part of the tick it
  exists (its late-start limit), not for the whole tick; a message behind a queue
  finishes after its FIFO wait and its serialisation; a class histogram's sum is the sum
  of the latencies its workloads saw.

``scripts/mutate`` runs this file first in the PFC, the tick-reference and the slots
subsets.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from fabric_core.commands import ClearFault, InjectFault
from fabric_core.net.profiles import ROCE_400G, Profile
from fabric_core.net.topology import leaf_spine
from fabric_core.runtime.fabric import Fabric, Solver
from fabric_core.runtime.scenario import load_scenario
from fabric_core.tick import step
from fabric_core.tick.flows import FlowRequests
from fabric_core.tick.step import BufferGroup, Solution, enforce_credits, finish_within_tick
from fabric_core.workloads.traffic import Scripted
from tests.helpers import SOLVERS, profile, scripted_fabric, with_probe

STATIC_BUFFER = 200e3  # bytes per port and priority
SHORT = 0.5  # bytes: how much the headroom falls short of what the sender sends after XOFF
#: RoCE with a fixed buffer per port and priority and no congestion control: PFC alone
STATIC_PFC = dataclasses.replace(
    ROCE_400G, pfc_buffer_mode="static", pfc_buffer_bytes=STATIC_BUFFER, congestion_control="none"
)


def headroom_short_by_half_a_byte(cable_s: float) -> Profile:
    """``STATIC_PFC`` with a headroom ``SHORT`` below what a sender sends at the payload
    rate A = R x MTU / (MTU + headers) in a reaction time (PFC reaction + the cable's
    round trip) after its queue crossed XOFF."""
    base = STATIC_PFC
    reaction = base.pfc_reaction_s + 2 * cable_s
    payload = base.link_bandwidth_Bps * base.mtu_bytes / (base.mtu_bytes + base.header_bytes)
    return dataclasses.replace(base, pfc_headroom_bytes=payload * reaction - SHORT)


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_half_byte_overflow_on_two_queues_is_dropped_and_resent(solver: Solver) -> None:
    """gpu0001 and gpu0002 send to gpu0000, whose NIC storms: the leaf cannot drain
    either ingress queue, so each fills at the payload rate A = R x MTU / (MTU + headers)
    until its sender stops a reaction time (PFC reaction + the cable's round trip) after
    the queue crossed XOFF = buffer - headroom: it peaks at XOFF + A x reaction. The
    headroom is 0.5 B short of A x reaction, so each queue drops 0.5 B of what arrives,
    once (the senders are paused afterwards), and the queue holds its whole buffer.
    Go-back-N puts the half bytes back at their senders, which resend them (counted
    retransmitted then) once the storm is cleared and they are let send again. (A drop
    of at most 1 B per entry: the ``share > 1`` masks of the drop hop pair up arrays of
    different lengths.)"""
    topo = leaf_spine(STATIC_PFC, leaves=1, spines=1, gpus_per_leaf=3)
    ingress = [int(topo.links.index[f"gpu000{k}->leaf00"]) for k in (1, 2)]
    cable = float(topo.links.prop_delay_s[ingress[0]])
    assert float(topo.links.prop_delay_s[ingress[1]]) == cable
    prof = headroom_short_by_half_a_byte(cable)
    flows = [(f"gpu000{k}", "gpu0000", 1e9, 0.0) for k in (1, 2)]
    fabric, _ = scripted_fabric(topo, prof, flows, dt_s=1e-6, solver=solver)
    fabric.apply(InjectFault(kind="pfc_storm", target="gpu0000"))
    fabric.run_ticks(8)  # XOFF (148.5 kB) at ~3 us, the senders stopped ~1 us later
    V = fabric.n_vls
    assert fabric.dropped_bytes == pytest.approx(2 * SHORT, rel=1e-6)
    discards = fabric.counters["discards_bytes_total"]
    resent = fabric.counters["retransmitted_bytes_total"]
    fl = fabric.flows
    slots = np.flatnonzero(fl.active)
    assert sorted(fl.path[0, slots].tolist()) == sorted(ingress)
    for link in ingress:
        assert discards[link] == pytest.approx(SHORT, rel=1e-6)
        assert resent[link] == 0.0  # the senders are paused: nothing resent yet ...
        assert fabric.occupancy[link * V] == pytest.approx(STATIC_BUFFER, rel=1e-12)
    assert fl.resend_bytes[slots] == pytest.approx([SHORT, SHORT], rel=1e-6)  # ... but owed
    assert discards.sum() == pytest.approx(2 * SHORT, rel=1e-6)
    fabric.apply(ClearFault(all=True))
    fabric.run_ticks(20)  # the queues drain and their senders resume (~5 us)
    for link in ingress:
        assert resent[link] == pytest.approx(SHORT, rel=1e-6)  # re-sent by the NIC
    assert not fl.resend_bytes.any()


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_half_byte_drop_takes_back_what_the_flow_sent_after_it(solver: Solver) -> None:
    """One flow gpu0000 (leaf00) -> gpu0002 (leaf01) through spine00; gpu0002's NIC
    storms. The queues of the two spine-leaf cables (150 ns: reaction 1.3 us) overflow in
    turn by 0.5 B, the headroom being 0.5 B short of A x reaction (the GPU cables, 15 ns,
    leave their queues headroom to spare): first leaf01's queue of spine00 -> leaf01 (the
    last hop), then the spine's queue of leaf00 -> spine00 (hop 2). Go-back-N from the
    first byte lost: what a queue admitted before its loss stays (leaf01's whole buffer,
    sent before either loss, then the spine's); the half byte and what the flow sent
    after it, the bytes behind the full queue, go back to the source. Each loss comes 5
    us after the source (re)started at the payload rate A (XOFF = buffer - headroom at
    XOFF / A, the sender stopped a reaction later: 5 A - buffer - SHORT behind the loss),
    so the flow owes 5 A x 1 us - buffer each time, resent at once, the second once the
    storm is cleared. (A drop of at most 1 B is a drop: ``share > 1`` for the flow's
    furthest drop would take back nothing behind it; the code before session 47 kept
    the bytes behind a loss and discarded those past it, leaf01's buffer.)"""
    topo = leaf_spine(STATIC_PFC, leaves=2, spines=1, gpus_per_leaf=2)
    links = topo.links.index
    up, down = int(links["leaf00->spine00"]), int(links["spine00->leaf01"])
    nic = int(links["gpu0000->leaf00"])
    cable = float(topo.links.prop_delay_s[up])
    assert float(topo.links.prop_delay_s[down]) == cable
    assert float(topo.links.prop_delay_s[nic]) < cable / 2
    prof = headroom_short_by_half_a_byte(cable)
    fabric, _ = scripted_fabric(
        topo, prof, [("gpu0000", "gpu0002", 1e9, 0.0)], dt_s=1e-6, solver=solver
    )
    fabric.apply(InjectFault(kind="pfc_storm", target="gpu0002"))
    V = fabric.n_vls
    payload = prof.link_bandwidth_Bps * prof.mtu_bytes / (prof.mtu_bytes + prof.header_bytes)
    owed_per_loss = 5 * payload * 1e-6 - STATIC_BUFFER
    discards = fabric.counters["discards_bytes_total"]
    resent = fabric.counters["retransmitted_bytes_total"]
    fabric.run_ticks(5)  # leaf01's loss in the fifth tick
    slot = int(np.flatnonzero(fabric.flows.active)[0])
    assert discards[down] == pytest.approx(SHORT, rel=1e-6) and discards[up] == 0.0
    assert fabric.flows.resend_bytes[slot] == pytest.approx(owed_per_loss, rel=1e-9)
    assert fabric.occupancy[down * V] == pytest.approx(STATIC_BUFFER, rel=1e-12)  # kept
    assert fabric.occupancy[up * V] == 0.0 and fabric.occupancy[nic * V] == 0.0  # taken back
    fabric.run_ticks(5)  # the source resends at once; the spine's loss in the tenth tick
    assert resent[nic] == pytest.approx(owed_per_loss, rel=1e-9)
    assert discards[up] == pytest.approx(SHORT, rel=1e-6)
    assert fabric.dropped_bytes == pytest.approx(2 * SHORT, rel=1e-6)
    assert fabric.flows.resend_bytes[slot] == pytest.approx(owed_per_loss, rel=1e-9)
    # past the loss: leaf01's buffer, sent before it, is kept (paused by the storm)
    assert fabric.occupancy[down * V] == pytest.approx(STATIC_BUFFER, rel=1e-12)
    assert fabric.occupancy[up * V] == pytest.approx(STATIC_BUFFER, rel=1e-12)
    assert fabric.occupancy[nic * V] == 0.0
    fabric.apply(ClearFault(all=True))
    fabric.run_ticks(20)
    assert resent[nic] == pytest.approx(2 * owed_per_loss, rel=1e-9)
    assert fabric.flows.resend_bytes[slot] == 0.0


@pytest.mark.parametrize("solver", SOLVERS)
def test_an_ideal_pfc_with_no_reaction_time_pauses_a_queue_that_stops_at_xoff(
    solver: Solver,
) -> None:
    """With no reaction time (pfc_reaction_s = 0, cables of 0 m) a sender stops the
    instant its queue reaches XOFF: its room is XOFF less what the queue holds, with no
    allowance past it. gpu0001 sends to gpu0000, whose NIC storms: leaf00's queue of
    gpu0001 -> leaf00 fills at the payload rate A = R x MTU / (MTU + headers) and stops
    exactly at XOFF = buffer - headroom = 150 kB, at t = XOFF / A (3.06 us), never above
    it. It is paused from then on (the room binding is what says so: the queue is at
    XOFF, not past it), nothing is dropped, and its sender has been stopped for
    t_end - XOFF / A. (Taking the pause from ``occupancy > XOFF`` alone, without the
    solver's bound, leaves the queue unpaused, at XOFF, for ever.)"""
    prof = ROCE_400G.with_overrides(
        pfc_buffer_mode="static",
        pfc_buffer_bytes=STATIC_BUFFER,
        pfc_headroom_bytes=50e3,
        congestion_control="none",
        pfc_reaction_s=0.0,
        cable_m_endpoint=0.0,
    )
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=2)
    link = int(topo.links.index["gpu0001->leaf00"])
    assert float(topo.links.prop_delay_s[link]) == 0.0
    fabric, _ = scripted_fabric(
        topo, prof, [("gpu0001", "gpu0000", 1e9, 0.0)], dt_s=1e-6, solver=solver
    )
    fabric.apply(InjectFault(kind="pfc_storm", target="gpu0000"))
    fabric.run_ticks(6)
    V = fabric.n_vls
    xoff = STATIC_BUFFER - 50e3
    payload = prof.link_bandwidth_Bps * prof.mtu_bytes / (prof.mtu_bytes + prof.header_bytes)
    assert fabric.occupancy[link * V] == pytest.approx(xoff, rel=1e-12)
    assert fabric.dropped_bytes == 0.0
    assert fabric.pfc_paused_queues()[link * V]
    assert fabric.paused[link]
    stopped = fabric.counters["pause_seconds_total"][link]
    assert stopped == pytest.approx(6e-6 - xoff / payload, rel=1e-9)


@pytest.mark.parametrize("solver", SOLVERS)
def test_the_deadlock_scenario_reports_its_ring_once_on_both_solvers(solver: Solver) -> None:
    """The pfc-deadlock scenario closes the ring leaf00 -> spine00 -> leaf01 -> spine01
    -> leaf00 with two bounced routes; the hot spots at its exits fill it in tens of
    microseconds (a few hundred kB at 400 Gb/s into 512 KiB queues), after which each
    ring queue is paused by the next and none can drain. By 100 us the detector has
    reported that cycle, once (it stays the same cycle), and the ring delivers nothing
    more. (The watch runs only when some paused queue's sender is stopped: ``any``, not
    ``all`` of the queues.)"""
    fabric = Fabric.from_scenario(load_scenario("pfc-deadlock", profile="roce-400g"), solver)
    fabric.run_ticks(100)
    dead = [e for e in fabric.events if e.kind == "deadlock"]
    assert len(dead) == 1 and fabric.deadlocks == 1
    cycle = dead[0].message.split("dependency ")[1].split(" -> ")
    ring = ["leaf00->spine00", "spine00->leaf01", "leaf01->spine01", "spine01->leaf00"]
    k = ring.index(cycle[0])
    assert cycle == ring[k:] + ring[:k]
    ring_wl = fabric.workloads[0]
    before = ring_wl.delivered_bytes  # type: ignore[attr-defined]
    fabric.run_ticks(20)
    assert ring_wl.delivered_bytes == before  # type: ignore[attr-defined]
    assert fabric.deadlocks == 1


def _one_buffer(
    a: list[float], c: list[float], d: list[float]
) -> tuple[Any, np.ndarray, np.ndarray]:
    """Entries 0..n-1 (rates ``a``) feed buffer 0; entry n + i, the next hop of entry
    i, drains it at rate ``c[i]`` and holds ``d[i]`` (bytes/s). Returns the index view
    ``enforce_credits`` reads, the padded rates and the held rates."""
    n = len(a)
    idx = SimpleNamespace(
        buffer_groups=[BufferGroup(0, n, np.array([0]), np.zeros(n, dtype=np.intp))],
        nxt_pad=np.r_[np.arange(n, 2 * n), [2 * n] * n].astype(np.intp),
    )
    rate = np.array([*a, *c, 0.0])
    held = np.array([0.0] * n + list(d) + [0.0])
    return idx, rate, held


def test_the_credit_fallback_admits_what_the_drain_surely_takes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When Newton has not converged, a buffer's inflows are scaled to the drain that
    cannot shrink any further: a next hop drains at least min(c, d) (its rate, or all it
    already holds if that is less) whatever arrives. Two entries of 10 B/s feed a buffer
    with 2 B free (dt = 1 s); their next hops drain at 4 and 4 and hold 6 and 1:
    min = 4 + 1 = 5, so alpha = (5 + 2) / 20 = 0.35 and each inflow becomes 3.5 B/s,
    below Newton's own answer (20 alpha = 4 + 4 + 2: alpha = 0.5), so the buffer takes
    no more than its room: 7 - (4 + 4) <= 2."""
    monkeypatch.setattr(step, "NEWTON_ITERATIONS", 0)  # Newton "does not converge"
    idx, rate, held = _one_buffer(a=[10.0, 10.0], c=[4.0, 4.0], d=[6.0, 1.0])
    alpha, _ = enforce_credits(idx, rate, held, np.array([2.0]), dt=1.0, max_min=False)
    assert alpha[0] == pytest.approx(0.35, rel=1e-12)
    assert rate[:2] == pytest.approx([3.5, 3.5], rel=1e-12)
    assert rate[2:4].tolist() == [4.0, 4.0]  # the next hops are not the credits' to cut
    net = rate[:2].sum() - np.minimum(rate[2:4], held[2:4] + rate[:2]).sum()
    assert net <= 2.0


def test_the_credit_fallback_holds_for_a_trickle_under_a_byte_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same fallback for a buffer fed a trickle: two entries of 0.25 B/s into a
    buffer with 0.1 B free (dt = 1 s), whose next hops drain at 0.1 and 0.1 B/s and hold
    0.05 and 0.2 B/s. At alpha = 1 the net inflow is 0.5 - (0.1 + 0.1) - 0.1 = 0.2 B/s
    over the room: short. The drain that cannot shrink is min(c, d) = 0.05 + 0.1 =
    0.15, so alpha = (0.15 + 0.1) / 0.5 = 0.5 and each inflow becomes 0.125 B/s: an
    inflow below 1 B/s is scaled like any other, not stopped."""
    monkeypatch.setattr(step, "NEWTON_ITERATIONS", 0)
    idx, rate, held = _one_buffer(a=[0.25, 0.25], c=[0.1, 0.1], d=[0.05, 0.2])
    alpha, _ = enforce_credits(idx, rate, held, np.array([0.1]), dt=1.0, max_min=False)
    assert alpha[0] == pytest.approx(0.5, rel=1e-12)
    assert rate[:2] == pytest.approx([0.125, 0.125], rel=1e-12)
    net = rate[:2].sum() - np.minimum(rate[2:4], held[2:4] + rate[:2]).sum()
    assert net <= 0.1


def test_capacity_credits_take_is_offered_again_once_in_a_second_pass() -> None:
    """gpu0000 sends to gpu0001, gpu0002 and gpu0003 (one leaf), each flow on a lane of
    its own, across its uplink of 30 B/s (dt = 1 s, each holding 100 B). Each lane's
    buffer at the leaf is full (0 B free), so it takes only what its flow's next hop
    drains in the tick: the leaf's downlinks to the three carry 4, 12 and 100 B/s.

    Pass 1: the uplink gives each 10 B/s; the flow to gpu0001 drains at 4 B/s, so credits
    cut it to 4 (alpha = 0.4). Pass 2 (it capped at 4): the other two share the other
    26 B/s, 13 each; the flow to gpu0002 drains at 12, so credits cut it to 12 (alpha =
    12 / 13). The solver makes two passes (MODEL.md, "a second pass"), so the uplink
    carries 4 + 12 + 13 = 29 B/s: the 1 B/s the second cut frees is not offered again (a
    third pass would give the flow to gpu0003 14 B/s)."""
    prof = profile()
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=4)
    fabric, _ = scripted_fabric(
        topo,
        prof,
        [("gpu0000", "gpu0001", 1e6, 0.0)],
        dt_s=1e-6,
        traffic_class="a",
        extra=[
            (f"w{i}", c, [("gpu0000", f"gpu000{i}", 1e6, 0.0)]) for i, c in ((2, "b"), (3, "c"))
        ],
        class_vl={"a": 0, "b": 1, "c": 2},
        solver="reference",
    )
    fabric.step()
    idx = fabric._current_index()
    links = topo.links.index
    capacity = np.full(len(topo.links), 100.0)
    capacity[links["gpu0000->leaf00"]] = 30.0
    capacity[links["leaf00->gpu0001"]] = 4.0
    capacity[links["leaf00->gpu0002"]] = 12.0
    backlog = np.where(idx.hop == 0, 100.0, 0.0)
    free = np.zeros(len(topo.links) * fabric.n_vls)
    sol = step.solve(idx, backlog, capacity, free, dt=1.0)
    first = np.flatnonzero(idx.hop == 0)
    assert np.unique(idx.buf_pad[first]).size == 3  # a buffer each
    by_dst = {int(idx.link[idx.nxt_pad[e]]): e for e in first}
    a, b, c = (by_dst[links[f"leaf00->gpu000{i}"]] for i in (1, 2, 3))
    assert sol.padded[[a, b, c]] == pytest.approx([4.0, 12.0, 13.0], rel=1e-12)
    assert sol.alpha[idx.buf_pad[[a, b, c]]] == pytest.approx([0.4, 12 / 13, 1.0], rel=1e-12)


def _finishing(rates: list[float], level: float, buf_pad: list[int], n_bufs: int) -> Any:
    """Entries on one link (number 0), their rates, the link's fair-share level, and
    their downstream buffers (``n_bufs``: none, the last hop); every buffer's credit
    factor is 1. Returns (index view, solution) as ``finish_within_tick`` reads them."""
    idx = SimpleNamespace(
        link=np.zeros(len(rates), dtype=np.intp),
        buf_pad=np.array(buf_pad, dtype=np.intp),
        size=len(rates),
    )
    sol = Solution(
        padded=np.array([*rates, 0.0]),
        level=np.array([level]),
        alpha=np.ones(n_bufs),
        share=np.array([level]),
    )
    return idx, sol


def test_a_last_hop_finishes_at_line_rate_not_faster() -> None:
    """A flow's last hop (no downstream buffer, so no credit factor) alone on a link of
    10 B/s moves its last 5 B in a tick of 1 s at the tick's average of 5 B/s: it really
    sent at line rate and stopped early, at 5 / 10 = 0.5 s."""
    idx, sol = _finishing([5.0], level=10.0, buf_pad=[1], n_bufs=1)
    t = finish_within_tick(idx, sol, np.array([10.0]), np.array([True]), dt=1.0)
    assert t[0] == pytest.approx(0.5, rel=1e-12)


def test_two_flows_finishing_on_one_link_share_it_then_the_larger_runs_alone() -> None:
    """Two entries finish on a link of 10 B/s in a tick of 1 s, with 2 B and 4 B: in
    processor sharing each sends at 5 B/s until the smaller is done, at 2 / 5 = 0.4 s;
    the larger has 2 B left and the whole link: 0.4 + 2 / 10 = 0.6 s."""
    idx, sol = _finishing([4.0, 2.0], level=10.0, buf_pad=[1, 1], n_bufs=1)
    t = finish_within_tick(idx, sol, np.array([10.0]), np.array([True, True]), dt=1.0)
    assert t == pytest.approx([0.6, 0.4], rel=1e-12)


def test_a_flow_finishing_beside_a_held_down_one_has_only_what_it_leaves() -> None:
    """On a link of 10 B/s the water-filling gave a finishing entry its demand, 0.5 B/s
    (its last 0.5 B in the 1 s tick), and the other entry the rest, 9.5 B/s: the
    link's level. Credits downstream then held that one down to 9.2 B/s: below the
    level, it would not yield, so it keeps its rate, and the finishing entry had the
    0.8 B/s it leaves: it sent its 0.5 B by 0.5 / 0.8 = 0.625 s (a leftover under
    1 B/s is a leftover like any other)."""
    idx, sol = _finishing([9.2, 0.5], level=9.5, buf_pad=[1, 1], n_bufs=1)
    t = finish_within_tick(idx, sol, np.array([10.0]), np.array([False, True]), dt=1.0)
    assert t[1] == pytest.approx(0.625, rel=1e-12)
    assert t[0] == 0.0  # not finishing


@dataclasses.dataclass
class _ReadyInside(Scripted):
    """Scripted flows whose data is ready at their scripted time, inside the tick that
    releases them (``Scripted`` dates them at the tick's start)."""

    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        req = super().generate(now_s, dt_s, rng)
        ready = np.array([self.flows[int(t)][3] for t in req.tag], dtype=np.float64)
        return dataclasses.replace(req, ready_s=ready)


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_flow_starting_inside_a_tick_sends_for_the_part_it_exists(solver: Solver) -> None:
    """A lone flow gpu0001 -> gpu0000 (one leaf, nothing else in the way) ready 4 us into
    a 10 us tick sends at the payload rate R x MTU / (MTU + headers) for the 6 us left of
    it: R x 6 us delivered after the first tick, then R x 10 us more in the second."""
    prof = profile()
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=2)
    dt, start = 10e-6, 4e-6
    idx = topo.nodes.index
    wl = _ReadyInside(
        name="late", traffic_class="bulk", flows=[(idx["gpu0001"], idx["gpu0000"], 1e12, start)]
    )
    fabric = Fabric(topo, prof, [wl], dt_s=dt, seed=1, solver=solver)
    r = prof.link_bandwidth_Bps * prof.mtu_bytes / (prof.mtu_bytes + prof.header_bytes)
    fabric.step()
    assert fabric.flows.active.sum() == 1
    slot = int(np.flatnonzero(fabric.flows.active)[0])
    assert fabric.flows.start_s[slot] == start
    assert fabric.flows.delivered[slot] == pytest.approx(r * (dt - start), rel=1e-9)
    fabric.step()
    assert fabric.flows.delivered[slot] == pytest.approx(r * (2 * dt - start), rel=1e-9)


def _until_started(fabric: Fabric, size: float) -> int:
    """Step until a flow of ``size`` bytes is in the table; its slot."""
    while True:
        fabric.step()
        slot = np.flatnonzero(fabric.flows.active & (fabric.flows.size == size))
        if slot.size:
            return int(slot[0])


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_message_behind_a_queue_finishes_after_its_fifo_wait_and_its_serialisation(
    solver: Solver,
) -> None:
    """On RoCE a 2-to-1 incast from two leaves to a third fills the spine's queues (the
    spine -> leaf02 link is the bottleneck); a 4 KiB message from gpu0001, beside gpu0000
    on leaf00, joins gpu0000's queue at the spine and waits for the bytes queued ahead
    (its ``wait_s``, set at its start), then crosses its NIC at line rate. Its share of
    the congested link moves its fluid bytes well before that, so its finish is the
    FIFO's: start + wait + size / bandwidth + fixed + host costs, exactly."""
    prof = ROCE_400G
    topo = leaf_spine(prof, leaves=3, spines=1, gpus_per_leaf=2)
    incast = [("gpu0000", "gpu0004", 1e12, 0.0), ("gpu0002", "gpu0004", 1e12, 0.0)]
    probe_row = ("gpu0001", "gpu0004", 4096.0, 50e-6)
    fabric, probe = with_probe(topo, prof, incast, probe_row, dt_s=1e-7, solver=solver)
    f = fabric.flows
    slot = _until_started(fabric, 4096)
    wait, start = float(f.wait_s[slot]), float(f.start_s[slot])
    costs = float(f.fixed_latency_s[slot] + f.extra_latency_s[slot])
    serialise = 4096 / float(topo.links.bandwidth_Bps[f.path[0, slot]])
    assert wait > 10 * serialise  # the queue ahead dominates: the FIFO end is the later one
    while not probe.finished:
        fabric.step()
    _, started, finished = probe.finished[0]
    assert started == pytest.approx(start, abs=1e-15)
    assert finished - started == pytest.approx(wait + serialise + costs, rel=1e-9)


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_class_histogram_sums_the_latencies_its_workloads_saw(solver: Solver) -> None:
    """The latency histogram's sum (and so its mean, and the exported ``_sum``) is the sum
    of the messages' own latencies, as the workload recorded them."""
    prof = profile()
    topo = leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=2)
    rows = [("gpu0000", "gpu0003", 4096.0 * (k + 1), k * 2e-6) for k in range(6)]
    fabric, (main,) = scripted_fabric(topo, prof, rows, dt_s=1e-6, solver=solver)
    while len(main.finished) < len(rows):
        fabric.step()
    latencies = [finish - start for _, start, finish in main.finished]
    hist = fabric.class_hist["bulk"].freeze()
    assert hist.sum_s == pytest.approx(sum(latencies), rel=1e-12)
    assert hist.mean() == pytest.approx(float(np.mean(latencies)), rel=1e-12)


def test_a_hop_that_can_send_nothing_and_had_nothing_left_sets_no_finish_time() -> None:
    """A finishing entry on a link with nothing left of its capacity (a link down) that
    carried 0 B in the tick: its last byte went before the tick, so it is timed at 0,
    not at the tick's end, and the flow ends at its other hops' latest time (the
    compiled ``kernels.move.finish_times`` does the same)."""
    idx, sol = _finishing([0.0], level=0.0, buf_pad=[1], n_bufs=1)
    t = finish_within_tick(idx, sol, np.array([0.0]), np.array([True]), dt=1.0)
    assert t[0] == 0.0
