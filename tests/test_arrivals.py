"""Poisson arrivals drawn in the order they come (``workloads.arrivals``): the same
arrivals at the same times whatever the tick, at the rate asked, at places picked
uniformly; and the RPC workload built on them."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from fabric_core.runtime import busy
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario, parse_scenario
from fabric_core.workloads.arrivals import BLOCK, PoissonArrivals
from fabric_core.workloads.kvcache import KvCache
from tests.helpers import scenario_alone


def _all_by_ticks(dt: float, end: float, seed: int = 3) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    arrivals = PoissonArrivals(2e6, 16, 0.0)
    parts = []
    now = 0.0
    while now < end:
        t, at, u = arrivals.take(min(now + dt, end), rng)
        assert (t >= now).all() and (t < now + dt).all()  # each in the tick that takes it
        parts.append((t, at, u))
        now += dt
    return tuple(np.concatenate(p) for p in zip(*parts, strict=True))


def test_the_same_arrivals_at_the_same_times_whatever_the_tick() -> None:
    end = 1e-3  # about 2,000 arrivals: several blocks
    one = _all_by_ticks(end, end)
    assert one[0].size > 2 * BLOCK
    for dt in (1e-6, 3.7e-6, 50e-6):
        for a, b in zip(one, _all_by_ticks(dt, end), strict=True):
            np.testing.assert_array_equal(a, b)


def test_the_rate_and_the_places_are_the_ones_asked_for() -> None:
    rate, places, end = 2e6, 16, 20e-3
    t, at, u = PoissonArrivals(rate, places, 0.0).take(end, np.random.default_rng(11))
    n = t.size  # Poisson: mean and variance rate * end (40,000)
    assert abs(n - rate * end) < 5 * np.sqrt(rate * end)
    gaps = np.diff(t)
    assert (gaps > 0).all()
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.03)
    assert gaps.std() == pytest.approx(1 / rate, rel=0.03)  # exponential: sd = mean
    counts = np.bincount(at, minlength=places)
    expected = n / places
    assert (np.abs(counts - expected) < 5 * np.sqrt(expected)).all()
    assert u.min() >= 0 and u.max() < 1 and u.mean() == pytest.approx(0.5, abs=0.01)


def test_the_next_arrival_is_known_between_takes_and_nothing_comes_before_it() -> None:
    rng = np.random.default_rng(5)
    arrivals = PoissonArrivals(1e5, 4, 1.0)
    assert arrivals.next_s == 1.0  # nothing drawn yet
    t, _, _ = arrivals.take(1.0, rng)
    assert t.size == 0
    nxt = arrivals.next_s
    assert nxt > 1.0
    kept = copy.deepcopy(rng)
    t, _, _ = arrivals.take(nxt, rng)  # up to, not at, the next arrival
    assert t.size == 0 and arrivals.next_s == nxt
    np.testing.assert_array_equal(rng.random(2), kept.random(2))  # nothing drawn
    t, _, _ = arrivals.take(np.nextafter(nxt, np.inf), rng)
    assert t.tolist() == [nxt]


def test_no_rate_no_arrivals_and_a_bad_rate_is_refused() -> None:
    arrivals = PoissonArrivals(0.0, 3, 0.0)
    assert arrivals.take(10.0, np.random.default_rng(1))[0].size == 0
    assert arrivals.next_s == float("inf")
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="rate of arrivals"):
            PoissonArrivals(bad, 3, 0.0)


def _rpc_messages(dt: str, until_s: float) -> list[tuple[int, int]]:
    """The probes' messages (source, peer) of the ticks that end by ``until_s``."""
    fabric = scenario_alone("tiny", "rpc", dt=dt)
    wl = fabric.workloads[0]
    seen: list[tuple[int, int]] = []
    generate = wl.generate

    def recording(now_s: float, dt_s: float, rng: np.random.Generator) -> object:
        req = generate(now_s, dt_s, rng)
        assert (req.ready_s == now_s).all()  # a message starts with its tick
        if now_s + dt_s <= until_s + 1e-12:
            seen.extend(zip(req.src.tolist(), req.dst.tolist(), strict=True))
        return req

    wl.generate = recording  # type: ignore[method-assign]
    # every tick through ``generate`` (busy ticks at once make the same messages in a
    # kernel: tests/test_busy.py)
    saved, busy.ENABLED = busy.ENABLED, False
    try:
        while fabric.sim_time_s < until_s:
            fabric.run_ticks(10)
    finally:
        busy.ENABLED = saved
    return seen


