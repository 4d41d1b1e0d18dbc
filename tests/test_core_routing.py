"""Adaptive routing: a new flow avoids the spine whose queues are full, and a burst of
new flows spreads by the load it places itself (``routing.route``'s ``size_bytes``)."""

from __future__ import annotations

import pytest

from fabric_core.runtime.fabric import Solver
from tests.helpers import SOLVERS, profile, scripted_fabric, small_leaf_spine

#: small enough that all six together (96 KiB on each link of the idle path) still
#: weigh less than the 128 KiB queued on each link of the loaded one: a burst's own load
#: must not send any of them into the full queues
PROBE_BYTES = 16 * 1024.0
T_PROBES = 50e-6
#: two line-rate flows from different leaves onto one receiver: the hash puts both on
#: spine01, whose buffers then hold 128 KiB (the receiver's downlink is the bottleneck)
HOGS = [("gpu0000", "gpu0004", 1e12, 0.0), ("gpu0008", "gpu0004", 1e12, 0.0)]
#: six flows from leaf00 to idle receivers on leaf01, started once the queues are full
PROBES: list[tuple[str, str, float, float]] = [
    (s, d, PROBE_BYTES, T_PROBES)
    for s in ("gpu0002", "gpu0003")
    for d in ("gpu0005", "gpu0006", "gpu0007")
]


def _probes_per_spine(routing: str, solver: Solver) -> dict[str, float]:
    """How many probes crossed each spine (bytes on leaf01's downlinks from it / size)."""
    prof = profile(routing=routing)
    topo = small_leaf_spine(prof, leaves=3, spines=2, gpus_per_leaf=4)
    fabric, (_, probes) = scripted_fabric(
        topo, prof, HOGS, dt_s=1e-6, extra=[("probe", "bulk", PROBES)], solver=solver
    )
    links = topo.links.index
    while fabric.sim_time_s < T_PROBES - 1e-9:
        fabric.step()
    before = fabric.snapshot().link_state
    # the precondition: spine01 is loaded, spine00 idle
    assert before.queue_bytes[links["leaf00->spine01"]] >= 64 * 1024
    assert before.queue_bytes[links["leaf00->spine00"]] == 0
    assert before.tx_bytes_total[links["spine00->leaf01"]] == 0
    while len(probes.finished) < len(PROBES):
        fabric.step()
    after = fabric.snapshot().link_state
    return {
        spine: float(
            after.tx_bytes_total[links[f"leaf00->{spine}"]]
            - before.tx_bytes_total[links[f"leaf00->{spine}"]]
        )
        for spine in ("spine00", "spine01")
    }


@pytest.mark.parametrize("solver", SOLVERS)
def test_new_flows_take_the_idle_spine(solver: Solver) -> None:
    """Adaptive routing picks the less loaded of two hashed candidates: here every probe
    has both spines as candidates, so all six cross the idle spine00 (the only traffic
    there), their own 96 KiB there weighing less than spine01's queues. ECMP, the control, keeps the hash's choice and sends most of them into the
    full queues of spine01."""
    adaptive = _probes_per_spine("adaptive", solver)
    ecmp = _probes_per_spine("ecmp", solver)
    assert adaptive["spine00"] == pytest.approx(len(PROBES) * PROBE_BYTES, rel=1e-9)
    assert ecmp["spine00"] <= (len(PROBES) - 2) * PROBE_BYTES * (1 + 1e-9)


def test_ecmp_in_a_fat_tree_pod_spreads_over_every_spine_including_the_first_link() -> None:
    """A fat-tree cables its switches first, so leaf00->spine00 is link 0: it is a
    candidate like any other (a link id is missing only when negative)."""
    import numpy as np

    from fabric_core.net.routing import route
    from fabric_core.net.topology import fat_tree

    prof = profile()
    topo = fat_tree(
        prof, pods=2, leaves_per_pod=2, spines_per_pod=2, cores_per_spine=2, gpus_per_leaf=2
    )
    links = topo.links.index
    assert links["leaf00->spine00"] == 0
    names = topo.nodes.index
    n = 64
    src = np.full(n, names["gpu0000"], dtype=np.int64)
    dst = np.full(n, names["gpu0002"], dtype=np.int64)  # leaf01, the same pod
    path, hops = route(
        topo,
        src,
        dst,
        np.arange(n, dtype=np.int64),
        mode="ecmp",
        link_cost=np.zeros(len(topo.links)),
    )
    assert (hops == 4).all()
    used = set(path[1].tolist())
    assert used == {links["leaf00->spine00"], links["leaf00->spine01"]}
