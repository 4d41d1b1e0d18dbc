"""Histograms filled by group in one pass are those filled group by group."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_core.histogram import Histogram, HistogramRows


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.floats(1e-9, 10.0)), max_size=60),
)
def test_rows_observed_together_are_observe_many_per_group(rows: list[tuple[int, float]]) -> None:
    group = np.array([g for g, _ in rows], dtype=np.int16)
    values = np.array([v for _, v in rows])
    rows = HistogramRows(4)
    rows.observe(group, values)
    for g, hist in enumerate(rows.hists):
        alone = Histogram()
        alone.observe_many(values[group == g])
        np.testing.assert_array_equal(hist.counts, alone.counts)
        assert np.isclose(hist.sum_s, alone.sum_s, rtol=1e-12, atol=0)
