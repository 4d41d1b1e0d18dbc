"""From MQTT payloads back to a real ``Snapshot`` (what the remote console renders).

Telemetry carries the top links only, so the snapshot built here has a link
table made of the links in the latest telemetry message (``LinkTable.reverse``
is -1 when the other direction was not reported). Node table, scenario and
profile come from the retained ``meta`` message; events from the ``event``
topic since the reader attached.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from exporters.mqtt.schema import EventMsg, HistogramMsg, MetaMsg, NodesMsg, TelemetryMsg
from fabric_core.runtime.snapshot import (
    Event,
    FaultView,
    LinkState,
    LinkTable,
    NodeTable,
    Snapshot,
    Totals,
    WorkloadView,
)
from fabric_core.tick import histogram as hist
from fabric_core.tick.histogram import HistogramView

_T = TypeVar("_T", bound=np.generic)


def _ro(array: NDArray[_T]) -> NDArray[_T]:
    """Make a freshly built array read-only, as snapshot arrays are."""
    array.flags.writeable = False
    return array


class IncompatibleTelemetryError(ValueError):
    """The sender uses another histogram layout or schema version."""


def check_meta(meta: MetaMsg) -> None:
    """Refuse a run whose histograms this program cannot read.

    Raises:
        IncompatibleTelemetryError: with what differs.
    """
    layout = meta.histogram
    if (
        layout.buckets_per_decade != hist.BUCKETS_PER_DECADE
        or layout.n_buckets != hist.N_BUCKETS
        or not math.isclose(layout.lowest_bound_s, hist.LOWEST_BOUND_S)
    ):
        raise IncompatibleTelemetryError(
            f"histogram layout {layout} differs from this fabtop's "
            f"({hist.BUCKETS_PER_DECADE}/decade, {hist.N_BUCKETS} buckets)"
        )


def decode_histogram(msg: HistogramMsg) -> HistogramView:
    """Rebuild a histogram view from its sparse counts."""
    counts = np.zeros(hist.N_BUCKETS, dtype=np.int64)
    idx = np.asarray(msg.i, dtype=np.intp)
    ok = (idx >= 0) & (idx < hist.N_BUCKETS)
    np.add.at(counts, idx[ok], np.asarray(msg.n, dtype=np.int64)[ok])
    counts.flags.writeable = False
    return HistogramView(counts=counts, sum_s=msg.sum_s)


def node_table(nodes: NodesMsg) -> NodeTable:
    """The node table of a run."""
    return NodeTable(
        name=tuple(nodes.name),
        kind=tuple(nodes.kind),
        tier=_ro(np.asarray(nodes.tier, dtype=np.int8)),
        plane=_ro(np.asarray(nodes.plane, dtype=np.int16)),
        index={name: i for i, name in enumerate(nodes.name)},
    )


def _f64(values: Iterable[float]) -> NDArray[np.float64]:
    return _ro(np.asarray(list(values), dtype=np.float64))


def _nan(x: float | None) -> float:
    return math.nan if x is None else x


def snapshot_from(
    meta: MetaMsg, tm: TelemetryMsg, nodes: NodeTable, events: tuple[Event, ...]
) -> Snapshot:
    """A snapshot from the latest meta and telemetry of one run (same ``run_id``)."""
    lm = tm.links
    names = tuple(lm.name)
    index = {name: i for i, name in enumerate(names)}
    ends = [name.split("->", 1) if "->" in name else [name, ""] for name in names]
    src = [nodes.index.get(a, -1) for a, _ in ends]
    dst = [nodes.index.get(b, -1) for _, b in ends]
    reverse = [index.get(f"{b}->{a}", -1) for a, b in ends]
    n = len(names)
    vl = np.asarray(lm.queue_vl_bytes, dtype=np.float64)
    if vl.ndim != 2 or vl.shape[0] != n:
        vl = np.zeros((n, 1))
    links = LinkTable(
        name=names,
        src=_ro(np.asarray(src, dtype=np.int32)),
        dst=_ro(np.asarray(dst, dtype=np.int32)),
        tier=tuple(lm.tier),
        bandwidth_Bps=_f64(lm.bandwidth_Bps),
        prop_delay_s=_f64(lm.prop_delay_s),
        buffer_bytes=_f64(lm.buffer_bytes),
        reverse=_ro(np.asarray(reverse, dtype=np.int32)),
        index=index,
    )
    state = LinkState(
        status=_ro(np.asarray(lm.status, dtype=np.int8)),
        utilisation=_f64(lm.utilisation),
        queue_bytes=_f64(lm.queue_bytes),
        queue_vl_bytes=_ro(vl),
        credits_bytes=_f64(lm.credits_bytes),
        paused=_ro(np.asarray(lm.paused, dtype=np.bool_)),
        tx_bytes_total=_f64(lm.tx_bytes_total),
        tx_packets_total=_f64(lm.tx_packets_total),
        transmit_wait_seconds_total=_f64(lm.transmit_wait_seconds_total),
        pause_frames_total=_f64(lm.pause_frames_total),
        pause_seconds_total=_f64(lm.pause_seconds_total),
        ecn_marked_packets_total=_f64(lm.ecn_marked_packets_total),
        cnp_handled_total=_f64(lm.cnp_handled_total),
        # per-priority PFC counters are not in the telemetry (Prometheus has them)
        pause_frames_vl_total=_ro(np.zeros_like(vl)),
        pause_seconds_vl_total=_ro(np.zeros_like(vl)),
        discards_bytes_total=_f64(lm.discards_bytes_total),
        retransmitted_bytes_total=_f64(lm.retransmitted_bytes_total),
        link_downed_total=_f64(lm.link_downed_total),
        link_error_recovery_total=_f64(lm.link_error_recovery_total),
        symbol_errors_total=_f64(lm.symbol_errors_total),
    )
    t = tm.totals
    return Snapshot(
        cluster=tm.cluster,
        scenario=tm.scenario,
        profile=tm.profile,
        flow_control=tm.flow_control,
        seed=tm.seed,
        tick=tm.tick,
        sim_time_s=tm.sim_time_s,
        dt_s=tm.dt_s,
        wall_time_s=tm.wall_time_s,
        target_speed=tm.target_speed,
        measured_speed=tm.measured_speed,
        running=tm.running,
        nodes=nodes,
        links=links,
        link_state=state,
        totals=Totals(
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
        latency={cls: decode_histogram(h) for cls, h in tm.latency.items()},
        workloads={
            name: WorkloadView(
                name=name,
                kind=w.kind,
                traffic_class=w.traffic_class,
                kpis={k: _nan(v) for k, v in w.kpis.items()},
                histograms={k: decode_histogram(h) for k, h in w.histograms.items()},
            )
            for name, w in tm.workloads.items()
        },
        faults=tuple(
            FaultView(
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
            for f in tm.faults
        ),
        events=events,
        params={k: _nan(v) for k, v in tm.params.items()},
    )


def decode_event(msg: EventMsg) -> Event:
    """An event as the snapshot holds it."""
    return Event(
        time_s=msg.time_s,
        severity=msg.severity,
        kind=msg.kind,
        target=msg.target,
        message=msg.message,
    )
