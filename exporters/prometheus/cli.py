"""The exporter's command-line options, shared by ``fabtop`` (embedded) and ``fabtop serve``.

add_metrics_arguments(parser)          # --metrics HOST:PORT, --no-metrics, --link-metrics
args = parser.parse_args()
server = start_from_args(args, lambda: engine.bus.latest)   # None with --no-metrics
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

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
from fabric_core.runtime.engine import EngineHealth
from fabric_core.runtime.snapshot import Snapshot


def _address(text: str) -> tuple[str, int]:
    try:
        return parse_metrics_address(text)
    except OptionError as exc:
        raise argparse.ArgumentTypeError(exc.reason) from None


def _link_metrics(text: str) -> LinkMetrics:
    try:
        return parse_link_metrics(text)
    except OptionError as exc:
        raise argparse.ArgumentTypeError(exc.reason) from None


def add_metrics_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--metrics``, ``--no-metrics`` and ``--link-metrics`` (bad values: a usage error)."""
    group = parser.add_argument_group("Prometheus exporter")
    group.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        type=_address,
        default=(DEFAULT_HOST, DEFAULT_PORT),
        help=f"serve /metrics on HOST:PORT (default {DEFAULT_HOST}:{DEFAULT_PORT}; "
        "port 0 picks a free one)",
    )
    group.add_argument(
        "--no-metrics", action="store_true", help="do not start the Prometheus exporter"
    )
    group.add_argument(
        "--link-metrics",
        metavar="MODE",
        type=_link_metrics,
        default=parse_link_metrics(DEFAULT_LINK_METRICS),
        help="per-link series: all | top:N (the N hottest links, plus links down or with "
        f"errors) | switch (per-switch sums only); default {DEFAULT_LINK_METRICS}",
    )


def start_from_args(
    args: argparse.Namespace,
    get_snapshot: Callable[[], Snapshot | None],
    health: Callable[[], EngineHealth] | None = None,
) -> MetricsServer | None:
    """Start the exporter the options ask for; ``None`` with ``--no-metrics``.

    Raises:
        OSError: the address cannot be bound (the message names it).
    """
    if args.no_metrics:
        return None
    host, port = args.metrics
    return start_metrics_server(get_snapshot, host, port, str(args.link_metrics), health=health)
