"""The closed-loop bulk workload keeps exactly ``outstanding`` flows per sender in flight."""

from __future__ import annotations

import numpy as np

from fabric_core.runtime.fabric import Fabric
from fabric_core.workloads.traffic import Bulk
from tests.helpers import profile, small_leaf_spine


def test_bulk_keeps_outstanding_flows_per_sender() -> None:
    prof = profile()
    topo = small_leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=4)
    wl = Bulk(name="bg", traffic_class="bulk", size_bytes=64 * 1024, outstanding=3)
    fabric = Fabric(topo, prof, [wl], dt_s=1e-6, seed=3)
    senders = int(topo.gpus.size)
    completed_before = 0
    for _ in range(40):  # 64 KiB flows finish within a few ticks: many rounds of refills
        fabric.step()
        fl = fabric.flows
        src = topo.links.src[fl.path[0, fl.active]]
        per_sender = np.bincount(src, minlength=int(topo.gpus.max()) + 1)[topo.gpus]
        assert per_sender.max() <= 3
        assert fl.n_active <= 3 * senders
        completed_before = fabric.completed_flows
    assert completed_before > 3 * senders  # flows did complete and were replaced
    assert wl.in_flight[topo.gpus].min() >= 0
