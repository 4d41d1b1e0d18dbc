"""``fabtop run``: a headless run that prints a summary and writes a JSON report."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from console.cli._common import (
    add_planes_options,
    add_scenario_options,
    build_fabric,
    count_of,
    duration,
    load_from_args,
    planes_from_args,
    whole_ticks_note,
)
from console.cli.output import file_path, refuse_bad_outputs, write_output
from console.cli.progress import ProgressBar
from console.compiling import ONCE
from console.fabrics import close_fabric
from fabric_core.commands import InjectFault
from fabric_core.faults.book import FAULT_KINDS, STAGES, fault_stages
from fabric_core.faults.recovery import RECOVERED_FRACTION
from fabric_core.reports.record import Recorder, RecordError, save_run
from fabric_core.reports.run import run_for
from fabric_core.runtime.engine import RunEndedError
from fabric_core.runtime.fabric import SOLVERS
from fabric_core.units import format_bytes, format_duration, format_rate
from fabric_core.workloads import RETRYING_KINDS


def register(sub: Any) -> None:
    """Add the ``run`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "run",
        help="run a scenario headless for a simulated duration and report",
        description="Run a scenario without the console and print throughput, utilisation, "
        "latency percentiles per traffic class and drops; optionally write a JSON report.",
    )
    add_scenario_options(p)
    p.add_argument(
        "--duration",
        type=duration,
        default=duration("1ms"),
        help="simulated time to run, with a unit (default 1ms; units ns, us, ms, s)",
    )
    p.add_argument(
        "--json", type=file_path, metavar="FILE", help="write the full report as JSON to FILE"
    )
    p.add_argument(
        "--solver",
        choices=SOLVERS,
        default="compiled",
        help="the tick's solver: the compiled kernels (default) or the numpy reference they "
        "are tested against (same results within 1e-9, several times slower)",
    )
    p.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="cores a large fabric's compiled tick shares (its solve, index, move and credits; "
        "tens of thousands of entries in flight; default: every core; the results do not "
        "depend on it)",
    )
    add_planes_options(p)
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    p.add_argument(
        "--record", type=file_path, metavar="FILE", help="record the run for `fabtop replay`"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run, print the summary, write the JSON report."""
    if args.threads is not None:
        from fabric_core.tick.kernels._jit import use_threads  # imports numba: not for --help

        try:
            use_threads(args.threads)
        except ValueError as exc:
            print(f"fabtop: --{exc}", file=sys.stderr)
            return 2
    # checked before the run, not when it is done and its results would be lost
    if refuse_bad_outputs((("--json", args.json), ("--record", args.record))):
        return 2
    scn = load_from_args(args)
    if scn is None:
        return 2
    fabric = build_fabric(scn, args.solver, planes_from_args(args))
    if fabric is None:
        return 2
    if not args.quiet and (note := whole_ticks_note(args.duration, fabric.dt_s)):
        print(f"fabtop: {note}", file=sys.stderr)
    for note in fabric.tick_notes():  # (figures the tick changes: said even with --quiet)
        print(f"fabtop: warning: {note}", file=sys.stderr)
    for note in fabric.admission_notes():  # (a workload that cannot run whole: likewise)
        print(f"fabtop: warning: {note}", file=sys.stderr)
    try:
        bar = ProgressBar(f"run {scn.name}", total_s=args.duration)
        if args.quiet:
            bar.enabled = False
        try:
            with _compiles_noted(bar, args.solver):
                report = run_for(fabric, args.duration, bar.update)
        except RunEndedError as exc:  # a plane's engine lost: no report
            bar.close()
            print(f"fabtop: the run stopped at {fabric.sim_time_s:.6g} s: {exc}", file=sys.stderr)
            if args.record:  # what ran until then, for `fabtop replay`
                _save_record(args.record, lambda: Recorder.start(scn, fabric).save(args.record))
            return 1
        bar.close()
        if args.quiet:  # (flows that never ran change every figure: said even with --quiet)
            if (refused := refused_warning(report)) is not None:
                print(f"fabtop: warning: {refused}", file=sys.stderr)
        else:
            print_summary(report)
            for at_s, cmd in fabric.schedule:  # (a fault past the end ran as if not there)
                what = f"{cmd.kind} on {cmd.target}" if isinstance(cmd, InjectFault) else "clear"
                # (a fault due at the run's end would apply at the start of the next tick)
                print(
                    f"scheduled fault not reached: {what} at {format_duration(at_s)}; the run "
                    f"ended at {format_duration(fabric.sim_time_s)}"
                )
        status = 0
        if args.json and not write_output(
            args.json, json.dumps(report, indent=2, allow_nan=False) + "\n"
        ):
            status = 1
        # the record last (it needs the fabric): a failure to write it loses neither the
        # summary nor the report, and is said after them
        if args.record and not _save_record(
            args.record, lambda: save_run(args.record, scn, fabric, report)
        ):
            status = 1
    finally:
        close_fabric(fabric)
    return status


def _save_record(path: Path, save: Callable[[], None]) -> bool:
    """Run ``save`` (writing the record to ``path``); on failure print ``fabtop: cannot
    write the record PATH: reason`` and return False (as ``output.write_output`` does)."""
    try:
        save()
    except OSError as exc:
        reason: object = exc.strerror or exc
    except RecordError as exc:
        reason = exc
    else:
        return True
    print(f"fabtop: cannot write the record {path}: {reason}", file=sys.stderr)
    return False


def _fmt(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else format_duration(x)


#: What mitigating a fault is called, by its kind's mitigation (``FaultKind.mitigation``)
_MITIGATED = {"reroute": "rerouted", "retrain": "retrained"}


def fault_line(f: dict[str, Any], flow_control: str | None = None) -> str:
    """One of a report's ``faults`` as ``fabtop run`` and ``fabtop compare`` say it: when
    it was injected, whether it was still active at the run's end, and the time after
    injection of each stage its kind reaches on this fabric (its ``stages``), "not yet"
    for one not reached; a stage that does not apply (nothing mitigates an incast, nor a
    PFC storm on a credit fabric) is left out. A report from before ``stages`` was in it
    has them from its kind (``fault_stages``) on the report's ``flow_control``, if
    given. Recovery is measured, not a state of the fault: the delivered throughput back
    to ``RECOVERED_FRACTION`` of its level before the fault, which a degraded link's
    retries reach while it lasts (its ``state`` then reads "recovered")."""
    injected = f["injected_at_seconds"]
    cleared = f.get("cleared_at_seconds")  # (a report from before it had it: see "state")
    if cleared is not None:
        end = f"cleared after {_fmt(cleared - injected)}"
    elif f["state"] == "cleared":
        end = "cleared"
    else:
        end = "active at the run's end"
    applies = f.get("stages")
    if applies is None:
        applies = fault_stages(f["kind"], flow_control)
    kind = FAULT_KINDS.get(f["kind"])
    share = f"{RECOVERED_FRACTION:.0%}"
    names = {
        "detected": "detected",
        "mitigated": _MITIGATED.get(kind.mitigation, "mitigated") if kind else "mitigated",
        "recovered": f"throughput ≥ {share} of its pre-fault rate",
    }
    times = {
        "detected": f["time_to_detect_seconds"],
        "mitigated": f.get("time_to_mitigate_seconds"),
        "recovered": f["time_to_recover_seconds"],
    }
    stages = []
    for stage in STAGES:
        seconds = times[stage]
        if seconds is not None:  # (reached: said, whatever ``stages`` says)
            stages.append(f"{names[stage]} after {_fmt(seconds)}")
        elif stage in applies:
            stages.append(f"{names[stage]}: not yet")
    return (
        f"fault {f['id']} {f['kind']} on {f['target']}: injected at {_fmt(injected)}, "
        f"{end}; {', '.join(stages)}"
    )


def _compiles_noted(bar: ProgressBar, solver: str) -> AbstractContextManager[None]:
    """The progress line's note of what numba compiles (``compile_progress_note``); none on
    the reference solver, which compiles nothing (and imports no numba)."""
    if solver != "compiled":
        return nullcontext()
    from fabric_core.tick.kernels._jit import compiles_watched  # numba: not for --help

    return compiles_watched(lambda kernel: bar.note(compile_progress_note(kernel)))


def compile_progress_note(kernel: str | None) -> str | None:
    """The progress bar's note while numba compiles ``kernel`` (None: it is done)."""
    if kernel is None:
        return None
    return f"compiling {kernel} {ONCE}"


def _in_flight_flows(report: dict[str, Any]) -> str:
    """How many flows the bytes in flight at the end are, and how many of those wait out
    their ACK timeout (RoCE, behind a dead link that swallowed their bytes): flows stuck
    there show only as bytes otherwise."""
    flows = report.get("in_flight", {})
    if not flows.get("flows"):
        return ""
    waiting = flows.get("waiting_to_resend", 0)
    held = f", {waiting:,} of them waiting for their ACK timeout to resend" if waiting else ""
    return f" ({count_of(flows['flows'], 'flow')}{held})"


def _waiting(report: dict[str, Any]) -> str:
    """The links' time held back, summed over the links, by what holds them: PFC's pauses
    on RoCE, credits on the credit fabric (the same counter, port_xmit_wait's); and on
    RoCE its pause frames and ECN marks."""
    links = report["links"]
    waited = format_duration(links["transmit_wait_seconds"])
    if report.get("flow_control") == "pfc":
        return (
            f"paused {waited} in all (PFC), {links['pause_frames']:,.0f} pause frames, "
            f"{links['ecn_marked_packets']:,.0f} ECN marks"
        )
    return f"credit wait {waited} in all"


#: Notable events listed one by one in a run's summary; past these, by kind with a count
NOTABLE_LISTED = 5


def notable_lines(events: list[dict[str, Any]]) -> list[str]:
    """The summary's lines for a report's warnings and errors: the first of each kind
    (time, target, message) with how many more of it there were, errors first. A fault's
    own timeline is left out: the lines of the faults above say it."""
    events = [e for e in events if not e["kind"].startswith("fault_")]
    if not events:
        return []
    by_kind: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for e in events:
        by_kind.setdefault((e["severity"], e["kind"]), []).append(e)
    lines = [f"warnings and errors ({len(events)}, of the run's latest events):"]
    # errors first, each severity's kinds as they first came (``by_kind``'s order: the
    # sort is stable)
    order = sorted(by_kind, key=lambda k: k[0] != "error")
    for severity, kind in order[:NOTABLE_LISTED]:
        first, *more = by_kind[(severity, kind)]
        again = f" (and {len(more)} more)" if more else ""
        lines.append(f"  {severity} at {_fmt(first['time_seconds'])}: {first['message']}{again}")
    if len(order) > NOTABLE_LISTED:
        lines.append(f"  and {len(order) - NOTABLE_LISTED} more kinds: --json F lists them all")
    return lines


def refused_warning(report: dict[str, Any]) -> str | None:
    """What the run's summary warns of the flows the admission limits refused (the
    report's ``admission``), or None when none were: the run was not the one asked for."""
    adm = report.get("admission")
    if not adm or not adm["refused_flows"]:
        return None
    return (
        f"{count_of(adm['refused_flows'], 'flow')} ({format_bytes(adm['refused_bytes'])}) "
        'refused at admission: not queued or retried, they never ran (docs/MQTT.md, "Limits")'
    )


#: What the summary says became of a workload's refused flows: a closed loop's senders
#: (``RETRYING_KINDS``) took the slots back (``tried_again``); whatever else waited for
#: them waits still
WAITS_FOR_EVER = "what waits for them (an all-to-all round, a MoE phase) waits for ever"


def tried_again(run: dict[str, Any]) -> str:
    """What became of a closed loop's refused flows in the run ``run`` (a report's):
    its senders tried again the next tick, or on a multi-plane fabric run one engine
    per plane, whose workloads hear of refusals at a batch's end, the next batch."""
    planes = run.get("planes")
    when = "the next tick" if planes is None else f"the next batch of {planes['batch_ticks']} ticks"
    return f"its senders took the slots back and tried again {when} (each try counted)"


def refused_lines(report: dict[str, Any]) -> list[str]:
    """The summary's lines of the flows the admission limits refused: the warning
    (``refused_warning``), then whose they were, each workload's and the faults'."""
    warning = refused_warning(report)
    if warning is None:
        return []
    adm = report["admission"]
    lines = [f"warning: {warning}"]
    workloads = report.get("workloads", {})
    again = tried_again(report.get("run", {}))
    named, named_bytes = 0, 0.0
    for name, w in adm["workloads"].items():
        named += w["refused_flows"]
        named_bytes += w["refused_bytes"]
        kind = workloads.get(name, {}).get("kind", "?")
        lines.append(
            f"  workload {name} ({kind}): {count_of(w['refused_flows'], 'flow')} "
            f"({format_bytes(w['refused_bytes'])}), past the fabric-wide cap of "
            f"{adm['max_flows_in_flight']:,} flows in flight; "
            + (again if kind in RETRYING_KINDS else WAITS_FOR_EVER)
        )
    if adm["refused_flows"] > named:  # (the rest are an incast fault's)
        lines.append(
            f"  incast faults: {count_of(adm['refused_flows'] - named, 'flow')} "
            f"({format_bytes(adm['refused_bytes'] - named_bytes)}), past their own limits "
            "or the fabric-wide cap"
        )
    return lines


#: What a run's summary says of a workload stopped all run
NEVER_STARTED = (
    "stopped all run: its scenario starts it stopped (start_stopped = true), and a run "
    "sends no start command (fabtop serve or the console can start it)"
)


def workload_lines(workloads: dict[str, dict[str, Any]], stopped: Sequence[str] = ()) -> list[str]:
    """A line for each workload's own results (its KPIs, as the console shows them): the
    class table above has the fabric's latency of its messages, not, say, a storage I/O's
    (104 µs where its fabric leg is 7 µs), a training step's GPU utilisation or a TTFT.
    A workload in ``stopped`` (stopped at the end: in a run, all run) says so first."""
    from console.fmt import fmt_kpi, kpi_label  # (the console's own words and units)

    lines = []
    for name, w in workloads.items():
        # (a KPI not measured yet is null in the report: NaN has no JSON)
        kpis = [
            f"{kpi_label(k)} {'—' if v is None else fmt_kpi(k, v)}"
            for k, v in sorted(w["kpis"].items())
        ]
        if name in stopped:
            kpis.insert(0, NEVER_STARTED)
        if kpis:
            lines.append(f"workload {name} ({w['kind']}): {', '.join(kpis)}")
    return lines


def print_summary(report: dict[str, Any]) -> None:
    """Human-readable summary of a run report."""
    r = report["run"]
    t = report["totals"]
    links = report["links"]
    print(f"scenario {report['scenario']}  profile {report['profile']}  seed {report['seed']}")
    planes = r.get("planes")
    if planes:
        print(
            f"one engine per plane: {planes['planes']} planes ({planes['placement']}), "
            f"batches of {planes['batch_ticks']} ticks"
        )
    print(
        f"simulated {format_duration(r['simulated_seconds'])} in {count_of(r['ticks'], 'tick')} of {format_duration(r['dt_seconds'])}; "
        f"wall {r['wall_seconds']:.2f} s ({r['sim_seconds_per_wall_second']:.3g} simulated s per "
        f"wall s, {r['hop_updates_per_second']:.3g} hop-updates/s)"
    )
    rest = r.get("after_first_tick")
    if rest is not None:
        # the first tick of a fresh process loads the compiled kernels: on a short run it
        # is most of the wall time, so the speed after it is the one to read
        print(
            f"  the first tick {r['first_tick_seconds']:.2f} s (a new process loads the compiled "
            f"kernels in it, or compiles them the first time after an install); "
            f"after it {rest['sim_seconds_per_wall_second']:.3g} simulated s per wall s, "
            f"{rest['hop_updates_per_second']:.3g} hop-updates/s"
        )
    as_python = r.get("as_python")
    if as_python is not None:
        print(
            f"  the first {count_of(as_python['ticks'], 'tick')} ran as Python "
            f"({as_python['wall_seconds']:.1f} s) while the kernels compiled aside {ONCE}"
        )
    print(
        f"delivered {format_bytes(t['delivered_bytes'])} ({format_rate(t['throughput_bytes_per_second'])}), "
        f"{count_of(t['completed_flows'], 'flow')} completed, in flight "
        f"{format_bytes(t['in_flight_bytes'])}{_in_flight_flows(report)}, "
        f"dropped {format_bytes(t['dropped_bytes'])}"
    )
    for line in refused_lines(report):  # (beside the totals: what never ran is not in them)
        print(line)
    print(
        f"links: {links['count']:,}, mean utilisation {links['mean_utilisation']:.1%} "
        f"(switch-to-switch {links['fabric_mean_utilisation']:.1%}), retransmitted "
        f"{format_bytes(links['retransmitted_bytes'])}, {_waiting(report)}"
    )
    print(f"{'class':<12} {'flows':>8} {'p50':>10} {'p99':>10} {'p99.9':>10}")
    for name, c in report["classes"].items():
        print(
            f"{name:<12} {c['completed']:>8,} {_fmt(c['p50_seconds']):>10} {_fmt(c['p99_seconds']):>10} {_fmt(c['p999_seconds']):>10}"
        )
    for f in report["faults"]:
        print(fault_line(f, report.get("flow_control")))
    for skipped in report.get("schedule_skipped", []):
        print(f"scheduled fault skipped, the core refused it: {skipped}")
    for line in workload_lines(report.get("workloads", {}), report.get("stopped_workloads", ())):
        print(line)
    for line in notable_lines(report.get("notable_events", [])):
        print(line)
