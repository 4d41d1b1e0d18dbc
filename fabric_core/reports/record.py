"""Record and replay: a run is (scenario, seed, commands with their tick).

A ``Recorder`` keeps the scenario table as loaded (with the seed, tick and
profile actually used), every command applied with the tick it was applied at
(``Engine(on_command=recorder.on_command)``), snapshot digests: one after each
command that changes the fabric (all but the pacing ones: pause, resume, speed)
and one at the end, and the run's report (null when there is none: a run that
stopped early, or one recorded without it). ``replay`` rebuilds the fabric from the record, applies the
commands at the same ticks, runs to the same final tick and compares every
digest and the report, so a replay either reproduces the run exactly or says at
which tick it first diverged (or which fields of the report differ).

The record also keeps the sha256 of each file the scenario was loaded from (``inputs``:
the scenario's TOML and a topology file it names). A replay reads the topology file
again (the record holds the scenario's table, not the file's), so before it runs it
compares them (``check_inputs``): a file changed since the record explains a divergence.

A digest covers everything in a snapshot that the simulation determines (link
state, totals, histograms, KPIs, faults and their timelines, events, params),
and nothing that depends on the wall clock (wall time, speeds, running).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from fabric_core.commands import (
    Command,
    CommandError,
    Pause,
    Resume,
    SetSpeed,
    encode_command,
    parse_command,
)
from fabric_core.planes.coordinator import PlanedFabric
from fabric_core.planes.pool import InProcessPool
from fabric_core.reports.run import report_of
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import (
    MAX_SCENARIO_BYTES,
    Scenario,
    ScenarioError,
    parse_scenario,
)
from fabric_core.runtime.snapshot import Snapshot
from fabric_core.textfile import TextFileError, read_text, text_sha256, write_text

FORMAT = "fabtop-record"
VERSION = 1

#: The largest record file read. A ``fabtop run --record`` record is a few KB (the scenario
#: table, the final digest and the report) and each recorded command adds some 250 bytes
#: (itself and the digest after it), so this holds 60,000 commands; anything larger is
#: refused unread (parsing 16 MiB of JSON may already take 0.5 GB).
MAX_RECORD_BYTES = 16 << 20
#: The deepest arrays and objects nest in a record: the recorder writes 5 (a scenario's
#: named link classes, a report's workload KPIs); deeper would exhaust the stack later.
MAX_RECORD_DEPTH = 32
#: The longest replay: a billion ticks, some 8 hours of the smallest bundled fabric
#: (tiny runs about 37,000 ticks a wall second), far past any run one records.
MAX_REPLAY_TICKS = 10**9

_DIGEST = re.compile(r"[0-9a-f]{32}")  # snapshot_digest's: 16 bytes in hex
_SHA256 = re.compile(r"[0-9a-f]{64}")


class RecordError(ValueError):
    """A record file that cannot be read or replayed; the message says why."""


#: Commands that only pace the engine: the fabric never sees them, so the recorder takes
#: no digest after them (and a replay does not apply them).
_PACING = (Pause, Resume, SetSpeed)
_WHAT_HAS_A_DIGEST = (
    "a record has a digest after each command that changes the fabric (all but pause, "
    "resume and speed) and, for a whole run, one at its end_tick"
)


def _changes_fabric(command: Command) -> bool:
    return not isinstance(command, _PACING)


# ---------------------------------------------------------------------- digests
def snapshot_digest(snap: Snapshot) -> str:
    """A hex digest of what the simulation determines in a snapshot (see module doc)."""
    h = hashlib.blake2b(digest_size=16)

    def put(x: Any) -> None:
        h.update(repr(x).encode())
        h.update(b"\0")

    put((snap.cluster, snap.scenario, snap.profile, snap.flow_control, snap.seed))
    put((snap.tick, snap.sim_time_s, snap.dt_s))
    for f in fields(snap.link_state):
        a = np.ascontiguousarray(getattr(snap.link_state, f.name))
        put((f.name, a.dtype.str, a.shape))
        h.update(a.tobytes())
    put(snap.totals)
    for name in sorted(snap.latency):
        hv = snap.latency[name]
        put((name, hv.sum_s))
        h.update(np.ascontiguousarray(hv.counts).tobytes())
    for name in sorted(snap.workloads):
        w = snap.workloads[name]
        put((name, w.kind, sorted(w.kpis.items())))
        for hname in sorted(w.histograms):
            hv = w.histograms[hname]
            put((hname, hv.sum_s))
            h.update(np.ascontiguousarray(hv.counts).tobytes())
    put(tuple((f.id, f.kind, f.target, sorted(f.params.items()), f.state) for f in snap.faults))
    put(
        tuple(
            (f.injected_at_s, f.detected_at_s, f.mitigated_at_s, f.recovered_at_s, f.cleared_at_s)
            for f in snap.faults
        )
    )
    put(snap.events)
    put(sorted(snap.params.items()))
    return h.hexdigest()


def fabric_digest(fabric: Fabric | PlanedFabric) -> str:
    """Digest of the fabric's snapshot now."""
    return snapshot_digest(fabric.snapshot(running=False))


