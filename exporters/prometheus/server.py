"""Serving the collector over HTTP: one encoding per snapshot, a cap on concurrent scrapes.

A scrape never touches the engine: the HTTP server runs in its own daemon
threads and reads the latest snapshot. The exposition is encoded at most once
per snapshot (and format, text or OpenMetrics): every scrape of the same
snapshot gets the cached bytes, so back-to-back scrapers cost a socket write
each, not an encoding (the engine publishes ~10 snapshots a second, so at most
~10 encodings a second whatever the scrape load). At most
``MAX_CONCURRENT_SCRAPES`` requests are served at once; one more is answered
``503`` with ``Retry-After: 1`` at once and counted
(``fabtop_exporter_scrapes_refused_total``). Responses are paced to at most
``MAX_SCRAPES_PER_S`` a second in all: a faster scraper waits for its turn (a
sleeping thread costs the engine nothing), so clients scraping back-to-back cannot
turn request handling into a load on the process (Prometheus scrapes every few
seconds; 20 a second is far above any real setup).
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry

from exporters.prometheus.bridge_metrics import BridgeCounters
from exporters.prometheus.collector import FabtopCollector
from exporters.prometheus.exposition import choose
from exporters.prometheus.options import (
    DEFAULT_HOST,
    DEFAULT_LINK_METRICS,
    DEFAULT_PORT,
    parse_link_metrics,
)
from fabric_core.runtime.engine import EngineHealth
from fabric_core.runtime.snapshot import Snapshot

#: Scrapes served at the same time; more are refused with 503 (Prometheus retries).
MAX_CONCURRENT_SCRAPES = 4
#: Most responses a second, all clients together; faster ones wait their turn.
MAX_SCRAPES_PER_S = 20.0


def host_port(host: str, port: int) -> str:
    """``host:port`` as ``--metrics`` takes it: an IPv6 host in brackets (``[::1]:9464``)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Pacer:
    """Spaces events at least ``1 / rate`` seconds apart: ``wait`` sleeps until its turn."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        """Sleep until this caller's turn (at once when the last one was long ago)."""
        if self.interval == 0:
            return
        with self._lock:
            now = time.monotonic()
            turn = max(now, self._next)
            self._next = turn + self.interval
        if turn > now:
            time.sleep(turn - now)


