"""The fabric-wide cap on flows in flight holds for workload flows too."""

from __future__ import annotations

import numpy as np

from fabric_core.faults.admission import AdmissionLimits
from fabric_core.net.profiles import NATIVE_400G
from fabric_core.net.topology import leaf_spine
from fabric_core.runtime.fabric import Fabric
from fabric_core.workloads.traffic import AllToAll, Bulk, Scripted


def test_workload_flows_past_the_fabric_cap_are_refused_counted_and_announced() -> None:
    topo = leaf_spine(NATIVE_400G, leaves=2, spines=2, gpus_per_leaf=4)
    wl = Bulk(name="bulk", traffic_class="bulk", size_bytes=4e6, outstanding=4)
    fabric = Fabric(topo, NATIVE_400G, [wl], dt_s=1e-6, seed=1)
    fabric.faults.admission.limits = AdmissionLimits(fabric_flows=10)
    fabric.step()
    assert fabric.faults.admission.refused_flows_total == 32 - 10  # 8 senders x 4 wanted
    most = 0
    for _ in range(29):
        fabric.step()
        most = max(most, fabric.flows.n_parents)
    assert most == 10  # the cap lets 10 in
    fl = fabric.flows  # the kept count is the table's: live heads
    assert fl.n_parents == np.count_nonzero(
        (fl.active | fl.held) & (fl.parent == np.arange(fl.capacity))
    )
    # the refused flows' senders try again each tick (none of the 4 MB flows ends in
    # 30 µs), each try counted
    assert fabric.faults.admission.refused_flows_total == 30 * 22
    assert int(wl.in_flight.sum()) == 10  # (the workload counts what the fabric carries)
    events = [e for e in fabric.events if e.kind == "flows_refused"]
    assert len(events) == 1 and "10 flows in flight" in events[0].message


def test_a_bulk_sender_refused_at_the_cap_gets_its_slot_back_and_sends_once_there_is_room() -> None:
    """A bulk counted its flows refused at admission as in flight for ever: its senders'
    slots were lost, and a sender with one slot never sent again. Here scripted flows fill
    the cap of 8 first; the bulk's 8 senders (one flow each) are all refused, try again
    each tick, and start once the scripted flows are done."""
    topo = leaf_spine(NATIVE_400G, leaves=2, spines=2, gpus_per_leaf=4)
    gpus = topo.gpus.tolist()
    filler = Scripted(
        name="filler",
        traffic_class="bulk",
        flows=[(gpus[i], gpus[(i + 1) % 8], 2.0**20, 0.0) for i in range(8)],
    )
    bulk = Bulk(name="bg", traffic_class="bulk", size_bytes=4096.0, outstanding=1)
    fabric = Fabric(topo, NATIVE_400G, [filler, bulk], dt_s=1e-6, seed=1)
    fabric.faults.admission.limits = AdmissionLimits(fabric_flows=8)
    fabric.step()
    assert fabric.faults.admission.refused_by_workload == {"bg": (8, 8 * 4096.0)}
    assert int(bulk.in_flight.sum()) == 0  # the slots are back (the old code: 8)
    for _ in range(40):
        fabric.step()
    assert len(filler.finished) == 8
    refused = fabric.faults.admission.refused_by_workload["bg"][0]
    assert refused % 8 == 0 and refused > 8  # tried again each tick until there was room
    assert bulk.delivered_bytes >= 8 * 4096.0  # each sender sent


def test_the_flows_the_cap_refuses_are_counted_under_their_workloads_name() -> None:
    """A run's report names the workloads that did not run whole: each workload's refused
    flows and bytes are counted under its name, and together they are the total (no
    fault here). The bulk asks first, so its 8 x 4 = 32 flows fit the cap of 36 (4 left);
    the all-to-all's first round of 4 x 3 = 12 gets 4, and 8 are refused."""
    topo = leaf_spine(NATIVE_400G, leaves=2, spines=2, gpus_per_leaf=4)
    bulk = Bulk(name="bg", traffic_class="bulk", size_bytes=4e6, outstanding=4)
    a2a = AllToAll(name="moe", traffic_class="bulk", ranks_spec=4, size_bytes=1000.0)
    fabric = Fabric(topo, NATIVE_400G, [bulk, a2a], dt_s=1e-6, seed=1)
    fabric.faults.admission.limits = AdmissionLimits(fabric_flows=36)
    fabric.step()
    adm = fabric.faults.admission
    assert adm.refused_by_workload == {"moe": (8, 8000.0)}
    assert adm.refused_flows_total == 8


def test_each_kind_says_how_many_flows_its_own_parameters_put_in_flight_at_once() -> None:
    """What ``fabtop run`` warns of before a run (``admission_notes``): a workload's step
    past the cap, from its parameters; a kind with no such bound (random arrivals) none."""
    from fabric_core.workloads.base import admission_notes
    from fabric_core.workloads.traffic import Incast, Pairs, Rpc

    topo = leaf_spine(NATIVE_400G, leaves=2, spines=2, gpus_per_leaf=4)
    pairs = Pairs(
        name="p", traffic_class="bulk", pair_names=[("gpu0000", "gpu0004")] * 3, outstanding=5
    )
    burst = Incast(name="i", traffic_class="bulk", senders_spec="all")
    a2a = AllToAll(name="a", traffic_class="bulk", ranks_spec="all")
    rpc = Rpc(name="r", traffic_class="bulk")
    fabric = Fabric(topo, NATIVE_400G, [pairs, burst, a2a, rpc], dt_s=1e-6, seed=1)
    assert [wl.flows_at_once() for wl in fabric.workloads] == [
        (15, "keeps 15 flows in flight (3 pairs x 5 outstanding)"),
        (7, "starts 7 flows a burst (7 senders into one GPU)"),
        (56, "starts 56 flows a round (8 ranks, each to the 7 others)"),
        None,
    ]
    notes = admission_notes(fabric.workloads, 14)
    assert [name for name, _ in notes] == ["p", "a"]  # (7 flows a burst fit in 14)
    assert notes[0][1].startswith(
        "workload 'p' keeps 15 flows in flight (3 pairs x 5 outstanding), more than the "
        "fabric-wide cap of 14 flows in flight: past it new flows are refused"
    )
    assert "its senders try again each tick" in notes[0][1]  # (pairs take slots back)
    assert "what waits for them waits for ever" in notes[1][1]  # (a round does not)
    # a multi-plane fabric's workloads hear of the parts its planes refuse at a batch's end
    planed = admission_notes(fabric.workloads, 14, retry_every="batch of ticks")
    assert "its senders try again each batch of ticks" in planed[0][1]
    assert "what waits for them waits for ever" in planed[1][1]
    assert admission_notes(fabric.workloads, 56) == []  # (a round of 56 is not past 56)
