"""Prometheus exporter: one custom collector over the latest snapshot.

Public face (used by the ``fabtop`` CLI modules)::

    from exporters.prometheus import start_metrics_server
    server = start_metrics_server(lambda: engine.bus.latest, "127.0.0.1", 9464, "top:50")
    server.address   # "127.0.0.1:9464"
    server.close()

Metric names and label sets are listed in docs/METRICS.md.
"""

from exporters.prometheus.collector import FabtopCollector
from exporters.prometheus.options import (
    DEFAULT_HOST,
    DEFAULT_LINK_METRICS,
    DEFAULT_PORT,
    LinkMetrics,
    OptionError,
    parse_link_metrics,
    parse_metrics_address,
)
from exporters.prometheus.server import MetricsServer, start_metrics_server

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_LINK_METRICS",
    "DEFAULT_PORT",
    "FabtopCollector",
    "LinkMetrics",
    "MetricsServer",
    "OptionError",
    "parse_link_metrics",
    "parse_metrics_address",
    "start_metrics_server",
]
