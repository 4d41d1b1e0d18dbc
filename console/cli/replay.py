"""``fabtop replay FILE``: re-run a recorded run and check it reproduces exactly."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from console.cli.output import file_path, refuse_bad_outputs, write_output
from console.cli.run import print_summary
from fabric_core.reports.record import MAX_RECORD_BYTES, RecordError, load_record, replay


def register(sub: Any) -> None:
    """Add the ``replay`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "replay",
        help="re-run a recorded run and check that it reproduces exactly",
        description="Rebuild the recorded scenario with its seed, apply the recorded commands "
        "at their ticks, run to the recorded end and compare every snapshot digest and the "
        "report. Exit status 0 when everything matches, 1 when the run diverged, 2 when the "
        f"record cannot be read (not a regular file, over {MAX_RECORD_BYTES >> 20} MiB, or a "
        "field malformed). Records come from `fabtop run --record FILE`.",
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
        result = replay(record)
    except RecordError as exc:
        print(f"fabtop: {args.record}: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        print_summary(result.report)
    if args.json and not write_output(
        args.json, json.dumps(result.report, indent=2, allow_nan=False) + "\n"
    ):
        return 1
    n_cmd = len(record["commands"])
    if result.ok:
        report = "" if result.report_matches is None else " and the report"
        digests = "digest" if result.checked == 1 else "digests"
        print(
            f"replay OK: {result.fabric.tick:,} ticks, {n_cmd:,} commands; "
            f"{result.checked:,} state {digests} (one after each command, one at the end)"
            f"{report} match"
        )
        return 0
    if result.mismatches:
        tick, want, got = result.mismatches[0]
        print(
            f"replay DIVERGED at tick {tick}: recorded digest {want}, replayed {got} "
            f"({len(result.mismatches)} of {result.checked} digests differ)",
            file=sys.stderr,
        )
    else:
        print("replay DIVERGED: the digests match but the report differs", file=sys.stderr)
    return 1
