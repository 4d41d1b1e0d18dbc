"""A one-line progress bar for long headless runs, on a terminal only.

``run``, ``compare``, ``storage-report`` and ``check`` report through it: simulated
time done / total, wall time so far and the speed (simulated seconds per wall
second). Written to stderr and only when stderr is a terminal, so pipes, files and
scripts see nothing of it.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from console.fmt import fmt_seconds, fmt_speed

#: Redraw at most this often (wall seconds).
REDRAW_EVERY_S = 0.2
BAR_WIDTH = 20


class ProgressBar:
    """``label [#####·····]  42%  sim 0.42 ms / 1 ms  wall 3.1 s  speed 1.4e-4×``."""

    def __init__(
        self, label: str = "", *, stream: TextIO | None = None, total_s: float = 0.0
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.label = label
        self._wall0 = time.perf_counter()
        self._last_draw = -1.0
        self._width = 0
        self._figures = (0.0, total_s)  # the last (done, total) shown
        self._note: str | None = None

    def note(self, text: str | None) -> None:
        """Show ``text`` after the figures, drawn at once, e.g. what the run waits for
        while its simulated clock stands still; None takes it back at the next update
        (so that notes in quick succession do not flicker)."""
        self._note = text
        if text is not None:
            self._last_draw = -1.0
            self.update(*self._figures)

    def restart(self, label: str) -> None:
        """A new phase (another profile, another variant): new label, wall clock from 0."""
        self.label = label
        self._wall0 = time.perf_counter()
        self._last_draw = -1.0

    def update(self, done_s: float, total_s: float, extra: str = "") -> None:
        """Show ``done_s`` of ``total_s`` simulated seconds (throttled)."""
        if not self.enabled:
            return
        self._figures = (done_s, total_s)
        now = time.perf_counter()
        if done_s < total_s and now - self._last_draw < REDRAW_EVERY_S:
            return
        self._last_draw = now
        frac = min(max(done_s / total_s, 0.0), 1.0) if total_s > 0 else 1.0
        wall = now - self._wall0
        filled = round(frac * BAR_WIDTH)
        bar = "#" * filled + "·" * (BAR_WIDTH - filled)
        speed = fmt_speed(done_s / wall) if wall > 0 and done_s > 0 else "—"
        line = (
            f"{self.label} [{bar}] {frac * 100:3.0f}%  sim {fmt_seconds(done_s)} / "
            f"{fmt_seconds(total_s)}  wall {wall:.1f} s  speed {speed}"
        )
        for more in (extra, self._note):
            if more:
                line += f"  {more}"
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()

    def close(self) -> None:
        """Clear the line (the results follow on a clean line)."""
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
