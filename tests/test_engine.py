"""The engine: commands at tick boundaries, pause/resume/speed, latest-value bus."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable

import pytest

from fabric_core.commands import InjectFault, Pause, Resume, SetSpeed, SetTick, parse_command
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from tests.helpers import until


def _engine(speed: float = 0.0) -> Engine:
    return Engine(Fabric.from_scenario(load_scenario("tiny")), speed=speed, publish_interval_s=0.01)


async def test_pause_stops_simulated_time_and_resume_restarts_it() -> None:
    engine = _engine()
    task = asyncio.create_task(engine.run())
    await until(lambda: engine.bus.latest is not None and engine.bus.latest.tick > 5)
    assert (await engine.submit(Pause(id="p1"))).ok
    # commands apply between batches: once the result is back no batch is in flight
    await until(lambda: engine.bus.latest is not None and not engine.bus.latest.running)
    frozen = engine.fabric.tick
    await asyncio.sleep(0.2)  # time passing while paused (load can only make this pass)
    assert engine.fabric.tick == frozen
    assert (await engine.submit(Resume())).ok
    await until(lambda: engine.fabric.tick > frozen + 5)
    engine.stop()
    await task
    assert engine.bus.closed


async def test_speed_paces_simulated_time_against_the_wall_clock() -> None:
    engine = _engine(speed=1e-4)  # 100 µs of simulated time per wall second
    loop = asyncio.get_running_loop()
    started = loop.time()
    task = asyncio.create_task(engine.run())
    await until(lambda: engine.fabric.sim_time_s >= 20e-6)
    sim, wall = engine.fabric.sim_time_s, loop.time() - started
    # never ahead of the pace: at most speed x wall, plus the batch in flight (a batch is
    # throttled to the publish interval: 10 ms x 1e-4 = 1 µs) and a tick. Load can only
    # make the engine slower, so this bound holds on a busy machine too.
    assert sim <= 1e-4 * wall + 1e-6 + engine.fabric.dt_s, (sim, wall)
    result = await engine.submit(SetSpeed(speed=0))
    assert result.ok and result.detail == {"speed": 0}
    await until(lambda: engine.fabric.sim_time_s > 10 * sim)  # flat out now
    engine.stop()
    await task


async def test_bad_commands_get_specific_errors_and_change_nothing() -> None:
    engine = _engine()
    task = asyncio.create_task(engine.run())
    await until(lambda: engine.bus.latest is not None)
    bad = await engine.submit(InjectFault(id="x1", kind="link_down", target="leaf00->spine07"))
    assert not bad.ok and bad.id == "x1"
    assert "unknown link 'leaf00->spine07'" in (bad.error or "")
    assert "did you mean" in (bad.error or "")
    good = await engine.submit(
        parse_command(
            b'{"command":"inject","kind":"link_down","target":"leaf00->spine01","id":"x2"}'
        )
    )
    assert good.ok and good.detail["fault_id"]
    await until(lambda: any(f.kind == "link_down" for f in engine.bus.latest.faults))  # type: ignore[union-attr]
    engine.stop()
    await task


async def test_a_slow_consumer_skips_snapshots_and_never_slows_the_engine() -> None:
    engine = _engine()
    task = asyncio.create_task(engine.run())
    seen = []
    async for snap in engine.bus.subscribe(min_interval_s=0.2):
        seen.append(snap.tick)
        if len(seen) == 3:
            break
    engine.stop()
    await task
    # the engine kept ticking while the consumer slept: it saw non-consecutive snapshots
    assert seen[1] - seen[0] > 1 and seen[2] - seen[1] > 1


def test_engine_rejects_a_negative_speed() -> None:
    with pytest.raises(ValueError, match="speed"):
        _engine(speed=-1)


class _LatePeer:
    """A lockstep peer in another process (``PeerClocks``) that reaches every simulated
    time ``late_s`` of wall time after the engine does: the engine waits that long before
    each of its batches. ``waited_s`` adds up the waits."""

    def __init__(self, late_s: float) -> None:
        self.late_s = late_s
        self.reached = -1.0  # the simulated time the peer has caught up with
        self.since: float | None = None  # when the engine got there first
        self.waited_s = 0.0

    def hold(self, sim_time_s: float, slack_s: float) -> bool:
        if sim_time_s <= self.reached:
            return False
        now = time.monotonic()
        if self.since is None:
            self.since = now
        if now - self.since < self.late_s:
            return True
        self.waited_s += now - self.since
        self.reached, self.since = sim_time_s, None
        return False

    def meet(self, sim_time_s: float, slack_s: float) -> float | None:
        return None

    def report(self, sim_time_s: float, *, heading_s: float, running: bool, closed: bool) -> None:
        pass


async def test_time_spent_waiting_for_a_lockstep_peer_is_not_slept_again() -> None:
    """An engine that waited for a slower peer is behind its pace by that wait: the sleep
    after its next batch is shorter by as much, so the pair keeps the speed asked for
    instead of losing every wait for a peer on top of the pace (the compare view ran at
    8e-3 of the 1e-2 asked, each side also sleeping after its fast batches).

    It measures the time slept, not the speed reached: a loaded machine slows the batches
    and so shortens the sleeps (the bound holds the better), where a lower bound on the
    speed would fail there."""
    speed, batch_wall_s, late_s = 1e-3, 0.05, 0.03
    # batches of 50 ms of wall time at the pace (the publish interval throttles them)
    engine = _engine(speed=speed)
    engine.publish_interval_s = batch_wall_s
    peer = _LatePeer(late_s)
    engine.clocks = peer
    slept: list[float] = []  # the pacing sleeps asked for (not the waits for the peer)
    idle = engine._idle

    async def recording(seconds: float) -> None:
        if peer.since is None:  # not holding for the peer: a sleep after a batch
            slept.append(seconds)
        await idle(seconds)

    engine._idle = recording  # type: ignore[method-assign]
    task = asyncio.create_task(engine.run())
    # past the first tick (which loads the kernels) and into the steady cycle
    await until(lambda: engine.fabric.sim_time_s > 3 * speed * batch_wall_s)
    slept.clear()
    sim0, wall0, waited0 = engine.fabric.sim_time_s, time.monotonic(), peer.waited_s
    # twenty batches, each after a 30 ms wait (longer on a loaded machine)
    await until(lambda: engine.fabric.sim_time_s - sim0 > 20 * speed * batch_wall_s)
    sim, wall = engine.fabric.sim_time_s - sim0, time.monotonic() - wall0
    waited, paced = peer.waited_s - waited0, sim / speed
    engine.stop()
    await task
    assert waited > 0.5 * 20 * late_s  # the peer held it before its batches
    # The pace's deadline counts on through the waits: what the engine sleeps is the pace
    # less the waits (and less its batches' work), give or take the batch and the wait
    # the window starts in. Sleeping the whole pace after each wait sleeps about `paced`
    # less the batches' work (0.8 s of 1.0 s here; waiting not slept again: 0.1 s).
    assert sum(slept) <= paced - waited + batch_wall_s + late_s, (sum(slept), paced, waited)
    assert sim <= speed * wall + speed * batch_wall_s + engine.fabric.dt_s  # never ahead


def _lockstepped() -> tuple[Engine, Engine, list[int]]:
    """The compare view's pair: tiny on native and on RoCE, lockstepped, flat out; every
    batch's size (ticks) is recorded as it starts."""
    native = Engine(Fabric.from_scenario(load_scenario("tiny")), speed=0, max_batch_wall_s=0.01)
    roce = Engine(
        Fabric.from_scenario(load_scenario("tiny", profile="roce-400g")),
        speed=0,
        max_batch_wall_s=0.01,
    )
    Engine.lockstep(native, roce)
    batches: list[int] = []
    for e in (native, roce):
        timed = e._timed_ticks

        def recording(n: int, timed: Callable[[int], float] = timed) -> float:
            batches.append(n)
            return timed(n)

        e._timed_ticks = recording  # type: ignore[method-assign]
    return native, roce, batches


