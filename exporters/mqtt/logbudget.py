"""A budget of log lines for what a sender on the broker controls (refused commands): a
flood of bad messages must not flood the log, and so the disk, too."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

#: Lines logged one by one in a window; the rest are counted and summed up in one line
LINES_PER_WINDOW = 20
WINDOW_S = 10.0


class LogBudget:
    """At most ``lines`` log lines a ``window_s``-second window; past that, lines are
    counted, and the first line after the window says how many of ``what`` were left
    out (a bridge that falls quiet says nothing more)."""

    def __init__(
        self,
        log: logging.Logger,
        what: str,
        lines: int = LINES_PER_WINDOW,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._what = what
        self._lines = lines
        self._window_s = window_s
        self._clock = clock
        self._window_start = -float("inf")
        self._logged = 0
        self.left_out = 0  # in the current window

    def log(self, level: int, msg: str, *args: object) -> None:
        """``logger.log(level, msg, *args)`` within the budget."""
        if not self._log.isEnabledFor(level):
            return
        now = self._clock()
        if now - self._window_start >= self._window_s:
            if self.left_out:
                self._log.log(
                    level,
                    "%d more %s within %g s of the first, not logged one by one (at most %d "
                    "lines in %g s)",
                    self.left_out,
                    self._what,
                    self._window_s,
                    self._lines,
                    self._window_s,
                )
            self._window_start, self._logged, self.left_out = now, 0, 0
        if self._logged < self._lines:
            self._logged += 1
            self._log.log(level, msg, *args)
        else:
            self.left_out += 1
