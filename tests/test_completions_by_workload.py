"""Completions handed to their workloads: the flows finished in a tick, split by workload
in the order they finished (``by_workload``, compiled and numpy, the same split)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_core.tick.kernels.slots import by_workload
from fabric_core.tick.reference import ReferenceTick


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.integers(-1, 4), min_size=1, max_size=40),
    st.integers(5, 7),
)
def test_each_workload_gets_its_flows_in_the_order_they_finished(
    workload: list[int], n_workloads: int
) -> None:
    wls = np.asarray(workload, np.int16)
    order, bounds = by_workload(wls, n_workloads)
    lo = 0
    for w in range(n_workloads):
        mine = order[lo : bounds[w]]
        np.testing.assert_array_equal(mine, np.flatnonzero(wls == w))  # in order
        lo = int(bounds[w])
    assert bounds[-1] == np.count_nonzero(wls >= 0)  # workload -1 (a fault's own) left out
    ref_order, ref_bounds = ReferenceTick.by_workload(wls, n_workloads)
    np.testing.assert_array_equal(order, ref_order)
    np.testing.assert_array_equal(bounds, ref_bounds)


def test_flows_of_no_workload_on_a_fabric_with_none_split_into_nothing() -> None:
    """A fabric with no workload whose finished flows are a fault's (workload -1): no
    place and no bound (the kernel wrote a first bound into an empty array before; bounds
    checked, as ``scripts/mutate`` and ``NUMBA_DISABLE_JIT=1`` run it, that fails)."""
    order, bounds = by_workload(np.array([-1, -1, -1], dtype=np.int16), 0)
    assert order.size == 0 and bounds.size == 0
