"""Which of two computations that give the same result to run: the one timed faster lately.

The compiled solve comes serial and over the cores (``kernels.solve``), bit for bit the
same. Over the cores it wins on a large tick when the machine is otherwise idle (1.3-1.6
times at 10k GPUs, README "Performance") and loses badly when another process wants a core,
such as the console beside the engine: each of the fifty-odd loops it shares a tick waits
for both threads, and a thread that lost its core waits for a scheduler slice. Measured on
``cluster-100k-4plane`` while other work ran on the second core: 40 ms a solve serial,
365 ms over the cores. So the engine times the one it runs, times the other now and then,
and runs the one faster per entry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: Every how many runs the one not chosen is timed again.
PROBE_EVERY = 50


@dataclass
class FasterOfTwo:
    """Picks 0 or 1 by their last time per unit of work (``record``); the other is tried
    every ``PROBE_EVERY`` runs, and each is tried once before either is preferred."""

    #: seconds per unit of work, the last time each ran (inf: not timed yet)
    per_unit_s: list[float] = field(default_factory=lambda: [math.inf, math.inf])
    runs: int = 0

    def pick(self) -> int:
        """The one to run now."""
        self.runs += 1
        if math.isinf(self.per_unit_s[0]) or math.isinf(self.per_unit_s[1]):
            return 0 if math.isinf(self.per_unit_s[0]) else 1
        best = 0 if self.per_unit_s[0] <= self.per_unit_s[1] else 1
        return 1 - best if self.runs % PROBE_EVERY == 0 else best

    def record(self, which: int, seconds: float, units: int) -> None:
        """``which`` took ``seconds`` for ``units`` of work."""
        self.per_unit_s[which] = seconds / max(units, 1)
