"""``fabtop storage-report``: the storage access paths side by side on the bundled scenarios."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from console.claims import spell_out_claims
from console.cli._common import factor
from console.cli.output import file_path, refuse_bad_outputs, write_output
from console.cli.progress import ProgressBar
from fabric_core.reports.run import run_for
from fabric_core.reports.storage import (
    CASES,
    Case,
    CaseResult,
    build_variant,
    markdown,
    splice,
    splice_params,
    text_table,
)
from fabric_core.runtime.scenario import ScenarioError
from fabric_core.units import format_duration


def register(sub: Any) -> None:
    """Add the ``storage-report`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "storage-report",
        help="run the storage scenarios on every access path and print them side by side",
        description="Run each bundled storage scenario once per access path (local-nvme, "
        "nvmeof, xds, nfs-rdma, nvme-tcp, nfs-tcp, plus slow-target and lane variants) and "
        "print the KPIs side by side; optionally write the tables into docs/STORAGE.md.",
    )
    p.add_argument(
        "scenarios",
        nargs="*",
        metavar="SCENARIO",
        help=f"storage scenarios to run (default: all of {', '.join(CASES)})",
    )
    p.add_argument(
        "--scale",
        type=factor,
        default=1.0,
        help="multiply each scenario's simulated duration (e.g. 0.25 for a quick look)",
    )
    p.add_argument(
        "--write-docs",
        type=file_path,
        metavar="FILE",
        help="splice the markdown tables into FILE between the storage-report markers (a "
        "file without them gets them, with the tables, at its end)",
    )
    p.set_defaults(func=run)


def _run_case(case: Case, scale: float, bar: ProgressBar) -> CaseResult:
    """``reports.storage.run_case`` with a progress bar per variant."""
    d = case.duration_s * scale
    rows = []
    for v in case.variants:
        bar.restart(f"{case.scenario} {v.label}")
        rows.append((v.label, run_for(build_variant(case, v), d, bar.update)))
    return CaseResult(case, d, rows)


def run(args: argparse.Namespace) -> int:
    """Run the cases, print them, write the docs table."""
    names = args.scenarios or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(
            f"fabtop: no storage report for {', '.join(unknown)}; known: {', '.join(CASES)}",
            file=sys.stderr,
        )
        return 2
    if refuse_bad_outputs([("--write-docs", args.write_docs)]):  # before the runs
        return 2
    results = []
    bar = ProgressBar()
    for name in names:
        try:
            res = _run_case(CASES[name], args.scale, bar)
        except ScenarioError as exc:
            bar.close()
            print(f"fabtop: {exc}", file=sys.stderr)
            return 2
        bar.close()
        print(spell_out_claims(text_table(res)), end="\n", flush=True)
        if args.scale < 1:  # (--scale 0.05 showed empty tables with no word of why)
            full = format_duration(CASES[name].duration_s)
            print(
                f"note: --scale {args.scale:g} ran {format_duration(res.duration_s)} of the "
                f"case's {full}: a figure that needs a whole step, burst or request reads — "
                "(or 0) where none completed in that time",
                flush=True,
            )
        print(flush=True)
        results.append(res)
    if args.write_docs:
        cmd = "fabtop storage-report" + "".join(f" {n}" for n in args.scenarios)
        if args.scale != 1.0:
            cmd += f" --scale {args.scale:g}"
        cmd += f" --write-docs {args.write_docs}"
        try:
            doc = args.write_docs.read_text() if args.write_docs.exists() else ""
        except (OSError, UnicodeDecodeError) as exc:
            print(f"fabtop: cannot read {args.write_docs}: {exc}", file=sys.stderr)
            return 1
        if not write_output(args.write_docs, splice_params(splice(doc, markdown(results, cmd)))):
            return 1
    return 0
