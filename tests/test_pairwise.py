"""``kernels.pairwise.numpy_sum`` adds as ``numpy.sum`` does, bit for bit: the compiled
steps that stand in for Python which summed with numpy (``kernels.busy``) rely on it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_core.tick.kernels.pairwise import PAIRWISE_BLOCK, numpy_sum


@settings(max_examples=300, deadline=None)
@given(
    n=st.one_of(st.integers(0, 3 * PAIRWISE_BLOCK + 9), st.integers(0, 20_000)),
    seed=st.integers(0, 2**32 - 1),
    spread=st.integers(0, 12),
)
def test_the_sum_is_numpys_bit_for_bit(n: int, seed: int, spread: int) -> None:
    rng = np.random.default_rng(seed)
    # magnitudes over ``spread`` decades, of both signs: where the order of additions shows
    a = rng.standard_normal(n) * 10.0 ** rng.integers(0, spread + 1, n)
    assert numpy_sum(a) == float(a.sum())


def test_equal_values_sum_as_numpy_sums_them() -> None:
    """A batch of flows of one size (the bytes a workload's batch injects)."""
    for n in range(1, 600):
        a = np.full(n, 7408.0 * 1.1)
        assert numpy_sum(a) == float(a.sum()), n


def test_an_empty_array_sums_to_zero() -> None:
    assert numpy_sum(np.zeros(0)) == 0.0
