"""Writes ``fabtop-dashboard.json`` (the Grafana dashboard in provisioning form).

The JSON is committed; this script is its source. After editing, run
``python -m exporters.grafana.build_dashboard`` (a test checks they agree).
Every query filters on ``instance=~"$instance"`` (picked from the cluster in
``fabtop_fabric_info``), so one Grafana serves several fabtop runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

UID = "fabtop-fabric"
OUT = Path(__file__).with_name("fabtop-dashboard.json")
DS = {"type": "prometheus", "uid": "${datasource}"}
I = 'instance=~"$instance"'  # noqa: E741 - short on purpose: it is in every query
RI = "$__rate_interval"
#: Simulated seconds per wall second, per exporter: the counters count simulated time's
#: bytes, frames and seconds, and the engine runs at 1e-3x real time or so, so a rate per
#: wall second would read some thousand times too low (``per_simulated_second``)
SIM_RATE = f"sum by (instance) (rate(fabtop_sim_time_seconds{{{I}}}[{RI}]))"

_next_id = 0


def _id() -> int:
    global _next_id
    _next_id += 1
    return _next_id


def per_simulated_second(expr: str) -> str:
    """``expr`` (rates per wall second, with an ``instance`` label) per simulated second:
    divided by how fast that exporter's simulated time ran over the same window (no value
    while it is paused)."""
    return f"{expr} / on (instance) group_left {SIM_RATE}"


def target(
    expr: str, legend: str = "", *, instant: bool = False, fmt: str = "time_series", ref: str = "A"
) -> dict[str, Any]:
    """A Prometheus query of a panel."""
    return {
        "datasource": DS,
        "expr": expr,
        "legendFormat": legend,
        "refId": ref,
        "instant": instant,
        "range": not instant,
        "format": fmt,
    }


def panel(
    kind: str,
    title: str,
    targets: list[dict[str, Any]],
    x: int,
    y: int,
    w: int = 8,
    h: int = 8,
    unit: str = "short",
    desc: str = "",
    **extra: Any,
) -> dict[str, Any]:
    """A panel at grid position (x, y)."""
    p: dict[str, Any] = {
        "id": _id(),
        "type": kind,
        "title": title,
        "description": desc,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "targets": targets,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
    }
    p.update(extra)
    return p


def row(title: str, y: int) -> dict[str, Any]:
    """A (non-collapsed) row header."""
    return {
        "id": _id(),
        "type": "row",
        "title": title,
        "collapsed": False,
        "panels": [],
        "gridPos": {"x": 0, "y": y, "w": 24, "h": 1},
    }


def query_var(name: str, label: str, query: str, *, multi: bool = False) -> dict[str, Any]:
    """A variable filled from ``label_values(...)``."""
    v: dict[str, Any] = {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "query": {"query": query, "refId": f"{name}-var"},
        "definition": query,
        "refresh": 2,
        "sort": 1,
        "multi": multi,
        "includeAll": multi,
        "current": {},
        "options": [],
        "hide": 0,
    }
    if multi:  # default to All, as an operator opening the dashboard expects
        v["allValue"] = ".*"
        v["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
    return v


def templating() -> dict[str, Any]:
    """Datasource, cluster, instance, switch, link, class, workload and top-N variables."""
    return {
        "list": [
            {
                "name": "datasource",
                "label": "Data source",
                "type": "datasource",
                "query": "prometheus",
                "current": {},
                "hide": 0,
                "refresh": 1,
                "options": [],
            },
            query_var("cluster", "Cluster", "label_values(fabtop_fabric_info, cluster)"),
            query_var(
                "instance",
                "Exporter",
                'label_values(fabtop_fabric_info{cluster=~"$cluster"}, instance)',
            ),
            query_var(
                "switch", "Switch", f"label_values(fabtop_switch_info{{{I}}}, switch)", multi=True
            ),
            query_var(
                "link",
                "Link",
                f'label_values(fabtop_link_info{{{I}, node=~"$switch"}}, link)',
                multi=True,
            ),
            query_var(
                "class",
                "Traffic class",
                f"label_values(fabtop_message_latency_seconds_count{{{I}}}, traffic_class)",
                multi=True,
            ),
            query_var(
                "workload",
                "Workload",
                f"label_values(fabtop_workload_info{{{I}}}, workload)",
                multi=True,
            ),
            {
                "name": "topn",
                "label": "Top N",
                "type": "custom",
                "query": "5,10,20,50",
                "current": {"text": "10", "value": "10"},
                "hide": 0,
                "multi": False,
                "includeAll": False,
                "options": [],
            },
        ]
    }


def panels() -> list[dict[str, Any]]:
    """All rows and panels, top to bottom."""
    sw = f'{I}, switch=~"$switch"'
    ln = f'{I}, link=~"$link"'
    ps: list[dict[str, Any]] = [row("Overview", 0)]
    ps += [
        panel(
            "stat",
            "Fabric",
            [
                target(
                    f"fabtop_fabric_info{{{I}}}",
                    "{{profile}} · {{flow_control}} · {{scenario}}",
                    instant=True,
                )
            ],
            0,
            1,
            6,
            4,
            options={"textMode": "name", "reduceOptions": {"calcs": ["lastNotNull"]}},
        ),
        panel(
            "stat",
            "Delivered",
            [
                target(
                    per_simulated_second(
                        f"sum by (instance) (rate(fabtop_delivered_bytes_total{{{I}}}[{RI}]))"
                    )
                )
            ],
            6,
            1,
            4,
            4,
            "Bps",
        ),
        panel(
            "stat",
            "Dropped",
            [
                target(
                    per_simulated_second(
                        f"sum by (instance) (rate(fabtop_dropped_bytes_total{{{I}}}[{RI}]))"
                    )
                )
            ],
            10,
            1,
            4,
            4,
            "Bps",
        ),
        panel(
            "stat",
            "Active faults",
            [target(f"sum(fabtop_faults_active{{{I}}}) or vector(0)")],
            14,
            1,
            4,
            4,
        ),
        panel(
            "stat",
            "Simulated speed",
            [target(f"fabtop_speed_measured_ratio{{{I}}}")],
            18,
            1,
            6,
            4,
            "short",
            desc="Simulated seconds per wall second.",
        ),
        panel(
            "timeseries",
            "Throughput by link tier",
            [target(f"fabtop:tier_data_transmitted_bytes:sim_rate1m{{{I}}}", "{{tier}}")],
            0,
            5,
            12,
            8,
            "Bps",
        ),
        panel(
            "timeseries",
            "Utilisation by link tier",
            [target(f"fabtop_tier_utilisation_ratio{{{I}}}", "{{tier}}")],
            12,
            5,
            12,
            8,
            "percentunit",
        ),
    ]
    ps.append(row("Hot links and switches (top N)", 13))
    ps += [
        panel(
            "timeseries",
            "Top links by utilisation",
            [target(f"topk($topn, fabtop_port_utilisation_ratio{{{ln}}})", "{{link}}")],
            0,
            14,
            8,
            8,
            "percentunit",
            desc="Per-link series follow --link-metrics (top:N exports the hottest links).",
        ),
        panel(
            "timeseries",
            "Top links by queue",
            [target(f"topk($topn, fabtop_port_queue_bytes{{{ln}}})", "{{link}}")],
            8,
            14,
            8,
            8,
            "bytes",
        ),
        panel(
            "timeseries",
            "Top links by transmit wait",
            [
                target(
                    "topk($topn, "
                    + per_simulated_second(
                        f"rate(fabtop_port_transmit_wait_seconds_total{{{ln}}}[{RI}])"
                    )
                    + ")",
                    "{{link}}",
                )
            ],
            16,
            14,
            8,
            8,
            "percentunit",
            desc="Share of time a port had data but no credit or was paused.",
        ),
        panel(
            "timeseries",
            "Top switches by transmitted bytes",
            [
                target(
                    f"topk($topn, fabtop:switch_data_transmitted_bytes:sim_rate1m{{{sw}}})",
                    "{{switch}}",
                )
            ],
            0,
            22,
            12,
            8,
            "Bps",
        ),
        panel(
            "table",
            "Hottest links now",
            [
                target(
                    f"topk($topn, fabtop_port_utilisation_ratio{{{ln}}}"
                    " * on(instance, link) group_left(node, peer, tier) fabtop_link_info)",
                    instant=True,
                    fmt="table",
                )
            ],
            12,
            22,
            12,
            8,
            "percentunit",
        ),
    ]
    ps.append(row("Latency", 30))
    ps += [
        panel(
            "heatmap",
            "Message latency",
            [
                target(
                    f"sum by (le) (increase(fabtop_message_latency_seconds_bucket"
                    f'{{{I}, traffic_class=~"$class"}}[{RI}]))',
                    "{{le}}",
                    fmt="heatmap",
                )
            ],
            0,
            31,
            12,
            9,
            "s",
            options={
                "calculate": False,
                "yAxis": {"unit": "s"},
                "cellGap": 1,
                "color": {"scheme": "Oranges", "mode": "scheme"},
            },
        ),
        panel(
            "timeseries",
            "Message latency p50 / p99 / p99.9",
            [
                target(
                    f"histogram_quantile({q}, sum by (traffic_class, le) (rate("
                    f'fabtop_message_latency_seconds_bucket{{{I}, traffic_class=~"$class"}}'
                    f"[{RI}])))",
                    f"{{{{traffic_class}}}} p{p}",
                    ref=r,
                )
                for q, p, r in ((0.5, "50", "A"), (0.99, "99", "B"), (0.999, "99.9", "C"))
            ],
            12,
            31,
            12,
            9,
            "s",
        ),
        panel(
            "timeseries",
            "TTFT p99 by workload",
            [
                target(
                    f'fabtop:workload_ttft_seconds:p99_1m{{{I}, workload=~"$workload"}}',
                    "{{workload}}",
                )
            ],
            0,
            40,
            8,
            8,
            "s",
        ),
        panel(
            "timeseries",
            "All-to-all time p99 by workload",
            [
                target(
                    f'fabtop:workload_alltoall_seconds:p99_1m{{{I}, workload=~"$workload"}}',
                    "{{workload}}",
                )
            ],
            8,
            40,
            8,
            8,
            "s",
        ),
        panel(
            "timeseries",
            "GPU utilisation",
            [
                target(
                    f'fabtop_workload_gpu_utilisation_ratio{{{I}, workload=~"$workload"}}',
                    "{{workload}}",
                )
            ],
            16,
            40,
            8,
            8,
            "percentunit",
        ),
    ]
    ps.append(row("Flow control: PFC, ECN, credits", 48))
    ps += [
        panel(
            "timeseries",
            "PFC pause frames received",
            [target(f"fabtop:switch_pfc_pause_frames_received:sim_rate1m{{{sw}}}", "{{switch}}")],
            0,
            49,
            8,
            8,
            "pps",
            desc="RoCE profiles only; zero on a credit-based fabric.",
        ),
        panel(
            "timeseries",
            "Time paused by PFC",
            [
                target(
                    per_simulated_second(
                        "sum by (instance, switch) "
                        f"(rate(fabtop_switch_pfc_pause_seconds_total{{{sw}}}[{RI}]))"
                    )
                    + f" / sum by (instance, switch) (fabtop_switch_ports{{{sw}}})",
                    "{{switch}}",
                )
            ],
            8,
            49,
            8,
            8,
            "percentunit",
            desc="Mean share of time a port of the switch was paused.",
        ),
        panel(
            "timeseries",
            "ECN-marked packets",
            [target(f"fabtop:switch_ecn_marked_packets:sim_rate1m{{{sw}}}", "{{switch}}")],
            16,
            49,
            8,
            8,
            "pps",
        ),
        panel(
            "timeseries",
            "Credits available",
            [target(f"fabtop_switch_credits_available_bytes{{{sw}}}", "{{switch}}")],
            0,
            57,
            8,
            8,
            "bytes",
            desc="Free downstream buffer: credits (native) or PFC headroom (RoCE).",
        ),
        panel(
            "timeseries",
            "Queued bytes",
            [target(f"fabtop_switch_queue_bytes{{{sw}}}", "{{switch}}")],
            8,
            57,
            8,
            8,
            "bytes",
        ),
        panel(
            "timeseries",
            "Paused or credit-starved ports",
            [target(f"fabtop_switch_paused_ports{{{sw}}}", "{{switch}}")],
            16,
            57,
            8,
            8,
        ),
    ]
    ps.append(row("Faults", 65))
    ps += [
        panel(
            "table",
            "Faults and their state",
            [target(f"fabtop_fault_state{{{I}}} == 1", instant=True, fmt="table")],
            0,
            66,
            12,
            8,
            transformations=[
                {
                    "id": "organize",
                    "options": {
                        "excludeByName": {
                            "Time": True,
                            "Value": True,
                            "__name__": True,
                            "job": True,
                        }
                    },
                }
            ],
        ),
        panel(
            "bargauge",
            "Time to detect / recover",
            [
                target(
                    f"fabtop_fault_time_to_detect_seconds{{{I}}}",
                    "detect {{kind}} {{target}}",
                    instant=True,
                ),
                target(
                    f"fabtop_fault_time_to_recover_seconds{{{I}}}",
                    "recover {{kind}} {{target}}",
                    instant=True,
                    ref="B",
                ),
            ],
            12,
            66,
            12,
            8,
            "s",
            desc="Simulated time after injection.",
        ),
        panel(
            "timeseries",
            "Links downed (last 5 min)",
            [
                target(
                    f"sum by (switch) (increase(fabtop_switch_link_downed_total{{{sw}}}[5m]))",
                    "{{switch}}",
                )
            ],
            0,
            74,
            6,
            8,
        ),
        panel(
            "timeseries",
            "Ports down",
            [target(f"fabtop_switch_down_ports{{{sw}}}", "{{switch}}")],
            6,
            74,
            6,
            8,
        ),
        panel(
            "timeseries",
            "Discarded and retransmitted",
            [
                target(f"fabtop:switch_discarded_bytes:sim_rate1m{{{sw}}}", "discarded {{switch}}"),
                target(
                    per_simulated_second(
                        "sum by (instance, switch) "
                        f"(rate(fabtop_switch_retransmitted_bytes_total{{{sw}}}[{RI}]))"
                    ),
                    "retransmitted {{switch}}",
                    ref="B",
                ),
                # go-back-N's resends are the NICs' (RoCE: every one), counted on the
                # links out of them, not on a switch's ports (docs/METRICS.md)
                target(
                    per_simulated_second(
                        "sum by (instance, tier) (rate(fabtop_tier_retransmitted_bytes_total"
                        f'{{{I}, tier=~"gpu-leaf|stor-leaf"}}[{RI}]))'
                    ),
                    "retransmitted by the NICs ({{tier}})",
                    ref="C",
                ),
            ],
            12,
            74,
            6,
            8,
            "Bps",
            desc="Bytes discarded and sent again per simulated second: a switch's own "
            "retries (link-level, native) by switch; go-back-N's resends (RoCE) by the NICs "
            "that send them again, by tier.",
        ),
        panel(
            "table",
            "Links with errors",
            [
                target(
                    f"fabtop_port_link_downed_total{{{ln}}}"
                    f" + fabtop_port_link_error_recovery_total{{{ln}}}"
                    f" + fabtop_port_symbol_errors_total{{{ln}}} > 0",
                    instant=True,
                    fmt="table",
                )
            ],
            18,
            74,
            6,
            8,
            desc="Links downed + error recoveries + symbol errors since the start.",
        ),
    ]
    ps.append(row("Exporter", 82))
    ps += [
        panel(
            "timeseries",
            "Collect duration",
            [target(f"fabtop_exporter_collect_duration_seconds{{{I}}}")],
            0,
            83,
            8,
            6,
            "s",
        ),
        panel(
            "timeseries",
            "Series per scrape",
            [target(f"fabtop_exporter_series{{{I}}}")],
            8,
            83,
            8,
            6,
        ),
        panel(
            "stat",
            "Per-link series truncated",
            [
                target(
                    f"fabtop_exporter_link_series_truncated{{{I}}}"
                    " * on(instance) group_left(link_metrics) fabtop_exporter_info",
                    "{{link_metrics}}",
                )
            ],
            16,
            83,
            8,
            6,
            desc="1 when --link-metrics leaves some links out (top:N or switch).",
        ),
    ]
    return ps


def dashboard() -> dict[str, Any]:
    """The whole dashboard (no numeric id: provisioning assigns one)."""
    global _next_id
    _next_id = 0
    return {
        "uid": UID,
        "title": "fabtop — RDMA fabric",
        "tags": ["fabtop", "rdma", "fabric"],
        "timezone": "",
        "editable": True,
        "graphTooltip": 1,
        "refresh": "5s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-15m", "to": "now"},
        "templating": templating(),
        "panels": panels(),
        "annotations": {"list": []},
        "links": [],
    }


def render() -> str:
    """The JSON text as committed."""
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {OUT}")