async def test_lockstepped_engines_stay_within_one_batch_of_each_other() -> None:
    """README: both sides show the same simulated moment, within one batch of ticks."""
    native, roce, batches = _lockstepped()
    assert native.fabric.dt_s == roce.fabric.dt_s
    tasks = [asyncio.create_task(e.run()) for e in (native, roce)]
    gaps = []
    await until(lambda: min(native.fabric.tick, roce.fabric.tick) > 50)
    for _ in range(200):
        await asyncio.sleep(0.002)  # a sampling interval, not a wait for a state
        gaps.append(abs(native.fabric.tick - roce.fabric.tick))
    for e in (native, roce):
        e.stop()
    await asyncio.gather(*tasks)
    assert max(gaps) <= max(batches), (max(gaps), max(batches))


async def test_lockstepped_engines_on_tick_grids_apart_still_run_whole_batches() -> None:
    """Two engines with the same tick whose boundaries are offset by half a tick (each
    changed its tick at another moment, as the adaptive tick does) cannot meet exactly:
    they must still run batches of many ticks, not one tick each in turns, and stay
    within a batch and a tick of each other."""
    native, roce, batches = _lockstepped()
    native.fabric.run_ticks(3)  # 1 µs ticks to 3 µs, then 2 µs ticks: 5, 7, 9 µs ...
    native.fabric.apply(SetTick(dt_s=2e-6))
    roce.fabric.run_ticks(4)  # 4 µs, then 6, 8, 10 µs ...
    roce.fabric.apply(SetTick(dt_s=2e-6))
    tasks = [asyncio.create_task(e.run()) for e in (native, roce)]
    gaps = []
    while len(batches) < 200:
        await asyncio.sleep(0.002)  # a sampling interval, not a wait for a state
        gaps.append(abs(native.fabric.sim_time_s - roce.fabric.sim_time_s))
    for e in (native, roce):
        e.stop()
    await asyncio.gather(*tasks)
    assert statistics.median(batches) > 1, batches[:50]  # (one tick each, in turns, before)
    assert max(gaps) <= (max(batches) + 1) * 2e-6 + 1e-12, (max(gaps), max(batches))


