"""The late-start limits (``kernels.slots.start_limits``): a flow ready only inside the
tick sends for the part of the tick it exists, at most that part of its first link's
capacity; the limits are worked out only in a tick that has such a flow."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_core.tick.kernels.slots import start_limits

DT = 2e-6
NOW = 1e-3


@settings(deadline=None)
@given(st.lists(st.floats(-3.0, 3.0), min_size=1, max_size=12), st.integers(0, 5))
def test_the_limits_are_the_part_of_the_tick_each_late_flow_exists(
    ready_in_ticks: list[float], extra: int
) -> None:
    """Heads at every other entry, their flows ready ``ready_in_ticks`` ticks after the
    tick's start (negative: before it); against the formula worked out here."""
    k = len(ready_in_ticks)
    n = 2 * k + extra
    heads = np.arange(0, 2 * k, 2, dtype=np.intp)
    flow = np.arange(n, dtype=np.intp)
    link = np.arange(n, dtype=np.intp) % 3
    capacity = np.array([50e9, 25e9, 12.5e9])
    start_s = np.full(n, NOW)
    start_s[heads] = NOW + np.array(ready_in_ticks) * DT
    limit, late = start_limits(heads, flow, link, start_s, capacity, n, NOW, DT)
    ready = (NOW + DT - start_s[heads]) / DT
    assert late == bool((ready < 1).any())
    if not late:
        assert limit.size == 0  # nothing worked out
        return
    expected = np.full(n, np.inf)
    part = np.clip(ready, 0.0, 1.0) * capacity[link[heads]]
    expected[heads] = np.where(ready < 1, part, np.inf)
    np.testing.assert_array_equal(limit, expected)
