"""Latency histograms: quantiles against numpy's percentiles, merging, the overflow bucket."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_core.tick.histogram import (
    BOUNDS_S,
    BUCKETS_PER_DECADE,
    EXACT_SAMPLES,
    N_BUCKETS,
    Histogram,
    HistogramRows,
    HistogramView,
    bucket_index,
)

#: One bucket's width in log10 space: bounds are 10**(1/20) apart.
BUCKET_LOG10 = 1 / BUCKETS_PER_DECADE


@settings(max_examples=40, deadline=None)
@given(
    low_bucket=st.integers(min_value=10, max_value=100),
    n_buckets=st.integers(min_value=10, max_value=40),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    q=st.sampled_from([0.5, 0.9, 0.99, 0.999]),
)
def test_quantile_of_log_uniform_samples_is_within_a_quarter_bucket_of_numpy(
    low_bucket: int, n_buckets: int, seed: int, q: float
) -> None:
    """Log-uniform samples are log-uniform inside each bucket too, so the log-linear
    interpolation is close to exact: a quarter of a bucket allows for sampling noise
    (1,000 or more samples a bucket). The range covers whole buckets, so none is filled
    in part only. Reporting a bucket's bound instead of interpolating is off by up to a
    whole bucket and fails this."""
    rng = np.random.default_rng(seed)
    low = math.log10(BOUNDS_S[low_bucket])
    samples = 10 ** rng.uniform(low, low + n_buckets * BUCKET_LOG10, 40_000)
    h = Histogram()
    h.observe_many(samples)
    got = h.freeze().quantile(q)
    want = float(np.percentile(samples, 100 * q))
    assert abs(math.log10(got) - math.log10(want)) <= BUCKET_LOG10 / 4, (got, want)


def test_bucket_estimate_places_a_buckets_values_log_evenly_inside_it() -> None:
    """Hand-placed: 100 values in the bucket (b0, b1], read from the counts alone (as a
    windowed difference or a decoded remote histogram is): the k-th smallest is put at
    log-position (k + 1/2) / 100 in the bucket, and q = k / 99 reads exactly that one."""
    b0, b1 = float(BOUNDS_S[40]), float(BOUNDS_S[41])  # 1e-6 and 10**-5.95
    h = Histogram()
    h.observe_many(np.full(100, (b0 + b1) / 2))
    counts_only = HistogramView(counts=h.counts.copy(), sum_s=h.sum_s)
    for k in (0, 24, 49, 99):
        want = b0 * (b1 / b0) ** ((k + 0.5) / 100)
        assert counts_only.quantile(k / 99) == pytest.approx(want, rel=1e-12)
    assert counts_only.quantile(0.5) == pytest.approx(math.sqrt(b0 * b1), rel=1e-6)
    # with the values kept (at most EXACT_SAMPLES of them) the quantile is the value itself
    for q in (0.0, 0.5, 0.99, 1.0):
        assert h.freeze().quantile(q) == (b0 + b1) / 2


def test_bucket_bounds_are_le_and_the_overflow_reports_the_last_bound() -> None:
    h = Histogram()
    h.observe_many(np.array([1e-6]))  # exactly on a bound: counted in that bucket (le)
    assert h.counts[bucket_index(np.array([1e-6]))[0]] == 1
    assert int(bucket_index(np.array([1e-6]))[0]) == 40
    assert h.freeze().quantile(1.0) == 1e-6
    h = Histogram()
    h.observe_many(np.array([1e3, 1e4]))  # past 100 s
    assert h.counts[-1] == 2
    counts_only = HistogramView(counts=h.counts.copy(), sum_s=h.sum_s)
    assert counts_only.quantile(0.5) == float(BOUNDS_S[-1]) == pytest.approx(100.0)
    assert h.freeze().quantile(0.5) == pytest.approx(5500.0)  # the values themselves
    assert math.isnan(Histogram().freeze().quantile(0.5))


def test_merged_histograms_give_the_quantiles_of_the_union() -> None:
    rng = np.random.default_rng(7)
    a, b = 10 ** rng.uniform(-6, -4, 5000), 10 ** rng.uniform(-5, -3, 5000)
    ha, hb, hab = Histogram(), Histogram(), Histogram()
    ha.observe_many(a)
    hb.observe_many(b)
    hab.observe_many(np.r_[a, b])
    merged = ha.freeze().merged(hb.freeze())
    assert merged.count == 10_000
    assert merged.sum_s == pytest.approx(float(np.r_[a, b].sum()))
    assert merged.mean() == pytest.approx(float(np.r_[a, b].mean()))
    for q in (0.5, 0.99):
        assert merged.quantile(q) == hab.freeze().quantile(q)


def test_bucket_layout_is_twenty_per_decade_from_ten_nanoseconds_to_a_hundred_seconds() -> None:
    """The bounds are exported as Prometheus ``le`` labels: their layout is a contract."""
    assert BOUNDS_S.size == 10 * 20 + 1
    assert N_BUCKETS == 202  # and the overflow bucket
    want = 10 ** (-8 + np.arange(201) / 20)
    np.testing.assert_allclose(BOUNDS_S, want, rtol=1e-12)


def test_a_value_below_the_lowest_bound_is_in_the_first_bucket_one_width_down() -> None:
    h = Histogram()
    h.observe_many(np.array([5e-9]))
    lowest = float(BOUNDS_S[0])
    assert h.counts[0] == 1
    # the first bucket reaches one bucket width below 10 ns: from the counts alone its
    # single value is put half a width down
    counts_only = HistogramView(counts=h.counts.copy(), sum_s=h.sum_s)
    assert counts_only.quantile(0.5) == pytest.approx(lowest / 10 ** (0.5 / 20), rel=1e-12)
    assert h.freeze().quantile(0.5) == 5e-9


@settings(max_examples=30, deadline=None)
@given(
    n_hists=st.integers(min_value=1, max_value=4),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    size=st.integers(min_value=0, max_value=300),
)
def test_rows_observed_together_are_observe_many_per_class(
    n_hists: int, seed: int, size: int
) -> None:
    rng = np.random.default_rng(seed)
    values = 10 ** rng.uniform(-9, 3, size)
    group = rng.integers(0, n_hists, size)
    rows = HistogramRows(n_hists)
    for h in rows.hists:  # start from something, so adding (not overwriting) is checked
        h.observe_many(np.array([1e-6]))
    rows.observe(group, values)
    for i, h in enumerate(rows.hists):
        want = Histogram()
        want.observe_many(np.r_[1e-6, values[group == i]])
        assert (h.counts == want.counts).all()
        assert h.sum_s == pytest.approx(want.sum_s, rel=1e-12)
        # the ends and the last values kept, in the order observed, are the same too
        assert (h.min_s, h.max_s) == (want.min_s, want.max_s)
        np.testing.assert_array_equal(h.recent_s, want.recent_s)


@settings(max_examples=30, deadline=None)
@given(
    batches=st.lists(st.integers(min_value=1, max_value=90), min_size=1, max_size=8),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_the_values_kept_are_the_last_ones_in_order_whatever_the_batches(
    batches: list[int], seed: int
) -> None:
    """Values kept in a ring of ``EXACT_SAMPLES``: read back oldest first, they are the
    last ones observed, however the observations were batched (and merged)."""
    rng = np.random.default_rng(seed)
    values = 10 ** rng.uniform(-8, 1, sum(batches))
    h, merged = Histogram(), Histogram()
    merged.observe_many(np.array([5.0]))
    lo = 0
    for n in batches:
        h.observe_many(values[lo : lo + n])
        lo += n
    merged.merge(h)
    np.testing.assert_array_equal(h.recent_s, values[-EXACT_SAMPLES:])
    np.testing.assert_array_equal(merged.recent_s, np.r_[5.0, values][-EXACT_SAMPLES:])
    assert (h.min_s, h.max_s) == (values.min(), values.max())
    assert (merged.min_s, merged.max_s) == (min(values.min(), 5.0), max(values.max(), 5.0))
    assert h.sum_s == pytest.approx(values.sum(), rel=1e-12)


def test_merge_adds_counts_and_sums_and_a_frozen_view_is_read_only() -> None:
    a, b = Histogram(), Histogram()
    a.observe_many(np.array([1e-6, 2e-6]))
    b.observe_many(np.array([3e-3]))
    a.merge(b)
    view = a.freeze()
    assert view.count == 3 and view.sum_s == pytest.approx(1e-6 + 2e-6 + 3e-3)
    assert b.freeze().count == 1  # the other one is unchanged
    with pytest.raises(ValueError):
        view.counts[0] = 7
    a.observe_many(np.array([1.0]))
    assert view.count == 3  # a copy: later observations do not reach it
    a.observe_many(np.array([]))
    assert a.freeze().count == 4


@pytest.mark.parametrize("row", [-1, 2])
def test_rows_observed_refuse_a_row_they_do_not_have(row: int) -> None:
    """The compiled pass does not check its rows: a row past the end would be written in
    memory that is not the histograms'. The rows refuse it, and keep their counts."""
    rows = HistogramRows(2)
    with pytest.raises(IndexError, match=r"histogram rows 0\.\.1"):
        rows.observe(np.array([0, row]), np.array([1e-6, 2e-6]))
    assert rows.counts.sum() == 0
