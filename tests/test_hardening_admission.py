"""Issue 20, defect 3: what an incast may add is bounded; clearing it cancels its flows."""

from __future__ import annotations

import numpy as np
import pytest

from fabric_core.commands import ClearFault, CommandError, InjectFault
from fabric_core.faults import recovery
from fabric_core.faults.admission import Admission, AdmissionLimits, admit_rounds
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from tests.helpers import profile, scripted_fabric, small_leaf_spine


def _fabric(name: str = "tiny") -> Fabric:
    return Fabric.from_scenario(load_scenario(name))


def _gpus(fabric: Fabric) -> int:
    return sum(1 for k in fabric.topo.nodes.kind if k == "gpu")


def _incast(fabric: Fabric, senders: int, size_bytes: float, period_s: float) -> None:
    """Inject an incast into gpu0000."""
    fabric.apply(
        InjectFault(
            kind="incast",
            target="gpu0000",
            params={"senders": senders, "size_bytes": size_bytes, "period_s": period_s},
        )
    )


def _incast_flows(fabric: Fabric) -> int:
    fl = fabric.flows
    return int(np.count_nonzero(fl.active & (fl.workload == recovery.INCAST_WORKLOAD)))


def test_the_reported_incast_is_refused_against_what_the_fabric_carries() -> None:
    fabric = _fabric()
    with pytest.raises(CommandError, match=r"senders must be at most \d+ \(the GPUs other"):
        fabric.apply(
            InjectFault(
                kind="incast",
                target="gpu0000",
                params={"senders": 4096, "size_bytes": 1e9, "period_s": 1e-7},
            )
        )
    senders = _gpus(fabric) - 1
    with pytest.raises(
        CommandError, match=r"more than its NIC's line rate .* period_s to at least"
    ):
        fabric.apply(
            InjectFault(
                kind="incast",
                target="gpu0000",
                params={"senders": senders, "size_bytes": 1e9, "period_s": 1e-7},
            )
        )
    assert not fabric.faults.active()


def test_an_in_range_flood_of_flows_is_bounded_counted_and_announced() -> None:
    fabric = _fabric()
    senders = _gpus(fabric) - 1
    lim = fabric.faults.admission.limits
    # 64-byte messages every 100 ns from every other GPU: 10 rounds a 1 us tick, far
    # more than one GPU's link drains; in range of what each NIC can offer
    _incast(fabric, senders, 4096.0, 1e-7)
    for _ in range(400):
        fabric.step()
        assert _incast_flows(fabric) <= min(senders * lim.per_sender_flows, lim.fault_flows)
    refused = fabric.faults.admission.refused_flows_total
    assert refused > 0
    events = [e for e in fabric.events if e.kind == "flows_refused"]
    assert len(events) == 1 and "admission limits reached" in events[0].message
    # every due round was either started or refused: nothing is queued for later
    f = fabric.faults.active("incast")[0]
    assert f.refused == refused


def test_outstanding_bytes_bound_a_fault_of_big_messages() -> None:
    fabric = _fabric()
    fabric.faults.admission.limits = AdmissionLimits(fault_bytes=8 * 2**20)
    senders = _gpus(fabric) - 1
    nic = float(fabric.topo.links.bandwidth_Bps.min())
    _incast(fabric, senders, 2**20, 2**20 / nic)
    for _ in range(200):
        fabric.step()
        fl = fabric.flows
        mine = fl.active & (fl.workload == recovery.INCAST_WORKLOAD)
        assert float((fl.size[mine] - fl.delivered[mine]).sum()) <= 8 * 2**20 + 1
    assert fabric.faults.admission.refused_flows_total > 0


def test_clearing_an_incast_cancels_its_unsent_messages_and_its_flows_go() -> None:
    fabric = _fabric()
    senders = _gpus(fabric) - 1
    _incast(fabric, senders, 65536.0, 2e-6)
    for _ in range(100):
        fabric.step()
    assert _incast_flows(fabric) > 0
    fabric.apply(ClearFault(all=True))
    fabric.step()
    assert [e for e in fabric.events if e.kind == "flows_cancelled"]
    fl = fabric.flows
    mine = fl.active & (fl.workload == recovery.INCAST_WORKLOAD)
    assert float(fl.backlog[0, mine].sum()) == 0.0  # nothing left to send at the sources
    for _ in range(2000):
        if _incast_flows(fabric) == 0:
            break
        fabric.step()
    assert _incast_flows(fabric) == 0
    t = fabric.snapshot().totals  # bytes still balance, the cancelled ones counted apart
    assert t.injected_bytes_total == pytest.approx(
        t.delivered_bytes_total + t.in_flight_bytes + t.cancelled_bytes_total, rel=1e-9, abs=1.0
    )
    assert t.dropped_bytes_total == 0
    assert t.cancelled_bytes_total > 0  # a counter of its own: injected never goes down


