"""Issue 20, defect 2: a tiny speed must not freeze the engine; its health is reported."""

from __future__ import annotations

import asyncio

import pytest

from fabric_core.commands import Pause, SetSpeed, SetTick
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from tests.helpers import until


def _engine(**kwargs: object) -> Engine:
    return Engine(Fabric.from_scenario(load_scenario("tiny")), **kwargs)  # type: ignore[arg-type]


async def test_a_command_cuts_a_long_pacing_sleep_short() -> None:
    # 10 us ticks at 1e-6: each tick is followed by a 10 s pacing sleep
    engine = _engine(speed=1e-3)
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.fabric.tick > 5, timeout=300)  # compiled, stepping
        assert (await engine.submit(SetTick(dt_s=1e-5))).ok
        assert (await engine.submit(SetSpeed(speed=1e-6))).ok
        await asyncio.sleep(0.5)  # let it step its tick and go to sleep (10 s)
        assert engine.health.pacing == "ok"
        # the corrective command is applied long before the 10 s sleep would have ended
        result = await asyncio.wait_for(engine.submit(SetSpeed(speed=1e-3)), timeout=5)
        assert result.ok and engine.speed == 1e-3
        sim = engine.fabric.sim_time_s
        await until(lambda: engine.fabric.sim_time_s > sim + 1e-4, timeout=5)  # time runs again
    finally:
        engine.stop()
        await task


async def test_pause_goes_ahead_of_commands_queued_before_it() -> None:
    engine = _engine(speed=0.0)
    order: list[str] = []
    engine._on_command = lambda _tick, cmd: order.append(type(cmd).__name__)
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.bus.latest is not None)
        # queued in one go: they are applied at the same tick boundary
        speeds = [asyncio.ensure_future(engine.submit(SetSpeed(speed=0.0))) for _ in range(5)]
        pause = asyncio.ensure_future(engine.submit(Pause()))
        await asyncio.gather(*speeds, pause)
        assert order[0] == "Pause" and order.count("SetSpeed") == 5
        assert engine.health.pacing == "paused"
    finally:
        engine.stop()
        await task


async def test_an_engine_that_cannot_keep_up_says_behind() -> None:
    engine = _engine(speed=1e3)  # far more than any fabric steps on this machine
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.health.pacing == "behind")
        assert engine.health.busy_fraction >= 0.5
    finally:
        engine.stop()
        await task


async def test_an_engine_held_up_by_its_event_loop_says_starved() -> None:
    engine = _engine(speed=1.0)
    engine.max_batch_wall_s = 0.002  # short batches: the loop's stalls dominate
    task = asyncio.create_task(engine.run())

    async def hog() -> None:  # another task that blocks the event loop most of the time
        import time

        while True:
            time.sleep(0.05)
            await asyncio.sleep(0)

    hogger = asyncio.create_task(hog())
    try:
        await until(lambda: engine.health.pacing == "starved")
        assert engine.health.busy_fraction < 0.5
    finally:
        hogger.cancel()
        engine.stop()
        await task


@pytest.mark.parametrize("speed", [-1.0, 1e-7, 1e-320, 1e4])
def test_engine_refuses_a_speed_out_of_range(speed: float) -> None:
    with pytest.raises(ValueError, match="speed must be 0"):
        _engine(speed=speed)


async def test_health_is_flat_out_at_speed_zero() -> None:
    engine = _engine(speed=0.0)
    assert engine.health.pacing == "flat-out"
    assert engine.health.queued_commands == 0


async def test_a_slower_speed_steps_on_at_once_and_measures_afresh() -> None:
    """The batch running when the speed fell, sized for the speed before, was paced at the
    new one: at 1e-5 after 1e-3 the engine slept some 10 s (at 1e-6, for hours) with the
    old speed still shown as measured; and a paused engine measured the speed before."""
    engine = _engine(speed=1e-3)
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.fabric.tick > 200, timeout=300)  # compiled, stepping
        assert (await engine.submit(SetSpeed(speed=1e-5))).ok
        assert engine.snapshot().measured_speed == 0.0  # nothing measured at 1e-5 yet
        tick = engine.fabric.tick
        # 1 us ticks at 1e-5: one every 0.1 s; a bound against the 10 s sleep, not a timing
        await until(lambda: engine.fabric.tick >= tick + 5, "ticks at the new speed", timeout=8)
        await until(lambda: engine.snapshot().measured_speed > 0, "a measured speed", timeout=8)
        assert engine.snapshot().measured_speed < 1e-4  # the new speed's, not the old one's
        assert (await engine.submit(Pause())).ok
        assert engine.snapshot().measured_speed == 0.0
    finally:
        engine.stop()
        await task