def comparable_report(report: dict[str, Any]) -> dict[str, Any]:
    """A run report without its wall-clock figures (what a replay must reproduce)."""
    out = dict(report)
    out.pop("run", None)
    return out


# ---------------------------------------------------------------------- recording
@dataclass
class Recorder:
    """Collects what a replay needs while a fabric runs."""

    scenario: dict[str, Any]
    source: str
    fabric: Fabric | PlanedFabric
    commands: list[dict[str, Any]] = field(default_factory=list)
    digests: list[dict[str, Any]] = field(default_factory=list)
    # the files the scenario was loaded from: {"role", "path", "sha256"}
    inputs: list[dict[str, str]] = field(default_factory=list)

    @classmethod
    def start(cls, scn: Scenario, fabric: Fabric | PlanedFabric) -> Recorder:
        """Start recording a fabric built from ``scn`` (before its first tick). Its source
        is kept as an absolute path: a topology file the scenario names is found beside
        it, and a replay from another directory found neither."""
        inputs = [
            {"role": f.role, "path": _absolute(f.path), "sha256": f.sha256} for f in scn.inputs
        ]
        return cls(scenario_table(scn), _absolute(scn.source), fabric, inputs=inputs)

    def on_command(self, tick: int, command: Command) -> None:
        """``Engine(on_command=...)``: a command was applied before tick ``tick``."""
        self.commands.append({"tick": tick, "command": json.loads(encode_command(command))})
        if _changes_fabric(command):
            self.digests.append({"tick": tick, "digest": fabric_digest(self.fabric)})

    def to_dict(self, report: dict[str, Any] | None = None) -> dict[str, Any]:
        """The record (JSON-ready), ending at the fabric's current tick."""
        planes = (
            {"batch_ticks": self.fabric.batch_ticks}
            if isinstance(self.fabric, PlanedFabric)
            else None
        )
        # a run whose plane was lost ends where it stopped; its state there is not whole
        # (the lost plane's is gone), so no digest of it: the commands' digests stand
        lost = self.fabric.lost if isinstance(self.fabric, PlanedFabric) else None
        final = [] if lost else [{"tick": self.fabric.tick, "digest": fabric_digest(self.fabric)}]
        return {
            "format": FORMAT,
            "version": VERSION,
            "source": self.source,
            "scenario": self.scenario,
            # one engine per plane (its batch): a replay runs the planes in one process
            **({"planes": planes} if planes is not None else {}),
            "seed": self.fabric.seed,
            "end_tick": self.fabric.tick,
            "commands": self.commands,
            "digests": [*self.digests, *final],
            "report": None if report is None else comparable_report(report),
            **({"ended": str(lost)} if lost else {}),
            "inputs": self.inputs,
        }

    def save(self, path: Path, report: dict[str, Any] | None = None) -> None:
        """Write the record to ``path`` (JSON), whole or not at all."""
        write_text(
            path, json.dumps(_jsonable(self.to_dict(report)), indent=1, allow_nan=False) + "\n"
        )


def _absolute(path: str) -> str:
    """``path`` made absolute when it names a file (``<scenario>`` stays as it is)."""
    return str(Path(path).resolve()) if Path(path).exists() else path


