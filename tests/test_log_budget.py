"""What a sender on the broker controls is logged within a budget
(``exporters/mqtt/logbudget.py``): a flood of refused commands fills neither the log nor
the disk, and what is left out is counted in one line."""

from __future__ import annotations

import logging

import pytest

from exporters.mqtt.logbudget import LogBudget


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records]


def test_past_the_budget_lines_are_counted_and_said_once_the_window_is_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Clock()
    budget = LogBudget(logging.getLogger("t.budget"), "refused commands", 3, 10.0, clock)
    with caplog.at_level(logging.INFO, "t.budget"):
        for i in range(50):
            budget.log(logging.INFO, "refused %d", i)
        assert _lines(caplog) == ["refused 0", "refused 1", "refused 2"]
        assert budget.left_out == 47
        clock.now += 9.9  # still the same window
        budget.log(logging.INFO, "refused %d", 50)
        assert len(caplog.records) == 3 and budget.left_out == 48
        clock.now += 0.2
        budget.log(logging.INFO, "refused %d", 51)
    assert _lines(caplog)[3:] == [
        "48 more refused commands within 10 s of the first, not logged one by one (at most 3 "
        "lines in 10 s)",
        "refused 51",
    ]
    assert budget.left_out == 0


def test_a_quiet_window_says_nothing_and_a_level_not_logged_costs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Clock()
    budget = LogBudget(logging.getLogger("t.quiet"), "refused commands", 2, 10.0, clock)
    with caplog.at_level(logging.INFO, "t.quiet"):
        for _ in range(5):
            budget.log(logging.DEBUG, "busy")  # below the level: neither logged nor counted
        assert budget.left_out == 0
        budget.log(logging.INFO, "a")
        clock.now += 60
        budget.log(logging.INFO, "b")
    assert _lines(caplog) == ["a", "b"]
