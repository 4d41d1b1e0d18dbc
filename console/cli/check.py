"""``fabtop check ibgda``: the IBGDA bring-up check (2 GPUs first, then the cluster)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

from console.cli._common import (
    add_scenario_options,
    count,
    duration,
    load_from_args,
    message_size,
)
from console.cli.output import file_path, refuse_bad_outputs, write_output
from console.cli.progress import ProgressBar
from fabric_core.commands import CommandError, InjectFault, closest_names
from fabric_core.reports.bringup import (
    CLUSTER_MESSAGE_BUDGET,
    DEADLINE_MARGIN,
    StepProgress,
    check_ibgda,
)
from fabric_core.runtime.scenario import Scenario, ScenarioError
from fabric_core.units import format_duration


def register(sub: Any) -> None:
    """Add the ``check`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "check",
        help="bring-up checks (ibgda: 2-GPU all-to-all small messages, then the cluster)",
        description="Run the IBGDA bring-up check: a small-message all-to-all on two GPUs of "
        "one leaf, then on every GPU of the scenario. Each step's time budget comes from the "
        "cluster (the slowest of WQE posting, NIC line rate and leaf uplinks, plus the latency "
        "of a round measured on two GPUs, times a margin). Prints pass/fail per step with "
        "message rate and latency; on failure, what failed (WQE post error; hang: no message "
        "completed for a window; slow: progress, but past the deadline) and on which GPU. "
        "Exit status 0 when every step passes, 1 otherwise.",
    )
    p.add_argument("what", metavar="CHECK", choices=["ibgda"], help="which check to run: ibgda")
    add_scenario_options(p)
    p.add_argument(
        "--mismatch",
        action="append",
        default=[],
        metavar="GPU[:MODE]",
        help="inject version_mismatch on GPU (a name such as gpu0003) before the check; MODE "
        "'fail' (the default): its WQE posts fail; 'hang': its posts succeed and their "
        "completions never come; repeatable",
    )
    p.add_argument(
        "--size",
        type=message_size,
        default=4096,
        metavar="BYTES",
        help="message size, in bytes or with a unit such as 4KiB (default 4096; at most 2 GiB)",
    )
    p.add_argument(
        "--rounds",
        type=count,
        default=4,
        help="all-to-all rounds per step (default 4; fewer make a large cluster's check "
        f"quicker). A cluster step over {CLUSTER_MESSAGE_BUDGET:,} messages is scaled down "
        "(fewer rounds, then messages per peer, then peers per GPU), and says so",
    )
    p.add_argument(
        "--timeout",
        type=duration,
        default=None,
        metavar="DURATION",
        help="simulated time after which a step that is still making progress is 'slow' "
        f"(default: {DEADLINE_MARGIN:g}x the step's expected time, computed from the cluster)",
    )
    p.add_argument("--json", type=file_path, metavar="FILE", help="write the results as JSON")
    p.set_defaults(func=run)


def _fault(spec: str) -> InjectFault:
    gpu, _, mode = spec.partition(":")
    if mode not in ("", "hang", "fail"):
        raise argparse.ArgumentTypeError(f"--mismatch {spec!r}: mode must be 'hang' or 'fail'")
    return InjectFault(
        kind="version_mismatch", target=gpu, params={"hang": 1.0 if mode == "hang" else 0.0}
    )


#: GPU names a refused --mismatch suggests at most
MAX_SUGGESTED_GPUS = 3


def _unknown_gpu(name: str, gpus: Sequence[str]) -> str:
    """Why ``name`` is no GPU of the scenario: the closest names, and the GPUs there are."""
    close = closest_names(name, gpus, n=MAX_SUGGESTED_GPUS)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return (
        f"--mismatch {name!r}: no such GPU in the scenario ({hint}its {len(gpus):,} GPUs are "
        f"{gpus[0]}..{gpus[-1]})"
    )


def _refuse_unknown_gpus(scn: Scenario, faults: Sequence[InjectFault]) -> None:
    """Raises ArgumentTypeError for a --mismatch GPU the scenario does not have (before
    the check runs; a node that is no GPU is left to the core, which says what it is)."""
    if not faults:
        return
    topo = scn.build_topology()
    names = topo.nodes.name
    known = set(names)
    for f in faults:
        if f.target not in known:
            raise argparse.ArgumentTypeError(
                _unknown_gpu(f.target, [names[i] for i in topo.gpus.tolist()])
            )


def _t(x: float) -> str:
    return format_duration(x) if math.isfinite(x) else "—"


def run(args: argparse.Namespace) -> int:
    """Run the check and print one line per step (plus the diagnosis on failure)."""
    if refuse_bad_outputs([("--json", args.json)]):  # before the check, not after it
        return 2
    scn = load_from_args(args)
    if scn is None:
        return 2
    bar = ProgressBar()
    names: list[str] = []

    def progress(p: StepProgress) -> None:
        if p.name not in names:
            names.append(p.name)
            bar.restart(f"step {len(names)} {p.name}")
        bar.update(p.elapsed_s, p.plan.expected_s, f"{p.completed:,}/{p.messages:,} messages")

    print(f"IBGDA bring-up check on {scn.name} ({scn.profile.name})", flush=True)
    try:
        faults = [_fault(s) for s in args.mismatch]
        gpus = [f.target for f in faults]
        if len(set(gpus)) < len(gpus):  # (the core refused the second, and it went unsaid)
            twice = next(g for g in gpus if gpus.count(g) > 1)
            raise argparse.ArgumentTypeError(
                f"--mismatch {twice} given twice: a GPU takes one version_mismatch"
            )
        _refuse_unknown_gpus(scn, faults)
        steps = check_ibgda(
            scn,
            faults=faults,
            size_bytes=args.size,
            rounds=args.rounds,
            timeout_s=args.timeout,
            progress=progress,
        )
    except (argparse.ArgumentTypeError, CommandError, ScenarioError, ValueError) as exc:
        bar.close()
        print(f"fabtop: {exc}", file=sys.stderr)
        return 2
    bar.close()
    for i, st in enumerate(steps, 1):
        verdict = "PASS" if st.passed else "FAIL"
        print(
            f"step {i} {st.name:<20} {verdict}  {len(st.gpus):,} GPUs  "
            f"{st.completed:,}/{st.messages:,} messages in {_t(st.elapsed_s)} "
            f"(expected {_t(st.expected_s)}, bound: {st.bound})  "
            f"rate {st.message_rate_per_s / 1e6:.3g} M msg/s per GPU  "
            f"latency p50 {_t(st.latency_p50_s)} p99 {_t(st.latency_p99_s)}"
        )
        if st.scaled:
            print(f"  scaled down: {st.scaled}")
        if not st.passed:
            print(f"  failure: {st.failure}")
            for line in st.diagnosis:
                print(f"  {line}")
    ok = all(s.passed for s in steps)
    if ok and len(steps) == 2:
        print("IBGDA bring-up: PASS")
    elif not ok:
        print("IBGDA bring-up: FAIL (fix the step above before running on the cluster)")
    if args.json and not write_output(
        args.json, json.dumps([s.as_dict() for s in steps], indent=2, default=str) + "\n"
    ):
        return 1
    return 0 if ok else 1
