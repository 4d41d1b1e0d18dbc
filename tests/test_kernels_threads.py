"""The threaded solve (``kernels.tick.use_threads``) gives the serial solve's rates, bit for
bit: the links of a rank are filled on numba's threads, each link's entries and scratch
its own, so nothing but the order in which links are visited changes.

Run on two threads from the first entry on (``PARALLEL_MIN_ENTRIES = 0``), on a feed-forward
fat-tree and on a leaf-spine with a pinned route that breaks up*/down* (Jacobi sweeps).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numba
import numpy as np
import pytest

from fabric_core.fabric import Fabric
from fabric_core.kernels import tick
from fabric_core.profiles import NATIVE_400G
from fabric_core.topology import fat_tree, leaf_spine
from fabric_core.workloads.traffic import Bulk, Scripted

pytestmark = pytest.mark.skipif(
    numba.config.NUMBA_NUM_THREADS < 2 or numba.config.DISABLE_JIT,
    reason="needs numba with two threads",
)


@pytest.fixture
def threaded() -> Iterator[Callable[[bool], None]]:
    """Switch the threaded solve on (from the first entry) or off; off afterwards."""

    def use(on: bool) -> None:
        tick.use_threads(2 if on else 1)
        tick.PARALLEL_MIN_ENTRIES = 0 if on else 20_000

    saved = tick.PARALLEL_MIN_ENTRIES
    yield use
    tick.use_threads(1)
    tick.PARALLEL_MIN_ENTRIES = saved


def _fat_tree() -> Fabric:
    topo = fat_tree(
        NATIVE_400G, pods=2, leaves_per_pod=2, spines_per_pod=2, cores_per_spine=2,
        gpus_per_leaf=4,
    )  # fmt: skip
    wl = Bulk(name="a2a", traffic_class="bulk", size_bytes=256 * 1024, outstanding=3)
    return Fabric(topo, NATIVE_400G, [wl], dt_s=1e-6, seed=3)


def _pinned_leaf_spine() -> Fabric:
    topo = leaf_spine(NATIVE_400G, leaves=2, spines=2, gpus_per_leaf=3)
    g = [int(x) for x in topo.gpus]
    flows = [(g[0], g[1], 3e6, 0.0), (g[2], g[4], 2e6, 0.0), (g[3], g[0], 1e6, 2e-6)]
    flows += [(g[i], g[(i + 3) % len(g)], 5e5, i * 1e-6) for i in range(len(g))]
    wl = Scripted(name="w", traffic_class="a", flows=flows)
    fabric = Fabric(topo, NATIVE_400G, [wl], dt_s=1e-6, seed=5)
    names = topo.nodes.name
    fabric.add_static_route(
        names[g[0]], names[g[1]], ["leaf00", "spine00", "leaf01", "spine00", "leaf00"]
    )
    return fabric


@pytest.mark.parametrize(("build", "feedforward"), [(_fat_tree, True), (_pinned_leaf_spine, False)])
def test_the_threaded_solve_is_the_serial_one_bit_for_bit(
    threaded: Callable[[bool], None], build: Callable[[], Fabric], feedforward: bool
) -> None:
    serial, parallel = build(), build()
    seen_feedforward = set()
    for _ in range(60):
        threaded(False)
        serial.step()
        threaded(True)
        parallel.step()
        assert serial._index is not None
        seen_feedforward.add(serial._index.feedforward)
        for name in ("rate", "backlog", "delivered"):
            np.testing.assert_array_equal(
                getattr(parallel.flows, name), getattr(serial.flows, name), err_msg=name
            )
        np.testing.assert_array_equal(parallel.occupancy, serial.occupancy)
        np.testing.assert_array_equal(parallel.link_rate, serial.link_rate)
        assert parallel.completed_flows == serial.completed_flows
    assert feedforward in seen_feedforward  # the solver path the case is about was taken
    assert serial.completed_flows > 0
