"""The departure-rate measurement behind a new message's FIFO wait (``kernels.departure``):
PIE's cycles (RFC 8033 §5.2), not the drain of one tick."""

from __future__ import annotations

import numpy as np
import pytest

from fabric_core.tick.kernels import departure
from fabric_core.tick.kernels.departure import (
    DQ_THRESHOLD_BYTES,
    departure_rates,
    update_departures,
)

RATE = 50e9  # B/s: a 400G port
DT = 1e-6


def _state(n: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.zeros(n), np.zeros(n), np.zeros(n)


def update_departures_at(
    drain: np.ndarray,
    occupancy: np.ndarray,
    dt: float,
    candidates: np.ndarray,
    open_cycles: np.ndarray,
    seen: np.ndarray,
    *state: np.ndarray,
) -> np.ndarray:
    """``departure.update_departures_at``, returning the cycles under way after the tick
    (as ``LinkBook.measure_departures`` keeps them)."""
    out = np.full(open_cycles.size + candidates.size, -1, dtype=np.intp)
    n = departure.update_departures_at(
        drain, occupancy, dt, candidates, open_cycles, seen, *state, out
    )
    return out[:n]


def test_a_queue_paused_half_the_time_is_seen_to_drain_at_half_its_rate() -> None:
    """PFC on and off every other tick: each tick's drain is 0 or the line rate, the
    bytes ahead of a new message leave at half of it on average."""
    dq, ds, avg = _state()
    for k in range(2000):
        drain = np.array([RATE if k % 2 else 0.0])
        update_departures(drain, np.array([4e6]), DT, dq, ds, avg)
        rate = departure_rates(drain, ds, avg)[0]
    assert rate == pytest.approx(RATE / 2, rel=0.02)


def test_a_queue_that_stops_draining_is_seen_to_slow_down() -> None:
    """After a steady drain, a full stop: the estimate falls as the cycle under way
    goes on with nothing leaving (16 KiB over its time so far), instead of standing."""
    dq, ds, avg = _state()
    full = np.array([4e6])
    for _ in range(100):
        update_departures(np.array([RATE]), full, DT, dq, ds, avg)
    assert departure_rates(np.array([RATE]), ds, avg)[0] == pytest.approx(RATE, rel=1e-9)
    stopped = np.array([0.0])
    for _ in range(1000):
        update_departures(stopped, full, DT, dq, ds, avg)
    elapsed = ds[0]
    assert elapsed > 900 * DT
    assert departure_rates(stopped, ds, avg)[0] <= DQ_THRESHOLD_BYTES / elapsed


def test_a_short_queue_is_not_measured_and_falls_back_to_the_tick_drain() -> None:
    dq, ds, avg = _state()
    update_departures(np.array([RATE]), np.array([1000.0]), DT, dq, ds, avg)
    assert ds[0] == 0 and avg[0] == 0
    assert departure_rates(np.array([123.0]), ds, avg)[0] == 123.0


def test_measuring_only_the_buffers_it_can_change_gives_every_buffer_the_same_state() -> None:
    """``update_departures_at`` (cycles under way, and the buffers that hold bytes) against
    ``update_departures`` (every buffer), bit for bit, over ticks in which queues build,
    drain, stop and come back, with the holding buffers listed with repeats and pads."""
    rng = np.random.default_rng(7)
    n = 64
    dense = _state(n)
    sparse = _state(n)
    open_cycles = np.zeros(0, dtype=np.intp)
    seen = np.zeros(n, dtype=bool)
    for _ in range(3000):
        holding = np.flatnonzero(rng.random(n) < 0.2)
        occupancy = np.zeros(n)
        occupancy[holding] = rng.uniform(0.0, 4 * DQ_THRESHOLD_BYTES, holding.size)
        drain = np.zeros(n)
        drain[holding] = rng.choice([0.0, 1e9, RATE], holding.size)
        update_departures(drain, occupancy, DT, *dense)
        listed = np.concatenate([holding, holding[::2], [n, n]]).astype(np.intp)
        open_cycles = update_departures_at(drain, occupancy, DT, listed, open_cycles, seen, *sparse)
        assert not seen.any()
    for a, b in zip(dense, sparse, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(np.sort(open_cycles), np.flatnonzero(dense[1] > 0))
    assert dense[2].any() and open_cycles.size  # averages measured, cycles under way


def _measure_both(
    ticks: list[tuple[float, float]], dt: float
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """One buffer through ``ticks`` of (drain B/s, occupancy B), by ``update_departures``
    and by ``update_departures_at``: each one's (cycle bytes, cycle s, average) after."""
    out = []
    for sparse in (False, True):
        state = _state()
        open_cycles = np.zeros(0, dtype=np.intp)
        seen = np.zeros(1, dtype=bool)
        for drain, occupancy in ticks:
            d, o = np.array([drain]), np.array([occupancy])
            if sparse:
                holding = np.array([0], dtype=np.intp)
                open_cycles = update_departures_at(d, o, dt, holding, open_cycles, seen, *state)
            else:
                update_departures(d, o, dt, *state)
        out.append(state)
    return out


@pytest.mark.parametrize("kernel", ["dense", "sparse"])
def test_a_queue_of_exactly_16_kib_starts_a_cycle(kernel: str) -> None:
    """PIE measures a queue that holds at least dq_threshold (RFC 8033 §5.2: 2^14 bytes)."""
    at = _measure_both([(0.0, DQ_THRESHOLD_BYTES)], DT)[kernel == "sparse"]
    just_under = _measure_both([(0.0, DQ_THRESHOLD_BYTES - 1)], DT)[kernel == "sparse"]
    assert at[1][0] == DT and just_under[1][0] == 0.0


@pytest.mark.parametrize("kernel", ["dense", "sparse"])
def test_cycles_end_at_16_kib_and_average_a_quarter_of_the_newest(kernel: str) -> None:
    """By hand, with a tick of 2^-20 s (exact in binary): 4,096 B a tick close a cycle in
    exactly 4 ticks (16,384 B: the cycle ends at the threshold, not past it), at 4,096 ×
    2^20 B/s, which is the first average; then 2,048 B a tick close one in 8 ticks at
    2,048 × 2^20 B/s, and the average moves a quarter of the way to it (CYCLE_WEIGHT)."""
    dt = 2.0**-20
    fast, slow = 4096.0 / dt, 2048.0 / dt
    first = _measure_both([(fast, 1e6)] * 4, dt)[kernel == "sparse"]
    assert first[1][0] == 0.0 and first[0][0] == 0.0  # closed on the 4th tick
    assert first[2][0] == fast
    three = _measure_both([(fast, 1e6)] * 3, dt)[kernel == "sparse"]
    assert three[1][0] == 3 * dt and three[2][0] == 0.0  # still under way after 3
    both = _measure_both([(fast, 1e6)] * 4 + [(slow, 1e6)] * 8, dt)[kernel == "sparse"]
    assert both[2][0] == 0.75 * fast + 0.25 * slow