def scenario_table(scn: Scenario) -> dict[str, Any]:
    """The scenario's table with the seed, tick and profile the run actually used."""
    table = copy.deepcopy(scn.raw)
    table["seed"] = scn.seed
    table["dt"] = scn.dt_s
    table["name"] = scn.name
    # the profile the run used, without the overrides the table applies again on top
    table["profile"] = scn.profile.name
    out: dict[str, Any] = _jsonable(table)
    return out


def _jsonable(x: Any, where: str = "") -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v, _key(where, k)) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v, f"{where}[{i}]") for i, v in enumerate(x)]
    if isinstance(x, float) and not math.isfinite(x):
        # JSON has no NaN or infinity: written, the record would not read back
        raise RecordError(f"cannot record a non-finite number ({x}) at {where or 'the top'}")
    if x is None or isinstance(x, str | int | float | bool):
        return x
    return str(x)  # TOML dates and times


def save_run(
    path: Path, scn: Scenario, fabric: Fabric | PlanedFabric, report: dict[str, Any]
) -> None:
    """Record a headless run (``fabtop run --record``): no commands, the final digest."""
    Recorder.start(scn, fabric).save(path, report)


# ---------------------------------------------------------------------- replay
@dataclass(frozen=True)
class ReportDifference:
    """A field of the recorded report that the replay did not reproduce."""

    path: str  # as ``report.totals.delivered_bytes``
    recorded: str  # the value as JSON spells it (cut short), or "missing"
    replayed: str


@dataclass(frozen=True)
class InputChange:
    """A file the recorded run's scenario was loaded from whose text is not the same now."""

    role: str  # "scenario" (its TOML) or "topology" (the file topology.path names)
    recorded_path: str
    recorded_sha256: str
    path: str  # the file the replay read (the scenario's: looked at, not read as the table)
    sha256: str

    @property
    def affects_replay(self) -> bool:
        """Whether the replay reads the file: not the scenario's TOML, whose table the
        record holds, but a topology file, which the replay reads again."""
        return self.role != "scenario"


@dataclass(frozen=True)
class InputCheck:
    """The files a replay reads compared with those the recorded run read, before it runs."""

    changed: tuple[InputChange, ...] = ()
    # files the replay reads that the record has no sha256 of (one from a fabtop before
    # records kept them): whether they changed cannot be told
    unchecked: tuple[str, ...] = ()


@dataclass
class ReplayResult:
    """What a replay found."""

    fabric: Fabric | PlanedFabric
    report: dict[str, Any]
    checked: int  # digests compared
    mismatches: list[tuple[int, str, str]]  # (tick, recorded, replayed)
    report_matches: bool | None  # None when the record has no report
    wall_s: float
    commands: int  # commands in the record
    fabric_commands: int  # those that change the fabric: each has a digest after it
    final_digest: bool  # a digest at the end was compared (none when the run stopped early)
    # every field of the report that differs, by path (sorted; [] when the report matches)
    report_differences: list[ReportDifference]
    # sections of the report the record has not, made by a fabtop from before they were
    # added (``LATER_REPORT_SECTIONS``): not compared
    report_not_recorded: tuple[str, ...] = ()
    inputs: InputCheck = field(default_factory=InputCheck)

    @property
    def ok(self) -> bool:
        """True when every digest (and the report) matched."""
        return not self.mismatches and self.report_matches is not False


def load_record(path: Path) -> dict[str, Any]:
    """Read and check a record file, of at most ``MAX_RECORD_BYTES``.

    Raises:
        RecordError: unreadable, not a regular file, too large, not UTF-8 JSON, not a
            fabtop record, or a field missing or malformed (the message names it).
    """
    try:
        text = read_text(path, MAX_RECORD_BYTES)
    except TextFileError as exc:
        raise RecordError(f"{path}: {exc} {_WHAT_A_RECORD_IS}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}: not JSON: {exc}") from None
    except RecursionError:
        raise RecordError(
            f"{path}: arrays or objects nest too deep to parse "
            f"(a record nests at most {MAX_RECORD_DEPTH} levels)"
        ) from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise RecordError(f"{path}: not a record's JSON: {exc}") from None
    try:
        _plan(data)
    except RecordError as exc:
        raise RecordError(f"{path}: {exc}") from None
    out: dict[str, Any] = data
    return out


_WHAT_A_RECORD_IS = (
    "(a record is a file `fabtop run --record` wrote: a few KB a run, some 250 bytes a "
    "recorded command)"
)


