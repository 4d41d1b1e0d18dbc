"""Record and replay: a recorded run replays to the same snapshot digests and report."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import io
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
    SetTick,
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
from fabric_core.reports.run import report_of
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import bundled_dir, load_scenario


def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="fabtop")
    sub = parser.add_subparsers()
    run_cli.register(sub)
    replay_cli.register(sub)
    args = parser.parse_args(list(argv))
    return int(args.func(args))


def _record(
    name: str, steps: list[tuple[int, Command]], tail: int = 20, with_report: bool = False
) -> dict[str, Any]:
    """Run ``name``, applying each command through an engine after ``ticks`` more ticks
    (``with_report``: and record the run's report, as ``fabtop run`` does)."""
    scn = load_scenario(name)
    fabric = Fabric.from_scenario(scn)
    rec = Recorder.start(scn, fabric)
    engine = Engine(fabric, on_command=rec.on_command)
    for ticks, cmd in steps:
        fabric.run_ticks(ticks)
        engine.apply(cmd)
    fabric.run_ticks(tail)
    report = report_of(fabric, fabric.tick, fabric.hop_updates, 0.0) if with_report else None
    out: dict[str, Any] = json.loads(json.dumps(rec.to_dict(report)))  # as a file reads back
    return out


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
    # the incast at tick 100 on another GPU (moved to another tick, the command would be
    # without its digest: a malformed record, tests/test_record_hostile.py)
    record["commands"][5]["command"]["target"] = "gpu0005"
    result = replay(record)
    assert not result.ok
    # the state recorded after the incast at tick 100 is not there at 100 any more
    assert result.mismatches[0][0] == 100
    assert all(t >= 100 for t, _, _ in result.mismatches)


def test_every_kind_of_command_the_engine_records_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pacing commands (no digest after them) beside the others, at one tick and at the end
    tick, with a tick change (a command the engine makes itself): as recorded, the record
    passes every check and replays, digests and report."""
    steps: list[tuple[int, Command]] = [
        (5, Pause()),
        (0, InjectFault(kind="link_down", target="leaf00->spine01")),
        (0, SetSpeed(speed=0.5)),
        (0, SetTick(dt_s=2e-6)),
        (0, Resume()),
        (10, ClearFault(all=True)),
        (0, Pause()),
    ]
    record = _record("tiny", steps, tail=0, with_report=True)
    assert [d["tick"] for d in record["digests"]] == [5, 5, 15, 15]  # (the last: the end's)
    path = tmp_path / "engine.rec"
    path.write_text(json.dumps(record))
    capsys.readouterr()
    assert _cli("replay", str(path), "--quiet") == 0
    assert capsys.readouterr().out == (
        "replay OK: 15 ticks, 7 commands (3 of which change the fabric); 4 state digests "
        "(one after each command that changes the fabric, one at the end) and the report "
        "match\n"
    )


@pytest.fixture(scope="module")
def run_record(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``fabtop run tiny --duration 50us --record``: no commands, a digest, a report."""
    path = tmp_path_factory.mktemp("run") / "run.rec"
    assert _cli("run", "tiny", "--duration", "50us", "--quiet", "--record", str(path)) == 0
    return load_record(path)


def _replay_quiet(
    record: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """``fabtop replay FILE --quiet`` of ``record``: (status, stdout, stderr)."""
    path = tmp_path / "r.rec"
    path.write_text(json.dumps(record))
    capsys.readouterr()
    status = _cli("replay", str(path), "--quiet")
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_replay_names_the_report_fields_that_differ(
    run_record: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = json.loads(json.dumps(run_record))
    delivered = record["report"]["totals"]["delivered_bytes"]
    record["report"]["totals"]["delivered_bytes"] = 1.0
    record["report"]["seed"] = 9
    assert _replay_quiet(record, tmp_path, capsys) == (
        1,
        "",
        "replay DIVERGED: the digests match but the report differs in 2 fields:\n"
        "  report.seed: recorded 9, replayed 7\n"
        f"  report.totals.delivered_bytes: recorded 1.0, replayed {json.dumps(delivered)}\n",
    )


def test_replay_names_five_report_fields_and_counts_the_rest(
    run_record: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In the order of their paths, compared exactly as the whole is (327.0 is not 327),
    a field on one side only said "missing"; the wall-clock figures are never compared."""
    record = json.loads(json.dumps(run_record))
    report = record["report"]
    flows = report["totals"]["completed_flows"]
    report["totals"]["completed_flows"] = float(flows)
    del report["cluster"]
    report["added"] = [1]
    report["links"]["count"] = {"x": 1}
    report["faults"] = [*report["faults"], "late"]
    report["profile"] = "roce-400g"
    report["scenario"] = "other"
    result = replay(record)
    assert result.mismatches == [] and result.report_matches is False
    n_faults = len(run_record["report"]["faults"])
    assert [(d.path, d.recorded, d.replayed) for d in result.report_differences] == [
        ("report.added", "[1]", "missing"),
        ("report.cluster", "missing", '"tiny"'),
        (f"report.faults[{n_faults}]", '"late"', "missing"),
        ("report.links.count", '{"x": 1}', "24"),
        ("report.profile", '"roce-400g"', '"native-400g"'),
        ("report.scenario", '"other"', '"tiny"'),
        ("report.totals.completed_flows", f"{flows}.0", f"{flows}"),
    ]
    status, out, err = _replay_quiet(record, tmp_path, capsys)
    assert status == 1 and out == ""
    assert err.splitlines() == [
        "replay DIVERGED: the digests match but the report differs in 7 fields:",
        "  report.added: recorded [1], replayed missing",
        '  report.cluster: recorded missing, replayed "tiny"',
        f'  report.faults[{n_faults}]: recorded "late", replayed missing',
        '  report.links.count: recorded {"x": 1}, replayed 24',
        '  report.profile: recorded "roce-400g", replayed "native-400g"',
        "  and 2 more",
    ]


def test_the_ok_line_says_what_was_compared(
    run_record: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One command, not "1 commands"; and the digests it names are the ones compared: none
    after a pacing command, none at the end of a run that stopped early."""

    def ok_line(record: dict[str, Any]) -> str:
        status, out, err = _replay_quiet(record, tmp_path, capsys)
        assert (status, err) == (0, ""), err
        return out.rstrip("\n")

    ok = "replay OK: 50 ticks, "
    assert ok_line(run_record) == (
        f"{ok}no commands; 1 state digest (one at the end) and the report match"
    )
    paced = json.loads(json.dumps(run_record))
    paced["commands"] = [{"tick": 5, "command": {"command": "speed", "speed": 0.5}}]
    assert ok_line(paced) == (
        f"{ok}1 command (it does not change the fabric); 1 state digest (one at the end) "
        "and the report match"
    )
    no_report = "; the record has no report, so none was compared"
    fabric_only = _record("tiny", [(5, STEPS[0][1]), (5, ClearFault(all=True))], tail=0)
    assert ok_line(fabric_only) == (
        "replay OK: 10 ticks, 2 commands; 3 state digests (one after each command, one at "
        f"the end) match{no_report}"
    )
    mixed = _record("tiny", STEPS)
    assert ok_line(mixed) == (
        "replay OK: 190 ticks, 9 commands (6 of which change the fabric); 7 state digests "
        f"(one after each command that changes the fabric, one at the end) match{no_report}"
    )
    mixed["ended"] = "plane 1's engine was lost"  # (its recorder took no final digest)
    mixed["digests"].pop()
    assert ok_line(mixed) == (
        "replay OK: 190 ticks, 9 commands (6 of which change the fabric); 6 state digests "
        "(one after each command that changes the fabric, none at the end: the run stopped "
        f"early) match{no_report}"
    )


def test_a_record_from_before_a_report_section_was_added_replays_without_it(
    run_record: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every record made before the report gained `notable_events` (or `tick_notes`)
    failed its replay with "report.notable_events: recorded missing"; such a section is
    left out and said so. A section that was always there is still compared."""
    older = json.loads(json.dumps(run_record))
    del older["report"]["notable_events"], older["report"]["tick_notes"]
    del older["report"]["in_flight"]  # (session 48's)
    status, out, err = _replay_quiet(older, tmp_path, capsys)
    assert (status, err) == (0, ""), err
    assert out.rstrip("\n").endswith(
        "and the report match (the report's tick_notes, notable_events, in_flight excepted: "
        "this record, from an older fabtop, has none)"
    )
    del older["report"]["totals"]
    status, _, err = _replay_quiet(older, tmp_path, capsys)
    assert status == 1 and "report.totals: recorded missing, replayed {" in err


def test_a_record_from_before_the_faults_mitigation_and_clear_times_replays_without_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each fault of the report gained ``time_to_mitigate_seconds`` and
    ``cleared_at_seconds``: a record whose faults lack them (an older fabtop's) replays
    OK and says they were left out; one that has them compares them."""
    scenario = tmp_path / "down.toml"
    scenario.write_text(
        (bundled_dir() / "tiny.toml").read_text()
        + '\n[[fault]]\nat = "5us"\nkind = "link_down"\ntarget = "leaf00->spine01"\n'
        'duration = "5us"\n'
    )
    path = tmp_path / "down.rec"
    assert _cli("run", str(scenario), "--duration", "20us", "--quiet", "--record", str(path)) == 0
    record = load_record(path)
    (fault,) = record["report"]["faults"]
    assert fault["cleared_at_seconds"] == pytest.approx(10e-6)
    del fault["time_to_mitigate_seconds"], fault["cleared_at_seconds"]
    status, out, err = _replay_quiet(record, tmp_path, capsys)
    assert (status, err) == (0, ""), err
    assert out.rstrip("\n").endswith(
        "(the report's faults[].time_to_mitigate_seconds, faults[].cleared_at_seconds "
        "excepted: this record, from an older fabtop, has none)"
    )
    fault["cleared_at_seconds"] = 1.0  # (a record that has it: it is compared)
    status, _, err = _replay_quiet(record, tmp_path, capsys)
    assert status == 1 and "report.faults[0].cleared_at_seconds: recorded 1.0, replayed" in err


def test_a_record_from_before_the_faults_stages_replays_without_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each fault of the report gained ``stages`` (those its kind reaches on the fabric):
    a record whose faults lack it replays OK and says it was left out."""
    scenario = tmp_path / "down.toml"
    scenario.write_text(
        (bundled_dir() / "tiny.toml").read_text()
        + '\n[[fault]]\nat = "5us"\nkind = "link_down"\ntarget = "leaf00->spine01"\n'
    )
    path = tmp_path / "down.rec"
    assert _cli("run", str(scenario), "--duration", "20us", "--quiet", "--record", str(path)) == 0
    record = load_record(path)
    (fault,) = record["report"]["faults"]
    assert fault["stages"] == ["detected", "mitigated", "recovered"]
    del fault["stages"]
    status, out, err = _replay_quiet(record, tmp_path, capsys)
    assert (status, err) == (0, ""), err
    assert out.rstrip("\n").endswith(
        "(the report's faults[].stages excepted: this record, from an older fabtop, has none)"
    )


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


def test_a_record_of_a_scenario_with_its_own_topology_file_replays_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Recorded as `fabtop run lab.toml` beside its `lab.topo`, it replayed only from that
    directory: "scenario.topology.path: lab.topo: cannot read" anywhere else."""
    bundled = Path(__file__).resolve().parents[1] / "fabric_core" / "scenarios"
    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / "lab.topo").write_text((bundled / "express-lab.topo").read_text())
    scenario = (bundled / "express-lab.toml").read_text().replace("express-lab.topo", "lab.topo")
    (lab / "lab.toml").write_text(scenario)
    record = tmp_path / "rec.json"
    monkeypatch.chdir(lab)
    assert _cli("run", "lab.toml", "--duration", "5us", "--record", str(record), "--quiet") == 0
    monkeypatch.chdir(tmp_path.parent)
    assert _cli("replay", str(record), "--quiet") == 0, capsys.readouterr().err
    assert "replay OK" in capsys.readouterr().out


# ------------------------------------------------------------------ the files it read
BUNDLED = Path(__file__).resolve().parents[1] / "fabric_core" / "scenarios"
EXPRESS = "link leaf00 leaf01 bandwidth=800G delay=500ns"  # (express-lab.topo's express cable)


def _sha256(path: Path) -> str:
    """What ``sha256sum PATH`` prints first."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def lab(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Copies of express-lab.toml and its .topo, and ``fabtop run lab.toml --duration 20us
    --record``: (scenario, topology, record), the paths resolved as the record keeps them."""
    lab = tmp_path.resolve() / "lab"
    lab.mkdir()
    for name in ("express-lab.toml", "express-lab.topo"):
        (lab / name).write_text((BUNDLED / name).read_text())
    scenario, topology, record = lab / "express-lab.toml", lab / "express-lab.topo", lab / "r.rec"
    args = ("run", str(scenario), "--duration", "20us", "--quiet", "--record", str(record))
    assert _cli(*args) == 0
    return scenario, topology, record


def _replay_all(record: Path, *flags: str) -> tuple[int, str]:
    """``fabtop replay RECORD``: (status, stdout and stderr in the order they were written)."""
    both = io.StringIO()
    with contextlib.redirect_stdout(both), contextlib.redirect_stderr(both):
        status = _cli("replay", str(record), *flags)
    return status, both.getvalue()


def test_a_record_keeps_the_sha256_of_the_files_its_scenario_read(
    lab: tuple[Path, Path, Path],
) -> None:
    scenario, topology, record = lab
    assert load_record(record)["inputs"] == [
        {"role": "scenario", "path": str(scenario), "sha256": _sha256(scenario)},
        {"role": "topology", "path": str(topology), "sha256": _sha256(topology)},
    ]
    # a scenario with no topology file: its TOML alone (here the bundled one)
    assert [i["role"] for i in _record_of_run("tiny", record.parent)["inputs"]] == ["scenario"]


def _record_of_run(name: str, where: Path) -> dict[str, Any]:
    path = where / f"{name}.rec"
    assert _cli("run", name, "--duration", "5us", "--quiet", "--record", str(path)) == 0
    return load_record(path)


def test_a_topology_file_changed_since_the_record_is_named_before_the_replay_and_after(
    lab: tuple[Path, Path, Path],
) -> None:
    """It read "replay DIVERGED at tick 20: recorded digest ..., replayed ..." and no more:
    nothing said that the file the replay reads again was not the one recorded."""
    _, topology, record = lab
    was = _sha256(topology)
    topology.write_text(topology.read_text().replace(EXPRESS, EXPRESS.replace("800G", "100G")))
    now = _sha256(topology)
    changed = (
        f"the topology file {topology} changed since the record (sha256 {was[:12]} then, "
        f"{now[:12]} now)"
    )
    status, out = _replay_all(record)
    assert status == 1
    lines = out.splitlines()
    # first, before the run's summary: the file and what follows from it
    assert lines[0] == f"fabtop: {changed}; the replay reads it as it is now, so it may diverge"
    assert lines[1].startswith("scenario express-lab ")
    assert lines[-2].startswith("replay DIVERGED at tick 20: recorded digest ")
    assert lines[-1] == (
        f"  the divergence is expected: {changed}, and the replay read it as it is now"
    )
    # --quiet: the verdict alone, still naming the file
    status, out = _replay_all(record, "--quiet")
    assert status == 1 and out.splitlines()[1:] == lines[-1:]


def test_an_edit_that_does_not_change_the_run_replays_and_is_said(
    lab: tuple[Path, Path, Path],
) -> None:
    """A comment added to the topology file changes its sha256 but not the run: the
    replay is not refused, it matches, and says the file changed."""
    _, topology, record = lab
    was = _sha256(topology)
    topology.write_text(topology.read_text() + "# a comment\n")
    status, out = _replay_all(record, "--quiet")
    assert status == 0
    assert out == (
        "replay OK: 20 ticks, no commands; 1 state digest (one at the end) and the report "
        f"match; the topology file {topology} changed since the record (sha256 {was[:12]} "
        f"then, {_sha256(topology)[:12]} now), but not in a way that changes this run\n"
    )


def test_a_scenario_file_changed_since_the_record_is_said_not_to_reach_the_replay(
    lab: tuple[Path, Path, Path],
) -> None:
    """The record holds the scenario's table: an edit of the TOML changes nothing in the
    replay, and the replay says so rather than leave the user to expect otherwise."""
    scenario, _, record = lab
    was = _sha256(scenario)
    scenario.write_text(scenario.read_text().replace('"400Gb/s"', '"100Gb/s"'))
    changed = (
        f"the scenario file {scenario} changed since the record (sha256 {was[:12]} then, "
        f"{_sha256(scenario)[:12]} now)"
    )
    status, out = _replay_all(record)
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == (
        f"fabtop: {changed}; the replay runs the scenario table the record holds, so this "
        "does not affect it"
    )
    assert lines[-1].endswith(
        f"and the report match; {changed}, but a replay runs the table the record holds"
    )


def test_a_scenario_file_gone_since_the_record_is_not_needed(tmp_path: Path) -> None:
    """The replay runs the recorded table and reads no file of tiny's: nothing to say."""
    scenario = tmp_path / "tiny.toml"
    scenario.write_text((BUNDLED / "tiny.toml").read_text())
    record = tmp_path / "r.rec"
    assert _cli("run", str(scenario), "--duration", "5us", "--quiet", "--record", str(record)) == 0
    scenario.unlink()
    status, out = _replay_all(record, "--quiet")
    assert (status, out.count("\n")) == (0, 1) and out.endswith("and the report match\n")


def test_a_record_from_before_the_sha256s_were_kept_still_replays(
    lab: tuple[Path, Path, Path],
) -> None:
    """Backward compatible: a record without ``inputs`` replays as before; when it
    diverges, the verdict says whether the topology file changed could not be told."""
    _, topology, record = lab
    older = load_record(record)
    del older["inputs"]
    record.write_text(json.dumps(older))
    status, out = _replay_all(record, "--quiet")
    assert status == 0 and out.count("\n") == 1 and out.endswith("and the report match\n")
    topology.write_text(topology.read_text().replace(EXPRESS, EXPRESS.replace("800G", "100G")))
    status, out = _replay_all(record, "--quiet")
    assert status == 1
    assert out.splitlines()[-1] == (
        f"  (cannot tell whether {topology} changed since the record: this record, from an "
        "older fabtop, has no sha256 of the files its run read)"
    )