class ExpositionCache:
    """The encoded exposition of the latest snapshot, per format; see the module docstring."""

    def __init__(
        self, registry: CollectorRegistry, get_snapshot: Callable[[], Snapshot | None]
    ) -> None:
        self._registry = registry
        self._get_snapshot = get_snapshot
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[Snapshot | None, bytes]] = {}
        #: the snapshot being encoded: what the collector reads
        self.current: Snapshot | None = None
        self.encodes = 0
        self.hits = 0
        self.refused = 0

    def stats(self) -> dict[str, float]:
        """Counters for the exporter's own metrics."""
        return {"encodes": self.encodes, "refused": self.refused}

    def get(self, accept: str | None) -> tuple[bytes, str]:
        """(body, content type) for a request's ``Accept`` header."""
        encoder, content_type = choose(accept or "")
        snap = self._get_snapshot()
        with self._lock:  # one encoding at a time; the others then find it cached
            entry = self._entries.get(content_type)
            if entry is not None and entry[0] is snap and snap is not None:
                self.hits += 1
                return entry[1], content_type
            self.current = snap
            self.encodes += 1
            body = encoder(self._registry)
            self._entries[content_type] = (snap, body)
            return body, content_type


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    cache: ExpositionCache
    slots: threading.BoundedSemaphore
    pacer: Pacer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up before its reply (a scraper's timeout) is no error of
        ours: say nothing. Anything else is reported as ``socketserver`` does."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10  # a client that sends nothing does not hold a thread for ever
    # the errors ``http.server`` answers itself (a method other than GET or HEAD, a
    # malformed request) in plain text, as ours are, not an HTML page
    error_message_format = "%(code)d %(message)s: %(explain)s\n"
    error_content_type = "text/plain; charset=utf-8"
    _head = False  # answering a HEAD: the status and headers of a GET, no body

    def do_HEAD(self) -> None:
        self._head = True
        self.do_GET()

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] not in ("/metrics", "/"):
            self._reply(404, b"not found: fabtop serves /metrics\n", "text/plain")
            return
        if not self.server.slots.acquire(blocking=False):
            self.server.cache.refused += 1
            self._reply(503, b"too many concurrent scrapes\n", "text/plain", {"Retry-After": "1"})
            return
        try:
            self.server.pacer.wait()
            body, content_type = self.server.cache.get(self.headers.get("Accept"))
        except Exception as exc:  # never let one scrape take the server down
            self._reply(500, f"error collecting metrics: {exc!r}\n".encode(), "text/plain")
            return
        finally:
            self.server.slots.release()
        self._reply(200, body, content_type)

    def _reply(
        self, code: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if not self._head:
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: no line per scrape on stderr."""


class MetricsServer:
    """A running ``/metrics`` endpoint; ``close()`` stops it."""

    def __init__(
        self,
        server: _Server,
        thread: threading.Thread,
        registry: CollectorRegistry,
        collector: FabtopCollector,
    ) -> None:
        """Wrap a started server (use ``start_metrics_server``)."""
        self._server = server
        self._thread = thread
        self.registry = registry
        self.collector = collector
        self.cache = server.cache
        host, port = server.server_address[:2]
        self.host = str(host)
        self.port = int(port)

    @property
    def address(self) -> str:
        """``host:port`` the server listens on (the real port when asked for port 0)."""
        return host_port(self.host, self.port)

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
    *,
    health: Callable[[], EngineHealth] | None = None,
    bridge: Callable[[], BridgeCounters] | None = None,
    max_concurrent: int = MAX_CONCURRENT_SCRAPES,
    max_rate: float = MAX_SCRAPES_PER_S,
) -> MetricsServer:
    """Serve fabtop's metrics on ``http://host:port/metrics`` in a daemon thread.

    Args:
        get_snapshot: returns the latest snapshot (e.g. ``lambda: engine.bus.latest``);
            called once per scrape, from a server thread.
        host: address to bind (loopback by default: expose it on purpose).
        port: TCP port; 0 picks a free one (see ``MetricsServer.address``).
        link_metrics: ``all``, ``top:N`` or ``switch`` (see docs/METRICS.md).
        health: the engine's pacing figures (``Engine.health``), exported when given.
        bridge: the MQTT bridge's counters (``fabtop serve``), exported when given.
        max_concurrent: scrapes served at once; more get 503.
        max_rate: most responses a second in all (0: no pacing); faster scrapers wait.

    Raises:
        ValueError: for a bad ``link_metrics``.
        OSError: if the address cannot be bound (e.g. the port is in use).
    """
    policy = parse_link_metrics(link_metrics)
    registry = CollectorRegistry(auto_describe=False)
    cache_box: list[ExpositionCache] = []
    collector = FabtopCollector(
        lambda: cache_box[0].current,
        policy,
        health=health,
        scrape_stats=lambda: cache_box[0].stats(),
        bridge=bridge,
    )
    registry.register(collector)
    cache = ExpositionCache(registry, get_snapshot)
    cache_box.append(cache)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET

    class _Bound(_Server):
        address_family = family

    try:
        server = _Bound((host, port), _Handler)
    except OSError as exc:
        where = host_port(host, port)
        raise OSError(exc.errno, f"cannot serve metrics on {where}: {exc.strerror}") from exc
    server.cache = cache
    server.slots = threading.BoundedSemaphore(max_concurrent)
    server.pacer = Pacer(max_rate)
    thread = threading.Thread(target=server.serve_forever, name="fabtop-metrics", daemon=True)
    thread.start()
    return MetricsServer(server, thread, registry, collector)