@dataclass(frozen=True)
class _Plan:
    """What a checked record replays: its commands and digests by tick, and its end."""

    commands: dict[int, list[Command]]
    digests: dict[int, list[str]]
    end: int
    batch_ticks: int | None  # one engine per plane, in batches of this many ticks
    fabric_commands: int  # the commands that change the fabric (each has a digest after it)
    whole: bool  # a whole run, with a digest at its end (not one that stopped early)
    inputs: dict[str, tuple[str, str]] | None  # role: (path, sha256); None: not recorded


def _plan(record: Any) -> _Plan:
    """Check every field a replay reads and gather the commands and digests by tick.

    Raises:
        RecordError: naming the first field missing or malformed.
    """
    _check_top_fields(record)
    batch = _batch_ticks(record)
    # end_tick bounds the replay's work, so it must be what the record itself implies: a
    # whole run ends with the digest the recorder took at its end_tick (so a larger
    # end_tick contradicts the digests), and a run that ended early (a plane lost: "ended",
    # no final digest) ran at least to its last command and digest. MAX_REPLAY_TICKS
    # bounds the rest (a record whose final digest was moved along with its end_tick).
    end = _tick(record, "end_tick", "", None)
    commands = _read_commands(record["commands"], end)
    digests = _read_digests(record["digests"], end)
    whole = "ended" not in record
    if whole:
        _check_final_digest(digests, end)
    if end > MAX_REPLAY_TICKS:
        raise RecordError(
            f"end_tick: {end:,}; a replay runs at most {MAX_REPLAY_TICKS:,} ticks "
            "(hours of wall time on the smallest fabric)"
        )
    _check_a_digest_after_each_command(commands, digests, end if whole else None)
    commands_at: dict[int, list[Command]] = {}
    for tick, cmd in commands:
        commands_at.setdefault(tick, []).append(cmd)
    digests_at: dict[int, list[str]] = {}
    for tick, digest in digests:
        digests_at.setdefault(tick, []).append(digest)
    changing = sum(_changes_fabric(cmd) for _, cmd in commands)
    return _Plan(commands_at, digests_at, end, batch, changing, whole, _read_inputs(record))


def _check_top_fields(record: Any) -> None:
    """Check the record's format, version, nesting and the kind of each top-level field."""
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise RecordError(f'not a fabtop record (no "format": "{FORMAT}")')
    _check_tree(record)
    version = record.get("version")
    if type(version) is not int or version != VERSION:
        raise RecordError(f"record version {_show(version)}; this fabtop reads {VERSION}")
    for key, kind in (("scenario", dict), ("commands", list), ("digests", list)):
        if not isinstance(record.get(key), kind):
            raise RecordError(f"{key}: {_show_field(record, key)}, not {_KINDS[kind]}")
    # the recorder always writes "report", null when it has none (a run that stopped
    # early): one missing was deleted, and a replay without it would check less than it says
    if "report" not in record or not isinstance(record["report"], dict | None):
        raise RecordError(
            f"report: {_show_field(record, 'report')}, not an object "
            "(or null: a run recorded without a report)"
        )
    # the recorder has written "source" since its first version: the file the scenario was
    # loaded from, beside which a topology file it names is found (without it the replay
    # would look in the working directory, and its errors could not say where it came from)
    if not isinstance(record.get("source"), str):
        raise RecordError(f"source: {_show_field(record, 'source')}, not a string")
    # optional, by design: "planes" absent or null (one engine), "ended" absent (a whole
    # run), "inputs" absent (a record from before they were kept: the files go unchecked)
    optional: tuple[tuple[str, type, bool], ...] = (
        ("ended", str, False),
        ("planes", dict, True),
        ("inputs", list, False),
    )
    for key, typ, null in optional:
        if key in record and not (isinstance(record[key], typ) or (null and record[key] is None)):
            raise RecordError(f"{key}: {_show(record[key])}, not {_KINDS[typ]}")
    # the seed is what makes the run the one recorded: the replay rebuilds with the
    # scenario's (one without would run the default seed's traffic, and "replay OK" would
    # claim another run), and the record says it at its top too, where the recorder has
    # always written it; the two must agree ("x" or [1, 2] there replayed "OK", and so did
    # a record with either deleted)
    if "seed" not in record["scenario"]:
        raise RecordError("scenario.seed: missing; a record's scenario holds the seed its run used")
    if "seed" not in record or record["seed"] != record["scenario"]["seed"]:
        raise RecordError(
            f"seed: {_show_field(record, 'seed')}, not the recorded scenario's seed "
            f"{_show_field(record['scenario'], 'seed')}"
        )