def test_rpc_probes_send_the_same_messages_on_any_tick() -> None:
    """The compare view's engines adapt their ticks each on its own: the probes' messages
    (who sends, to whom, in which order) must not depend on them."""
    fine = _rpc_messages("1us", 300e-6)
    assert len(fine) > 20
    assert fine == _rpc_messages("4us", 300e-6)
    assert all(src != dst for src, dst in fine)


def test_a_stopped_probe_sends_nothing_and_starts_afresh() -> None:
    """Stopped, the probes are quiet (their ticks may run at once, without ``generate``);
    started again, they send at their rate from then on, not what they would have sent
    while stopped."""
    fabric = scenario_alone("tiny", "rpc")
    wl = fabric.workloads[0]
    fabric.run_ticks(200)
    wl.stop()
    assert wl.quiet_until(fabric.sim_time_s, fabric.dt_s) == float("inf")
    sent = wl.kpis(fabric.sim_time_s)["messages_sent"]
    fabric.run_ticks(2000)
    assert wl.kpis(fabric.sim_time_s)["messages_sent"] == sent
    wl.start()
    fabric.run_ticks(1)  # 8 senders at 20,000 a second: 0.16 a 1 µs tick
    assert wl.kpis(fabric.sim_time_s)["messages_sent"] - sent <= 3


def test_a_probe_with_no_senders_sends_nothing() -> None:
    raw = copy.deepcopy(load_scenario("tiny").raw)
    for w in raw["workload"]:
        if w["kind"] == "rpc":
            w["senders"] = []
    fabric = Fabric.from_scenario(parse_scenario(raw, "tiny, no probe senders"))
    fabric.run_ticks(100)
    probe = next(w for w in fabric.workloads if w.name == "probe")
    assert probe.kpis(fabric.sim_time_s)["messages_sent"] == 0


def _kv_requests(dt: str, until_s: float) -> tuple[list[tuple[float, int]], int, int]:
    """The KV cache's requests up to ``until_s`` (a whole number of ticks): its restores
    (time, GPU) in the order they start, and how many were hits and misses."""
    fabric = scenario_alone("storage-kvcache", "kvcache", dt=dt, rate_per_s=2000, hit_rate=0.5)
    wl = fabric.workloads[0]
    assert isinstance(wl, KvCache) and wl.store is not None
    seen: list[tuple[float, int]] = []
    restore = wl.store.restore

    def recording(gpu, kv_bytes, t, *, external=True):  # type: ignore[no-untyped-def]
        seen.extend((float(s), int(g)) for s, g in zip(t, gpu, strict=True))
        return restore(gpu, kv_bytes, t, external=external)

    wl.store.restore = recording  # type: ignore[method-assign]
    while fabric.sim_time_s < until_s - 1e-12:
        fabric.run_ticks(1)
    return seen, wl.hits, wl.misses


def test_kv_cache_requests_are_the_same_on_any_tick() -> None:
    """Each request at its own time and GPU, a hit or a miss, whatever the tick."""
    restores, hits, misses = _kv_requests("10us", 2e-3)
    assert len(restores) == hits > 10 and misses > 10
    assert (restores, hits, misses) == _kv_requests("40us", 2e-3)


def test_a_stopped_kv_cache_starts_afresh() -> None:
    fabric = scenario_alone("storage-kvcache", "kvcache", dt="40us", rate_per_s=2000)
    wl = fabric.workloads[0]
    fabric.run_ticks(25)
    wl.stop()
    fabric.run_ticks(25)  # 1 ms: 16 requests, at 16,000 a second, if they were kept
    before = wl.hits + wl.misses
    wl.start()
    fabric.run_ticks(1)  # 0.64 a tick expected
    assert wl.hits + wl.misses - before <= 4


def _pd_requests(dt: str, until_s: float) -> list[tuple[float, float]]:
    """PD's requests (arrival, context tokens) that arrive before ``until_s``."""
    fabric = scenario_alone("pd-llama70b", "pd", dt=dt, rate_per_s=20000)
    wl = fabric.workloads[0]
    while fabric.sim_time_s < until_s:
        fabric.run_ticks(10)
    cols, n = wl._cols, wl.n_req
    return [
        (float(t), float(c))
        for t, c in zip(cols["arrival"][:n], cols["ctx"][:n], strict=True)
        if t < until_s
    ]


def test_pd_requests_are_the_same_on_any_tick() -> None:
    """Their arrivals and their contexts, whatever the tick."""
    fine = _pd_requests("10us", 2e-3)
    assert len(fine) > 20
    assert len({c for _, c in fine}) > 10  # contexts drawn, not one figure
    assert fine == _pd_requests("40us", 2e-3)
