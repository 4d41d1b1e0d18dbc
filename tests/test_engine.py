"""The engine: commands at tick boundaries, pause/resume/speed, latest-value bus."""

from __future__ import annotations

import asyncio

import pytest

from fabric_core.commands import InjectFault, Pause, Resume, SetSpeed, parse_command
from fabric_core.engine import Engine
from fabric_core.fabric import Fabric
from fabric_core.scenario import load_scenario
from tests.helpers import until


def _engine(speed: float = 0.0) -> Engine:
    return Engine(Fabric.from_scenario(load_scenario("tiny")), speed=speed, publish_interval_s=0.01)


async def test_pause_stops_simulated_time_and_resume_restarts_it() -> None:
    engine = _engine()
    task = asyncio.create_task(engine.run())
    await until(lambda: engine.bus.latest is not None and engine.bus.latest.tick > 5)
    assert (await engine.submit(Pause(id="p1"))).ok
    await asyncio.sleep(0.05)
    frozen = engine.fabric.tick
    await asyncio.sleep(0.2)
    assert engine.fabric.tick == frozen
    assert engine.bus.latest is not None and not engine.bus.latest.running
    assert (await engine.submit(Resume())).ok
    await until(lambda: engine.fabric.tick > frozen + 5)
    engine.stop()
    await task
    assert engine.bus.closed


async def test_speed_paces_simulated_time_against_the_wall_clock() -> None:
    engine = _engine(speed=1e-4)  # 100 µs of simulated time per wall second
    task = asyncio.create_task(engine.run())
    await asyncio.sleep(0.5)
    sim = engine.fabric.sim_time_s
    assert sim <= 1e-4  # never ahead of the pace (0.5 s wall -> at most 50 µs, plus a batch)
    result = await engine.submit(SetSpeed(speed=0))
    assert result.ok and result.detail == {"speed": 0}
    await asyncio.sleep(0.3)
    assert engine.fabric.sim_time_s > sim
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


async def test_lockstepped_engines_keep_the_same_simulated_time() -> None:
    native = Engine(Fabric.from_scenario(load_scenario("tiny")), speed=0, max_batch_wall_s=0.01)
    roce = Engine(
        Fabric.from_scenario(load_scenario("tiny", profile="roce-400g")),
        speed=0,
        max_batch_wall_s=0.01,
    )
    Engine.lockstep(native, roce)
    tasks = [asyncio.create_task(e.run()) for e in (native, roce)]
    gaps, batches = [], []
    for _ in range(20):
        await asyncio.sleep(0.05)
        gaps.append(abs(native.fabric.tick - roce.fabric.tick))
        batches.append(native._ticks_per_batch + roce._ticks_per_batch)
    for e in (native, roce):
        e.stop()
    await asyncio.gather(*tasks)
    assert min(native.fabric.tick, roce.fabric.tick) > 50  # both ran
    # never further apart than the two batches in flight (both step in worker threads)
    assert max(gaps) <= 2 * max(batches)