def _read_inputs(record: dict[str, Any]) -> dict[str, tuple[str, str]] | None:
    """The files the recorded run's scenario was loaded from, as role: (path, sha256);
    None for a record without them (made before records kept them: still replayed)."""
    if "inputs" not in record:
        return None
    out: dict[str, tuple[str, str]] = {}
    for i, entry in enumerate(record["inputs"]):
        where = f"inputs[{i}]"
        if not isinstance(entry, dict):
            raise RecordError(
                f'{where}: {_show(entry)}, not an object {{"role", "path", "sha256"}}'
            )
        for key in ("role", "path"):
            if not isinstance(entry.get(key), str):
                raise RecordError(f"{where}.{key}: {_show_field(entry, key)}, not a string")
        sha = entry.get("sha256")
        if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
            raise RecordError(
                f"{where}.sha256: {_show_field(entry, 'sha256')}, not a sha256 (64 hex digits)"
            )
        if entry["role"] in out:  # (which one would the replay compare with?)
            raise RecordError(f"{where}.role: {_show(entry['role'])}, already an input's role")
        out[entry["role"]] = (entry["path"], sha)
    return out


def _batch_ticks(record: dict[str, Any]) -> int | None:
    """The batch of a run with one engine per plane (None: one engine for the fabric)."""
    if record.get("planes") is None:
        return None
    batch = record["planes"].get("batch_ticks")
    if type(batch) is not int or batch < 1:
        raise RecordError(
            f"planes.batch_ticks: {_show_field(record['planes'], 'batch_ticks')}, "
            "not a whole number >= 1"
        )
    return batch


def _read_commands(entries: list[Any], end: int) -> list[tuple[int, Command]]:
    """The recorded commands as (tick, command), in the record's order."""
    out: list[tuple[int, Command]] = []
    for i, entry in enumerate(entries):
        where = f"commands[{i}]"
        if not isinstance(entry, dict):
            raise RecordError(f'{where}: {_show(entry)}, not an object {{"tick", "command"}}')
        tick = _tick(entry, "tick", where, end)
        if not isinstance(entry.get("command"), dict):
            raise RecordError(f"{where}.command: {_show_field(entry, 'command')}, not an object")
        try:
            cmd = parse_command(json.dumps(entry["command"]))
        except CommandError as exc:
            raise RecordError(f"{where}.command: {exc}") from None
        out.append((tick, cmd))
    return out


def _read_digests(entries: list[Any], end: int) -> list[tuple[int, str]]:
    """The recorded digests as (tick, digest), in the record's order."""
    out: list[tuple[int, str]] = []
    for i, entry in enumerate(entries):
        where = f"digests[{i}]"
        if not isinstance(entry, dict):
            raise RecordError(f'{where}: {_show(entry)}, not an object {{"tick", "digest"}}')
        tick = _tick(entry, "tick", where, end)
        digest = entry.get("digest")
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise RecordError(
                f"{where}.digest: {_show_field(entry, 'digest')}, not a snapshot digest "
                "(32 hex digits)"
            )
        out.append((tick, digest))
    return out


def _check_final_digest(digests: list[tuple[int, str]], end: int) -> None:
    """A whole run's record ends with the digest the recorder took at its end_tick."""
    last = digests[-1][0] if digests else None
    if last != end:
        at = "no digest" if last is None else f"its last digest at tick {last}"
        raise RecordError(
            f"end_tick: {end}, but the record has {at}; a whole run's record ends with "
            "the digest of the state at its end_tick"
        )


