"""The soak benchmark's short version (issue 18): two minutes of the console, the exporter
and the engine under a fault injected or cleared every two seconds, with no error, the
invariants holding at the end and memory flat after warm-up.

``benchmarks/soak.py`` runs the 30-minute version (README, Performance). A short run has a
short warm-up, so memory may grow up to 10 % between its second quarter and its last.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from soak import soak  # a benchmark script, not a package


async def test_two_minutes_of_console_exporter_and_faults_hold_up() -> None:
    report = await soak(minutes=2.0, fault_every_s=2.0)
    assert report.failures(rss_tolerance=0.10) == []
    assert report.faults_injected >= 20 and report.scrapes >= 60
    assert report.simulated_s > 0
