"""Record and replay: a recorded run replays to the same snapshot digests and report."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.cli import replay as replay_cli
from console.cli import run as run_cli
from fabric_core.commands import (
    ClearFault,
    Command,
    InjectFault,
    Pause,
    Resume,
    SetParam,
    SetSpeed,
    StopWorkload,
)
from fabric_core.reports.record import (
    Recorder,
    RecordError,
    fabric_digest,
    load_record,
    replay,
    snapshot_digest,
)
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario


def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="fabtop")
    sub = parser.add_subparsers()
    run_cli.register(sub)
    replay_cli.register(sub)
    args = parser.parse_args(list(argv))
    return int(args.func(args))


def _record(name: str, steps: list[tuple[int, Command]], tail: int = 20) -> dict[str, Any]:
    """Run ``name``, applying each command through an engine after ``ticks`` more ticks."""
    scn = load_scenario(name)
    fabric = Fabric.from_scenario(scn)
    rec = Recorder.start(scn, fabric)
    engine = Engine(fabric, on_command=rec.on_command)
    for ticks, cmd in steps:
        fabric.run_ticks(ticks)
        engine.apply(cmd)
    fabric.run_ticks(tail)
    return json.loads(json.dumps(rec.to_dict()))  # as written to and read from a file


STEPS: list[tuple[int, Command]] = [
    (30, InjectFault(kind="link_down", target="leaf00->spine01", id="a1")),
    (0, SetParam(name="reroute_s", value=50e-6)),
    (10, Pause()),
    (0, SetSpeed(speed=0.5)),
    (0, Resume()),
    (60, InjectFault(kind="incast", target="gpu0006", duration_s=30e-6)),
    (20, StopWorkload(workload="probe")),
    (20, InjectFault(kind="link_degraded", target="leaf01->spine00", params={"ber": 1e-6})),
    (30, ClearFault(all=True)),
]


def test_a_recorded_engine_run_replays_exactly() -> None:
    record = _record("tiny", STEPS)
    assert [c["tick"] for c in record["commands"]] == [30, 30, 40, 40, 40, 100, 120, 140, 170]
    # a digest after every fabric command and one at the end
    assert len(record["digests"]) == 7
    result = replay(record)
    assert result.mismatches == []
    assert result.checked == 7
    assert result.fabric.tick == record["end_tick"] == 190
    assert result.ok


def test_replay_names_the_first_tick_that_diverges() -> None:
    record = _record("tiny", STEPS)
    record["commands"][5]["tick"] = 101  # the incast one tick later
    result = replay(record)
    assert not result.ok
    # the state recorded after the incast at tick 100 is not there at 100 any more
    assert result.mismatches[0][0] == 100
    assert all(t >= 100 for t, _, _ in result.mismatches)


def test_digest_ignores_the_wall_clock_but_not_the_state() -> None:
    fabric = Fabric.from_scenario(load_scenario("tiny"))
    fabric.run_ticks(5)
    a = fabric.snapshot(wall_time_s=1.0, target_speed=1.0, measured_speed=2.0, running=True)
    b = fabric.snapshot(wall_time_s=9.0, target_speed=0.0, measured_speed=0.1, running=False)
    assert snapshot_digest(a) == snapshot_digest(b)
    fabric.run_ticks(1)
    assert fabric_digest(fabric) != snapshot_digest(a)


async def test_the_engine_records_commands_at_the_tick_it_applied_them() -> None:
    scn = load_scenario("tiny")
    fabric = Fabric.from_scenario(scn)
    rec = Recorder.start(scn, fabric)
    engine = Engine(
        fabric, speed=0, publish_interval_s=0.01, max_batch_wall_s=0.01, on_command=rec.on_command
    )
    task = asyncio.create_task(engine.run())
    try:
        while fabric.tick < 20:
            await asyncio.sleep(0.005)
        ok = await engine.submit(InjectFault(kind="link_down", target="leaf01->spine00"))
        bad = await engine.submit(InjectFault(kind="link_down", target="leaf01->spine09"))
        while fabric.tick < 60:
            await asyncio.sleep(0.005)
        await engine.submit(ClearFault(all=True))
        await engine.submit(Pause())
    finally:
        engine.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert ok.ok and not bad.ok
    record = json.loads(json.dumps(rec.to_dict()))
    assert [c["command"]["command"] for c in record["commands"]] == ["inject", "clear", "pause"]
    result = replay(record)
    assert result.ok and result.checked == 3


_cmds = st.sampled_from(
    [
        InjectFault(kind="link_down", target="leaf00->spine00"),
        InjectFault(kind="switch_down", target="spine01", duration_s=40e-6),
        InjectFault(kind="link_flap", target="leaf01->spine01", params={"period_s": 30e-6}),
        InjectFault(kind="credit_loss", target="spine00->leaf01", params={"loss_fraction": 0.1}),
        InjectFault(kind="incast", target="gpu0002", duration_s=20e-6),
        InjectFault(kind="pfc_storm", target="gpu0005"),
        ClearFault(all=True),
        ClearFault(target="leaf00->spine00"),  # may fail (nothing there): not recorded
        SetParam(name="reroute_s", value=20e-6),
    ]
)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.integers(min_value=0, max_value=25), _cmds), max_size=6))
def test_random_command_sequences_replay_exactly(steps: list[tuple[int, Command]]) -> None:
    record = _record("tiny", steps, tail=10)
    result = replay(record)
    assert result.ok, result.mismatches


# ------------------------------------------------------------------ the CLI
def test_fabtop_run_record_then_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = tmp_path / "run.json"
    report = tmp_path / "report.json"
    assert _cli("run", "chaos-mix", "--duration", "300us", "--quiet", "--record", str(rec)) == 0
    data = load_record(rec)
    assert data["scenario"]["name"] == "chaos-mix" and data["end_tick"] == 300
    assert data["report"]["faults"]  # the scheduled faults are in the recorded report
    capsys.readouterr()
    assert _cli("replay", str(rec), "--quiet", "--json", str(report)) == 0
    out = capsys.readouterr().out
    assert "replay OK: 300 ticks" in out and "report match" in out
    replayed = json.loads(report.read_text())
    assert replayed["run"]["ticks"] == 300 and replayed["run"]["sim_seconds_per_wall_second"] > 0
    replayed.pop("run")
    assert replayed == data["report"]
    # without --quiet: the run's summary (as ``fabtop run`` prints it), then the verdict
    assert _cli("replay", str(rec)) == 0
    out = capsys.readouterr().out
    assert "simulated 300 µs in 300 ticks" in out and "simulated s per wall s" in out
    assert "replay OK: 300 ticks" in out


def test_fabtop_replay_reports_divergence_and_bad_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = tmp_path / "run.json"
    assert _cli("run", "tiny", "--duration", "50us", "--quiet", "--record", str(rec)) == 0
    data = json.loads(rec.read_text())
    data["scenario"]["seed"] = data["seed"] = 8  # another seed: another run
    rec.write_text(json.dumps(data))
    capsys.readouterr()
    assert _cli("replay", str(rec), "--quiet") == 1
    assert "replay DIVERGED at tick 50" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something-else"}')
    assert _cli("replay", str(bad)) == 2
    assert "not a fabtop record" in capsys.readouterr().err
    assert _cli("replay", str(tmp_path / "missing.json")) == 2
    assert "cannot read" in capsys.readouterr().err


def test_a_record_whose_commands_no_longer_apply_is_refused() -> None:
    record = _record("tiny", [(5, InjectFault(kind="link_down", target="leaf00->spine00"))])
    record["commands"][0]["command"]["target"] = "leaf00->spine07"
    with pytest.raises(
        RecordError, match="tick 5: recorded command no longer applies: unknown link"
    ):
        replay(record)
