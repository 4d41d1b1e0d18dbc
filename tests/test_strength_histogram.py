"""The histogram past its exact window (more than ``EXACT_SAMPLES`` values): the ends are
the observed min and max, merges and windows keep them, and a window's mean is its own.

Each expectation is computed from the samples with numpy, not with the histogram's code.
"""

from __future__ import annotations

import numpy as np
import pytest

from fabric_core.tick.histogram import BUCKETS_PER_DECADE, EXACT_SAMPLES, Histogram

MANY = 4 * EXACT_SAMPLES


def _hist(values: np.ndarray) -> Histogram:
    h = Histogram()
    h.observe_many(values)
    return h


def _spread(lo: float, hi: float, n: int = MANY, seed: int = 1) -> np.ndarray:
    return np.exp(np.random.default_rng(seed).uniform(np.log(lo), np.log(hi), n))


def test_past_the_exact_window_the_ends_are_the_observed_min_and_max() -> None:
    x = _spread(1e-6, 1e-3)
    view = _hist(x).freeze()
    assert view.exact() is None  # estimated from the buckets
    assert view.quantile(0.0) == x.min()
    assert view.quantile(1.0) == x.max()
    # and every quantile lies between them
    assert x.min() <= view.quantile(0.5) <= x.max()


def test_an_exactly_full_window_is_exact_and_one_more_value_is_not() -> None:
    x = _spread(1e-6, 1e-3, EXACT_SAMPLES + 1)
    assert _hist(x[:EXACT_SAMPLES]).freeze().exact() is not None
    assert _hist(x).freeze().exact() is None
    assert Histogram().freeze().exact() is None  # nothing observed: nothing exact


def test_merging_keeps_the_union_min_and_max() -> None:
    fast, slow = _spread(1e-6, 2e-6), _spread(1e-3, 2e-3, seed=2)
    a, b = _hist(fast), _hist(slow)
    a.merge(b)
    view = a.freeze()
    assert view.quantile(0.0) == fast.min()
    assert view.quantile(1.0) == slow.max()
    both = _hist(fast).freeze().merged(_hist(slow).freeze())
    assert both.quantile(0.0) == fast.min() and both.quantile(1.0) == slow.max()
    # the same the other way round
    back = _hist(slow).freeze().merged(_hist(fast).freeze())
    assert back.quantile(0.0) == fast.min() and back.quantile(1.0) == slow.max()


def test_a_merge_with_an_empty_view_is_the_other_view() -> None:
    x = _spread(1e-6, 1e-3, 50)
    view = _hist(x).freeze()
    for merged in (view.merged(Histogram().freeze()), Histogram().freeze().merged(view)):
        assert merged.quantile(0.0) == x.min() and merged.quantile(1.0) == x.max()
        assert merged.quantile(0.5) == pytest.approx(float(np.median(x)), rel=1e-12)


def test_a_window_since_an_earlier_view_has_the_new_samples_mean() -> None:
    h = _hist(_spread(1e-3, 2e-3))
    before = h.freeze()
    new = _spread(1e-6, 2e-6, 40, seed=3)
    h.observe_many(new)
    window = h.freeze().since(before)
    assert window.count == new.size
    assert window.mean() == pytest.approx(float(new.mean()), rel=1e-9)
    assert window.quantile(0.5) == pytest.approx(float(np.median(new)), rel=1e-12)
    # a window too big for the values kept: counts only, and still its own mean
    more = _spread(1e-5, 2e-5, MANY, seed=4)
    h.observe_many(more)
    wide = h.freeze().since(before)
    assert wide.exact() is None
    assert wide.mean() == pytest.approx(float(np.r_[new, more].mean()), rel=1e-9)


@pytest.mark.parametrize("q", [0.1, 0.25, 0.5, 0.75, 0.9, 0.99])
def test_an_estimated_quantile_is_within_one_bucket_of_numpy(q: float) -> None:
    x = _spread(1e-6, 1e-2, 20 * EXACT_SAMPLES, seed=5)
    got = _hist(x).freeze().quantile(q)
    want = float(np.percentile(x, 100 * q))
    assert abs(np.log10(got / want)) < 1 / BUCKETS_PER_DECADE  # one bucket


def test_equal_samples_past_the_window_give_that_value_at_every_quantile() -> None:
    """Inside one bucket the estimate would spread the values over the bucket's width;
    the observed min and max bound it, so identical samples read back exactly."""
    x = np.full(MANY, 1.234e-3)
    view = _hist(x).freeze()
    assert view.exact() is None
    for q in (0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0):
        assert view.quantile(q) == pytest.approx(1.234e-3, rel=1e-12)


def test_a_window_of_one_new_sample_is_that_sample() -> None:
    h = _hist(_spread(1e-3, 2e-3))
    before = h.freeze()
    h.observe_many(np.array([25.85e-6]))
    window = h.freeze().since(before)
    assert window.count == 1
    assert window.quantile(0.5) == window.quantile(0.99) == 25.85e-6


def test_views_are_read_only() -> None:
    """A view is shared with the exporter's thread: neither its counts nor the values
    it keeps can be written through it, merged or not."""
    a, b = _hist(_spread(1e-6, 1e-3, 50)).freeze(), _hist(_spread(1e-6, 1e-3, 50, seed=2)).freeze()
    for view in (a, a.merged(b), a.merged(b).since(a)):
        with pytest.raises(ValueError):
            view.counts[0] = 1
        if view.recent_s.size:
            with pytest.raises(ValueError):
                view.recent_s[0] = 1.0
