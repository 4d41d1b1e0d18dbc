"""The kernels' own sort (``kernels.sorting``) against numpy's stable sort."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_core.tick.kernels.sorting import sorted_copy, stable_argsort


@settings(deadline=None)  # (the first example compiles)
@given(st.lists(st.sampled_from([0.0, 1.5, -2.0, 3.25, np.inf, np.nan]), max_size=70))
def test_stable_argsort_is_numpys_with_ties_and_nan(values: list[float]) -> None:
    a = np.array(values, dtype=np.float64)
    np.testing.assert_array_equal(stable_argsort(a), np.argsort(a, kind="stable"))


@settings(deadline=None)
@given(st.lists(st.integers(-5, 5), max_size=200))
def test_integers_sort_as_numpy_sorts_them(values: list[int]) -> None:
    a = np.array(values, dtype=np.int64)
    np.testing.assert_array_equal(stable_argsort(a), np.argsort(a, kind="stable"))
    np.testing.assert_array_equal(sorted_copy(a), np.sort(a))


@settings(deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 1.5, -2.0, 3.25, np.inf, np.nan]), min_size=1, max_size=300),
    st.booleans(),
)
def test_long_and_presorted_arrays_sort_as_numpy_sorts_them(
    values: list[float], presort: bool
) -> None:
    """Past a run (``sorting.RUN``) the runs are merged; an array already in order takes
    the shortcut, which must give the stable order too (ties in place, NaN last)."""
    a = np.array(values, dtype=np.float64)
    if presort:
        a = np.sort(a)
    np.testing.assert_array_equal(stable_argsort(a), np.argsort(a, kind="stable"))


def test_equal_values_keep_their_order_across_runs_and_merges() -> None:
    a = np.repeat([3.0, 1.0, 2.0], 40)  # ties spanning runs of 16 and their merges
    np.testing.assert_array_equal(stable_argsort(a), np.argsort(a, kind="stable"))
    np.testing.assert_array_equal(stable_argsort(np.ones(100)), np.arange(100))
