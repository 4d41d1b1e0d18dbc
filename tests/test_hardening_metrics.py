"""Issue 20, defects 5 and 6: /metrics encoded once per snapshot, capped scrapes,
series that expire and a capped total with a self-metric for what was cut."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporters.prometheus import start_metrics_server
from exporters.prometheus.options import parse_link_metrics
from exporters.prometheus.selection import LinkSelector
from fabric_core.runtime.engine import EngineHealth
from fabric_core.runtime.snapshot import Snapshot
from tests._prometheus import EngineThread


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineThread]:
    running = EngineThread("tiny").start()
    yield running
    running.stop()


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return int(r.status), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _value(text: bytes, name: str, labels: dict[str, str] | None = None) -> float:
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            if sample.name == name and (labels is None or sample.labels == labels):
                return float(sample.value)
    raise AssertionError(f"{name} not in the scrape")


def test_scrapes_of_one_snapshot_get_the_same_bytes_encoded_once(engine: EngineThread) -> None:
    snap = engine.wait_ticks(2)
    frozen: list[Snapshot | None] = [snap]
    with start_metrics_server(lambda: frozen[0], port=0) as server:
        bodies = [_get(server.url)[1] for _ in range(5)]
        assert all(b == bodies[0] for b in bodies)
        assert server.cache.encodes == 1 and server.cache.hits == 4
        assert _value(bodies[0], "fabtop_exporter_encodes_total") == 1
        newer = engine.wait_ticks(2)  # a new snapshot: encoded afresh, once
        frozen[0] = newer
        again = [_get(server.url)[1] for _ in range(3)]
        assert again[0] != bodies[0] and server.cache.encodes == 2
        assert _value(again[0], "fabtop_ticks_total") == float(newer.tick)


def test_concurrent_scrapes_past_the_cap_get_503_at_once(engine: EngineThread) -> None:
    gate = threading.Event()
    entered = threading.Event()

    def slow_snapshot() -> Snapshot | None:
        entered.set()
        gate.wait(30)
        return engine.latest()

    with start_metrics_server(slow_snapshot, port=0, max_concurrent=1) as server:
        first: list[tuple[int, bytes]] = []
        t = threading.Thread(target=lambda: first.append(_get(server.url)))
        t.start()
        assert entered.wait(30)
        code, body = _get(server.url)  # the one place is taken
        assert code == 503 and b"too many concurrent scrapes" in body
        gate.set()
        t.join(30)
        assert first[0][0] == 200
        assert server.cache.refused == 1
        code, body = _get(server.url)
        assert code == 200 and _value(body, "fabtop_exporter_scrapes_refused_total") == 1


def test_engine_pacing_and_refused_flows_are_exported(engine: EngineThread) -> None:
    health = EngineHealth("starved", 0.25, 3, 17)
    with start_metrics_server(engine.latest, port=0, health=lambda: health) as server:
        _, body = _get(server.url)
    assert _value(body, "fabtop_engine_pacing", {"state": "starved"}) == 1
    assert _value(body, "fabtop_engine_pacing", {"state": "ok"}) == 0
    assert _value(body, "fabtop_engine_busy_ratio") == 0.25
    assert _value(body, "fabtop_flows_refused_total") == 17


def test_a_link_whose_errors_stopped_growing_expires_after_the_hold() -> None:
    clock = Clock()
    sel = LinkSelector(parse_link_metrics("top:1"), hold_s=300, clock=clock)
    cold, up = np.zeros(4), np.zeros(4, bool)
    errors = np.array([0.0, 5.0, 0.0, 0.0])
    assert sel.select(cold, up, errors).tolist() == [1]  # errors grew: hot now
    clock.now += 299
    assert sel.select(cold, up, errors).tolist() == [1]  # still "in the last 5 minutes"
    clock.now += 2
    assert sel.select(cold, up, errors).tolist() == []  # errors stopped growing: expired
    errors[1] = 6.0
    assert sel.select(cold, up, errors).tolist() == [1]  # they grow again: back


def test_the_cap_keeps_links_down_first_then_the_most_recent_and_counts_the_cut() -> None:
    clock = Clock()
    sel = LinkSelector(parse_link_metrics("top:1"), hold_s=300, clock=clock, max_links=3)
    n = 10
    errors = np.zeros(n)
    down = np.zeros(n, bool)
    for i in range(6):  # a storm: links 0..5 get errors one after the other
        errors[i] = 1.0
        clock.now += 1
        sel.select(np.zeros(n), down, errors)
    down[9] = True
    got = sel.select(np.zeros(n), down, errors)
    assert got.tolist() == [4, 5, 9]  # the link down, then the two most recent
    assert sel.cut == 4


def test_the_default_cap_bounds_top_n_after_a_storm(engine: EngineThread) -> None:
    sel = LinkSelector(parse_link_metrics("top:50"))
    n = 1000
    got = sel.select(np.zeros(n), np.zeros(n, bool), np.arange(n, dtype=float) + 1)
    assert got.size == 200 and sel.cut == 800
    assert LinkSelector(parse_link_metrics("top:100")).max_links == 400
    assert LinkSelector(parse_link_metrics("all")).max_links is None


def test_links_cut_is_a_self_metric(engine: EngineThread) -> None:
    with start_metrics_server(engine.latest, port=0, link_metrics="top:1") as server:
        server.collector._selector.max_links = 0  # every qualifying link is cut
        engine.wait_ticks(2)
        _, body = _get(server.url)
    assert _value(body, "fabtop_exporter_links_exported") == 0
    assert _value(body, "fabtop_exporter_links_cut") >= 1


def test_responses_are_paced_to_the_rate_in_all(monkeypatch: pytest.MonkeyPatch) -> None:
    from exporters.prometheus import server as srv

    class FakeTime:
        def __init__(self) -> None:
            self.now = 100.0
            self.slept: list[float] = []

        def monotonic(self) -> float:
            return self.now

        def sleep(self, s: float) -> None:
            self.slept.append(round(s, 9))

    fake = FakeTime()
    monkeypatch.setattr(srv, "time", fake)
    pacer = srv.Pacer(20.0)
    for _ in range(4):  # four back-to-back requests at the same moment
        pacer.wait()
    assert fake.slept == [0.05, 0.1, 0.15]  # the first goes at once, then one per 50 ms
    fake.now += 10  # long after: at once again
    pacer.wait()
    assert fake.slept == [0.05, 0.1, 0.15]
    srv.Pacer(0).wait()  # 0: no pacing


def test_a_scraper_that_hangs_up_is_not_reported_as_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A client that gives up before its reply (a scraper's timeout on a busy machine)
    leaves the server a broken pipe: it is not an error of the exporter's and prints
    nothing, where socketserver would print a traceback per request; anything else
    still is reported."""
    server = start_metrics_server(lambda: None, port=0)
    inner = server._server  # what socketserver calls handle_error on
    try:
        for gone in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset")):
            try:
                raise gone
            except ConnectionError:
                inner.handle_error(None, ("127.0.0.1", 1))
        assert capsys.readouterr().err == ""
        try:
            raise RuntimeError("a real bug")
        except RuntimeError:
            inner.handle_error(None, ("127.0.0.1", 1))
        assert "a real bug" in capsys.readouterr().err
        assert _get(f"http://{server.address}/metrics")[0] in (200, 503)  # still serving
    finally:
        server.close()


def _request(url: str, method: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=30) as r:
            return int(r.status), dict(r.headers), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_head_gets_a_gets_headers_and_no_body_and_other_methods_plain_text(
    engine: EngineThread,
) -> None:
    """HEAD /metrics was answered 501 with an HTML page (uptime checkers and load
    balancers probe with HEAD)."""
    snap = engine.wait_ticks(2)
    with start_metrics_server(lambda: snap, port=0) as server:
        code, headers, body = _request(server.url, "HEAD")
        got, got_headers, got_body = _request(server.url, "GET")
        assert (code, body) == (200, b"") and got == 200
        assert headers["Content-Length"] == got_headers["Content-Length"] == str(len(got_body))
        assert headers["Content-Type"] == got_headers["Content-Type"]
        # (and the port counts' help reads: it said "Ports of the ports of the switch")
        assert b"# HELP fabtop_switch_down_ports How many of the ports of the switch have" in (
            got_body
        )
        assert _request(server.url.replace("/metrics", "/nowhere"), "HEAD")[0] == 404
        code, headers, body = _request(server.url, "POST")
        assert code == 501 and headers["Content-Type"].startswith("text/plain")
        assert body.startswith(b"501 Unsupported method ('POST')")
