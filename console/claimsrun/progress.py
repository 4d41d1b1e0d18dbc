"""A progress bar over the claims (work done, not simulated time), on a terminal only.

Same look and rules as ``console.cli.progress.ProgressBar`` (stderr, only on a
terminal, throttled), but it counts claims: each runs many short emulator runs of
different simulated lengths, so simulated time is no measure of the work left.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from console.cli.progress import BAR_WIDTH, REDRAW_EVERY_S


class ClaimsProgress:
    """``claims [#####·····]  42%  C7: 4096 B over 3  wall 3.1 s``."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self._wall0 = time.perf_counter()
        self._last = -1.0
        self._width = 0

    def __call__(self, frac: float, label: str) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if frac < 1 and now - self._last < REDRAW_EVERY_S:
            return
        self._last = now
        filled = round(min(max(frac, 0.0), 1.0) * BAR_WIDTH)
        bar = "#" * filled + "·" * (BAR_WIDTH - filled)
        line = f"claims [{bar}] {frac * 100:3.0f}%  {label[:60]}  wall {now - self._wall0:.1f} s"
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()

    def close(self) -> None:
        """Clear the line."""
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
