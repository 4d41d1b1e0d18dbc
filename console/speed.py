"""The target speed a press of ``+`` or ``-`` asks for.

A press multiplies the speed. Taken from the latest snapshot alone, presses in quick
succession all start from the same value: the snapshot says the new speed only once the
engine has applied the command and published again, so five presses of ``-`` halved the
speed once or twice. ``SpeedSteps`` starts from the last speed asked until a snapshot
published after its reply says what the engine runs at.

``SpeedSteps.press`` is a press of ``+`` or ``-`` in any view: the main view and the
compare view pass what differs (which snapshot to step from, how to send, where the
reply is told and redrawn).

``SharedWindow`` measures the speed of fabrics shown side by side over one wall-clock
window: each engine's own ``measured_speed`` is smoothed over its own batches, so the
compare view's two sides showed figures of different windows (1.2e-2× native beside
8.1e-3× RoCE while the two ran in lockstep), which could not be compared.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from fabric_core.commands import MAX_SPEED, MIN_SPEED, Command, CommandResult, SetSpeed

if TYPE_CHECKING:
    from fabric_core.runtime.snapshot import Snapshot

#: What a press of ``+`` says when the engine already runs flat out.
FLAT_OUT = "already running flat out"


class SpeedSteps:
    """The speeds asked by ``+`` and ``-`` (one per console, or per compare view)."""

    def __init__(self) -> None:
        self._asked: float | None = None
        self._waiting = 0  # replies not yet back
        self._seen: Snapshot | None = None  # the latest snapshot when the last reply came

    def step(self, latest: Snapshot | None, factor: float) -> float | None:
        """The speed to ask for: ``factor`` times the last one asked (while no snapshot
        since its reply shows it) or the snapshot's; from 1 when flat out (speed 0) and
        slower is asked; None when flat out and faster is asked (nothing is faster)."""
        if self._asked is not None and (self._waiting > 0 or latest is self._seen):
            current = self._asked
        else:
            current = latest.target_speed if latest is not None else 0.0
        if current <= 0:
            if factor > 1:
                return None
            current = 1.0
        return min(max(current * factor, MIN_SPEED), MAX_SPEED)

    def sent(self, speed: float) -> None:
        """A ``speed`` command with ``speed`` has gone out."""
        self._asked = speed
        self._waiting += 1

    def replied(self, ok: bool, latest: Snapshot | None) -> None:
        """Its reply came (``latest``: the source's latest snapshot now); a refusal forgets
        the speed asked, so the next press starts from the engine's."""
        self._waiting = max(self._waiting - 1, 0)
        if not ok:
            self._asked = None
        elif self._waiting == 0:
            self._seen = latest

    def press(
        self,
        factor: float,
        *,
        latest: Callable[[], Snapshot | None],
        send: Callable[[Command], Awaitable[CommandResult]],
        notify: Callable[[str], object],
        start: Callable[[Coroutine[Any, Any, None]], object],
        redraw: Callable[[], None],
    ) -> None:
        """A press of ``+`` or ``-``: ask for ``factor`` times the speed (``step``) at once,
        so that quick presses compound, and send it in the background.

        Args:
            latest: the latest snapshot of the engine the step starts from.
            send: sends a command and tells the operator when it is refused.
            notify: tells the operator (here: that nothing is faster than flat out).
            start: runs a coroutine in a worker (the key press does not wait for it).
            redraw: redraws the view once the reply came.
        """
        speed = self.step(latest(), factor)
        if speed is None:
            notify(FLAT_OUT)
            return
        self.sent(speed)

        async def ask() -> None:
            result = await send(SetSpeed(speed=speed))
            self.replied(result.ok, latest())
            redraw()

        start(ask())


#: Wall seconds over which ``SharedWindow`` measures (some more: its oldest reading is
#: the last one at least this old).
SHARED_WINDOW_S = 2.0
#: Least wall time between its oldest and newest readings before it says a speed.
SHARED_LEAST_S = 1.0


class SharedWindow:
    """The speeds of fabrics shown side by side, over one window of wall time.

    Each reading pairs the wall time it is taken at with the simulated time of every
    fabric's latest snapshot, all read at once; a fabric's speed is the simulated time it
    ran between the window's oldest and newest readings over the wall time between them,
    the same for all. A change of a fabric's target speed or of its running (a pause)
    starts the window afresh, as does a simulated time that goes back (a new run)."""

    #: Where the wall time comes from (a test sets its own).
    clock: Callable[[], float] = time.monotonic

    def __init__(self, window_s: float = SHARED_WINDOW_S, least_s: float = SHARED_LEAST_S) -> None:
        self.window_s = window_s
        self.least_s = least_s
        self._readings: deque[tuple[float, tuple[float, ...]]] = deque()
        self._key: tuple[tuple[float, bool], ...] | None = None

    def read(self, snaps: Sequence[Snapshot | None]) -> None:
        """Take a reading of ``snaps``, the fabrics' latest snapshots now."""
        now = self.clock()
        if any(s is None for s in snaps):
            self._readings.clear()
            self._key = None
            return
        known = [s for s in snaps if s is not None]
        key = tuple((s.target_speed, s.running) for s in known)
        sims = tuple(s.sim_time_s for s in known)
        last = self._readings[-1] if self._readings else None
        if (
            key != self._key
            or last is None
            or now < last[0]
            or any(b < a for a, b in zip(last[1], sims, strict=True))
        ):
            self._readings.clear()
        self._key = key
        self._readings.append((now, sims))
        while len(self._readings) > 2 and self._readings[1][0] <= now - self.window_s:
            self._readings.popleft()

    def speeds(self) -> tuple[float, ...] | None:
        """Each fabric's simulated seconds per wall second over the window, in the order
        read; None until the window spans ``least_s``."""
        if len(self._readings) < 2:
            return None
        (t0, first), (t1, last) = self._readings[0], self._readings[-1]
        if t1 - t0 < self.least_s or t1 <= t0:
            return None
        return tuple((b - a) / (t1 - t0) for a, b in zip(first, last, strict=True))

    @property
    def span_s(self) -> float:
        """The wall time between the window's oldest and newest readings."""
        if len(self._readings) < 2:
            return 0.0
        return self._readings[-1][0] - self._readings[0][0]
