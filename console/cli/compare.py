"""``fabtop compare``: one scenario on the native and the RoCE fabric, side by side."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from console.cli._common import duration, seed_number, warn_of_units, whole_ticks_note
from console.cli.output import file_path, refuse_bad_outputs, write_output
from console.cli.progress import ProgressBar
from console.cli.run import fault_line, refused_warning
from fabric_core.net.profiles import PROFILES
from fabric_core.reports.compare import DEFAULT_PROFILES, compare_scenario, latency_by_size
from fabric_core.runtime.scenario import ScenarioError, load_scenario
from fabric_core.units import format_bytes, format_duration, format_rate


def register(sub: Any) -> None:
    """Add the ``compare`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "compare",
        help="run a scenario on the native and the RoCE fabric and compare",
        description="Run SCENARIO with the same seed and workload on two profiles (default "
        "native-400g and roce-400g) and print per-class latency, throughput, drops, pause "
        "frames, ECN marks and deadlocks side by side, then a latency-by-size table for one "
        "message across 1 and 3 switch hops.",
    )
    p.add_argument(
        "scenario",
        nargs="?",
        default="default",
        metavar="SCENARIO",
        help="bundled name or TOML path (default: default)",
    )
    p.add_argument(
        "--duration",
        type=duration,
        default=duration("1ms"),
        help="simulated time per profile (default 1ms)",
    )
    p.add_argument(
        "--seed", type=seed_number, help="override the scenario's seed (the same for both runs)"
    )
    p.add_argument(
        "--profiles",
        nargs=2,
        metavar=("A", "B"),
        default=list(DEFAULT_PROFILES),
        choices=sorted(PROFILES),
        help=f"the two profiles, different ones (default {' '.join(DEFAULT_PROFILES)})",
    )
    p.add_argument("--json", type=file_path, metavar="FILE", help="write the comparison as JSON")
    p.add_argument("--no-sizes", action="store_true", help="skip the latency-by-size table")
    p.set_defaults(func=run)


def _d(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else format_duration(x)


def lower_by_header(a: str) -> str:
    """The heading of the column of ``latency_by_size``'s "reduction": the profile it is
    the advantage of, ``native-400g lower by`` (it said "lower by" without saying which)."""
    return f"{a} lower by"


def lower_by(reduction: float) -> str:
    """A row's "reduction" (1 - the first profile's latency / the second's) as a whole
    percentage; a reduction that rounds to nothing is 0%, not -0%."""
    text = f"{reduction:.0%}"
    return "0%" if text == "-0%" else text


def run(args: argparse.Namespace) -> int:
    """Run both profiles, print the tables, write JSON."""
    if args.profiles[0] == args.profiles[1]:
        print(
            f"fabtop compare: --profiles: the two profiles are both {args.profiles[0]}; "
            "give two different ones",
            file=sys.stderr,
        )
        return 2
    if refuse_bad_outputs([("--json", args.json)]):  # before both runs, not after them
        return 2
    bar = ProgressBar()

    def progress(name: str, done: float, total: float) -> None:
        if bar.label != name:
            bar.restart(name)
        bar.update(done, total)

    try:
        # (the durations without a unit, said before the runs: both read the same file)
        warn_of_units(load_scenario(args.scenario, profile=args.profiles[0], seed=args.seed))
        result = compare_scenario(
            args.scenario, args.duration, profiles=args.profiles, seed=args.seed, progress=progress
        )
    except ScenarioError as exc:
        bar.close()
        print(f"fabtop: {exc}", file=sys.stderr)
        return 2
    bar.close()
    first = next(iter(result["reports"].values()))["run"]
    if note := whole_ticks_note(args.duration, first["dt_seconds"]):
        print(f"fabtop: {note}", file=sys.stderr)
    for note in next(iter(result["reports"].values()))["tick_notes"]:  # (the same on both)
        print(f"fabtop: warning: {note}", file=sys.stderr)
    a, b = args.profiles
    if not args.no_sizes:
        result["latency_by_size"] = latency_by_size(args.profiles)
    print(render(result, a, b))
    if args.json:
        try:
            text = json.dumps(result, indent=2, allow_nan=False, default=str) + "\n"
        except ValueError as exc:  # a non-finite figure, which JSON cannot hold
            print(f"fabtop: cannot write {args.json}: {exc}", file=sys.stderr)
            return 1
        if not write_output(args.json, text):
            return 1
    return 0


#: The latency quantiles of the class table, and their keys in a run's report
QUANTILES = (("p50", "p50_seconds"), ("p99", "p99_seconds"), ("p99.9", "p999_seconds"))


def class_table(classes: dict[str, Any], a: str, b: str) -> list[str]:
    """Latency per class on the two profiles: a quantile over each pair of columns, the
    profiles' names under it (one header of "native-400g p50  roce-400g p50 ..." ran its
    labels together)."""
    w = max(len(a), len(b), 9) + 1
    pair = 2 * w + 1
    lines = [
        (f"{'':<12}" + "".join(f"  {q:^{pair}}" for q, _ in QUANTILES)).rstrip(),
        f"{'class':<12}" + f"  {a:>{w}} {b:>{w}}" * len(QUANTILES),
    ]
    for cls, row in classes.items():
        ra, rb = row.get(a, {}), row.get(b, {})
        lines.append(
            f"{cls:<12}"
            + "".join(f"  {_d(ra.get(key)):>{w}} {_d(rb.get(key)):>{w}}" for _, key in QUANTILES)
        )
    return lines


def render(result: dict[str, Any], a: str, b: str) -> str:
    """The comparison as plain-text tables (also used to write docs)."""
    # the scenario's name, as `run` says it (not the path it was given as)
    name = result.get("reports", {}).get(a, {}).get("scenario", result["scenario"])
    lines = [
        f"scenario {name}, {format_duration(result['duration_seconds'])} simulated on each profile",
        "",
    ]
    lines += class_table(result["classes"], a, b)
    lines.append("")
    fa, fb = result["fabric"][a], result["fabric"][b]
    lines.append(f"{'':<24} {a:>16} {b:>16}")
    lines.append(
        f"{'throughput':<24} {format_rate(fa['throughput_bytes_per_second']):>16} {format_rate(fb['throughput_bytes_per_second']):>16}"
    )
    lines.append(
        f"{'completed flows':<24} {fa['completed_flows']:>16,} {fb['completed_flows']:>16,}"
    )
    lines.append(
        f"{'dropped':<24} {format_bytes(fa['dropped_bytes']):>16} {format_bytes(fb['dropped_bytes']):>16}"
    )
    lines.append(
        f"{'retransmitted':<24} {format_bytes(fa['retransmitted_bytes']):>16} {format_bytes(fb['retransmitted_bytes']):>16}"
    )
    lines.append(f"{'pause frames':<24} {fa['pause_frames']:>16,.0f} {fb['pause_frames']:>16,.0f}")
    lines.append(
        f"{'ECN-marked packets':<24} {fa['ecn_marked_packets']:>16,.0f} {fb['ecn_marked_packets']:>16,.0f}"
    )
    lines.append(f"{'deadlocks':<24} {fa['deadlocks']:>16} {fb['deadlocks']:>16}")
    # the faults as `fabtop run` says them, on each profile (compare left them out)
    for name in (a, b):
        report = result.get("reports", {}).get(name, {})
        for f in report.get("faults", []):
            lines.append(f"{name}: {fault_line(f, report.get('flow_control'))}")
        for skipped in report.get("schedule_skipped", []):
            lines.append(f"{name}: scheduled fault skipped, the core refused it: {skipped}")
        if (refused := refused_warning(report)) is not None:  # (the profile ran less)
            lines.append(f"{name}: warning: {refused}")
    if "latency_by_size" in result:
        lines.append("")
        # (the same on every scenario: a reader took it for their own cluster's latency)
        lines.append(
            "one message alone on each profile's stock idle fabric (2 leaves, 1 spine), not "
            "this scenario's: its links, latencies and topology do not enter"
        )
        # (the row's "reduction" is the first profile's: 1 - a's latency / b's)
        header = lower_by_header(a)
        w = len(header)
        lines.append(f"{'message':>10} {'switches':>8} {a:>14} {b:>14}  {header:>{w}}")
        rows = result["latency_by_size"]
        for row in rows:
            lat = row["latency_seconds"]
            lines.append(
                f"{format_bytes(row['size_bytes']):>10} {row['switch_hops']:>8} {_d(lat[a]):>14} {_d(lat[b]):>14}  {lower_by(row['reduction']):>{w}}"
            )
        if any(lower_by(row["reduction"]).startswith("-") for row in rows):
            lines.append(f"(negative: {a} is higher, by that share of {b}'s latency)")
    return "\n".join(lines)
