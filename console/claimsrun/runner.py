"""Run the selected claims, apply each row's rule, and collect what the renderers need."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from console.claimsrun import runs
from console.claimsrun.catalogue import Claim, Part
from console.claimsrun.model import Measurement, PartResult, Settings
from console.claimsrun.verdict import Condition, Verdict

#: (fraction of the work done, what is running)
Progress = Callable[[float, str], None]


@dataclass
class Row:
    """One table row: a claim's part, its measured figures and its verdict."""

    claim: Claim
    part: Part
    result: PartResult
    verdict: Verdict
    failing: list[Condition]


@dataclass
class Outcome:
    """One claim: its measurement and rows."""

    claim: Claim
    measurement: Measurement
    rows: list[Row]
    wall_s: float


@dataclass
class Report:
    """Everything ``fabtop claims`` prints and writes."""

    settings: Settings
    outcomes: list[Outcome] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def rows(self) -> list[Row]:
        return [r for o in self.outcomes for r in o.rows]


def judge(claim: Claim, m: Measurement) -> list[Row]:
    """Apply each part's rule to its measured metrics."""
    out = []
    for part in claim.parts:
        res = m.parts[part.key]
        out.append(
            Row(claim, part, res, part.rule.verdict(res.metrics), part.rule.failing(res.metrics))
        )
    return out


def run_claims(
    claims: Sequence[Claim], settings: Settings, progress: Progress | None = None
) -> Report:
    """Measure every claim in ``claims`` (in order) and judge it."""
    runs.clear_cache()
    report = Report(settings)
    total = sum(c.weight for c in claims) or 1.0
    done = 0.0
    wall0 = time.perf_counter()
    for claim in claims:

        def tick(label: str, claim: Claim = claim, frac: float = done / total) -> None:
            if progress is not None:
                progress(frac, f"{claim.id}: {label}")

        tick("starting")
        t0 = time.perf_counter()
        m = claim.measure(settings, tick)
        report.outcomes.append(Outcome(claim, m, judge(claim, m), time.perf_counter() - t0))
        done += claim.weight
        if progress is not None:
            progress(done / total, f"{claim.id}: done")
    report.wall_s = time.perf_counter() - wall0
    return report
