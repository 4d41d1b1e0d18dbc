"""``fabtop replay FILE``: re-run a recorded run and check it reproduces exactly."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from console.cli.output import file_path, refuse_bad_outputs, write_output
from console.cli.run import print_summary
from fabric_core.reports.record import (
    MAX_RECORD_BYTES,
    InputChange,
    InputCheck,
    RecordError,
    ReplayResult,
    ReportDifference,
    load_record,
    replay,
)

#: The differing fields of a report the verdict names (in order of their paths); it
#: counts the rest (another seed changes hundreds).
MAX_NAMED_DIFFERENCES = 5


def register(sub: Any) -> None:
    """Add the ``replay`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "replay",
        help="re-run a recorded run and check that it reproduces exactly",
        description="Rebuild the recorded scenario with its seed, apply the recorded commands "
        "at their ticks, run to the recorded end and compare every snapshot digest and the "
        "report. Exit status 0 when everything matches, 1 when the run diverged, 2 when the "
        f"record cannot be read (not a regular file, over {MAX_RECORD_BYTES >> 20} MiB, or a "
        "field malformed). Records come from `fabtop run --record FILE`. A topology file the "
        "scenario names is read again: one changed since the record (its sha256 is in the "
        "record) is named before the replay runs and in the verdict, as the expected cause "
        "of a divergence.",
    )
    p.add_argument("record", type=file_path, metavar="FILE", help="a record written with --record")
    p.add_argument(
        "--json",
        type=file_path,
        metavar="FILE",
        help="write the replayed run's report as JSON to FILE",
    )
    p.add_argument("--quiet", action="store_true", help="print nothing but the verdict and errors")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Replay, print the verdict (and the summary), write the report."""
    if refuse_bad_outputs([("--json", args.json)]):  # before the replay, not after it
        return 2
    try:
        record = load_record(args.record)  # (its errors name the file)
    except RecordError as exc:
        print(f"fabtop: {exc}", file=sys.stderr)
        return 2
    try:
        result = replay(record, on_inputs=None if args.quiet else _say_changed_inputs)
    except RecordError as exc:
        print(f"fabtop: {args.record}: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        print_summary(result.report)
    if args.json and not write_output(
        args.json, json.dumps(result.report, indent=2, allow_nan=False) + "\n"
    ):
        return 1
    if result.ok:
        print(_ok_line(result))
        return 0
    print(_diverged(result), file=sys.stderr)
    return 1


def _say_changed_inputs(check: InputCheck) -> None:
    """Before the run: each file the scenario was loaded from that changed since the record."""
    for change in check.changed:
        if change.affects_replay:
            then = "the replay reads it as it is now, so it may diverge"
        else:
            then = "the replay runs the scenario table the record holds, so this does not affect it"
        print(f"fabtop: {_changed(change)}; {then}", file=sys.stderr)


def _changed(change: InputChange) -> str:
    """``the topology file /x/lab.topo changed since the record (sha256 ... then, ... now)``"""
    what = f"the {change.role} file"
    if change.path == change.recorded_path:
        return (
            f"{what} {change.path} changed since the record (sha256 "
            f"{_short(change.recorded_sha256)} then, {_short(change.sha256)} now)"
        )
    return (  # (a scenario file gone since: its topology file is looked for elsewhere)
        f"{what} is not the one recorded: the run read {change.recorded_path} (sha256 "
        f"{_short(change.recorded_sha256)}), the replay reads {change.path} "
        f"(sha256 {_short(change.sha256)})"
    )


def _short(sha256: str) -> str:
    """The first 12 hex digits: enough to tell two versions of a file apart (the record
    keeps all 64, which ``sha256sum FILE`` prints)."""
    return sha256[:12]


def _ok_line(result: ReplayResult) -> str:
    """``replay OK: ...``: the ticks and commands replayed and exactly what was compared."""
    compared = []
    if result.checked:
        compared.append(_digests_compared(result))
    if result.report_matches:
        compared.append("the report")
    line = f"replay OK: {result.fabric.tick:,} ticks, {_commands_replayed(result)}; "
    line += f"{' and '.join(compared)} match" if compared else "nothing to compare"
    if result.report_matches is None:
        line += "; the record has no report, so none was compared"
    if result.report_not_recorded:
        line += (
            f" (the report's {', '.join(result.report_not_recorded)} excepted: this record, "
            "from an older fabtop, has none)"
        )
    for change in result.inputs.changed:
        if change.affects_replay:
            line += f"; {_changed(change)}, but not in a way that changes this run"
        else:
            line += f"; {_changed(change)}, but a replay runs the table the record holds"
    return line


def _commands_replayed(result: ReplayResult) -> str:
    """``3 commands (2 of which change the fabric)``: the pacing ones have no digest."""
    total, changing = result.commands, result.fabric_commands
    if total == 0:
        return "no commands"
    text = _count(total, "command")
    if changing == total:
        return text
    if changing == 0:
        return f"{text} ({'it does not' if total == 1 else 'none of which'} change the fabric)"
    return f"{text} ({changing:,} of which change{'s' if changing == 1 else ''} the fabric)"


def _digests_compared(result: ReplayResult) -> str:
    """``2 state digests (one after each command, one at the end)``: which ones."""
    where = []
    if result.fabric_commands:
        every = result.fabric_commands == result.commands
        where.append(f"one after each command{'' if every else ' that changes the fabric'}")
    where.append(
        "one at the end" if result.final_digest else "none at the end: the run stopped early"
    )
    return f"{_count(result.checked, 'state digest')} ({', '.join(where)})"


def _diverged(result: ReplayResult) -> str:
    """``replay DIVERGED ...``: the first digest that differs, else the report's fields;
    then what changed since the record among the files the replay read (the expected
    cause), or, for an older record, that this could not be checked."""
    if result.mismatches:
        tick, want, got = result.mismatches[0]
        lines = [
            f"replay DIVERGED at tick {tick}: recorded digest {want}, replayed {got} "
            f"({len(result.mismatches)} of {result.checked} digests differ)"
        ]
    else:
        lines = [_report_diverged(result.report_differences)]
    for change in result.inputs.changed:
        if change.affects_replay:
            lines.append(
                f"  the divergence is expected: {_changed(change)}, and the replay read it "
                "as it is now"
            )
        else:
            lines.append(
                f"  (not the cause: {_changed(change)}, but a replay runs the table the "
                "record holds)"
            )
    for path in result.inputs.unchecked:
        lines.append(
            f"  (cannot tell whether {path} changed since the record: this record, from an "
            "older fabtop, has no sha256 of the files its run read)"
        )
    return "\n".join(lines)


def _report_diverged(differences: list[ReportDifference]) -> str:
    """The verdict's first line, then the first differing fields, one a line."""
    if not differences:  # (the comparison of the whole found what the fields did not)
        return "replay DIVERGED: the digests match but the report differs"
    lines = [
        "replay DIVERGED: the digests match but the report differs in "
        f"{_count(len(differences), 'field')}:"
    ]
    lines += [
        f"  {d.path}: recorded {d.recorded}, replayed {d.replayed}"
        for d in differences[:MAX_NAMED_DIFFERENCES]
    ]
    if len(differences) > MAX_NAMED_DIFFERENCES:
        lines.append(f"  and {len(differences) - MAX_NAMED_DIFFERENCES:,} more")
    return "\n".join(lines)


def _count(n: int, what: str) -> str:
    """``1 command``, ``2 commands``."""
    return f"{n:,} {what}{'' if n == 1 else 's'}"
