"""Which of two computations that give the same result to run: the one timed faster.

The compiled solve comes serial and over the cores (``kernels.solve``), bit for bit the
same. Over the cores it wins on a large tick when the machine is otherwise idle (some 1.2
times at 100k GPUs) and loses badly when another process wants a core, such as the console
beside the engine: each of the fifty-odd loops it shares a tick waits for both threads, and
a thread that lost its core waits for a scheduler slice. Measured on this 2-core machine
while other work ran on the second core: 2.8 ms a tick serial, 637 ms over the cores on the
1,024-GPU fat-tree. So the engine now and then runs both on the same tick (a probe: the
same work, so the times compare whatever the tick's size), keeps the faster, probes again
twice as late while the choice holds, and at once when the one over the cores, running,
slows down to twice its time at the last probe (another process took a core it shares).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Runs between probes right after the choice changed, and at the most.
FIRST_PROBE_AFTER = 4
LAST_PROBE_AFTER = 64
#: The one over the cores (1), running, probes again at once when it takes this much longer
#: per unit of work than at the last probe.
SLOWDOWN = 2.0


@dataclass
class FasterOfTwo:
    """Chooses 0 or 1 (``plan``) from probes that time both on the same work (``probed``)."""

    #: the one run between probes
    best: int = 0
    #: runs between probes now, and runs left until the next
    probe_after: int = FIRST_PROBE_AFTER
    until_probe: int = 0
    #: seconds per unit of work of ``best`` at the last probe
    best_per_unit_s: float = 0.0

    def plan(self) -> tuple[int, bool]:
        """The one to run now, and whether to time the other on the same work too."""
        self.until_probe -= 1
        return self.best, self.until_probe < 0

    def probed(self, seconds: tuple[float, float], units: int) -> None:
        """Both took ``seconds`` (0's, 1's) for the same ``units`` of work."""
        faster = 0 if seconds[0] <= seconds[1] else 1
        if faster == self.best:
            self.probe_after = min(2 * self.probe_after, LAST_PROBE_AFTER)
        else:
            self.best, self.probe_after = faster, FIRST_PROBE_AFTER
        self.until_probe = self.probe_after
        self.best_per_unit_s = seconds[faster] / max(units, 1)

    def ran(self, seconds: float, units: int) -> None:
        """``best`` took ``seconds`` for ``units``: if it is 1 (the one that shares the
        cores, which another process can slow down many times over) and slowed down,
        probe next time."""
        if self.best == 1 and seconds / max(units, 1) > SLOWDOWN * self.best_per_unit_s > 0:
            self.until_probe = 0
