"""Serving the collector over HTTP with prometheus-client's own server."""

from __future__ import annotations

import threading
from collections.abc import Callable
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from exporters.prometheus.collector import FabtopCollector
from exporters.prometheus.options import (
    DEFAULT_HOST,
    DEFAULT_LINK_METRICS,
    DEFAULT_PORT,
    parse_link_metrics,
)
from fabric_core.snapshot import Snapshot


class MetricsServer:
    """A running ``/metrics`` endpoint; ``close()`` stops it."""

    def __init__(
        self,
        server: WSGIServer,
        thread: threading.Thread,
        registry: CollectorRegistry,
        collector: FabtopCollector,
    ) -> None:
        """Wrap a started server (use ``start_metrics_server``)."""
        self._server = server
        self._thread = thread
        self.registry = registry
        self.collector = collector
        host, port = server.server_address[:2]
        self.host = str(host)
        self.port = int(port)

    @property
    def address(self) -> str:
        """``host:port`` the server listens on (the real port when asked for port 0)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def url(self) -> str:
        """The scrape URL."""
        return f"http://{self.address}/metrics"

    def close(self) -> None:
        """Stop serving and free the port (idempotent)."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_metrics_server(
    get_snapshot: Callable[[], Snapshot | None],
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    link_metrics: str = DEFAULT_LINK_METRICS,
) -> MetricsServer:
    """Serve fabtop's metrics on ``http://host:port/metrics`` in a daemon thread.

    Args:
        get_snapshot: returns the latest snapshot (e.g. ``lambda: engine.bus.latest``);
            called once per scrape, from the server thread.
        host: address to bind (loopback by default: expose it on purpose).
        port: TCP port; 0 picks a free one (see ``MetricsServer.address``).
        link_metrics: ``all``, ``top:N`` or ``switch`` (see docs/METRICS.md).

    Raises:
        ValueError: for a bad ``link_metrics``.
        OSError: if the address cannot be bound (e.g. the port is in use).
    """
    policy = parse_link_metrics(link_metrics)
    registry = CollectorRegistry(auto_describe=False)
    collector = FabtopCollector(get_snapshot, policy)
    registry.register(collector)
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot serve metrics on {host}:{port}: {exc.strerror}") from exc
    return MetricsServer(server, thread, registry, collector)
