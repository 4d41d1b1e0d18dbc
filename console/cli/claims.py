"""``fabtop claims``: run the scenarios bearing on each article claim and print the verdicts."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from console.cli.output import file_path, output_problem, refuse_bad_outputs, write_output


def register(sub: Any) -> None:
    """Add the ``claims`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "claims",
        help="measure the article's claims C1-C10 and print a table with verdicts",
        description="Run the bundled scenarios that bear on each claim of the scaleFabric "
        "article (C1-C10: GDR, IBGDA, NVMe/NFS over RDMA, XDS, latency, PFC, TTFT, 800G) on "
        "the relevant profiles and paths, with sweeps where a claim depends on a condition, "
        "and print for each: the claim in a sentence, the article's figure, the emulated "
        "figure on each side, their ratio, the conditions, and a verdict (reproduced / partly "
        "/ not reproduced) decided by the rule written next to the claim. Takes about a "
        "minute on 2 cores (--quick: less).",
    )
    p.add_argument(
        "--only",
        metavar="C7,C9",
        help="run only these claims (comma-separated ids, C1..C10)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="fewer sweep points and shorter runs (under a minute; figures are rougher)",
    )
    p.add_argument("--json", type=file_path, metavar="FILE", help="write the results as JSON")
    p.add_argument(
        "--markdown",
        type=file_path,
        metavar="FILE",
        help="write the results as markdown (docs/CLAIMS.md is made this way)",
    )
    p.add_argument(
        "--plots",
        type=file_path,
        metavar="DIR",
        help="write an SVG plot of every sweep into DIR (needs matplotlib: "
        "pip install -e '.[plots]')",
    )
    p.set_defaults(func=run)


def _command(args: argparse.Namespace) -> str:
    parts = ["fabtop", "claims"]
    if args.only:
        parts += ["--only", args.only]
    if args.quick:
        parts.append("--quick")
    if args.markdown:
        parts += ["--markdown", str(args.markdown)]
    if args.plots:
        parts += ["--plots", str(args.plots)]
    return shlex.join(parts)


def run(args: argparse.Namespace) -> int:
    """Select, run, print, write."""
    # the claims machinery (and through it the fabric core) loads only when this runs
    from console.claimsrun import Settings, render, run_claims, select
    from console.claimsrun import plots as plotting
    from console.claimsrun.progress import ClaimsProgress
    from fabric_core.runtime.scenario import ScenarioError

    try:
        claims = select(args.only)
    except ValueError as exc:
        print(f"fabtop: {exc}", file=sys.stderr)
        return 2
    # checked before the claims run (minutes), not after it; --markdown and --plots
    # make their directories
    if refuse_bad_outputs([("--json", args.json)]) or refuse_bad_outputs(
        [("--markdown", args.markdown)], make_parents=True
    ):
        return 2
    plots_problem = None if args.plots is None else output_problem(args.plots / "x.svg", True)
    if plots_problem is not None:
        print(f"fabtop: --plots {args.plots}: {plots_problem}", file=sys.stderr)
        return 2
    want_plots = args.plots is not None
    if want_plots and not plotting.available():
        print(
            f"fabtop: --plots needs matplotlib ({plotting.INSTALL_HINT}); printing the tables "
            "without plots",
            file=sys.stderr,
        )
        want_plots = False
    bar = ClaimsProgress()
    try:
        report = run_claims(claims, Settings(quick=args.quick), bar)
    except ScenarioError as exc:
        bar.close()
        print(f"fabtop: {exc}", file=sys.stderr)
        return 2
    bar.close()
    print(render.text(report))
    command = _command(args)
    written: dict[str, Path] = {}
    try:
        if want_plots:
            written = plotting.plot_all(
                (s for o in report.outcomes for s in o.measurement.sweeps), args.plots
            )
            print(f"wrote {len(written)} plots into {args.plots}")
        elif args.plots is None and not plotting.available():
            print(f"(plots of the sweeps: {plotting.INSTALL_HINT}, then --plots DIR)")
        if args.markdown:
            args.markdown.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"fabtop: cannot write: {exc}", file=sys.stderr)
        return 1
    if args.markdown:
        text = render.markdown(report, command, written, args.markdown.parent)
        if not write_output(args.markdown, text):
            return 1
        print(f"wrote {args.markdown}")
    if args.json and not write_output(
        args.json, json.dumps(render.to_json(report, command), indent=2, allow_nan=False) + "\n"
    ):
        return 1
    return 0