async def test_a_fault_sent_to_both_lockstepped_engines_is_injected_at_the_same_time() -> None:
    """README: a fault injected in the compare view reaches both fabrics at the same
    simulated time. Sent as the compare view sends it (``Engine.submit_together``)."""
    native, roce, _ = _lockstepped()

    def both_past(tick: int) -> Callable[[], bool]:
        return lambda: min(native.fabric.tick, roce.fabric.tick) > tick

    tasks = [asyncio.create_task(e.run()) for e in (native, roce)]
    await until(both_past(50))
    faults = (("link_down", "leaf00->spine00"), ("link_down", "leaf00->spine01"),
              ("link_degraded", "leaf00->spine00"))  # fmt: skip
    for i, (kind, target) in enumerate(faults):
        cmd = InjectFault(id=f"both-{i}", kind=kind, target=target)
        results = await Engine.submit_together((native, roce), cmd)
        assert all(r.ok for r in results), results
        await until(both_past(50 * (i + 2)))
    for e in (native, roce):
        e.stop()
    await asyncio.gather(*tasks)
    at = [[f.injected_at_s for f in e.fabric.snapshot().faults] for e in (native, roce)]
    assert len(at[0]) == 3 and at[0] == at[1], at


async def test_a_running_engine_refuses_a_second_loop_and_keeps_running() -> None:
    """Two loops would step one fabric from two threads at once (heap corruption seen when
    a harness started an engine the console had started already)."""
    engine = _engine(speed=1e-3)
    task = asyncio.create_task(engine.run())
    await until(lambda: engine.bus.latest is not None)
    with pytest.raises(RuntimeError, match="already running"):
        await engine.run()
    tick = engine.fabric.tick
    await until(lambda: engine.fabric.tick > tick)  # the first loop goes on
    engine.stop()
    await task