def _check_a_digest_after_each_command(
    commands: list[tuple[int, Command]], digests: list[tuple[int, str]], end: int | None
) -> None:
    """Refuse digests that are not where the recorder takes them: at each tick, one after
    each command there that changes the fabric, and (``end``: a whole run's) one more at
    the end. Replayed, a command without its digest, or a digest without a command, would
    be called a divergence of the run, when it is the record that is wrong."""
    changes: dict[int, list[int]] = {}  # tick: indices of its commands that change the fabric
    for i, (tick, cmd) in enumerate(commands):
        if _changes_fabric(cmd):
            changes.setdefault(tick, []).append(i)
    taken: dict[int, list[int]] = {}  # tick: indices of its digests
    for j, (tick, _) in enumerate(digests):
        taken.setdefault(tick, []).append(j)
    for tick in sorted(changes.keys() | taken.keys()):
        cmds, dgs = changes.get(tick, []), taken.get(tick, [])
        expected = len(cmds) + (tick == end)
        if len(dgs) > expected:
            raise RecordError(
                f"digests[{dgs[expected]}]: at tick {tick}, but the record has "
                f"{_commands_that_change(len(cmds))} the fabric at tick {tick}"
                f"{' (its end_tick)' if tick == end else ''}, so {_count(expected, 'digest')} "
                f"there, not {len(dgs)}; {_WHAT_HAS_A_DIGEST}"
            )
        if len(dgs) < len(cmds):
            among = f" for {_commands_that_change(len(cmds))} the fabric there" if dgs else ""
            raise RecordError(
                f"commands[{cmds[len(dgs)]}]: at tick {tick}, but the record has "
                f"{_count(len(dgs), 'digest')} at tick {tick}{among}; {_WHAT_HAS_A_DIGEST}"
            )
        if len(dgs) < expected:  # (only the end's is missing)
            raise RecordError(
                f"end_tick: {tick}, but the record has {_count(len(dgs), 'digest')} at tick "
                f"{tick} for {_commands_that_change(len(cmds))} the fabric there and none for "
                f"the end; {_WHAT_HAS_A_DIGEST}"
            )


def _count(n: int, what: str) -> str:
    """``no digest``, ``1 digest``, ``2 digests``."""
    return f"no {what}" if n == 0 else f"{n:,} {what}{'s' if n > 1 else ''}"


def _commands_that_change(n: int) -> str:
    """``no command that changes``, ``2 commands that change`` (then: the fabric)."""
    return f"{_count(n, 'command')} that change{'s' if n <= 1 else ''}"


_KINDS: dict[type, str] = {dict: "an object", list: "an array", str: "a string"}


def _tick(entry: dict[str, Any], key: str, where: str, end: int | None) -> int:
    """``entry[key]``, a tick of the run: a whole number from 0 (where a fabric starts)
    to ``end`` (where the record ends); ``where`` names the entry in errors."""
    where = f"{where}.{key}" if where else key
    value = entry.get(key)
    if type(value) is not int:  # (json reads 5.0 as a float; a bool is an int to Python)
        raise RecordError(f"{where}: {_show_field(entry, key)}, not a tick (a whole number)")
    if value < 0:
        raise RecordError(f"{where}: {value}, before the run's first tick (0)")
    if end is not None and value > end:
        raise RecordError(f"{where}: {value}, after the record's end_tick ({end})")
    return value


def _check_tree(record: dict[str, Any]) -> None:
    """Refuse arrays and objects nested deeper than ``MAX_RECORD_DEPTH`` and non-finite
    numbers (Python's JSON reads NaN, Infinity and 1e999), naming where; iterative, so
    that a deep record cannot exhaust the stack here."""
    stack: list[tuple[Any, str, int]] = [(record, "", 1)]
    while stack:
        x, where, depth = stack.pop()
        if isinstance(x, dict | list):
            if depth > MAX_RECORD_DEPTH:
                raise RecordError(
                    f"{where}: arrays or objects nested more than {MAX_RECORD_DEPTH} levels "
                    "deep (a record nests 5)"
                )
            items = x.items() if isinstance(x, dict) else enumerate(x)
            children = [
                (v, _key(where, k) if isinstance(x, dict) else f"{where}[{k}]", depth + 1)
                for k, v in items
            ]
            stack.extend(reversed(children))  # (the first one in the file is named)
        elif isinstance(x, float) and not math.isfinite(x):
            raise RecordError(
                f"{where or 'the record'}: {_show(x)}, not a finite number; a record holds "
                "only finite ones (standard JSON has no NaN or Infinity: the recorder never "
                "writes them)"
            )


def _key(where: str, key: object) -> str:
    k = str(key)
    k = k if len(k) <= 40 else k[:37] + "..."
    return f"{where}.{k}" if where else k


