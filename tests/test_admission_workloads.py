"""The fabric-wide cap on flows in flight holds for workload flows too."""

from __future__ import annotations

import numpy as np

from fabric_core.faults.admission import AdmissionLimits
from fabric_core.net.profiles import NATIVE_400G
from fabric_core.net.topology import leaf_spine
from fabric_core.runtime.fabric import Fabric
from fabric_core.workloads.traffic import AllToAll, Bulk


def test_workload_flows_past_the_fabric_cap_are_refused_counted_and_announced() -> None:
    topo = leaf_spine(NATIVE_400G, leaves=2, spines=2, gpus_per_leaf=4)
    wl = Bulk(name="bulk", traffic_class="bulk", size_bytes=4e6, outstanding=4)
    fabric = Fabric(topo, NATIVE_400G, [wl], dt_s=1e-6, seed=1)
    fabric.faults.admission.limits = AdmissionLimits(fabric_flows=10)
    most = 0
    for _ in range(30):
        fabric.step()
        most = max(most, fabric.flows.n_parents)
    assert most == 10  # 8 senders x 4 wanted: the cap lets 10 in
    fl = fabric.flows  # the kept count is the table's: live heads
    assert fl.n_parents == np.count_nonzero(
        (fl.active | fl.held) & (fl.parent == np.arange(fl.capacity))
    )
    assert fabric.faults.admission.refused_flows_total == 32 - 10
    events = [e for e in fabric.events if e.kind == "flows_refused"]
    assert len(events) == 1 and "10 flows in flight" in events[0].message


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
