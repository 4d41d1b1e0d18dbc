"""Max-min water-filling: fair, feasible, and independent of the warm-start guess."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_core.tick.step import waterfill


@st.composite
def problems(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    n_links = draw(st.integers(1, 6))
    n = draw(st.integers(1, 40))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    link = rng.integers(0, n_links, n).astype(np.intp)
    capacity = rng.uniform(1.0, 100.0, n_links)
    # demands: some tiny, some huge, some tied at the same value (ties are the hard case)
    demand = rng.choice([0.0, 0.5, 3.0, 10.0, 1e3], n) * rng.choice([1.0, rng.uniform()], n)
    # guesses: last tick's shares are anything from 0 to infinity
    guess = rng.choice([0.0, 1.0, 5.0, 20.0, 60.0, np.inf, -np.inf], n_links)
    return demand, link, capacity, guess


@settings(max_examples=300, deadline=None)
@given(problems())
def test_waterfill_is_max_min_fair_whatever_the_guess(
    p: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> None:
    demand, link, capacity, guess = p
    cold, cold_level, cold_share = waterfill(demand, link, capacity)
    warm, warm_level, warm_share = waterfill(demand, link, capacity, guess)
    np.testing.assert_allclose(warm, cold, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(warm_level, cold_level, rtol=1e-9, atol=1e-9)
    assert np.array_equal(np.isinf(warm_share), np.isinf(cold_share))
    # feasible: no entry above its demand, no link above its capacity
    assert (cold <= demand + 1e-9).all()
    used = np.bincount(link, weights=cold, minlength=capacity.size)
    assert (used <= capacity * (1 + 1e-9)).all()
    # max-min: an entry below its demand sits on a full link, at that link's largest rate
    starved = cold < demand - 1e-9
    for e in np.flatnonzero(starved):
        on = link == link[e]
        assert used[link[e]] >= capacity[link[e]] * (1 - 1e-9)
        assert cold[e] >= cold[on].max() - 1e-9


def test_all_satisfied_link_has_infinite_share_and_leftover_level() -> None:
    rate, level, share = waterfill(
        np.array([1.0, 2.0]), np.array([0, 0], dtype=np.intp), np.array([10.0])
    )
    assert rate.tolist() == [1.0, 2.0]
    assert level[0] == 7.0 and share[0] == np.inf
