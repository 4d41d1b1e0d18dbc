"""Hostile and broken record files: each is refused with one clear error naming what is
wrong and where, never a traceback, a hang or unbounded memory; and ``fabtop run
--record`` to a path that cannot be written loses no run."""

from __future__ import annotations

import copy
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from console.cli import main
from console.cli import run as run_cli
from fabric_core.commands import ClearFault, InjectFault
from fabric_core.reports import record as record_mod
from fabric_core.reports.record import (
    MAX_RECORD_BYTES,
    MAX_RECORD_DEPTH,
    MAX_REPLAY_TICKS,
    Recorder,
    RecordError,
    load_record,
    replay,
)
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario


@pytest.fixture(scope="module")
def good() -> dict[str, Any]:
    """A record of tiny with two commands (and their digests), as read from a file."""
    scn = load_scenario("tiny")
    fabric = Fabric.from_scenario(scn)
    rec = Recorder.start(scn, fabric)
    engine = Engine(fabric, on_command=rec.on_command)
    fabric.run_ticks(5)
    engine.apply(InjectFault(kind="link_down", target="leaf00->spine01", id="a"))
    fabric.run_ticks(5)
    engine.apply(ClearFault(all=True))
    fabric.run_ticks(5)
    out: dict[str, Any] = json.loads(json.dumps(rec.to_dict()))
    assert out["end_tick"] == 15 and [d["tick"] for d in out["digests"]] == [5, 10, 15]
    return out


def _replay_cli(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``fabtop replay PATH``: must refuse it (status 2) with one line on stderr."""
    capsys.readouterr()
    assert main(["replay", str(path), "--quiet"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert err.startswith(f"fabtop: {path}: ") and "\n" not in err, err
    return err


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "r.rec"
    path.write_text(json.dumps(data))
    return path


def test_the_good_record_replays(good: dict[str, Any], tmp_path: Path) -> None:
    """The control: the record the other tests break is accepted as it is."""
    assert load_record(_write(tmp_path, good)) == good
    assert replay(copy.deepcopy(good)).ok


# ------------------------------------------------------------------ what is read
def test_a_fifo_is_refused_without_waiting_for_a_writer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "pipe.rec"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            load_record(fifo)
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(timeout=10)
    if t.is_alive():  # release the reader blocked in open() before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        t.join(timeout=5)
        pytest.fail("load_record waited on a FIFO")
    assert isinstance(outcome[0], RecordError)
    assert "not a regular file (a FIFO)" in str(outcome[0])
    assert "not a regular file (a FIFO)" in _replay_cli(fifo, capsys)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_dev_zero_is_refused_unread(capsys: pytest.CaptureFixture[str]) -> None:
    assert "not a regular file (a device)" in _replay_cli(Path("/dev/zero"), capsys)


def test_a_directory_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "not a regular file (a directory)" in _replay_cli(tmp_path, capsys)


def test_a_file_over_the_limit_is_refused_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = tmp_path / "big.rec"
    with big.open("wb") as f:
        f.truncate(MAX_RECORD_BYTES + 1)  # sparse: nothing written
    err = _replay_cli(big, capsys)
    assert f"{MAX_RECORD_BYTES + 1:,} bytes" in err and "at most 16 MiB" in err


def test_a_limit_in_the_size_not_only_in_the_stat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file whose stat says less than it holds (one that grew, or /proc's) is still read
    only to the limit."""
    path = _write(tmp_path, {"format": "fabtop-record", "pad": "x" * 1000})
    monkeypatch.setattr(record_mod, "MAX_RECORD_BYTES", 100)
    real_fstat = os.fstat

    def small(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        return os.stat_result((st.st_mode, *st[1:6], 10, *st[7:]))  # st_size: 10

    monkeypatch.setattr(os, "fstat", small)
    with pytest.raises(RecordError, match="more than 100 bytes"):
        load_record(path)


def test_bytes_that_are_not_utf8_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "latin1.rec"
    path.write_bytes(b'{"format": "fabtop-record",\n "source": "caf\xe9"}')
    assert "not UTF-8 text (byte 0xe9 on line 2)" in _replay_cli(path, capsys)


def test_deep_nesting_is_refused_without_exhausting_the_stack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], good: dict[str, Any]
) -> None:
    path = tmp_path / "deep.rec"
    path.write_text("[" * 100_000)
    assert "nest too deep to parse" in _replay_cli(path, capsys)
    # deep enough for the parser, too deep for a record
    data = copy.deepcopy(good)
    data["report"] = {"x": json.loads("[" * 40 + "]" * 40)}
    err = _replay_cli(_write(tmp_path, data), capsys)
    assert f"report.x{'[0]' * (MAX_RECORD_DEPTH - 2)}: arrays or objects nested more" in err


