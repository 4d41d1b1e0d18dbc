"""The console's rates and latency window when the run behind it starts again.

A console on MQTT outlives the engine it watches: ``serve`` can be restarted, and the
next snapshot then has a lower tick and counters that start from zero. The view must
start its differences again, not subtract the old run's counters from the new one's.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from console.latency import LatencyWindow
from console.linkview import RateTracker
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.runtime.snapshot import Snapshot


def run(ticks: list[int], profile: str | None = None) -> list[Snapshot]:
    """Snapshots of a fresh ``tiny`` run after each of ``ticks`` (cumulative)."""
    fabric = Fabric.from_scenario(load_scenario("tiny", profile=profile))
    out = []
    for t in ticks:
        fabric.run_ticks(t - fabric.tick)
        out.append(
            fabric.snapshot(wall_time_s=0.0, target_speed=1e-3, measured_speed=0.0, running=True)
        )
    return out


def test_a_restarted_run_restarts_the_latency_window() -> None:
    old = run([2000, 4000, 6000])
    new = run([300, 600])
    window = LatencyWindow(window_samples=5)
    for snap in old:
        window.update(snap)
    assert window.current["rpc"].count > 0
    after = window.update(new[0])  # before: negative counts and a division by zero
    fresh = LatencyWindow(window_samples=5).update(new[0])
    for name, lat in after.items():
        assert lat.count == fresh[name].count >= 0
        assert lat.p99_history_s == fresh[name].p99_history_s
        for a, b in ((lat.p50_s, fresh[name].p50_s), (lat.p99_s, fresh[name].p99_s)):
            assert (math.isnan(a) and math.isnan(b)) or a == b


def test_a_restarted_run_restarts_the_rates() -> None:
    old = run([4000, 6000], "roce-400g")
    new = run([1000, 2500], "roce-400g")  # ECN marks from about tick 2,000 on
    rates = RateTracker()
    for snap in old:
        rates.update(snap)
    assert rates.update(new[0]).pauses_per_s.shape == (len(new[0].links),)
    # the next sample of the new run gives the new run's rates (before: the old run's,
    # frozen until the new run passed tick 6,000)
    got = rates.update(new[1])
    fresh = RateTracker()
    fresh.update(new[0])
    want = fresh.update(new[1])
    assert want.ecn_per_s.sum() > 0
    np.testing.assert_array_equal(got.ecn_per_s, want.ecn_per_s)
    np.testing.assert_array_equal(got.pauses_per_s, want.pauses_per_s)


def test_counts_that_go_down_while_the_tick_goes_up_restart_the_window() -> None:
    """A new run whose first snapshot comes after the old run's last tick (or telemetry
    that lies): its counts fall below the window's oldest. Before, a division by zero in
    the quantiles ended the console."""
    old = run([2000, 4000])
    window = LatencyWindow(window_samples=5)
    for snap in old:
        window.update(snap)
    assert window.current["rpc"].count > 0
    fewer = {
        name: replace(hist, counts=np.asarray(hist.counts) // 4)
        for name, hist in old[-1].latency.items()
    }
    later = replace(old[-1], tick=old[-1].tick + 1, latency=fewer)
    after = window.update(later)
    fresh = LatencyWindow(window_samples=5).update(later)
    for name, lat in after.items():
        assert lat.count == fresh[name].count >= 0
        assert lat.p99_s == fresh[name].p99_s or math.isnan(lat.p99_s)
