"""Record and replay: a run is (scenario, seed, commands with their tick).

A ``Recorder`` keeps the scenario table as loaded (with the seed, tick and
profile actually used), every command applied with the tick it was applied at
(``Engine(on_command=recorder.on_command)``), and snapshot digests: one after
each command and one at the end. ``replay`` rebuilds the fabric from the
record, applies the commands at the same ticks, runs to the same final tick and
compares every digest, so a replay either reproduces the run exactly or says
at which tick it first diverged.

A digest covers everything in a snapshot that the simulation determines (link
state, totals, histograms, KPIs, faults and their timelines, events, params),
and nothing that depends on the wall clock (wall time, speeds, running).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
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
from fabric_core.reports.run import summarise
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import Scenario, ScenarioError, parse_scenario
from fabric_core.runtime.snapshot import Snapshot

FORMAT = "fabtop-record"
VERSION = 1


class RecordError(ValueError):
    """A record file that cannot be read or replayed; the message says why."""


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

    @classmethod
    def start(cls, scn: Scenario, fabric: Fabric | PlanedFabric) -> Recorder:
        """Start recording a fabric built from ``scn`` (before its first tick)."""
        return cls(scenario_table(scn), scn.source, fabric)

    def on_command(self, tick: int, command: Command) -> None:
        """``Engine(on_command=...)``: a command was applied before tick ``tick``."""
        self.commands.append({"tick": tick, "command": json.loads(encode_command(command))})
        if not isinstance(command, Pause | Resume | SetSpeed):
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
        }

    def save(self, path: Path, report: dict[str, Any] | None = None) -> None:
        """Write the record to ``path`` (JSON)."""
        path.write_text(
            json.dumps(_jsonable(self.to_dict(report)), indent=1, allow_nan=False) + "\n"
        )


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


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        raise RecordError(f"cannot record a non-finite number ({x})")
    if x is None or isinstance(x, str | int | float | bool):
        return x
    return str(x)  # TOML dates and times


def save_run(
    path: Path, scn: Scenario, fabric: Fabric | PlanedFabric, report: dict[str, Any]
) -> None:
    """Record a headless run (``fabtop run --record``): no commands, the final digest."""
    Recorder.start(scn, fabric).save(path, report)


# ---------------------------------------------------------------------- replay
@dataclass
class ReplayResult:
    """What a replay found."""

    fabric: Fabric | PlanedFabric
    report: dict[str, Any]
    checked: int  # digests compared
    mismatches: list[tuple[int, str, str]]  # (tick, recorded, replayed)
    report_matches: bool | None  # None when the record has no report
    wall_s: float

    @property
    def ok(self) -> bool:
        """True when every digest (and the report) matched."""
        return not self.mismatches and self.report_matches is not False


def load_record(path: Path) -> dict[str, Any]:
    """Read and check a record file.

    Raises:
        RecordError: unreadable, not JSON, or not a fabtop record.
    """
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise RecordError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RecordError(f'{path}: not a fabtop record (no "format": "{FORMAT}")')
    if data.get("version") != VERSION:
        raise RecordError(
            f"{path}: record version {data.get('version')!r}; this fabtop reads {VERSION}"
        )
    for key, typ in (("scenario", dict), ("end_tick", int), ("commands", list), ("digests", list)):
        if not isinstance(data.get(key), typ):
            raise RecordError(f"{path}: field {key!r} missing or not a {typ.__name__}")
    return data


def replay(
    record: dict[str, Any], progress: Callable[[int, int], None] | None = None
) -> ReplayResult:
    """Re-run a record and compare its digests (and report).

    Raises:
        RecordError: the scenario or a command of the record no longer applies.
    """
    try:
        scn = parse_scenario(dict(record["scenario"]), str(record.get("source", "<record>")))
        planes = record.get("planes")
        fabric: Fabric | PlanedFabric
        if planes is not None:
            batch = planes.get("batch_ticks") if isinstance(planes, dict) else None
            if not isinstance(batch, int) or batch < 1:
                raise RecordError(f'"planes" must be {{"batch_ticks": N >= 1}}, got {planes!r}')
            # the planes in this process: the same results as the actors, bit for bit
            fabric = PlanedFabric(scn, InProcessPool, batch_ticks=batch)
        else:
            fabric = Fabric.from_scenario(scn)
    except ScenarioError as exc:
        raise RecordError(f"the recorded scenario does not load: {exc}") from None
    pending: dict[int, list[Command]] = {}
    for i, entry in enumerate(record["commands"]):
        try:
            cmd = parse_command(json.dumps(entry["command"]))
            tick = int(entry["tick"])
        except (CommandError, KeyError, TypeError, ValueError) as exc:
            raise RecordError(f"command #{i} of the record is invalid: {exc}") from None
        pending.setdefault(tick, []).append(cmd)
    expected: dict[int, list[str]] = {}
    for d in record["digests"]:
        expected.setdefault(int(d["tick"]), []).append(str(d["digest"]))
    end = int(record["end_tick"])
    mismatches: list[tuple[int, str, str]] = []
    checked = 0
    wall0 = time.perf_counter()
    stops = sorted({t for t in [*pending, *expected] if t <= end} | {end})
    for stop in stops:
        if stop > fabric.tick:
            fabric.run_ticks(stop - fabric.tick)
            if progress is not None:
                progress(fabric.tick, end)
        got: list[str] = []
        for cmd in pending.get(stop, []):
            if isinstance(cmd, Pause | Resume | SetSpeed):
                continue  # pacing only: the fabric does not see them
            try:
                fabric.apply(cmd)
            except CommandError as exc:
                raise RecordError(
                    f"tick {stop}: recorded command no longer applies: {exc}"
                ) from None
            got.append(fabric_digest(fabric))
        if stop == end and "ended" not in record:  # (a run that ended early has none)
            got.append(fabric_digest(fabric))
        want = expected.get(stop, [])
        checked += len(want)
        for k in range(max(len(want), len(got))):
            w = want[k] if k < len(want) else "-"
            g = got[k] if k < len(got) else "-"
            if w != g:
                mismatches.append((stop, w, g))
    wall = time.perf_counter() - wall0
    report = summarise(fabric.snapshot(wall_time_s=wall, running=False))
    recorded = record.get("report")
    report_matches = None
    if isinstance(recorded, dict):
        report_matches = _canon(recorded) == _canon(comparable_report(report))
    report["run"] = {
        "simulated_seconds": fabric.sim_time_s,
        "ticks": fabric.tick,
        "dt_seconds": fabric.dt_s,
        "wall_seconds": wall,
        "ticks_per_second": fabric.tick / wall if wall > 0 else float("inf"),
        "hop_updates": fabric.hop_updates,
        "hop_updates_per_second": fabric.hop_updates / wall if wall > 0 else float("inf"),
    }
    return ReplayResult(fabric, report, checked, mismatches, report_matches, wall)


def _canon(x: Any) -> bytes:
    """Canonical JSON (what was written to the file and read back)."""
    return msgspec.json.encode(
        json.loads(json.dumps(_jsonable(x), allow_nan=False)), order="sorted"
    )