def test_an_integer_of_more_digits_than_python_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "digits.rec"
    path.write_text('{"format": "fabtop-record", "end_tick": ' + "9" * 5000 + "}")
    assert "not a record's JSON" in _replay_cli(path, capsys)


# ------------------------------------------------------------------ its fields
def _set(data: dict[str, Any], where: str, value: Any) -> None:
    """``data`` with the field at ``where`` (``digests.0.tick``) set, or deleted when
    ``value`` is ``DELETE``."""
    *path, last = where.split(".")
    target: Any = data
    for p in path:
        target = target[int(p)] if isinstance(target, list) else target[p]
    key: Any = int(last) if isinstance(target, list) else last
    if value is DELETE:
        del target[key]
    else:
        target[key] = value


DELETE = object()

BROKEN: list[tuple[str, Any, str]] = [
    ("version", True, "record version true; this fabtop reads 1"),
    ("scenario", DELETE, "scenario: missing, not an object"),
    ("commands", {}, "commands: {}, not an array"),
    ("digests", [5], 'digests[0]: 5, not an object {"tick", "digest"}'),
    ("digests", [{}], "digests[0].tick: missing, not a tick (a whole number)"),
    ("digests", [{"tick": "x"}], 'digests[0].tick: "x", not a tick (a whole number)'),
    ("digests.0.tick", 5.0, "digests[0].tick: 5.0, not a tick"),
    ("digests.1.digest", "zz", 'digests[1].digest: "zz", not a snapshot digest (32 hex digits)'),
    ("digests.1.digest", DELETE, "digests[1].digest: missing, not a snapshot digest"),
    ("digests.0.tick", 16, "digests[0].tick: 16, after the record's end_tick (15)"),
    ("commands.0", "pause", 'commands[0]: "pause", not an object {"tick", "command"}'),
    ("commands.0.tick", True, "commands[0].tick: true, not a tick (a whole number)"),
    ("commands.1.tick", -1, "commands[1].tick: -1, before the run's first tick (0)"),
    ("commands.1.command", DELETE, "commands[1].command: missing, not an object"),
    ("commands.0.command.command", "explode", "commands[0].command: "),
    ("end_tick", True, "end_tick: true, not a tick (a whole number)"),
    ("end_tick", -5, "end_tick: -5, before the run's first tick (0)"),
    ("end_tick", "15", 'end_tick: "15", not a tick'),
    ("end_tick", DELETE, "end_tick: missing, not a tick"),
    (
        "end_tick",
        10**12,
        "end_tick: 1000000000000, but the record has its last digest at tick 15; a whole "
        "run's record ends with the digest of the state at its end_tick",
    ),
    ("digests", [], "end_tick: 15, but the record has no digest"),
    ("planes", {"batch_ticks": 0}, "planes.batch_ticks: 0, not a whole number >= 1"),
    ("planes", {}, "planes.batch_ticks: missing, not a whole number >= 1"),
    ("ended", None, "ended: null, not a string"),
    ("report", [], "report: [], not an object"),
    # (session 44: a record without its report replayed "OK", having checked less; the
    # recorder always writes it, null when it has none)
    ("report", DELETE, "report: missing, not an object (or null: a run recorded without"),
    ("source", 5, "source: 5, not a string"),
    # (a record with its source or its seed deleted replayed "OK": the source places the
    # topology file the replay reads, and the seed is which run the record claims)
    ("source", DELETE, "source: missing, not a string"),
    ("seed", DELETE, "seed: missing, not the recorded scenario's seed 7"),
    ("scenario.seed", DELETE, "scenario.seed: missing; a record's scenario holds the seed"),
    # (the sha256 of each file the scenario read, which a replay compares before it runs)
    ("inputs", {}, "inputs: {}, not an array"),
    ("inputs", None, "inputs: null, not an array"),
    ("inputs.0", "tiny.toml", 'inputs[0]: "tiny.toml", not an object {"role", "path", "sha256"}'),
    ("inputs.0.role", DELETE, "inputs[0].role: missing, not a string"),
    ("inputs.0.path", 5, "inputs[0].path: 5, not a string"),
    ("inputs.0.sha256", "zz", 'inputs[0].sha256: "zz", not a sha256 (64 hex digits)'),
    ("inputs.0.sha256", DELETE, "inputs[0].sha256: missing, not a sha256"),
    (
        "inputs",
        [{"role": "topology", "path": "x.topo", "sha256": "0" * 64}] * 2,
        'inputs[1].role: "topology", already an input\'s role',
    ),
    ("report", {"t": float("nan")}, "report.t: NaN, not a finite number"),
    ("scenario.seed", float("inf"), "scenario.seed: Infinity, not a finite number"),
    # (session 42: the top's seed went unread, so any value there replayed "OK")
    ("seed", "x", 'seed: "x", not the recorded scenario\'s seed'),
    ("seed", [1, 2], "seed: [1, 2], not the recorded scenario's seed"),
    # (session 43: these named the bundled tiny.toml, which is sound, not the record)
    (
        "scenario.topology.leaves",
        -2,
        "the recorded scenario does not load: scenario.topology.leaves: expected a whole "
        "number >= 1, got -2 (the record says it came from ",
    ),
    (
        "scenario.fault",
        [{"at": "1us", "kind": "link_down", "target": "nowhere"}],
        "scenario.fault[0]: unknown link 'nowhere'",
    ),
    # (it read "scenario.unknown key(s) bogus")
    ("scenario.bogus", 1, "does not load: scenario: unknown key(s) bogus; accepted: "),
    # (session 44: a command without its digest, or a digest without its command, replayed
    # as "DIVERGED ... recorded digest -", blaming the run for a broken record)
    (
        "digests.0",
        DELETE,
        "commands[0]: at tick 5, but the record has no digest at tick 5; a record has a "
        "digest after each command that changes the fabric (all but pause, resume and speed)",
    ),
    (
        "commands.1.tick",
        5,
        "commands[1]: at tick 5, but the record has 1 digest at tick 5 for 2 commands that "
        "change the fabric there",
    ),
    (
        "digests.0.tick",
        3,
        "digests[0]: at tick 3, but the record has no command that changes the fabric at "
        "tick 3, so no digest there, not 1",
    ),
    (
        "commands.1.tick",
        15,
        "digests[1]: at tick 10, but the record has no command that changes the fabric at "
        "tick 10, so no digest there, not 1",
    ),
]


