"""The custom collector: every metric of a scrape, read from the latest snapshot.

One ``collect()`` reads one snapshot, so every figure of a scrape describes the
same tick. Nothing is kept between scrapes but the static labels (rebuilt when
the link table changes) and the ``top:N`` memory of the link selector.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Iterator

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from exporters.prometheus import families as fam
from exporters.prometheus.bridge_metrics import BridgeCounters, bridge_families
from exporters.prometheus.links import (
    LinkLabels,
    aggregate_families,
    always_exported,
    error_totals,
    per_link_families,
    port_counters,
)
from exporters.prometheus.options import LinkMetrics
from exporters.prometheus.selection import DEFAULT_HOLD_S, LinkSelector, heat
from fabric_core.runtime.engine import EngineHealth
from fabric_core.runtime.snapshot import Snapshot

#: The states ``fabtop_engine_pacing`` has a series for (``EngineHealth.pacing``).
PACING_STATES = ("ok", "behind", "starved", "paused", "flat-out")

#: Every state a fault goes through (``fabtop_fault_state`` has one series per state).
FAULT_STATES = ("active", "detected", "mitigated", "recovered", "cleared")

_NAME_RE = re.compile(r"[^a-zA-Z0-9_]")


def metric_word(text: str) -> str:
    """``text`` made safe inside a metric name (``ttft-seconds`` → ``ttft_seconds``)."""
    return _NAME_RE.sub("_", text).strip("_").lower() or "unnamed"


class FabtopCollector(Collector):
    """Collects fabtop metrics from ``get_snapshot()`` at each scrape."""

    def __init__(
        self,
        get_snapshot: Callable[[], Snapshot | None],
        link_metrics: LinkMetrics,
        hold_s: float = DEFAULT_HOLD_S,
        health: Callable[[], EngineHealth] | None = None,
        scrape_stats: Callable[[], dict[str, float]] | None = None,
        bridge: Callable[[], BridgeCounters] | None = None,
    ) -> None:
        """Create the collector.

        Args:
            get_snapshot: returns the latest snapshot (None before the first).
            link_metrics: the ``--link-metrics`` policy.
            hold_s: how long a link stays exported after it left the top N.
            health: the engine's pacing figures (``Engine.health``), if known.
            scrape_stats: the HTTP server's counters (``encodes``, ``refused``).
            bridge: the MQTT bridge's counters, where the process runs one.
        """
        self._get_snapshot = get_snapshot
        self.link_metrics = link_metrics
        self._health = health
        self._scrape_stats = scrape_stats
        self._bridge = bridge
        self._selector = LinkSelector(link_metrics, hold_s)
        self._labels: LinkLabels | None = None
        self._exported = 0  # links with per-link series in the last scrape
        self._lock = threading.Lock()

    def describe(self) -> list[Metric]:
        """Nothing: the families depend on the snapshot (avoids a collect at register)."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Yield every family for the latest snapshot, then the exporter's own metrics.

        The families are built in full, under a lock, before the first is yielded:
        concurrent scrapes must not interleave in the link selector, and the
        collect duration must not include the caller's rendering.
        """
        with self._lock:
            start = time.perf_counter()
            snap = self._get_snapshot()
            metrics = [] if snap is None else list(self._snapshot_families(snap))
            links = 0 if snap is None else len(snap.links)
            exported = self._exported if snap is not None else 0
            series = sum(fam.sample_count(m) for m in metrics)
            metrics.extend(self._self_families(snap, series, links, exported, start))
        return iter(metrics)

    # ------------------------------------------------------------------ fabric
    def _link_labels(self, snap: Snapshot) -> LinkLabels:
        if self._labels is None or self._labels.links is not snap.links:
            self._labels = LinkLabels(snap.nodes, snap.links, snap.profile)
        return self._labels

    def _snapshot_families(self, snap: Snapshot) -> Iterator[Metric]:
        yield fam.info(
            "fabtop_fabric_info",
            "The emulated fabric: cluster, scenario, profile and flow control.",
            [
                {
                    "cluster": snap.cluster,
                    "scenario": snap.scenario,
                    "profile": snap.profile,
                    "flow_control": snap.flow_control,
                    "seed": str(snap.seed),
                }
            ],
        )
        yield from _run_families(snap)
        labels = self._link_labels(snap)
        counters = port_counters(snap)
        state = snap.link_state
        idx = self._selector.select(
            heat(state.utilisation, state.queue_bytes, snap.links.buffer_bytes),
            always_exported(snap),
            error_totals(snap),
        )
        self._exported = int(idx.size)
        yield fam.info(
            "fabtop_switch_info", "A switch: its tier and network plane.", labels.switch_info
        )
        if idx.size:
            yield from per_link_families(snap, labels, counters, idx)
        yield from aggregate_families(
            snap, labels.switches, counters, "fabtop_switch", "ports of the switch"
        )
        yield from aggregate_families(
            snap, labels.tiers, counters, "fabtop_tier", "links of the tier"
        )
        yield fam.histogram(
            "fabtop_message_latency_seconds",
            "Message completion latency per traffic class, since the start of the run.",
            [({"traffic_class": name}, view) for name, view in sorted(snap.latency.items())],
        )
        yield from _workload_families(snap)
        yield from _fault_families(snap)

    # ------------------------------------------------------------------ self
    def _self_families(
        self, snap: Snapshot | None, series: int, links: int, exported: int, start: float
    ) -> Iterator[Metric]:
        mode = str(self.link_metrics)
        yield fam.info("fabtop_exporter_info", "The exporter's settings.", [{"link_metrics": mode}])
        yield fam.gauge(
            "fabtop_exporter_snapshot_available",
            "1 once the emulator has published a snapshot.",
            [{}],
            [float(snap is not None)],
        )
        yield fam.gauge(
            "fabtop_exporter_links_exported",
            "Links with per-link series in this scrape.",
            [{}],
            [float(exported)],
        )
        yield fam.gauge(
            "fabtop_exporter_link_series_truncated",
            "1 if --link-metrics left some links' per-link series out of this scrape.",
            [{}],
            [float(exported < links)],
        )
        yield fam.gauge(
            "fabtop_exporter_links_cut",
            "Links that qualified for per-link series (hot, down or with errors in the hold "
            "time) but were left out by the cap on exported links.",
            [{}],
            [float(self._selector.cut if snap is not None else 0)],
        )
        stats = {} if self._scrape_stats is None else self._scrape_stats()
        for key, name, doc in (
            (
                "encodes",
                "fabtop_exporter_encodes_total",
                "Expositions encoded (at most one per snapshot and format; scrapes of the "
                "same snapshot get the cached bytes).",
            ),
            (
                "refused",
                "fabtop_exporter_scrapes_refused_total",
                "Scrapes answered 503 because too many were in progress.",
            ),
        ):
            if key in stats:
                yield fam.counter(name, doc, [{}], [float(stats[key])])
        if self._health is not None:
            h = self._health()
            yield fam.gauge(
                "fabtop_engine_pacing",
                "1 for the engine's pacing state (ok, behind: it steps all the time and "
                "cannot keep the speed; starved: it falls short while stepping less than "
                "half of the time; paused; flat-out), 0 for the others.",
                [{"state": st} for st in PACING_STATES],
                [float(h.pacing == st) for st in PACING_STATES],
            )
            yield fam.gauge(
                "fabtop_engine_busy_ratio",
                "Share of the engine's recent wall time, sleeps excluded, spent stepping.",
                [{}],
                [h.busy_fraction],
            )
            yield fam.gauge(
                "fabtop_engine_queued_commands",
                "Commands waiting for the next tick boundary.",
                [{}],
                [float(h.queued_commands)],
            )
            yield fam.counter(
                "fabtop_flows_refused_total",
                "Flows the admission limits refused (per-sender, per-fault or the "
                "fabric-wide cap; see docs/MQTT.md, Limits).",
                [{}],
                [float(h.flows_refused_total)],
            )
        if self._bridge is not None:
            yield from bridge_families(self._bridge())
        yield fam.gauge(
            "fabtop_exporter_series",
            "Samples in this scrape before the exporter's own metrics.",
            [{}],
            [float(series)],
        )
        yield fam.gauge(
            "fabtop_exporter_collect_duration_seconds",
            "Time spent reading the snapshot and building this scrape's samples.",
            [{}],
            [time.perf_counter() - start],
        )


def _run_families(snap: Snapshot) -> Iterator[Metric]:
    """How the run goes: simulated time, speed, and the fabric-wide totals."""
    gauges = (
        ("fabtop_sim_time_seconds", "Simulated time since the start of the run.", snap.sim_time_s),
        ("fabtop_tick_seconds", "Simulated time per tick.", snap.dt_s),
        (
            "fabtop_speed_target_ratio",
            "Simulated seconds per wall second asked for (0 = flat out).",
            snap.target_speed,
        ),
        (
            "fabtop_speed_measured_ratio",
            "Simulated seconds per wall second achieved.",
            snap.measured_speed,
        ),
        ("fabtop_running", "1 while simulated time runs, 0 while paused.", float(snap.running)),
        (
            "fabtop_in_flight_bytes",
            "Bytes injected and not yet delivered or dropped.",
            snap.totals.in_flight_bytes,
        ),
        (
            "fabtop_throughput_bytes_per_second",
            "Bytes delivered per second, recently.",
            snap.totals.throughput_Bps,
        ),
        ("fabtop_active_flows", "Flows in progress.", float(snap.totals.active_flows)),
        (
            "fabtop_waiting_flows",
            "Flows in progress waiting for their RC ACK timeout to resend bytes a dead link lost.",
            float(snap.totals.waiting_flows),
        ),
    )
    for name, doc, value in gauges:
        yield fam.gauge(name, doc, [{}], [float(value)])
    counters = (
        ("fabtop_ticks_total", "Ticks run.", float(snap.tick)),
        (
            "fabtop_injected_bytes_total",
            "Bytes injected by the endpoints.",
            snap.totals.injected_bytes_total,
        ),
        (
            "fabtop_cancelled_bytes_total",
            "Bytes of flows cancelled before they were sent (a cleared incast fault's).",
            snap.totals.cancelled_bytes_total,
        ),
        (
            "fabtop_delivered_bytes_total",
            "Bytes delivered to their destination.",
            snap.totals.delivered_bytes_total,
        ),
        (
            "fabtop_dropped_bytes_total",
            "Bytes dropped anywhere in the fabric.",
            snap.totals.dropped_bytes_total,
        ),
        (
            "fabtop_completed_flows_total",
            "Flows completed.",
            float(snap.totals.completed_flows_total),
        ),
    )
    for name, doc, value in counters:
        yield fam.counter(name, doc, [{}], [float(value)])
    params = sorted(snap.params.items())
    yield fam.gauge(
        "fabtop_param",
        "A live-tunable profile parameter's current value.",
        [{"param": k} for k, _ in params],
        [float(v) for _, v in params],
    )


def _workload_families(snap: Snapshot) -> Iterator[Metric]:
    """Workload info, KPIs (GPU utilisation by name) and histograms (TTFT, all-to-all...)."""
    wls = sorted(snap.workloads.values(), key=lambda w: w.name)
    yield fam.info(
        "fabtop_workload_info",
        "A workload: its kind and traffic class.",
        [{"workload": w.name, "kind": w.kind, "traffic_class": w.traffic_class} for w in wls],
    )
    # (a KPI not measured yet is NaN in the snapshot: no sample, as fabtop_workload_kpi)
    util = [
        (w.name, float(w.kpis["gpu_utilisation"]))
        for w in wls
        if math.isfinite(float(w.kpis.get("gpu_utilisation", math.nan)))
    ]
    yield fam.gauge(
        "fabtop_workload_gpu_utilisation_ratio",
        "Share of time the workload's GPUs compute rather than wait (0..1).",
        [{"workload": n} for n, _ in util],
        [v for _, v in util],
    )
    kpis = [
        (w.name, k, float(v))
        for w in wls
        for k, v in sorted(w.kpis.items())
        if math.isfinite(float(v))
    ]
    yield fam.gauge(
        "fabtop_workload_kpi",
        "A workload KPI as the emulator reports it (the unit ends its name).",
        [{"workload": n, "kpi": k} for n, k, _ in kpis],
        [v for _, _, v in kpis],
    )
    names = sorted({k for w in wls for k in w.histograms})
    for key in names:
        word = metric_word(key)
        word = word if word.endswith("_seconds") else f"{word}_seconds"
        what = key.removesuffix("_seconds").replace("_", " ")
        yield fam.histogram(
            f"fabtop_workload_{word}",
            f"Workload {what} (seconds), since the workload started.",
            [({"workload": w.name}, w.histograms[key]) for w in wls if key in w.histograms],
        )


def _fault_families(snap: Snapshot) -> Iterator[Metric]:
    """Faults: state (one series per state, 1 for the current), count, timelines."""
    faults = snap.faults
    ids = [{"fault_id": f.id, "kind": f.kind, "target": f.target} for f in faults]
    state_labels = [{**lab, "state": s} for lab in ids for s in FAULT_STATES]
    state_values = [float(f.state == s) for f in faults for s in FAULT_STATES]
    yield fam.gauge(
        "fabtop_fault_state",
        "1 for the state the fault is in (active, detected, mitigated, "
        "recovered, cleared), 0 for the others.",
        state_labels,
        state_values,
    )
    kinds = sorted({f.kind for f in faults})
    active = [sum(1 for f in snap.active_faults if f.kind == k) for k in kinds]
    yield fam.gauge(
        "fabtop_faults_active",
        "Faults not yet cleared, per kind.",
        [{"kind": k} for k in kinds],
        [float(n) for n in active],
    )
    yield fam.gauge(
        "fabtop_fault_injected_at_seconds",
        "Simulated time the fault was injected.",
        ids,
        [f.injected_at_s for f in faults],
    )
    for name, attr, doc in (
        (
            "fabtop_fault_time_to_detect_seconds",
            "time_to_detect_s",
            "Simulated time from injection to detection (once detected).",
        ),
        (
            "fabtop_fault_time_to_recover_seconds",
            "time_to_recover_s",
            "Simulated time from injection to recovery (once recovered).",
        ),
    ):
        done = [
            (lab, getattr(f, attr))
            for lab, f in zip(ids, faults, strict=True)
            if getattr(f, attr) is not None
        ]
        yield fam.gauge(name, doc, [lab for lab, _ in done], [float(v) for _, v in done])
