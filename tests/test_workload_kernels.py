"""The traffic workloads' compiled steps (``fabric_core.tick.kernels.traffic``) against what
they stand for: ``np.repeat``, a uniform pick among the other endpoints, ``np.add.at``."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_core.tick.kernels import traffic as wk


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-2, 4), min_size=0, max_size=30), st.integers(0, 2**31))
def test_repeat_senders_is_np_repeat_of_the_counts_clipped_at_zero(
    counts: list[int], seed: int
) -> None:
    drawn = np.random.default_rng(seed).choice(500, len(counts), replace=False)
    senders = np.sort(drawn).astype(np.int32)
    c = np.asarray(counts, np.int64)
    got = wk.repeat_senders(senders, c)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.repeat(senders, np.maximum(c, 0)))


def test_top_up_lists_each_sender_once_per_flow_it_is_short() -> None:
    senders = np.array([1, 3, 4], np.int32)
    in_flight = np.array([0, 0, 0, 2, 5], np.int64)  # sender 4 is over its share
    np.testing.assert_array_equal(wk.top_up(senders, in_flight, 2), [1, 1])
    np.testing.assert_array_equal(wk.top_up(senders, in_flight, 3), [1, 1, 1, 3])


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 40), st.integers(1, 50), st.integers(0, 2**31))
def test_random_peers_skips_the_source_and_reaches_every_other_endpoint(
    pool_size: int, n: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    pool = np.sort(rng.choice(200, pool_size, replace=False)).astype(np.int32)
    # sources in the pool and out of it (a storage target sending to GPUs)
    src = rng.integers(0, 200, size=n).astype(np.int64)
    pick = rng.integers(0, pool_size - 1, size=n)
    dst = wk.random_peers(src, pool, pick)
    assert np.all(dst != src)
    assert np.all(np.isin(dst, pool))
    # the pick is the rank among the pool without the source: a bijection onto the others
    for s, p, d in zip(src.tolist(), pick.tolist(), dst.tolist(), strict=True):
        others = pool[pool != s]
        assert d == others[min(p, others.size - 1)]


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 40), st.integers(0, 50), st.integers(0, 2**31))
def test_uniform_peers_are_the_numpy_steps_they_stand_for(
    pool_size: int, n: int, seed: int
) -> None:
    """An arrival's source is its sender; its peer is ``u`` scaled to a place among the
    others, as the RPC probes worked it out with numpy before."""
    rng = np.random.default_rng(seed)
    pool = np.sort(rng.choice(200, pool_size, replace=False)).astype(np.int32)
    senders = pool[rng.permutation(pool_size)[: max(1, pool_size // 2)]]
    sender = rng.integers(0, senders.size, size=n)
    u = rng.random(n)
    u[: min(n, 2)] = np.nextafter(1.0, 0.0)  # the top of [0, 1): the last place
    src, dst = wk.uniform_peers(senders, sender, u, pool)
    want_src = senders[sender].astype(np.int64)
    pick = np.minimum((u * (pool_size - 1)).astype(np.int64), pool_size - 2)
    np.testing.assert_array_equal(src, want_src)
    np.testing.assert_array_equal(dst, wk.random_peers(want_src, pool, pick))
    assert np.all(dst != src)


def test_hotspot_peers_redirect_the_chosen_flows_but_never_to_their_source() -> None:
    pool = np.array([10, 11, 12, 13], np.int32)
    src = np.array([10, 12, 13, 11], np.int64)
    dst = np.array([13, 13, 12, 12], np.int64)
    u = np.array([0.1, 0.9, 0.1, 0.2])  # flows 0, 2, 3 under the fraction 0.25
    hot_pick = np.array([0, 1, 0, 1], np.int64)  # hotspots 10, 11, 10, 11
    wk.hotspot_peers(src, dst, pool, u, hot_pick, 0.25)
    # flow 0's hotspot is its own source: it keeps its peer; flow 1 is not chosen
    np.testing.assert_array_equal(dst, [13, 13, 10, 12])


def test_count_started_adds_one_per_listed_source() -> None:
    in_flight = np.zeros(5, np.int64)
    wk.count_started(in_flight, np.array([1, 3, 1], np.int64))
    np.testing.assert_array_equal(in_flight, [0, 2, 0, 1, 0])


def test_count_finished_takes_one_off_per_listed_source() -> None:
    in_flight = np.array([0, 2, 0, 1, 0], np.int64)
    wk.count_finished(in_flight, np.array([1, 3, 1], np.int64))
    np.testing.assert_array_equal(in_flight, [0, 0, 0, 0, 0])