def test_two_incasts_keep_their_flows_apart() -> None:
    fabric = _fabric()
    params: dict[str, float | str] = {"senders": 2.0, "size_bytes": 1e6, "period_s": 1e-4}
    fabric.apply(InjectFault(kind="incast", target="gpu0000", params=params))
    second = fabric.apply(InjectFault(kind="incast", target="gpu0001", params=params))
    fabric.step()
    assert _incast_flows(fabric) == 4
    fabric.apply(ClearFault(fault_id=str(second["fault_id"])))
    fabric.step()
    fl = fabric.flows
    mine = fl.active & (fl.workload == recovery.INCAST_WORKLOAD)
    # the first incast's messages still have bytes to send; the second's none
    to_gpu0 = mine & (fl.dst == fabric.topo.nodes.index["gpu0000"])
    to_gpu1 = mine & (fl.dst == fabric.topo.nodes.index["gpu0001"])
    assert fl.backlog[0, to_gpu0].sum() > 0
    assert fl.backlog[0, to_gpu1].sum() == 0


def test_admit_rounds_takes_each_senders_room_then_the_totals() -> None:
    room = np.array([2, 0, 1])
    got = admit_rounds(room, 3, 10.0, flow_room=100, byte_room=1e9).reshape(3, 3)
    assert got.tolist() == [[True, False, True], [True, False, False], [False, False, False]]
    assert admit_rounds(room, 3, 10.0, flow_room=2, byte_room=1e9).sum() == 2
    assert admit_rounds(room, 3, 10.0, flow_room=100, byte_room=25.0).sum() == 2
    assert not admit_rounds(room, 3, 10.0, flow_room=0, byte_room=1e9).any()


def test_the_fabric_wide_cap_counts_and_announces_once_per_episode() -> None:
    events: list[tuple[str, str, str, str]] = []
    adm = Admission(AdmissionLimits(fabric_flows=10))
    emit = lambda *e: events.append(e)  # noqa: E731
    assert adm.fabric_admit(np.full(4, 100.0), 8, emit) == 2
    assert adm.fabric_admit(np.full(4, 100.0), 10, emit) == 0
    assert adm.refused_flows_total == 6 and adm.refused_bytes_total == 600.0
    assert len(events) == 1 and events[0][1] == "flows_refused"
    assert adm.fabric_admit(np.full(1, 100.0), 0, emit) == 1  # room again
    adm.fabric_admit(np.full(20, 1.0), 0, emit)
    assert len(events) == 2


def test_the_per_fault_flow_limit_binds_when_the_senders_have_room() -> None:
    """7 senders with 16 flows of room each could hold 112 flows; the fault's own limit
    of 20 holds it there, and it is reached (the bound is the fault's, not a lower one)."""
    fabric = _fabric()
    fabric.faults.admission.limits = AdmissionLimits(per_sender_flows=16, fault_flows=20)
    senders = _gpus(fabric) - 1
    _incast(fabric, senders, 4096.0, 1e-7)
    most = 0
    for _ in range(200):
        fabric.step()
        most = max(most, _incast_flows(fabric))
        assert _incast_flows(fabric) <= 20
    assert most == 20


def test_clearing_an_incast_of_one_flow_cancels_its_unsent_bytes() -> None:
    fabric = _fabric()
    _incast(fabric, 1, 64e6, 1.0)
    fabric.run_ticks(20)
    assert _incast_flows(fabric) == 1
    fabric.apply(ClearFault(all=True))
    fabric.step()
    assert fabric.snapshot().totals.cancelled_bytes_total > 32e6  # most of 64 MB was unsent


def test_an_incast_on_a_fabric_without_a_bulk_class_uses_its_first_class() -> None:
    prof = profile()
    fabric, _ = scripted_fabric(
        small_leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=4),
        prof,
        [("gpu0001", "gpu0002", 1e6, 0.0)],
        dt_s=1e-6,
        traffic_class="rpc",
    )
    assert fabric.classes == ["rpc"]  # no "bulk": the incast's flows take class 0
    _incast(fabric, 2, 1e6, 1.0)
    fabric.run_ticks(5)
    fl = fabric.flows
    mine = fl.active & (fl.workload == recovery.INCAST_WORKLOAD)
    assert mine.any() and (fl.cls[mine] == 0).all()