def _show(value: object) -> str:
    """A value for an error message as JSON spells it (``true``, not ``True``), cut short
    (a record's field may be megabytes)."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):  # (a record built in memory)
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _show_field(entry: dict[str, Any], key: str) -> str:
    return "missing" if key not in entry else _show(entry[key])


def check_inputs(recorded: dict[str, tuple[str, str]] | None, scn: Scenario) -> InputCheck:
    """Compare the files a recorded run read (``recorded``, role: (path, sha256); None for
    an older record without them) with those the replay's scenario ``scn`` was built
    from. A replay reads only the topology file again; the scenario's TOML it looks at
    (its path as recorded), to say an edit there does not reach the replay."""
    if recorded is None:
        return InputCheck(unchecked=tuple(_absolute(f.path) for f in scn.inputs))
    changed: list[InputChange] = []
    unchecked: list[str] = []
    for f in scn.inputs:
        if f.role not in recorded:
            unchecked.append(_absolute(f.path))
        elif recorded[f.role][1] != f.sha256:
            path = _absolute(f.path)  # (as recorded: a relative one would depend on the cwd)
            changed.append(InputChange(f.role, *recorded[f.role], path, f.sha256))
    if "scenario" in recorded and all(f.role != "scenario" for f in scn.inputs):
        path, sha = recorded["scenario"]
        try:
            now = text_sha256(read_text(Path(path), MAX_SCENARIO_BYTES))
        except TextFileError:
            now = sha  # gone or unreadable: the replay does not need it, so nothing to say
        if now != sha:
            changed.append(InputChange("scenario", path, sha, path, now))
    return InputCheck(tuple(changed), tuple(unchecked))


def replay(
    record: dict[str, Any],
    progress: Callable[[int, int], None] | None = None,
    on_inputs: Callable[[InputCheck], None] | None = None,
) -> ReplayResult:
    """Re-run a record and compare its digests (and report). ``on_inputs`` is told,
    before the run, how the files the scenario reads compare with the recorded ones.

    Raises:
        RecordError: a field of the record is missing or malformed, or the scenario or a
            command of the record no longer applies.
    """
    plan = _plan(record)
    source = str(record["source"])
    try:
        scn = parse_scenario(dict(record["scenario"]), source)
        fabric: Fabric | PlanedFabric
        if plan.batch_ticks is not None:
            # the planes in this process: the same results as the actors, bit for bit
            fabric = PlanedFabric(scn, InProcessPool, batch_ticks=plan.batch_ticks)
        else:
            fabric = Fabric.from_scenario(scn)
    except ScenarioError as exc:
        # named as the record's field: the file it was recorded from is not what is wrong
        why = str(exc).removeprefix(f"{source}: ")
        key, _, _ = why.partition(":")  # (a key's path, or words: "unknown key(s) x; ...")
        field = f"scenario.{why}" if key and " " not in key else f"scenario: {why}"
        raise RecordError(
            f"the recorded scenario does not load: {field} (the record says it came from {source})"
        ) from None
    inputs = check_inputs(plan.inputs, scn)
    if on_inputs is not None:
        on_inputs(inputs)
    pending, expected, end = plan.commands, plan.digests, plan.end
    mismatches: list[tuple[int, str, str]] = []
    checked = 0
    wall0 = time.perf_counter()
    stops = sorted({*pending, *expected, end})  # (all at or before end: _plan)
    for stop in stops:
        if stop > fabric.tick:
            fabric.run_ticks(stop - fabric.tick)
            if progress is not None:
                progress(fabric.tick, end)
        got: list[str] = []
        for cmd in pending.get(stop, []):
            if not _changes_fabric(cmd):
                continue  # pacing only: the fabric does not see them
            try:
                fabric.apply(cmd)
            except CommandError as exc:
                raise RecordError(
                    f"tick {stop}: recorded command no longer applies: {exc}"
                ) from None
            got.append(fabric_digest(fabric))
        if stop == end and plan.whole:  # (a run that ended early has none)
            got.append(fabric_digest(fabric))
        want = expected.get(stop, [])
        checked += len(want)
        for k in range(max(len(want), len(got))):
            w = want[k] if k < len(want) else "-"
            g = got[k] if k < len(got) else "-"
            if w != g:
                mismatches.append((stop, w, g))
    wall = time.perf_counter() - wall0
    # (the report ``fabtop run`` writes, its run figures over the whole replay)
    report = report_of(fabric, fabric.tick, fabric.hop_updates, wall)
    report_matches, differences, not_recorded = _compare_reports(record["report"], report)
    return ReplayResult(
        fabric,
        report,
        checked,
        mismatches,
        report_matches,
        wall,
        commands=len(record["commands"]),
        fabric_commands=plan.fabric_commands,
        final_digest=plan.whole,
        report_differences=differences,
        report_not_recorded=not_recorded,
        inputs=inputs,
    )


#: Sections added to the run report after records were first made, in the order they came
#: (``fabtop run``'s report): a record made before one was added lacks it, and its replay
#: compares the rest. Any other section a record lacks is a difference.
LATER_REPORT_SECTIONS = (
    "schedule_skipped",
    "tick_notes",
    "notable_events",
    "stopped_workloads",
    "admission",
    "in_flight",
)


#: Fields added to each of the report's faults after records were first made: a record
#: whose faults all lack one was made before it, and its replay compares the rest.
LATER_FAULT_FIELDS = ("time_to_mitigate_seconds", "cleared_at_seconds", "stages")


def _compare_reports(
    recorded: dict[str, Any] | None, replayed: dict[str, Any]
) -> tuple[bool | None, list[ReportDifference], tuple[str, ...]]:
    """Whether the replayed report is the recorded one, byte for byte as canonical JSON and
    without its wall-clock figures (None: the record has none), the fields that differ,
    and the sections left out for the record's lacking them (``LATER_REPORT_SECTIONS``, and
    ``LATER_FAULT_FIELDS`` as ``faults[].name``)."""
    if recorded is None:
        return None, [], ()
    not_recorded = tuple(k for k in LATER_REPORT_SECTIONS if k in replayed and k not in recorded)
    compared = {k: v for k, v in comparable_report(replayed).items() if k not in not_recorded}
    faults = recorded.get("faults")
    if isinstance(faults, list) and faults and all(isinstance(f, dict) for f in faults):
        absent = tuple(k for k in LATER_FAULT_FIELDS if not any(k in f for f in faults))
        if absent and isinstance(compared.get("faults"), list):
            compared["faults"] = [
                {k: v for k, v in f.items() if k not in absent} for f in compared["faults"]
            ]
            not_recorded += tuple(f"faults[].{k}" for k in absent)
    want, got = _canon(recorded), _canon(compared)
    if want == got:
        return True, [], not_recorded
    return False, _differences(json.loads(want), json.loads(got), "report"), not_recorded


_ABSENT = object()  # a key or an item one side of a comparison has and the other has not


def _differences(recorded: Any, replayed: Any, where: str) -> list[ReportDifference]:
    """Where two JSON trees differ, keys sorted and items by index: each value that is not
    an object or array on both sides, compared as canonical JSON (so 1 is not 1.0, as in
    the comparison of the whole)."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        return [
            difference
            for k in sorted(recorded.keys() | replayed.keys())
            for difference in _differences(
                recorded.get(k, _ABSENT), replayed.get(k, _ABSENT), _key(where, k)
            )
        ]
    if isinstance(recorded, list) and isinstance(replayed, list):
        return [
            difference
            for i in range(max(len(recorded), len(replayed)))
            for difference in _differences(_item(recorded, i), _item(replayed, i), f"{where}[{i}]")
        ]
    if _canon_leaf(recorded) == _canon_leaf(replayed):
        return []
    return [ReportDifference(where, _show_leaf(recorded), _show_leaf(replayed))]


def _item(items: list[Any], i: int) -> Any:
    return items[i] if i < len(items) else _ABSENT


def _canon_leaf(x: Any) -> bytes | None:
    return None if x is _ABSENT else msgspec.json.encode(x, order="sorted")


def _show_leaf(x: Any) -> str:
    return "missing" if x is _ABSENT else _show(x)


def _canon(x: Any) -> bytes:
    """Canonical JSON (what was written to the file and read back)."""
    return msgspec.json.encode(
        json.loads(json.dumps(_jsonable(x), allow_nan=False)), order="sorted"
    )
