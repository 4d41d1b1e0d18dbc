"""A RoCE sender whose bytes a dead link swallowed waits for its RC local ACK timeout.

Until BFD declares a link down, switches forward into it and lose what they send. The
receiver gets nothing, so it sends neither ACK nor NAK, and the sender resends from the
first unacknowledged packet when its local ACK timeout (IBTA: 4.096 µs × 2^timeout) is
up, then again each time it is, until routing has moved the flow. The expectations here
are that timeline, worked out from the profile's figures (docs/MODEL.md, "Faults and
recovery"), not read from the code.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fabric_core.commands import InjectFault
from fabric_core.net.profiles import get_profile
from fabric_core.runtime.fabric import SOLVERS, Fabric, Solver
from tests.helpers import scripted_fabric, small_leaf_spine, step_resending

DT = 1e-6
SIZE = 40e6  # 0.8 ms at 400 Gb/s: still sending when its spine link fails at 50 µs
BFD_S, ECMP_S = 100e-6, 100e-6  # detection 3 × 100 µs, then 100 µs to reconverge
FAIL_TICK = 50


def one_flow(
    ack_timeout_s: float, solver: Solver, down_for_s: float | None = None
) -> tuple[Fabric, int, int]:
    """One flow across a 2-spine RoCE fabric; returns (fabric, its slot, its spine
    uplink) at the tick its uplink is failed (for ``down_for_s``; None: for good)."""
    prof = dataclasses.replace(
        get_profile("roce-400g"),
        bfd_interval_s=BFD_S,
        ecmp_reconverge_s=ECMP_S,
        local_ack_timeout_s=ack_timeout_s,
    )
    topo = small_leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=1)
    fabric, _ = scripted_fabric(
        topo, prof, [("gpu0000", "gpu0001", SIZE, 0.0)], dt_s=DT, solver=solver
    )
    fabric.run_ticks(FAIL_TICK)
    slot = int(np.flatnonzero(fabric.flows.active)[0])
    names = fabric.topo.links.name
    uplink = next(
        int(li)
        for li in fabric.flows.path[: fabric.flows.hops[slot], slot]
        if names[li].startswith("leaf00->spine")
    )
    fabric.apply(InjectFault(kind="link_down", target=names[uplink], duration_s=down_for_s))
    return fabric, slot, uplink


def timeline(fabric: Fabric, slot: int, limit_ticks: int = 3000) -> dict[str, list[float]]:
    """Tick by tick until the flow is done: the start of the tick in which it began to
    wait, and of the one in which its NIC sent again, and its finish; checks that the
    bytes add up on every tick."""
    out: dict[str, list[float]] = {"waits": [], "resends": [], "finish": []}
    nic = int(fabric.flows.path[0, slot])
    waiting = False
    for _ in range(limit_ticks):
        sent = float(fabric.counters["tx_bytes_total"][nic])
        fabric.step()
        now = fabric.sim_time_s
        # bytes are neither lost nor made: what was injected is delivered or in flight
        assert fabric.injected_bytes == pytest.approx(
            fabric.delivered_bytes + fabric.flows.in_flight_bytes(), rel=1e-12, abs=1e-3
        )
        if fabric.flows.n_waiting and not waiting:
            out["waits"].append(now - DT)  # held at the start of the tick
            waiting = True
            # it carries nothing while it waits: no entries, nothing sent
            assert fabric.flows.n_parents == 1 and not fabric.flows.active.any()
        elif waiting and fabric.flows.n_waiting == 0:
            waiting = False
        elif waiting:
            assert float(fabric.counters["tx_bytes_total"][nic]) == sent
        resent = float(fabric.counters["tx_bytes_total"][nic]) > sent
        if not waiting and resent and len(out["resends"]) < len(out["waits"]):
            out["resends"].append(now - DT)  # the tick it sent in began a tick ago
        if fabric.completed_flows:
            out["finish"].append(now)
            return out
    raise AssertionError("the flow did not finish")


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_blackholed_sender_waits_its_ack_timeout_then_resends_on_the_new_path(
    solver: Solver,
) -> None:
    """Timeout 7 (524 µs) is past the reroute (400 µs after the failure): the sender
    loses a tick's bytes, waits 524 µs, and resends everything past its last
    acknowledged byte once, on the path routing has moved it to."""
    timeout = 4.096e-6 * 2**7
    fabric, slot, uplink = one_flow(timeout, solver)
    delivered_at_failure = fabric.delivered_bytes
    t = timeline(fabric, slot)
    assert len(t["waits"]) == 1
    # the tick after the failure, the bytes its leaf sent into the dead link are lost
    assert t["waits"][0] == pytest.approx((FAIL_TICK + 1) * DT, abs=DT / 2)
    assert t["resends"][0] - t["waits"][0] == pytest.approx(timeout, abs=DT)
    assert uplink not in fabric.flows.path[:, slot]  # moved while it waited
    assert fabric.delivered_bytes == pytest.approx(SIZE, rel=1e-12)
    # nothing arrives while it waits; then the rest at the line's payload rate (each
    # MTU of payload carries its headers), with the new path's store-and-forward and
    # propagation within the tolerance
    p = fabric.profile
    payload_Bps = (
        fabric.topo.links.bandwidth_Bps[uplink] * p.mtu_bytes / (p.mtu_bytes + p.header_bytes)
    )
    rest = (SIZE - delivered_at_failure) / payload_Bps
    assert t["finish"][0] - t["resends"][0] == pytest.approx(rest, abs=3e-6)
    # what was lost is what one tick put into the dead link: under a buffer
    lost = float(fabric.counters["discards_bytes_total"][uplink])
    assert 0 < lost <= fabric.topo.links.bandwidth_Bps[uplink] * DT * (1 + 1e-9)


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_timeout_shorter_than_the_reroute_resends_into_the_dead_link_and_waits_again(
    solver: Solver,
) -> None:
    """Timeout 6 (262 µs): the first resend, 263 µs after the loss, goes into the link
    still unknown to be dead (the reroute is at 400 µs), is lost and waits again; the
    second, after 2 × 262 µs and the tick its loss took, gets through."""
    timeout = 4.096e-6 * 2**6
    fabric, slot, uplink = one_flow(timeout, solver)
    t = timeline(fabric, slot)
    assert len(t["waits"]) == 2
    assert t["resends"][0] - t["waits"][0] == pytest.approx(timeout, abs=DT)
    assert t["waits"][1] - t["resends"][0] == pytest.approx(DT, abs=DT / 2)  # lost again
    assert t["resends"][1] - t["waits"][1] == pytest.approx(timeout, abs=DT)
    detected = fabric.faults.faults["f0"].mitigated_at_s
    assert detected is not None and t["resends"][0] < detected < t["resends"][1]
    assert uplink not in fabric.flows.path[:, slot]
    assert fabric.delivered_bytes == pytest.approx(SIZE, rel=1e-12)


def test_a_link_back_before_bfd_notices_takes_the_resend_on_the_old_path() -> None:
    """The link is down for 100 µs, less than BFD's 300 µs: routing never moves the
    flow, and after its timeout (524 µs) it resends on the path it had."""
    timeout = 4.096e-6 * 2**7
    fabric, slot, uplink = one_flow(timeout, "compiled", down_for_s=100e-6)
    left = SIZE - fabric.delivered_bytes
    carried = float(fabric.counters["tx_bytes_total"][uplink])
    t = timeline(fabric, slot)
    assert len(t["waits"]) == 1
    assert t["resends"][0] - t["waits"][0] == pytest.approx(timeout, abs=DT)
    assert fabric.faults.faults["f0"].mitigated_at_s is None  # never rerouted
    # what was left went over the old uplink once it was back (its payload counted)
    extra = float(fabric.counters["tx_bytes_total"][uplink]) - carried
    assert extra == pytest.approx(left, rel=1e-6)
    assert fabric.delivered_bytes == pytest.approx(SIZE, rel=1e-12)


@pytest.mark.parametrize("solver", SOLVERS)
def test_retransmitted_bytes_are_counted_when_the_sender_resends_them_not_when_lost(
    solver: Solver,
) -> None:
    """The link table's and the run report's retransmitted bytes say what the sender sent
    again, when it sent it: nothing while it waits for its ACK timeout (the bytes lost
    show as discards and dropped bytes meanwhile), then, tick by tick, what its NIC
    sends of what it goes back for, on the NIC's link. In all, that is what the NIC sent
    past the flow's size: every byte once, and those it went back for twice."""
    from fabric_core.reports.run import summarise

    timeout = 4.096e-6 * 2**7
    fabric, slot, uplink = one_flow(timeout, solver)
    nic = int(fabric.flows.path[0, slot])
    while not fabric.flows.n_waiting:
        fabric.step()
    lost_at_s = fabric.sim_time_s
    while fabric.sim_time_s < lost_at_s + timeout - 2 * DT:  # waiting
        fabric.step()
        snap = fabric.snapshot()
        report = summarise(snap)
        assert float(np.sum(snap.link_state.retransmitted_bytes_total)) == 0.0
        assert report["links"]["retransmitted_bytes"] == 0.0
        assert snap.link_state.discards_bytes_total[uplink] > 0
        assert report["totals"]["dropped_bytes"] > 0
    assert fabric.flows.n_waiting == 1  # (not resent yet)
    # the NIC's (tick start, resent, sent) in the ticks it resent in
    ticks: list[tuple[float, float, float]] = []
    while not fabric.completed_flows:
        # a link resends no more than it sends (no bit errors here), and only the NIC does
        resent, sent = step_resending(fabric, nic)
        if resent > 0:
            ticks.append((fabric.sim_time_s - DT, resent, sent))
    ls = fabric.snapshot().link_state
    # counted from the tick the timeout is up, at the NIC's rate: what it went back for
    # is the first it sends (every tick but the last of the resend is all resent)
    assert ticks[0][0] == pytest.approx(lost_at_s - DT + timeout, abs=DT)
    for _, resent_b, sent_b in ticks[:-1]:
        assert resent_b == pytest.approx(sent_b, rel=1e-9)
    total = float(ls.retransmitted_bytes_total[nic])
    assert total == pytest.approx(float(ls.tx_bytes_total[nic]) - SIZE, rel=1e-9)
    # go-back-N: at least the bytes lost (and what was in flight past them)
    assert total >= float(ls.discards_bytes_total[uplink]) > 0
    assert summarise(fabric.snapshot())["links"]["retransmitted_bytes"] == pytest.approx(total)


