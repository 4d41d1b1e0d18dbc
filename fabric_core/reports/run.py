"""Headless runs: advance a fabric for a simulated duration and summarise it."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fabric_core.faults.book import fault_stages
from fabric_core.planes.coordinator import PlanedFabric
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.snapshot import Snapshot

ProgressFn = Callable[[float, float], None]  # (simulated so far, total)


def ticks_for(duration_s: float, dt_s: float) -> int:
    """The ticks ``run_for`` runs for ``duration_s``: whole ticks, at least one, rounded up
    (a duration a billionth of a tick over a whole number is not a tick more)."""
    return max(1, math.ceil(duration_s / dt_s - 1e-9))


def run_for(
    fabric: Fabric | PlanedFabric, duration_s: float, progress: ProgressFn | None = None
) -> dict[str, Any]:
    """Run ``duration_s`` of simulated time and return the report (JSON-ready).

    The first tick is timed on its own as well: in a fresh process it loads the compiled
    kernels from numba's cache (some 0.4 s), which would hide the speed of a short run."""
    ticks = ticks_for(duration_s, fabric.dt_s)
    wall0 = time.perf_counter()
    hop0 = fabric.hop_updates
    fabric.run_ticks(1)
    first = FirstTick(time.perf_counter() - wall0, fabric.hop_updates - hop0)
    # some 200 progress reports, in batches of at least 100 ticks (uneventful ticks run
    # several to a call: a batch of a few would pay the call for each)
    batch = max(min(ticks, 100), ticks // 200)
    done = 1
    while done < ticks:
        n = min(batch, ticks - done)
        fabric.run_ticks(n)
        done += n
        if progress is not None:
            progress(done * fabric.dt_s, ticks * fabric.dt_s)
    wall_s = time.perf_counter() - wall0
    return report_of(fabric, ticks, fabric.hop_updates - hop0, wall_s, first)


@dataclass(frozen=True)
class FirstTick:
    """The first tick of a run, timed on its own: its wall seconds and hop-updates."""

    wall_s: float
    hop_updates: int


#: The severities of the events a report lists (``notable_events``)
NOTABLE_SEVERITIES = ("warning", "error")


def report_of(
    fabric: Fabric | PlanedFabric,
    ticks: int,
    hop_updates: int,
    wall_s: float,
    first: FirstTick | None = None,
) -> dict[str, Any]:
    """The report (JSON-ready) of a fabric that has just run ``ticks`` ticks, with
    ``hop_updates`` hop-updates, in ``wall_s`` seconds of wall time; with ``first``, the
    first of those ticks timed on its own (``run.after_first_tick``: the rest's speed)."""
    snap = fabric.snapshot(wall_time_s=wall_s, running=False)
    report = summarise(snap)
    # the scenario's scheduled faults the core refused when their time came (a second of
    # one kind on a link, a clear of nothing): said once each, beside the faults that ran
    report["schedule_skipped"] = list(fabric.schedule_skipped)
    # workloads the tick is too long for: their figures are the tick's, not the physics'
    report["tick_notes"] = fabric.tick_notes()
    # workloads stopped at the end: in a run, those its scenario starts stopped
    # (``start_stopped``), since nothing sends a run a start command
    report["stopped_workloads"] = [wl.name for wl in fabric.workloads if not wl.running]
    # flows the admission limits refused: they never ran, so the run is not the one asked for
    report["admission"] = admission_of(fabric)
    # the flows still in flight at the end, beside their bytes (the totals'): on RoCE some
    # may be held for their ACK timeout, stuck behind a dead link that swallowed their bytes
    report["in_flight"] = {
        "flows": snap.totals.active_flows,
        "waiting_to_resend": snap.totals.waiting_flows,
    }

    def per(x: float, seconds: float) -> float:
        return x / seconds if seconds > 0 else float("inf")

    report["run"] = {
        "simulated_seconds": fabric.sim_time_s,
        "ticks": fabric.tick,
        "dt_seconds": fabric.dt_s,
        "wall_seconds": wall_s,
        "ticks_per_second": per(ticks, wall_s),
        "hop_updates": hop_updates,
        "hop_updates_per_second": per(hop_updates, wall_s),
        "sim_seconds_per_wall_second": per(ticks * fabric.dt_s, wall_s),
        "solver": fabric.solver,
    }
    if first is not None:
        rest_s = max(wall_s - first.wall_s, 0.0)
        report["run"]["first_tick_seconds"] = first.wall_s
        if ticks > 1:
            report["run"]["after_first_tick"] = {
                "wall_seconds": rest_s,
                "sim_seconds_per_wall_second": per((ticks - 1) * fabric.dt_s, rest_s),
                "hop_updates_per_second": per(hop_updates - first.hop_updates, rest_s),
            }
    if isinstance(fabric, Fabric) and fabric.python_ticks:
        # a first run after an install: its first ticks ran as Python, far slower, while
        # the kernels compiled aside (``kernels.warmup``)
        report["run"]["as_python"] = {
            "ticks": fabric.python_ticks,
            "wall_seconds": fabric.python_wall_s,
        }
    if isinstance(fabric, PlanedFabric):
        report["run"]["planes"] = planes_figures(fabric)
    return report


def admission_of(fabric: Fabric | PlanedFabric) -> dict[str, Any]:
    """The report's ``admission``: the flows and bytes the admission limits refused in all
    (``fabtop_flows_refused_total``), those of each workload that had some refused (in the
    scenario's order; the rest of the totals are faults' flows), the fabric-wide cap, and
    the notes of the workloads whose own parameters ask for more flows at once than it
    lets in (``Fabric.admission_notes``: said before the run, too).

    A refused flow is not queued or retried: it never completes, so a workload that waits
    for it (an all-to-all round, a MoE phase) waits for ever, but a closed loop's sender
    (``bulk``, ``pairs``) takes its slot back and tries again with a new flow, counted
    again if refused again (docs/MQTT.md, "Limits")."""
    adm = fabric.faults.admission
    by_name = adm.refused_by_workload
    return {
        "refused_flows": int(adm.refused_flows_total),
        "refused_bytes": float(adm.refused_bytes_total),
        "max_flows_in_flight": int(adm.limits.fabric_flows),
        "workloads": {
            wl.name: {"refused_flows": by_name[wl.name][0], "refused_bytes": by_name[wl.name][1]}
            for wl in fabric.workloads
            if wl.name in by_name
        },
        "notes": fabric.admission_notes(),
    }


def planes_figures(fabric: PlanedFabric) -> dict[str, Any]:
    """How a fabric run one engine per plane was run: where, how many, the batch."""
    return {
        "placement": fabric.pool.placement,
        "planes": fabric.planes,
        "batch_ticks": fabric.batch_ticks,
    }


def _num(x: float) -> float | None:
    return None if not math.isfinite(x) else float(x)


def summarise(snap: Snapshot) -> dict[str, Any]:
    """A JSON-ready summary of a snapshot: throughput, utilisation, latency, drops, faults."""
    ls = snap.link_state
    util = np.asarray(ls.utilisation)
    elapsed = snap.sim_time_s
    # switch to switch: neither end an endpoint (a GPU or a storage target; the tier's
    # names counted storage cables, ``stor-leaf``, as the fabric's own)
    switch = np.asarray(snap.nodes.tier) > 0
    fabric_links = switch[np.asarray(snap.links.src)] & switch[np.asarray(snap.links.dst)]
    classes = {}
    for name, h in snap.latency.items():
        classes[name] = {
            "completed": h.count,
            "p50_seconds": _num(h.quantile(0.5)),
            "p99_seconds": _num(h.quantile(0.99)),
            "p999_seconds": _num(h.quantile(0.999)),
            "mean_seconds": _num(h.mean()),
        }
    tx = np.asarray(ls.tx_bytes_total)
    return {
        "scenario": snap.scenario,
        "cluster": snap.cluster,
        "profile": snap.profile,
        "flow_control": snap.flow_control,
        "seed": snap.seed,
        "totals": {
            "injected_bytes": snap.totals.injected_bytes_total,
            "cancelled_bytes": snap.totals.cancelled_bytes_total,
            "delivered_bytes": snap.totals.delivered_bytes_total,
            "dropped_bytes": snap.totals.dropped_bytes_total,
            "in_flight_bytes": snap.totals.in_flight_bytes,
            "completed_flows": snap.totals.completed_flows_total,
            "throughput_bytes_per_second": snap.totals.delivered_bytes_total / elapsed
            if elapsed > 0
            else 0.0,
        },
        "links": {
            "count": len(snap.links),
            "mean_utilisation": float(
                tx.sum() / (np.asarray(snap.links.bandwidth_Bps).sum() * elapsed)
            )
            if elapsed > 0
            else 0.0,
            "max_utilisation_last_tick": float(util.max(initial=0.0)),
            "fabric_mean_utilisation": float(
                tx[fabric_links].sum()
                / (np.asarray(snap.links.bandwidth_Bps)[fabric_links].sum() * elapsed)
            )
            if elapsed > 0 and fabric_links.any()
            else 0.0,
            "discards_bytes": float(np.asarray(ls.discards_bytes_total).sum()),
            "retransmitted_bytes": float(np.asarray(ls.retransmitted_bytes_total).sum()),
            "transmit_wait_seconds": float(np.asarray(ls.transmit_wait_seconds_total).sum()),
            "pause_frames": float(np.asarray(ls.pause_frames_total).sum()),
            "ecn_marked_packets": float(np.asarray(ls.ecn_marked_packets_total).sum()),
        },
        "classes": classes,
        "workloads": {
            name: {
                "kind": w.kind,
                "class": w.traffic_class,
                "kpis": {k: _num(v) for k, v in w.kpis.items()},
            }
            for name, w in snap.workloads.items()
        },
        "faults": [
            {
                "id": f.id,
                "kind": f.kind,
                "target": f.target,
                "state": f.state,
                "injected_at_seconds": f.injected_at_s,
                "time_to_detect_seconds": f.time_to_detect_s,
                "time_to_mitigate_seconds": f.time_to_mitigate_s,
                "time_to_recover_seconds": f.time_to_recover_s,
                # ("state" is the latest stage reached: "recovered" says nothing of whether
                # the fault is still active; this does)
                "cleared_at_seconds": f.cleared_at_s,
                # the stages this kind reaches on this fabric: a time still null is "not
                # yet" only for one of these (nothing mitigates a PFC storm on credits)
                "stages": list(fault_stages(f.kind, snap.flow_control)),
            }
            for f in snap.faults
        ],
        "events": len(snap.events),
        # what an operator must hear of (a deadlock, a PFC watchdog's drops, a fault's
        # timeline): the warnings and errors among the snapshot's latest events
        "notable_events": [
            {
                "time_seconds": e.time_s,
                "severity": e.severity,
                "kind": e.kind,
                "target": e.target,
                "message": e.message,
            }
            for e in snap.events
            if e.severity in NOTABLE_SEVERITIES
        ],
    }