@pytest.mark.parametrize(("where", "value", "message"), BROKEN)
def test_a_malformed_field_is_named(
    where: str,
    value: Any,
    message: str,
    good: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = copy.deepcopy(good)
    _set(data, where, value)
    _assert_refused(data, message, tmp_path, capsys)


def _assert_refused(
    data: dict[str, Any], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``fabtop replay`` refuses ``data`` with ``message``, and so does replay() in memory."""
    assert message in _replay_cli(_write(tmp_path, data), capsys)
    # the same from a record in memory, handed to replay() unread
    with pytest.raises(RecordError) as caught:
        replay(data)
    assert message in str(caught.value)


def _insert(entries: list[dict[str, Any]], entry: dict[str, Any]) -> None:
    """Put ``entry`` after the entries of its tick and those before, as the recorder does."""
    entries.insert(sum(e["tick"] <= entry["tick"] for e in entries), entry)


LINK_DOWN = {"command": "inject", "kind": "link_down", "target": "leaf00->spine00"}


def test_a_command_added_without_its_digest_is_refused(
    good: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = copy.deepcopy(good)
    _insert(data["commands"], {"tick": 12, "command": LINK_DOWN})
    _assert_refused(
        data, "commands[2]: at tick 12, but the record has no digest at tick 12;", tmp_path, capsys
    )
    # at the end tick, one digest there is the end's or the command's: one is missing
    data = copy.deepcopy(good)
    _insert(data["commands"], {"tick": 15, "command": LINK_DOWN})
    _assert_refused(
        data,
        "end_tick: 15, but the record has 1 digest at tick 15 for 1 command that changes the "
        "fabric there and none for the end",
        tmp_path,
        capsys,
    )


def test_pacing_commands_have_no_digest_after_them(
    good: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pause, resume and speed do not change the fabric: the recorder takes no digest after
    them, so a record has none there (and one there is refused)."""
    data = copy.deepcopy(good)
    for command in ({"command": "pause"}, {"command": "speed", "speed": 0.5}):
        _insert(data["commands"], {"tick": 7, "command": command})
    assert load_record(_write(tmp_path, data)) == data
    assert replay(copy.deepcopy(data)).ok
    _insert(data["digests"], {"tick": 7, "digest": good["digests"][0]["digest"]})
    _assert_refused(
        data,
        "digests[1]: at tick 7, but the record has no command that changes the fabric at "
        "tick 7, so no digest there, not 1",
        tmp_path,
        capsys,
    )


def test_end_tick_moved_with_the_final_digest_is_bounded(
    good: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record consistent with itself but claiming more ticks than any replay runs."""
    data = copy.deepcopy(good)
    data["end_tick"] = data["digests"][-1]["tick"] = MAX_REPLAY_TICKS + 1
    err = _replay_cli(_write(tmp_path, data), capsys)
    assert f"end_tick: {MAX_REPLAY_TICKS + 1:,}; a replay runs at most" in err


def test_a_run_that_ended_early_may_end_after_its_last_digest(
    good: dict[str, Any], tmp_path: Path
) -> None:
    """A run whose plane was lost has no final digest: it ran at least to its last command
    (so its end_tick is not tied to a digest), and no further back than that."""
    data = copy.deepcopy(good)
    data["ended"] = "plane 1's engine was lost"
    data["digests"].pop()  # (its recorder takes no final digest)
    data["end_tick"] = 40
    assert load_record(_write(tmp_path, data))["end_tick"] == 40
    data["end_tick"] = 9
    with pytest.raises(RecordError, match=r"commands\[1\].tick: 10, after the record's end_tick"):
        load_record(_write(tmp_path, data))


def test_a_non_finite_number_is_named_when_recording(tmp_path: Path) -> None:
    scn = load_scenario("tiny")
    rec = Recorder.start(scn, Fabric.from_scenario(scn))
    path = tmp_path / "r.rec"
    with pytest.raises(RecordError, match=r"non-finite number \(nan\) at report\.totals\.x"):
        rec.save(path, {"totals": {"x": float("nan")}})
    assert not path.exists()  # refused before the file was opened


# ------------------------------------------------------------------ fabtop run --record
def test_run_record_to_a_missing_directory_is_refused_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_run(*_: object, **__: object) -> None:
        raise AssertionError("the run started")

    monkeypatch.setattr(run_cli, "build_fabric", no_run)
    missing = tmp_path / "no" / "x.rec"
    argv = ["run", "tiny", "--duration", "10us", "--quiet", "--record"]
    assert main([*argv, str(missing)]) == 2
    assert (
        capsys.readouterr().err
        == f"fabtop: --record {missing}: no such directory {missing.parent}\n"
    )
    assert main([*argv, str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"fabtop: --record {tmp_path}: is a directory\n"


@pytest.mark.skipif(
    sys.platform == "win32" or os.geteuid() == 0, reason="root writes in any directory"
)
def test_run_record_into_a_read_only_directory_is_refused_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(run_cli, "build_fabric", lambda *_: pytest.fail("the run started"))
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        assert main(["run", "tiny", "--duration", "10us", "--record", str(ro / "x.rec")]) == 2
    finally:
        ro.chmod(stat.S_IRWXU)
    assert "cannot create a file in" in capsys.readouterr().err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_a_record_that_fails_to_write_loses_not_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """/dev/full passes every check and then fails the write (ENOSPC): the summary and
    the JSON report are still there, the error is one line, the status 1."""
    report = tmp_path / "report.json"
    argv = ["run", "tiny", "--duration", "20us", "--json", str(report), "--record", "/dev/full"]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert "scenario tiny" in captured.out  # the summary
    assert json.loads(report.read_text())["run"]["ticks"] == 20
    assert captured.err == "fabtop: cannot write the record /dev/full: No space left on device\n"


def test_replay_json_to_a_missing_directory_is_refused_before_the_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from console.cli import replay as replay_cli

    monkeypatch.setattr(replay_cli, "load_record", lambda *_: pytest.fail("replayed"))
    out = tmp_path / "no" / "r.json"
    assert main(["replay", str(tmp_path / "r.rec"), "--json", str(out)]) == 2
    assert capsys.readouterr().err == f"fabtop: --json {out}: no such directory {out.parent}\n"


def test_run_json_to_a_missing_directory_is_refused_before_the_run(tmp_path: Path) -> None:
    """As for --record: the report of a long run is not lost to a typo in its path."""
    result = subprocess.run(
        [sys.executable, "-m", "console.cli", "run", "tiny", "--duration", "10us", "--json",
         str(tmp_path / "no-such-dir" / "r.json")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert f"--json {tmp_path / 'no-such-dir' / 'r.json'}: no such directory" in result.stderr
    assert "delivered" not in result.stdout  # no run


def test_a_record_that_fails_to_write_leaves_the_one_before_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written beside and renamed over: a full disk mid-write leaves the last record as it
    was, and no temporary file, rather than a truncated record."""
    scn = load_scenario("tiny")
    fabric = Fabric.from_scenario(scn)
    fabric.run_ticks(5)
    path = tmp_path / "run.rec"
    Recorder.start(scn, fabric).save(path)
    before = path.read_bytes()
    real_write = Path.write_text

    def half_then_full(self: Path, text: str, *args: Any, **kwargs: Any) -> int:
        real_write(self, text[: len(text) // 2], *args, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", half_then_full)
    fabric.run_ticks(5)
    with pytest.raises(OSError, match="No space left"):
        Recorder.start(scn, fabric).save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.rec"]
    load_record(path)  # still a whole record
