"""The target speed a press of ``+`` or ``-`` asks for.

A press multiplies the speed. Taken from the latest snapshot alone, presses in quick
succession all start from the same value: the snapshot says the new speed only once the
engine has applied the command and published again, so five presses of ``-`` halved the
speed once or twice. ``SpeedSteps`` starts from the last speed asked until a snapshot
published after its reply says what the engine runs at.

``SpeedSteps.press`` is a press of ``+`` or ``-`` in any view: the main view and the
compare view pass what differs (which snapshot to step from, how to send, where the
reply is told and redrawn).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
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
