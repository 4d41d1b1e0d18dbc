"""The tick adapts to the speed: longer when the engine falls behind, back when it waits;
results do not change, and a recording of an adapted run replays exactly."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from fabric_core.commands import CommandError, SetSpeed, SetTick, parse_command
from fabric_core.reports.record import Recorder, replay
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from tests.helpers import credit_loop_rate, profile, scripted_fabric, small_leaf_spine, until
from tests.test_core_timing import fixed_latency, payload_rate


def test_changing_the_tick_mid_flow_keeps_completion_time_and_clock() -> None:
    prof = profile(buffer_per_vl_bytes=8 * 1024)
    topo = small_leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=1)  # 4 hops
    size = 16 * 1024**2
    fabric, (wl,) = scripted_fabric(topo, prof, [("gpu0000", "gpu0001", size, 0.0)], dt_s=1e-6)
    fabric.run_ticks(50)  # 50 µs at 1 µs ticks
    assert fabric.apply(SetTick(dt_s=20e-6)) == {"dt_s": 20e-6}
    fabric.run_ticks(10)  # 200 µs at 20 µs ticks
    fabric.apply(SetTick(dt_s=100e-9))
    fabric.run_ticks(7)
    assert fabric.sim_time_s == pytest.approx(50e-6 + 200e-6 + 0.7e-6, rel=1e-12)
    fabric.apply(SetTick(dt_s=5e-6))
    while not wl.finished:
        fabric.step()
    _, start, finish = wl.finished[0]
    hops = ["gpu0000->leaf00", "leaf00->spine00", "spine00->leaf01", "leaf01->gpu0001"]
    # 8 KiB lanes over 30 m cables: the credit loops, not the link, set the rate
    rate = min(payload_rate(prof), credit_loop_rate(fabric, hops))
    assert rate < 0.6 * payload_rate(prof)
    expected = size / rate + fixed_latency(fabric, hops)
    assert finish - start == pytest.approx(expected, rel=0.01)
    assert fabric.delivered_bytes == pytest.approx(size, rel=1e-12)


def test_tick_commands_are_checked() -> None:
    with pytest.raises(CommandError, match=r"dt_s must be a number >= 1e-09"):
        parse_command('{"command": "tick", "dt_s": 0}')
    with pytest.raises(CommandError, match=r"dt_s must be a number <= 0\.01"):
        parse_command('{"command": "tick", "dt_s": 1}')
    fabric = Fabric.from_scenario(load_scenario("tiny"))
    with pytest.raises(CommandError, match="tick must be between"):
        fabric.set_dt(0.5)
    assert fabric.dt_s == 1e-6  # unchanged
    assert parse_command('{"command": "tick", "dt_s": 2e-6}') == SetTick(dt_s=2e-6)


def _engine(speed: float, **kw: object) -> Engine:
    fabric = Fabric.from_scenario(load_scenario("tiny"))  # 1 µs ticks
    return Engine(fabric, speed=speed, publish_interval_s=0.01, max_batch_wall_s=0.02, **kw)  # type: ignore[arg-type]


async def test_the_engine_lengthens_the_tick_to_keep_up_and_shortens_it_again() -> None:
    # 500 ms of simulated time per wall second is 500,000 ticks a second at 1 µs: too many
    # (50 ms was too many once; ``tiny`` now keeps that pace at a 2 µs tick)
    engine = _engine(speed=0.5, max_tick_s=32e-6)
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.fabric.dt_s >= 16e-6)
        await until(lambda: engine.bus.latest is not None and engine.bus.latest.dt_s >= 16e-6)
        assert engine.fabric.dt_s <= 32e-6  # never past the most it may use
        # a slow pace leaves the engine waiting: the tick comes back to where it started
        assert (await engine.submit(SetSpeed(speed=2e-3))).ok
        await until(lambda: engine.fabric.dt_s == 1e-6, timeout=30.0)
    finally:
        engine.stop()
        await task


async def test_without_a_max_tick_the_tick_stays() -> None:
    engine = _engine(speed=0.5)
    task = asyncio.create_task(engine.run())
    # the state in which an engine with a max tick lengthens it: behind its pace, here for
    # thousands of ticks (with a max tick, the tick doubles within the first ten)
    await until(lambda: engine.health.pacing in ("behind", "starved") and engine.fabric.tick > 3000)
    engine.stop()
    await task
    assert engine.fabric.dt_s == 1e-6


async def test_an_operator_tick_is_the_floor_the_engine_adapts_down_to() -> None:
    engine = _engine(speed=1e-4, max_tick_s=1e-4)
    task = asyncio.create_task(engine.run())
    try:
        assert (await engine.submit(SetTick(dt_s=8e-6))).ok
        await asyncio.sleep(1.0)  # slow pace: the engine waits, but keeps the operator's tick
        assert engine.fabric.dt_s == 8e-6
    finally:
        engine.stop()
        await task


async def test_an_adapted_run_replays_exactly() -> None:
    scn = load_scenario("tiny")
    fabric = Fabric.from_scenario(scn)
    rec = Recorder.start(scn, fabric)
    engine = Engine(
        fabric,
        speed=0.5,
        publish_interval_s=0.01,
        max_batch_wall_s=0.02,
        on_command=rec.on_command,
        max_tick_s=32e-6,
    )
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: fabric.dt_s >= 8e-6)
        start = fabric.tick
        await until(lambda: fabric.tick > start + 20)
    finally:
        engine.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    record = json.loads(json.dumps(rec.to_dict()))
    ticks = [c for c in record["commands"] if c["command"]["command"] == "tick"]
    assert len(ticks) >= 3  # 1 -> 2 -> 4 -> 8 µs at least
    result = replay(record)
    assert result.mismatches == [] and result.ok
    assert result.fabric.sim_time_s == pytest.approx(fabric.sim_time_s, rel=1e-12)


def rounds_started(fabric: Fabric, name: str) -> float:
    (wl,) = [w for w in fabric.snapshot().workloads.values() if w.name == name]
    return wl.kpis["rounds_started"]


def test_a_tick_longer_than_a_workloads_period_says_it_loses_rounds() -> None:
    """tiny's all-to-all starts a round every 40 µs, at most one a tick: at a 100 µs tick
    it ran 2,240 rounds' messages of 5,600 in 4 ms, and nothing said so."""
    short = Fabric.from_scenario(load_scenario("tiny"))
    assert short.tick_notes() == []
    assert not [e for e in short.snapshot().events if e.kind == "tick_too_long"]
    long = Fabric.from_scenario(load_scenario("tiny", dt=100e-6))
    (note,) = long.tick_notes()
    assert note == (
        "workload 'moe' starts a round every 40 µs, but the tick is 100 µs: at most one a "
        "tick, so some are lost, not bunched"
    )
    (event,) = [e for e in long.snapshot().events if e.kind == "tick_too_long"]
    assert (event.severity, event.target, event.message) == ("warning", "moe", note)
    short.run_ticks(400)  # 400 µs
    long.run_ticks(4)
    assert rounds_started(long, "moe") < rounds_started(short, "moe") / 2  # (what it says)
    # a tick set by a command says so too, and a short one again says nothing
    short.apply(SetTick(dt_s=50e-6))
    assert [e.kind for e in short.snapshot().events].count("tick_too_long") == 1
    short.apply(SetTick(dt_s=1e-6))
    assert short.tick_notes() == []
