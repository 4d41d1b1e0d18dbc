"""From a ``Snapshot`` to the MQTT payloads (``schema``): what the bridge sends."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from exporters.mqtt.schema import (
    SCHEMA_VERSION,
    CommandStatsMsg,
    EventMsg,
    EventStatsMsg,
    FaultMsg,
    HealthMsg,
    HistogramLayoutMsg,
    HistogramMsg,
    LinksMsg,
    MetaMsg,
    NodesMsg,
    TelemetryMsg,
    TotalsMsg,
    WorkloadMsg,
)
from fabric_core.runtime.engine import EngineHealth
from fabric_core.runtime.snapshot import Event, LinkStatus, Snapshot
from fabric_core.tick import histogram as hist
from fabric_core.tick.histogram import HistogramView

#: Faults sent per telemetry message: every active one, then the latest cleared ones.
MAX_FAULTS = 64


def _num(x: float) -> float | None:
    return None if math.isnan(x) else x


def encode_histogram(h: HistogramView) -> HistogramMsg:
    """Sparse counts plus p50/p99/p99.9 (null when empty)."""
    nz = np.flatnonzero(h.counts)
    return HistogramMsg(
        count=h.count,
        sum_s=h.sum_s,
        p50_s=_num(h.quantile(0.5)),
        p99_s=_num(h.quantile(0.99)),
        p999_s=_num(h.quantile(0.999)),
        i=nz.tolist(),
        n=h.counts[nz].tolist(),
    )


def top_links(snap: Snapshot, k: int) -> NDArray[np.intp]:
    """The ``k`` links an operator most needs to see, most interesting first.

    Links not up come first, then paused ones, then by utilisation and queue;
    links named as the target of an active fault are always included (beyond ``k``).
    """
    ls = snap.link_state
    n = len(snap.links)
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    # np.lexsort sorts by the last key first; negate for descending order.
    order = np.lexsort(
        (
            -ls.queue_bytes,
            -ls.utilisation,
            -ls.paused.astype(np.int8),
            -(ls.status != LinkStatus.UP).astype(np.int8),
        )
    )
    chosen = list(order[: max(k, 0)])
    seen = set(int(i) for i in chosen)
    for fault in snap.active_faults:
        i = snap.links.index.get(fault.target)
        if i is not None and i not in seen:
            chosen.append(i)
            seen.add(i)
    return np.asarray(chosen, dtype=np.intp)


def encode_links(snap: Snapshot, k: int) -> LinksMsg:
    """The top ``k`` links (see ``top_links``) as columns."""
    idx = top_links(snap, k)
    lt, ls = snap.links, snap.link_state

    def col(a: NDArray[np.generic]) -> list[float]:
        return [float(x) for x in a[idx]]

    return LinksMsg(
        total=len(lt),
        name=[lt.name[i] for i in idx],
        tier=[lt.tier[i] for i in idx],
        bandwidth_Bps=col(lt.bandwidth_Bps),
        prop_delay_s=col(lt.prop_delay_s),
        buffer_bytes=col(lt.buffer_bytes),
        status=[int(x) for x in ls.status[idx]],
        utilisation=col(ls.utilisation),
        queue_bytes=col(ls.queue_bytes),
        queue_vl_bytes=np.asarray(ls.queue_vl_bytes, dtype=np.float64)[idx].tolist(),
        credits_bytes=col(ls.credits_bytes),
        paused=[bool(x) for x in ls.paused[idx]],
        tx_bytes_total=col(ls.tx_bytes_total),
        tx_packets_total=col(ls.tx_packets_total),
        transmit_wait_seconds_total=col(ls.transmit_wait_seconds_total),
        pause_frames_total=col(ls.pause_frames_total),
        pause_seconds_total=col(ls.pause_seconds_total),
        ecn_marked_packets_total=col(ls.ecn_marked_packets_total),
        cnp_handled_total=col(ls.cnp_handled_total),
        discards_bytes_total=col(ls.discards_bytes_total),
        retransmitted_bytes_total=col(ls.retransmitted_bytes_total),
        link_downed_total=col(ls.link_downed_total),
        link_error_recovery_total=col(ls.link_error_recovery_total),
        symbol_errors_total=col(ls.symbol_errors_total),
    )


def _faults(snap: Snapshot) -> list[FaultMsg]:
    active = [f for f in snap.faults if f.cleared_at_s is None]
    cleared = [f for f in snap.faults if f.cleared_at_s is not None]
    room = max(0, MAX_FAULTS - len(active))
    kept = {id(f) for f in active} | {id(f) for f in (cleared[-room:] if room else [])}
    keep = [f for f in snap.faults if id(f) in kept]
    return [
        FaultMsg(
            id=f.id,
            kind=f.kind,
            target=f.target,
            params=dict(f.params),
            state=f.state,
            injected_at_s=f.injected_at_s,
            detected_at_s=f.detected_at_s,
            mitigated_at_s=f.mitigated_at_s,
            recovered_at_s=f.recovered_at_s,
            cleared_at_s=f.cleared_at_s,
        )
        for f in keep
    ]


def encode_telemetry(
    snap: Snapshot,
    *,
    run_id: str,
    top_k: int = 32,
    health: EngineHealth | None = None,
    commands: CommandStatsMsg | None = None,
    events: EventStatsMsg | None = None,
) -> TelemetryMsg:
    """The telemetry message for one snapshot (with the engine's pacing and the
    bridge's command and event counters when given)."""
    t = snap.totals
    return TelemetryMsg(
        v=SCHEMA_VERSION,
        run_id=run_id,
        cluster=snap.cluster,
        scenario=snap.scenario,
        profile=snap.profile,
        flow_control=snap.flow_control,
        seed=snap.seed,
        tick=snap.tick,
        sim_time_s=snap.sim_time_s,
        dt_s=snap.dt_s,
        wall_time_s=snap.wall_time_s,
        target_speed=snap.target_speed,
        measured_speed=snap.measured_speed,
        running=snap.running,
        totals=TotalsMsg(
            injected_bytes_total=t.injected_bytes_total,
            cancelled_bytes_total=t.cancelled_bytes_total,
            delivered_bytes_total=t.delivered_bytes_total,
            dropped_bytes_total=t.dropped_bytes_total,
            in_flight_bytes=t.in_flight_bytes,
            throughput_Bps=t.throughput_Bps,
            active_flows=t.active_flows,
            completed_flows_total=t.completed_flows_total,
            waiting_flows=t.waiting_flows,
        ),
        links=encode_links(snap, top_k),
        latency={cls: encode_histogram(h) for cls, h in snap.latency.items()},
        workloads={
            name: WorkloadMsg(
                kind=w.kind,
                traffic_class=w.traffic_class,
                kpis={k: _num(float(v)) for k, v in w.kpis.items()},
                histograms={k: encode_histogram(h) for k, h in w.histograms.items()},
            )
            for name, w in snap.workloads.items()
        },
        faults=_faults(snap),
        params={k: _num(float(v)) for k, v in snap.params.items()},
        health=None
        if health is None
        else HealthMsg(
            pacing=health.pacing,
            busy_fraction=health.busy_fraction,
            queued_commands=health.queued_commands,
            flows_refused_total=health.flows_refused_total,
        ),
        commands=commands,
        events=events,
    )


def encode_meta(snap: Snapshot, *, run_id: str) -> MetaMsg:
    """The retained run description for the snapshot's run."""
    nodes = snap.nodes
    return MetaMsg(
        v=SCHEMA_VERSION,
        run_id=run_id,
        cluster=snap.cluster,
        scenario=snap.scenario,
        profile=snap.profile,
        flow_control=snap.flow_control,
        seed=snap.seed,
        links_total=len(snap.links),
        nodes=NodesMsg(
            name=list(nodes.name),
            kind=list(nodes.kind),
            tier=[int(x) for x in nodes.tier],
            plane=[int(x) for x in nodes.plane],
        ),
        histogram=HistogramLayoutMsg(
            buckets_per_decade=hist.BUCKETS_PER_DECADE,
            lowest_bound_s=hist.LOWEST_BOUND_S,
            highest_bound_s=hist.HIGHEST_BOUND_S,
            n_buckets=hist.N_BUCKETS,
        ),
        link_names=list(snap.links.name),
    )


def encode_event(event: Event, *, run_id: str) -> EventMsg:
    """One event message."""
    return EventMsg(
        v=SCHEMA_VERSION,
        run_id=run_id,
        # to the picosecond: simulated time is a sum of ticks, whose float noise
        # (0.06675099999999999) says nothing a tick of 1 ns or more could
        time_s=round(event.time_s, 12),
        severity=event.severity,
        kind=event.kind,
        target=event.target,
        message=event.message,
    )


class EventCursor:
    """Finds the events of a snapshot that were not sent yet.

    A snapshot holds the latest 100 events of its run (newest last); an event carries
    no sequence number. The cursor remembers the last event it returned; the events
    after it in the next window are new. When that event is no longer in the window,
    at least a window's worth of events happened between the two snapshots (a burst
    between two snapshots the bridge read, or the broker away for long): the events
    in the window newer than it are returned, those that scrolled out in between are
    lost, and ``gaps`` counts the occasion (how many were lost is unknown, possibly
    none). Nothing queues up without bound.
    """

    def __init__(self) -> None:
        self._last: Event | None = None
        #: times the last event returned had scrolled out of the next window
        self.gaps = 0

    def new_events(self, events: tuple[Event, ...]) -> tuple[Event, ...]:
        """The events after the last one returned before; advances the cursor."""
        start = 0
        if self._last is not None:
            pos = self._find(events)
            if pos is not None:
                start = pos + 1
            else:
                self.gaps += 1
                last_time = self._last.time_s
                start = next((i for i, e in enumerate(events) if e.time_s > last_time), len(events))
        new = events[start:]
        if new:
            self._last = new[-1]
        return new

    def _find(self, events: tuple[Event, ...]) -> int | None:
        for i in range(len(events) - 1, -1, -1):
            if events[i] is self._last:
                return i
        for i in range(len(events) - 1, -1, -1):
            if events[i] == self._last:
                return i
        return None
