"""The engine: an asyncio task that runs a ``Fabric`` and publishes snapshots.

Commands come in through ``submit`` and are applied at a tick boundary, in the
order received, so a run is reproducible from (scenario, seed, command log).
Ticks run in batches in a worker thread so that a long batch never starves the
event loop the console and the exporters share. Pacing: the engine aims at
``speed`` simulated seconds per wall second (0 = flat out) and publishes a
snapshot at most every ``publish_interval_s`` of wall time.

The tick adapts to the speed (``max_tick_s``): an engine that falls behind doubles
the tick, one that mostly waits halves it again, never below the tick it started
with (or the one an operator set). The model's results do not depend on the tick
(docs/MODEL.md, "Time scales"), so this trades nothing but the granularity of
arrivals for keeping up; each change is a ``tick`` command, so a recording replays it.

A command cuts a pacing sleep short (``submit`` wakes the engine), so it applies at
the next tick boundary however slow the speed. Operator commands (pause, resume,
clear) go ahead of the others queued at the same boundary. ``health`` says whether
the engine keeps pace: ``behind`` (it steps all the time and still falls short: the
fabric costs more than the speed allows) or ``starved`` (it falls short while it
steps less than half of the time: the process's other work, or the machine, holds
it up).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fabric_core.commands import (
    MAX_TICK_S,
    MIN_TICK_S,
    ClearFault,
    Command,
    CommandError,
    CommandResult,
    Pause,
    Resume,
    SetSpeed,
    SetTick,
    speed_problem,
)
from fabric_core.faults.book import FaultBook
from fabric_core.runtime.bus import SnapshotBus
from fabric_core.runtime.snapshot import Snapshot


class RunEndedError(RuntimeError):
    """The fabric cannot go on (a plane's engine was lost): the engine ends the run, with
    the fabric's own event saying why, and keeps the reason (``Engine.ended``)."""


#: The target speed of an engine not told one (simulated seconds per wall second;
#: ``fabtop serve`` without ``--speed``; the console sets its own).
DEFAULT_SPEED = 1e-3


class EngineFabric(Protocol):
    """What the engine needs of a fabric: ``Fabric``, or a coordinator of plane engines
    (``fabric_core.planes.coordinator.PlanedFabric``)."""

    dt_s: float
    sim_time_s: float
    tick: int
    faults: FaultBook

    @property
    def compiling_aside(self) -> bool:
        """Whether its ticks run far slower than they will for now (a first run's, as
        Python while the kernels compile aside): the engine keeps its tick meanwhile."""

    def run_ticks(self, n: int) -> None:
        """Advance ``n`` ticks (``RunEndedError``: the fabric cannot go on)."""

    def apply(self, cmd: Command) -> Mapping[str, Any]:
        """Apply a fabric command (``CommandError``: it does not fit)."""

    def snapshot(
        self,
        *,
        wall_time_s: float = 0.0,
        target_speed: float = 0.0,
        measured_speed: float = 0.0,
        running: bool = True,
    ) -> Snapshot:
        """An immutable picture of the fabric now."""


@dataclass
class _Pending:
    command: Command
    reply: asyncio.Future[CommandResult]


class PeerClocks(Protocol):
    """The simulated clocks of lockstepped engines that are not in this process (the
    compare view runs each fabric in its own process). ``Engine.lockstep`` covers engines
    in one process; this covers the others, through whatever the two processes share."""

    def hold(self, sim_time_s: float, slack_s: float) -> bool:
        """True while the engine must not start a batch: a running peer is more than
        ``slack_s`` behind ``sim_time_s`` (or the owner holds the engine at its
        boundary). ``slack_s``: ``Engine.lockstep_slack_s``."""

    def meet(self, sim_time_s: float, slack_s: float) -> float | None:
        """The nearest simulated time more than ``slack_s`` after ``sim_time_s`` that a
        running peer is at or is heading for (the end of the batch it runs); None if
        there is none. A batch ends there, so that engines meet at the same boundaries
        and then run side by side instead of in turns."""

    def report(self, sim_time_s: float, *, heading_s: float, running: bool, closed: bool) -> None:
        """Tell the peers where this engine is and where its batch ends (``heading_s``;
        its time between batches): at every batch's start and end and state change."""


#: Commands an operator needs even while a flood of others is queued: applied first.
URGENT_COMMANDS = (Pause, Resume, ClearFault)


@dataclass(frozen=True, slots=True)
class EngineHealth:
    """How the engine keeps up with its pace (see the module docstring).

    Attributes:
        pacing: ``ok``, ``behind``, ``starved``, ``paused`` or ``flat-out`` (speed 0).
        busy_fraction: share of the recent wall time the engine did not sleep that went
            into stepping the fabric (0..1; the rest: snapshots, the event loop's other work).
        queued_commands: commands waiting for the next tick boundary.
        flows_refused_total: flows the admission limits refused (``fabric_core.faults.admission``).
    """

    pacing: str
    busy_fraction: float
    queued_commands: int
    flows_refused_total: int


class Engine:
    """Runs a fabric continuously; see the module docstring."""

    #: Batches in a row behind pace before the tick doubles, and mostly waiting (more
    #: than WAITING of the wall time) before it halves: the hysteresis keeps a tick that
    #: just keeps up from flapping (a tick that halves leaves the engine at most 80 %
    #: busy, so it does not fall behind again).
    BEHIND_BATCHES = 3
    WAITING_BATCHES = 5
    WAITING = 0.6
    #: A measured speed below this fraction of the pace counts as behind.
    BEHIND = 0.95

    def __init__(
        self,
        fabric: EngineFabric,
        *,
        speed: float = DEFAULT_SPEED,
        publish_interval_s: float = 0.1,
        max_batch_wall_s: float = 0.05,
        on_command: Callable[[int, Command], None] | None = None,
        max_tick_s: float | None = None,
        on_publish: Callable[[Snapshot], None] | None = None,
    ) -> None:
        """Create an engine.

        Args:
            fabric: the emulated fabric (owned by the engine from now on).
            speed: simulated seconds per wall second; 0 = as fast as possible.
            publish_interval_s: wall time between snapshots.
            max_batch_wall_s: longest stretch of ticks run without looking at
                commands (bounds the latency of pause and of every command).
            on_command: called with (tick, command) for every command applied
                (the recorder uses it).
            max_tick_s: the longest tick the engine may switch to when it cannot
                keep up with ``speed``; None keeps the tick fixed.
            on_publish: called with every snapshot published, as it is (an engine in
                another process forwards them; the bus keeps only the latest).
        """
        problem = speed_problem(speed)
        if problem is not None:
            raise ValueError(problem)
        if max_tick_s is not None and not MIN_TICK_S <= max_tick_s <= MAX_TICK_S:
            raise ValueError(f"max tick must be between {MIN_TICK_S:g} and {MAX_TICK_S:g} s")
        self.fabric = fabric
        #: why the run ended on its own (``RunEndedError``: a plane's engine was lost)
        self.ended: str | None = None
        self.bus = SnapshotBus()
        self.speed = speed
        self.running = True
        self.publish_interval_s = publish_interval_s
        self.max_batch_wall_s = max_batch_wall_s
        self._on_command = on_command
        self._on_publish = on_publish
        self._queue: deque[_Pending] = deque()
        self._urgent: deque[_Pending] = deque()
        #: commands due at a simulated time (``submit_together``), by that time
        self._due: list[tuple[float, _Pending]] = []
        self._batch_end_s: float | None = None  # where the batch being run will end
        self._stop = asyncio.Event()
        self._looping = False  # inside ``run``
        self._wake = asyncio.Event()
        self._wall_start = time.monotonic()
        self._measured_speed = 0.0
        self._recent = (0.0, 0.0)  # (simulated, wall) seconds, decaying sums over batches
        self._busy = (0.0, 0.0)  # (stepping, wall) seconds, decaying sums over batches
        self._ticks_per_batch = 1
        self._peers: list[Engine] = []
        #: peers in other processes (``PeerClocks``); None: only ``lockstep`` peers
        self.clocks: PeerClocks | None = None
        self.max_tick_s = max_tick_s
        self._floor_tick_s = fabric.dt_s  # adaptation never goes below this
        self._behind = 0  # batches in a row that could not keep pace
        self._waiting = 0  # batches in a row that mostly waited
        self._mark: float | None = None  # when the last batch ended (None: after a pause)
        # (wall, simulated) time the pace counts from: sleeps aim at a cumulative deadline,
        # so a sleep that overruns (a busy event loop) is made up by the next one
        self._pace_from: tuple[float, float] | None = None
        self._repace = False  # the speed changed: pace from the end of the next batch
        self._last_publish = 0.0

    @staticmethod
    def lockstep(*engines: Engine) -> None:
        """Keep several engines (the compare view's fabrics) at the same simulated time:
        an engine that gets ahead of a running peer waits for it, so the clocks stay
        within one batch of each other whatever each fabric costs to step. Engines in
        other processes do the same through ``clocks`` (``PeerClocks``)."""
        for engine in engines:
            engine._peers = [e for e in engines if e is not engine]

    @staticmethod
    async def submit_together(engines: Sequence[Engine], command: Command) -> list[CommandResult]:
        """Apply ``command`` in every engine at the same simulated time (the compare view's
        faults): the first tick boundary at or after the furthest any of them gets before
        it hears of the command (the end of the batch it is running). Each engine ends
        its batches there, so with equal ticks both apply it at that very time. A paused
        engine applies it at once."""
        at_s = max(e.boundary_s for e in engines)
        # queued before anything awaits: an engine must not start a batch past at_s unaware
        replies = [e._schedule(command, at_s) for e in engines]
        return list(await asyncio.gather(*replies))

    @property
    def boundary_s(self) -> float:
        """The first tick boundary this engine can still apply a command at: the end of
        the batch being run, or now between batches (``submit_together``'s time)."""
        return self._batch_end_s or self.fabric.sim_time_s

    def submit_at(self, command: Command, at_s: float) -> asyncio.Future[CommandResult]:
        """Apply ``command`` at the first tick boundary at or after simulated time
        ``at_s`` (batches end there); at once when paused or when ``at_s`` has passed.
        Queued when called (not when awaited): no batch starts past ``at_s`` unaware.
        ``submit_together`` for engines in other processes: their owner takes the
        furthest ``boundary_s`` of them all and sends it to each."""
        return self._schedule(command, at_s)

    def _schedule(self, command: Command, at_s: float) -> asyncio.Future[CommandResult]:
        reply: asyncio.Future[CommandResult] = asyncio.get_running_loop().create_future()
        self._due.append((at_s, _Pending(command, reply)))
        self._due.sort(key=lambda d: d[0])
        self._wake.set()
        return reply

    # ---------------------------------------------------------------- commands
    async def submit(self, command: Command) -> CommandResult:
        """Queue a command; returns its result once applied at a tick boundary (an
        error at once when the engine has stopped: nothing would apply it)."""
        if self.bus.closed:
            why = f": {self.ended}" if self.ended else ""
            return CommandResult(id=command.id, ok=False, error=f"the engine has stopped{why}")
        reply: asyncio.Future[CommandResult] = asyncio.get_running_loop().create_future()
        queue = self._urgent if isinstance(command, URGENT_COMMANDS) else self._queue
        queue.append(_Pending(command, reply))
        self._wake.set()  # cut a pacing sleep short: commands apply at the next boundary
        return await reply

    @property
    def queued(self) -> int:
        """Commands waiting for the next tick boundary."""
        return len(self._queue) + len(self._urgent)

    def _apply_pending(self, everything: bool = False) -> bool:
        """Apply queued commands, operator ones first, then those due by now (all of
        them when ``everything`` or paused); True if any was applied."""
        applied = False
        while self._urgent or self._queue:
            self._reply((self._urgent or self._queue).popleft())
            applied = True
        now = self.fabric.sim_time_s
        while self._due and (everything or not self.running or self._due[0][0] <= now + 1e-15):
            self._reply(self._due.pop(0)[1])
            applied = True
        return applied

    def _reply(self, pending: _Pending) -> None:
        result = self.apply(pending.command)
        if not pending.reply.done():  # the caller may have given up waiting
            pending.reply.set_result(result)

    def apply(self, command: Command) -> CommandResult:
        """Apply one command now (between ticks). Never raises for bad input.

        A ``tick`` command from an operator also sets the shortest tick the engine
        adapts down to.
        """
        result = self._apply(command)
        if result.ok and isinstance(command, SetTick):
            self._floor_tick_s = self.fabric.dt_s
        return result

    def _apply(self, command: Command) -> CommandResult:
        try:
            if isinstance(command, Pause):
                self.running = False
                detail: dict[str, object] = {}
            elif isinstance(command, Resume):
                self.running = True
                detail = {}
            elif isinstance(command, SetSpeed):
                self.speed = command.speed
                # the pace starts again after the next batch, whose ticks were sized for the
                # speed before: paced from its start at a much slower speed, it slept for
                # hours (until the next command); and the speed measured at the old one is
                # no measure of the new
                self._pace_from = None
                self._repace = True
                self._ticks_per_batch = 1  # not a batch sized for the speed before
                self._recent = (0.0, 0.0)
                self._measured_speed = 0.0
                detail = {"speed": command.speed}
            else:
                detail = dict(self.fabric.apply(command))
        except CommandError as exc:
            return CommandResult(id=command.id, ok=False, error=str(exc))
        if self._on_command is not None:
            self._on_command(self.fabric.tick, command)
        return CommandResult(id=command.id, ok=True, detail=detail)

    # ---------------------------------------------------------------- running
    def stop(self) -> None:
        """Ask ``run`` to return after the current batch."""
        self._stop.set()
        self._wake.set()

    @property
    def health(self) -> EngineHealth:
        """Whether the engine keeps pace now (see ``EngineHealth``)."""
        stepping, wall = self._busy
        busy = stepping / wall if wall > 0 else 0.0
        if not self.running:
            pacing = "paused"
        elif self.speed == 0:
            pacing = "flat-out"
        elif self._recent[1] > 0 and self._measured_speed < self.BEHIND * self.speed:
            pacing = "behind" if busy >= 0.5 else "starved"
        else:
            pacing = "ok"
        admission = getattr(self.fabric.faults, "admission", None)
        refused = 0 if admission is None else int(admission.refused_flows_total)
        return EngineHealth(pacing, min(busy, 1.0), self.queued, refused)

    def snapshot(self) -> Snapshot:
        """Build a snapshot of the fabric now, with the engine's pacing figures."""
        return self.fabric.snapshot(
            wall_time_s=time.monotonic() - self._wall_start,
            target_speed=self.speed,
            measured_speed=self._measured_speed if self.running else 0.0,
            running=self.running,
        )

    async def run(self) -> None:
        """Run until ``stop``; publishes the first snapshot at once.

        Raises:
            RuntimeError: the engine is already running (two loops would step one fabric
                from two threads at once).
        """
        if self._looping:
            raise RuntimeError("this engine is already running; stop it before running it again")
        self._looping = True
        self._wall_start = time.monotonic()
        self._publish()
        self._last_publish = time.monotonic()
        try:
            while not self._stop.is_set():
                changed = self._apply_pending()
                self._report_clock()
                if not self.running:
                    if changed:
                        self._publish()
                    self._mark = self._pace_from = None  # paused time is not stepping time
                    await self._idle(0.02)
                    continue
                if self._ahead_of_peers():
                    # nor is waiting for a peer; but the pace keeps counting, so the time
                    # waited is not slept again after the next batch
                    self._mark = None
                    await self._idle(0.002)
                    continue
                # the snapshot goes out before the pacing sleep: at a slow speed the
                # sleep is long, and telemetry must show the state it sleeps in
                await self._run_batch(functools.partial(self._publish_due, changed))
        except RunEndedError as exc:
            self.ended = str(exc)
            self.running = False
        finally:
            self._apply_pending(everything=True)
            self._report_clock(closed=True)
            self._publish()
            self.bus.close()
            self._looping = False

    def _report_clock(self, closed: bool = False) -> None:
        if self.clocks is not None:
            self.clocks.report(
                self.fabric.sim_time_s,
                heading_s=self.boundary_s,
                running=self.running,
                closed=closed,
            )

    def _meeting_point(self, now_s: float) -> float | None:
        """Where the batch starting now should end at the latest to meet the lockstep
        peers: the nearest time ahead that a running peer is at (waiting for this
        engine) or is heading for. Without it, two engines whose batches span different
        simulated times take turns: each waits out the other's whole batch."""
        slack = self.lockstep_slack_s
        ahead = [
            p.boundary_s
            for p in self._peers
            if p.running and not p.bus.closed and p.boundary_s > now_s + slack
        ]
        if self.clocks is not None:
            theirs = self.clocks.meet(now_s, slack)
            if theirs is not None:
                ahead.append(theirs)
        return min(ahead, default=None)

    def _publish(self) -> None:
        snap = self.snapshot()
        self.bus.publish(snap)
        if self._on_publish is not None:
            self._on_publish(snap)

    def _publish_due(self, changed: bool) -> None:
        """Publish a snapshot if a command changed something or the interval is up."""
        now = time.monotonic()
        if changed or now - self._last_publish >= self.publish_interval_s:
            self._publish()
            self._last_publish = now

    @property
    def lockstep_slack_s(self) -> float:
        """How far a lockstep peer may be behind this engine, or a meeting point ahead of
        it, and still count as here: a hair under one tick. Engines on the same tick grid
        meet exactly, as before; two whose grids are offset by less than a tick (each
        changed its tick at another moment) would otherwise overshoot each other's
        boundaries by a fraction of a tick, each batch ending one tick past the other's
        and the pair running one tick a batch in turns (seen in the compare view: 220
        ticks a second where each side does 1,300)."""
        return self.fabric.dt_s * (1 - 1e-6)

    def _ahead_of_peers(self) -> bool:
        mine = self.fabric.sim_time_s
        slack = self.lockstep_slack_s
        if self.clocks is not None and self.clocks.hold(mine, slack):
            return True
        return any(
            p.running and not p.bus.closed and p.fabric.sim_time_s < mine - slack
            for p in self._peers
        )

    async def _idle(self, seconds: float) -> None:
        """Sleep up to ``seconds``; a command (``submit``) or ``stop`` ends it at once."""
        if self._queue or self._urgent or self._stop.is_set():
            return
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)

    async def _run_batch(self, stepped: Callable[[], None] = lambda: None) -> None:
        """Run a batch of ticks in a worker thread, call ``stepped``, then sleep to keep
        pace."""
        n = self._ticks_per_batch
        now_s, dt = self.fabric.sim_time_s, self.fabric.dt_s
        if self._due:  # end the batch at the boundary a due command waits for
            n = max(1, min(n, math.ceil((self._due[0][0] - now_s) / dt - 1e-9)))
        meet = self._meeting_point(now_s)
        if meet is not None:  # and where a lockstep peer will be
            n = max(1, min(n, math.ceil((meet - now_s) / dt - 1e-9)))
        self._batch_end_s = now_s + n * dt
        self._report_clock()
        wall0 = time.monotonic()
        # the measured speed counts from the end of the previous batch: the time between
        # batches (snapshots, the event loop's other work) is part of a simulated second's cost
        since = wall0 if self._mark is None else self._mark
        sim0 = self.fabric.sim_time_s
        try:
            stepping = await asyncio.to_thread(self._timed_ticks, n)
        finally:
            self._batch_end_s = None
        wall = max(time.monotonic() - wall0, 1e-9)
        stepped()
        sim = self.fabric.sim_time_s - sim0
        # adapt the batch so that it lasts about max_batch_wall_s / 2
        per_tick = wall / n
        self._ticks_per_batch = max(1, min(10_000, int(self.max_batch_wall_s / 2 / per_tick)))
        waited = 0.0
        # the batch that ran at the speed before (unpaced at the new one) measures neither
        # (a speed change set _pace_from to None, so an unpaced batch sets it afresh here)
        unpaced = self._repace and self.speed > 0
        self._repace = False
        if self.speed > 0:
            if self._pace_from is None:
                self._pace_from = (
                    (time.monotonic(), self.fabric.sim_time_s) if unpaced else (since, sim0)
                )
            wall_from, sim_from = self._pace_from
            wait = wall_from + (self.fabric.sim_time_s - sim_from) / self.speed - time.monotonic()
            if wait > 0:
                slept_from = time.monotonic()
                await self._idle(wait)  # a command cuts it short
                waited = max(time.monotonic() - slept_from, 1e-9)
            elif wait < -self.publish_interval_s:
                self._pace_from = None  # far behind: keep pace from here, no catch-up burst
            # Throttle the batch so one batch never spans much more than the interval.
            ticks_for_interval = self.publish_interval_s * self.speed / max(self.fabric.dt_s, 1e-15)
            self._ticks_per_batch = max(1, min(self._ticks_per_batch, int(ticks_for_interval)))
        now = time.monotonic()
        elapsed = max(now - since, 1e-9)
        self._mark = now
        # simulated over wall time of the recent batches (weighted by their length, so a
        # short batch that catches up after an overlong sleep does not count for more)
        busy_step, busy_wall = self._busy
        self._busy = (0.8 * busy_step + stepping, 0.8 * busy_wall + elapsed - waited)
        if unpaced:
            return  # it says nothing of the new speed: neither measured nor adapted to
        recent_sim, recent_wall = self._recent
        self._recent = (0.8 * recent_sim + sim, 0.8 * recent_wall + elapsed)
        self._measured_speed = self._recent[0] / self._recent[1]
        if self.speed > 0 and self.max_tick_s is not None and not self.fabric.compiling_aside:
            # behind: busy all the time and still below the pace (smoothed over batches)
            behind = waited == 0 and self._measured_speed < self.BEHIND * self.speed
            self._adapt_tick(behind=behind, waited=waited / elapsed)

    def _timed_ticks(self, n: int) -> float:
        """Run ``n`` ticks (in the worker thread); the wall time they took."""
        start = time.monotonic()
        self.fabric.run_ticks(n)
        return time.monotonic() - start

    def _adapt_tick(self, *, behind: bool, waited: float) -> None:
        """Double the tick after a few batches behind pace, halve it after a few that
        mostly waited (see the module docstring)."""
        assert self.max_tick_s is not None
        self._behind = self._behind + 1 if behind else 0
        self._waiting = self._waiting + 1 if waited > self.WAITING else 0
        dt = self.fabric.dt_s
        new = dt
        if self._behind >= self.BEHIND_BATCHES and dt < self.max_tick_s:
            new = min(dt * 2, self.max_tick_s)
        elif self._waiting >= self.WAITING_BATCHES and dt > self._floor_tick_s:
            new = max(dt / 2, self._floor_tick_s)
        if new != dt:
            self._behind = self._waiting = 0
            self._apply(SetTick(dt_s=new))
            self._ticks_per_batch = max(1, int(self._ticks_per_batch * dt / new))
            self._recent = (0.0, 0.0)  # measure the new tick afresh
