"""Histograms filled by class in one pass are those filled class by class."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_core.histogram import Histogram, observe_by_class


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.floats(1e-9, 10.0)), max_size=60),
)
def test_observe_by_class_is_observe_many_per_class(rows: list[tuple[int, float]]) -> None:
    group = np.array([g for g, _ in rows], dtype=np.int16)
    values = np.array([v for _, v in rows])
    together = [Histogram() for _ in range(4)]
    observe_by_class(together, group, values)
    for g, hist in enumerate(together):
        alone = Histogram()
        alone.observe_many(values[group == g])
        np.testing.assert_array_equal(hist.counts, alone.counts)
        assert np.isclose(hist.sum_s, alone.sum_s, rtol=1e-12, atol=0)
