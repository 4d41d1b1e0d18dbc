"""Quantiles of few samples (issue 15 item 4): measurements, not bucket midpoints."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_core.tick.histogram import (
    BUCKETS_PER_DECADE,
    EXACT_SAMPLES,
    Histogram,
    HistogramRows,
    HistogramView,
    bucket_index,
)

BUCKET_LOG10 = 1 / BUCKETS_PER_DECADE
QS = (0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0)

durations = st.floats(min_value=1e-8, max_value=99.0, allow_nan=False, allow_infinity=False)


def _counts_only(h: Histogram) -> HistogramView:
    return HistogramView(counts=h.counts.copy(), sum_s=h.sum_s)


def test_one_sample_gives_that_sample_at_every_quantile() -> None:
    """The issue's case: one flow with an exact FCT of 25.85 µs was reported as p50
    26.6 µs and p99 28.2 µs (bucket interpolation)."""
    h = Histogram()
    h.observe_many(np.array([25.85e-6]))
    view = h.freeze()
    assert view.quantile(0.5) == view.quantile(0.99) == view.quantile(0.999) == 25.85e-6
    # from its bucket count alone: p50 = p99, inside the sample's bucket
    c = _counts_only(h)
    assert c.quantile(0.5) == c.quantile(0.99)
    assert abs(math.log10(c.quantile(0.99) / 25.85e-6)) < BUCKET_LOG10


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(durations, min_size=1, max_size=EXACT_SAMPLES),
    q=st.sampled_from(QS),
)
def test_few_samples_give_numpys_percentile_exactly(values: list[float], q: float) -> None:
    x = np.array(values)
    h = Histogram()
    for part in np.array_split(x, 3):  # observed over several calls, as ticks do
        h.observe_many(part)
    assert h.freeze().quantile(q) == pytest.approx(float(np.percentile(x, 100 * q)), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(durations, min_size=1, max_size=600),
    q=st.sampled_from(QS),
)
def test_any_samples_are_within_one_bucket_of_numpy_and_inside_min_max(
    values: list[float], q: float
) -> None:
    """Past EXACT_SAMPLES, or from counts alone, the estimate of each order statistic
    lies in that statistic's bucket, so numpy's interpolation of them is within one
    bucket width; with the min and max known it never leaves [min, max]."""
    x = np.array(values)
    want = float(np.percentile(x, 100 * q))
    h = Histogram()
    h.observe_many(x)
    for view in (h.freeze(), _counts_only(h)):
        got = view.quantile(q)
        assert abs(math.log10(got) - math.log10(want)) < BUCKET_LOG10 + 1e-12, (got, want)
    got = h.freeze().quantile(q)
    assert x.min() <= got <= x.max()


def test_the_bucket_counts_do_not_change() -> None:
    """The Prometheus histogram is the bucket counts: they stay ``le`` bin counts."""
    rng = np.random.default_rng(3)
    x = 10 ** rng.uniform(-7, -2, 500)
    h = Histogram()
    h.observe_many(x)
    want = np.bincount(bucket_index(x), minlength=h.counts.size)
    np.testing.assert_array_equal(h.counts, want)


def test_a_window_of_few_new_samples_is_exact() -> None:
    """``since``: what a console window sees between two snapshots."""
    h = Histogram()
    h.observe_many(10 ** np.random.default_rng(1).uniform(-6, -3, 1000))
    old = h.freeze()
    h.observe_many(np.array([3e-5, 7e-5]))
    win = h.freeze().since(old)
    assert win.count == 2
    assert win.quantile(0.5) == pytest.approx(5e-5, rel=1e-12)
    assert win.quantile(0.99) == pytest.approx(3e-5 + 0.99 * 4e-5, rel=1e-12)
    # a window longer than the values kept falls back to the bucket estimate
    big = 10 ** np.random.default_rng(2).uniform(-6, -3, 3 * EXACT_SAMPLES)
    h.observe_many(big)
    win = h.freeze().since(old)
    assert win.exact() is None
    got, want = win.quantile(0.5), float(np.percentile(np.r_[3e-5, 7e-5, big], 50))
    assert abs(math.log10(got / want)) < BUCKET_LOG10


def test_merged_small_views_are_exact_and_keep_the_union_min_max() -> None:
    a, b = Histogram(), Histogram()
    a.observe_many(np.array([1e-6, 4e-6]))
    b.observe_many(np.array([2e-5]))
    m = a.freeze().merged(b.freeze())
    assert m.quantile(0.5) == 4e-6
    assert (m.min_s, m.max_s) == (1e-6, 2e-5)
    a.merge(b)
    assert a.freeze().quantile(1.0) == 2e-5
    # merged with a view of counts only, min and max are no longer known
    assert math.isnan(m.merged(_counts_only(b)).min_s)


def test_rows_keep_each_rows_values_min_and_max() -> None:
    rows = HistogramRows(3)
    group = np.array([0, 2, 0, 2, 2])
    values = np.array([1e-6, 5e-6, 3e-6, 2e-6, 9e-6])
    rows.observe(group, values)
    v0, v1, v2 = (h.freeze() for h in rows.hists)
    assert v0.quantile(0.5) == pytest.approx(2e-6, rel=1e-12)
    assert v1.count == 0 and math.isnan(v1.quantile(0.5))
    assert (v2.min_s, v2.max_s, v2.quantile(0.5)) == (2e-6, 9e-6, 5e-6)
