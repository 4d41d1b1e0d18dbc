"""Verdict rules: explicit thresholds, written next to each claim, applied to measured metrics.

A rule is data, not code: a list of conditions, each naming one measured metric and
the band it must fall in for the claim to count as *reproduced*, and a wider band for
*partly*. The claim's verdict is the worst of its conditions, so a claim with two
halves (``~63 % lower`` *and* ``below a microsecond``) is reproduced only when both
hold. A metric the run could not measure (NaN, missing) is *not reproduced*: a figure
we do not have cannot confirm anything.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass

INF = math.inf


class Verdict(enum.IntEnum):
    """Ordered so that ``min`` of several verdicts is the worst one."""

    NOT_REPRODUCED = 0
    PARTLY = 1
    REPRODUCED = 2

    @property
    def label(self) -> str:
        """As printed in the table."""
        return {0: "not reproduced", 1: "partly", 2: "reproduced"}[int(self)]


@dataclass(frozen=True)
class Band:
    """A closed interval ``[low, high]`` (either end may be infinite)."""

    low: float = -INF
    high: float = INF

    def __contains__(self, x: float) -> bool:
        return math.isfinite(x) and self.low <= x <= self.high

    def describe(self, fmt: str = "{:g}") -> str:
        """``≥ 0.5``, ``≤ 1e-06``, ``0.2–0.4``."""
        if self.high == INF:
            return "≥ " + fmt.format(self.low)
        if self.low == -INF:
            return "≤ " + fmt.format(self.high)
        return fmt.format(self.low) + "–" + fmt.format(self.high)


@dataclass(frozen=True)
class Condition:
    """``metric`` in ``reproduced`` → reproduced; else in ``partly`` → partly; else not.

    ``partly`` should contain ``reproduced`` (a wider band around it).
    """

    metric: str
    reproduced: Band
    partly: Band
    what: str = ""  # the metric in words, for the rule's text
    fmt: str = "{:g}"  # how the thresholds are printed

    def grade(self, metrics: Mapping[str, float]) -> Verdict:
        """The verdict of this condition alone."""
        x = float(metrics.get(self.metric, math.nan))
        if x in self.reproduced:
            return Verdict.REPRODUCED
        if x in self.partly:
            return Verdict.PARTLY
        return Verdict.NOT_REPRODUCED

    def describe(self) -> str:
        """The condition in words."""
        name = self.what or self.metric
        if self.partly == self.reproduced:  # (all or nothing: "≤ 0 → reproduced, ≤ 0 → partly")
            return f"{name} {self.reproduced.describe(self.fmt)} → reproduced, else not"
        return (
            f"{name} {self.reproduced.describe(self.fmt)} → reproduced, "
            f"{self.partly.describe(self.fmt)} → partly"
        )


@dataclass(frozen=True)
class Rule:
    """All conditions must hold; the verdict is the worst condition's."""

    conditions: tuple[Condition, ...]

    def verdict(self, metrics: Mapping[str, float]) -> Verdict:
        """Apply the rule to measured metrics."""
        return min((c.grade(metrics) for c in self.conditions), default=Verdict.NOT_REPRODUCED)

    def failing(self, metrics: Mapping[str, float]) -> list[Condition]:
        """The conditions that keep the verdict below *reproduced*."""
        return [c for c in self.conditions if c.grade(metrics) is not Verdict.REPRODUCED]

    def describe(self) -> str:
        """The rule in words (shown next to the claim)."""
        return "; ".join(c.describe() for c in self.conditions)


def at_least(
    metric: str, reproduced: float, partly: float, what: str = "", fmt: str = "{:g}"
) -> Condition:
    """A higher-is-better condition."""
    return Condition(metric, Band(reproduced), Band(partly), what, fmt)


def at_most(
    metric: str, reproduced: float, partly: float, what: str = "", fmt: str = "{:g}"
) -> Condition:
    """A lower-is-better condition."""
    return Condition(metric, Band(high=reproduced), Band(high=partly), what, fmt)