def test_the_waiting_flows_reach_the_scrape_the_telemetry_and_the_compare_view() -> None:
    """An operator sees how many flows wait for their ACK timeout: the Prometheus
    gauge, the MQTT totals a remote console decodes, and the compare view's line."""
    from console.screens.compare.sides import dropped_line
    from exporters.mqtt.decode import node_table, snapshot_from
    from exporters.mqtt.encode import encode_meta, encode_telemetry
    from exporters.mqtt.schema import encoder, meta_decoder, telemetry_decoder
    from exporters.prometheus import start_metrics_server
    from tests._prometheus import samples, scrape

    fabric, _slot, _uplink = one_flow(4.096e-6 * 2**7, "compiled")
    fabric.run_ticks(5)
    snap = fabric.snapshot()
    assert snap.totals.waiting_flows == 1 and snap.totals.active_flows == 1
    with start_metrics_server(lambda: snap, port=0, link_metrics="switch") as server:
        values = samples(scrape(server.url))
    assert values[("fabtop_waiting_flows", ())] == 1.0
    tm = telemetry_decoder.decode(encoder.encode(encode_telemetry(snap, run_id="r")))
    meta = meta_decoder.decode(encoder.encode(encode_meta(snap, run_id="r")))
    remote = snapshot_from(meta, tm, node_table(meta.nodes), ())
    assert remote.totals.waiting_flows == 1
    assert "1 flow waiting to resend (ACK timeout)" in dropped_line(remote)
    fabric.run_ticks(600)  # the timeout is up and the flow resent on its new path
    assert fabric.snapshot().totals.waiting_flows == 0
    assert "waiting" not in dropped_line(fabric.snapshot())
