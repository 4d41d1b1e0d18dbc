"""From MQTT payloads back to a real ``Snapshot`` (what the remote console renders).

Telemetry carries the top links only, so the snapshot built here has a link
table made of the links in the latest telemetry message (``LinkTable.reverse``
is -1 when the other direction was not reported). Node table, scenario and
profile come from the retained ``meta`` message; events from the ``event``
topic since the reader attached.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sized
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from exporters.mqtt.schema import (
    EventMsg,
    HistogramMsg,
    LinksMsg,
    MetaMsg,
    NodesMsg,
    TelemetryMsg,
)
from fabric_core.runtime.snapshot import (
    Event,
    FaultView,
    LinkState,
    LinkStatus,
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


class InvalidTelemetryError(ValueError):
    """A message that has the schema's types but cannot describe a fabric (lists of
    different lengths, a value out of its range); the text names the field."""


_INT64_MAX = 2**63 - 1
_LINK_STATUSES = sorted(int(s) for s in LinkStatus)
#: The columns of ``links`` besides ``name``: each holds one value per named link.
_LINK_COLUMNS = tuple(f for f in LinksMsg.__struct_fields__ if f not in ("total", "name"))


def _show(name: str, limit: int = 60) -> str:
    """``name`` quoted for an error message, escaped and cut short (it comes from the wire)."""
    text = repr(name)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def _check_range(field: str, values: Iterable[int], lo: int, hi: int, what: str) -> None:
    """Refuse the first value of ``values`` outside ``lo..hi`` (``what`` says the rule)."""
    for k, x in enumerate(values):
        if not lo <= x <= hi:
            raise InvalidTelemetryError(f"{field}[{k}] is {x}: {what}")


def _check_length(field: str, values: Sized, n: int, of: str) -> None:
    if len(values) != n:
        raise InvalidTelemetryError(f"{field} has {len(values)} values for {n} {of}")


def _check_unique(field: str, names: list[str]) -> None:
    seen: set[str] = set()
    for k, name in enumerate(names):
        if name in seen:  # the index by name would keep one of the two
            raise InvalidTelemetryError(f"{field}[{k}] {_show(name)} appears twice")
        seen.add(name)


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


def decode_histogram(msg: HistogramMsg, where: str = "histogram") -> HistogramView:
    """Rebuild a histogram view from its sparse counts (``where`` names it in errors).

    Raises:
        InvalidTelemetryError: ``i`` and ``n`` differ in length, an index is outside
            the layout, or a count is negative or too large to add up.
    """
    _check_length(f"{where}.n", msg.n, len(msg.i), f"bucket indices ({where}.i)")
    last = hist.N_BUCKETS - 1
    _check_range(f"{where}.i", msg.i, 0, last, f"bucket indices are 0..{last}")
    _check_range(f"{where}.n", msg.n, 0, _INT64_MAX, "a count is 0 or more (and fits 64 bits)")
    if sum(msg.n) > _INT64_MAX:  # a sum that wraps around would turn negative
        raise InvalidTelemetryError(f"{where}.n adds up to more than 64 bits can count")
    counts = np.zeros(hist.N_BUCKETS, dtype=np.int64)
    np.add.at(counts, np.asarray(msg.i, dtype=np.intp), np.asarray(msg.n, dtype=np.int64))
    counts.flags.writeable = False
    return HistogramView(counts=counts, sum_s=msg.sum_s)


def check_nodes(nodes: NodesMsg) -> None:
    """Refuse a node table the console could not index.

    Raises:
        InvalidTelemetryError: naming the field: a column of another length than
            ``name``, a name twice, a tier or plane out of its range.
    """
    n = len(nodes.name)
    for field in ("kind", "tier", "plane"):
        _check_length(f"nodes.{field}", getattr(nodes, field), n, "nodes (nodes.name)")
    _check_unique("nodes.name", nodes.name)
    # the ranges of the snapshot's dtypes (int8, int16), not only today's topologies
    _check_range("nodes.tier", nodes.tier, 0, 127, "a tier is 0..127 (0 endpoint, 1 leaf, ...)")
    _check_range("nodes.plane", nodes.plane, 0, 32767, "a plane is 0..32767")


def node_table(nodes: NodesMsg) -> NodeTable:
    """The node table of a run.

    Raises:
        InvalidTelemetryError: see ``check_nodes``.
    """
    check_nodes(nodes)
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


def check_links(lm: LinksMsg, nodes: NodeTable) -> list[tuple[int, int]]:
    """Refuse a links section the console could not draw; each link's (src, dst) nodes.

    Raises:
        InvalidTelemetryError: naming the field: a column of another length than
            ``name``, rows of ``queue_vl_bytes`` of different lengths, a status that is
            not a ``LinkStatus``, a name twice, or one that is not ``a->b`` between two
            nodes of the run's ``meta``.
    """
    n = len(lm.name)
    for field in _LINK_COLUMNS:
        _check_length(f"links.{field}", getattr(lm, field), n, "links (links.name)")
    widths = sorted({len(row) for row in lm.queue_vl_bytes})
    if len(widths) > 1:
        raise InvalidTelemetryError(
            f"links.queue_vl_bytes rows have {widths} values: one per virtual lane, as many "
            "for every link"
        )
    statuses = ", ".join(f"{int(s)} {s.name.lower()}" for s in LinkStatus)
    lo, hi = _LINK_STATUSES[0], _LINK_STATUSES[-1]
    _check_range("links.status", lm.status, lo, hi, f"a status is one of {statuses}")
    _check_unique("links.name", lm.name)
    ends = []
    for k, name in enumerate(lm.name):
        a, arrow, b = name.partition("->")
        i, j = nodes.index.get(a), nodes.index.get(b)
        if not arrow or i is None or j is None:
            raise InvalidTelemetryError(
                f"links.name[{k}] {_show(name)} is not 'a->b' between two nodes of the run's meta"
            )
        ends.append((i, j))
    return ends


def snapshot_from(
    meta: MetaMsg, tm: TelemetryMsg, nodes: NodeTable, events: tuple[Event, ...]
) -> Snapshot:
    """A snapshot from the latest meta and telemetry of one run (same ``run_id``).

    Raises:
        InvalidTelemetryError: the telemetry cannot describe a fabric (see
            ``check_links`` and ``decode_histogram``); the message names the field.
    """
    lm = tm.links
    ends = check_links(lm, nodes)
    names = tuple(lm.name)
    index = {name: i for i, name in enumerate(names)}
    src = [a for a, _ in ends]
    dst = [b for _, b in ends]
    reverse = [index.get(f"{nodes.name[b]}->{nodes.name[a]}", -1) for a, b in ends]
    n = len(names)
    vl = np.asarray(lm.queue_vl_bytes, dtype=np.float64)
    if vl.ndim != 2:  # no links: [] has shape (0,)
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
        latency={
            cls: decode_histogram(h, f"latency[{_show(cls)}]") for cls, h in tm.latency.items()
        },
        workloads={
            name: WorkloadView(
                name=name,
                kind=w.kind,
                traffic_class=w.traffic_class,
                kpis={k: _nan(v) for k, v in w.kpis.items()},
                histograms={
                    k: decode_histogram(h, f"workloads[{_show(name)}].histograms[{_show(k)}]")
                    for k, h in w.histograms.items()
                },
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
