"""The exporter's options and server life cycle, through the public API."""

from __future__ import annotations

import argparse
import re
import socket

import pytest

from console.cli._common import add_metrics_options
from console.cli.tui import start_exporter
from exporters.prometheus import (
    LinkMetrics,
    parse_link_metrics,
    parse_metrics_address,
    start_metrics_server,
)
from tests._prometheus import promtool, samples, scrape


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:9464", ("127.0.0.1", 9464)),
        ("0.0.0.0:0", ("0.0.0.0", 0)),
        ("localhost:8000", ("localhost", 8000)),
        (":9100", ("127.0.0.1", 9100)),
        ("[::1]:9464", ("::1", 9464)),
        (" metrics.example-1.internal:65535 ", ("metrics.example-1.internal", 65535)),
    ],
)
def test_metrics_address_forms(text: str, expected: tuple[str, int]) -> None:
    assert parse_metrics_address(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty address"),
        ("127.0.0.1", "missing port"),
        ("127.0.0.1:http", "port 'http' is not a number"),
        ("127.0.0.1:-1", "port '-1' is not a number"),
        ("127.0.0.1:70000", "out of range"),
        ("::1:9464", "IPv6 host in brackets"),
        ("[::1]9464", "expected [IPv6]:PORT"),
        ("bad host:80", "not a host name"),
    ],
)
def test_metrics_address_errors_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_metrics_address(text)


def test_link_metrics_forms() -> None:
    assert parse_link_metrics("all") == LinkMetrics("all")
    assert parse_link_metrics("switch") == LinkMetrics("switch")
    assert parse_link_metrics("TOP:7") == LinkMetrics("top", 7)
    assert str(parse_link_metrics("top:50")) == "top:50"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("top", "did you mean top:N"),
        ("top:0", "whole number >= 1"),
        ("top:x", "whole number >= 1"),
        ("top:-3", "whole number >= 1"),
        ("links", "expected 'all', 'top:N'"),
        ("", "expected 'all', 'top:N'"),
    ],
)
def test_link_metrics_errors_say_what_is_accepted(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_link_metrics(text)


def test_bad_link_metrics_is_refused_before_binding() -> None:
    with pytest.raises(ValueError, match="top:N"):
        start_metrics_server(lambda: None, port=0, link_metrics="hottest")


def test_port_zero_reports_the_real_port_and_close_frees_it() -> None:
    server = start_metrics_server(lambda: None, port=0)
    host, port = parse_metrics_address(server.address)
    assert host == "127.0.0.1" and port > 0
    assert "fabtop_exporter_snapshot_available 0.0" in scrape(server.url)
    server.close()
    server.close()  # idempotent
    with socket.socket() as sock:  # nothing listens there any more
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is fine
        sock.bind(("127.0.0.1", port))
        sock.listen()


def test_port_in_use_is_a_clear_error() -> None:
    with (
        start_metrics_server(lambda: None, port=0) as first,
        pytest.raises(OSError, match=f"cannot serve metrics on 127.0.0.1:{first.port}"),
    ):
        start_metrics_server(lambda: None, port=first.port)


@pytest.mark.integration  # runs promtool
def test_before_the_first_snapshot_only_exporter_metrics_and_they_lint() -> None:
    with start_metrics_server(lambda: None, port=0, link_metrics="switch") as server:
        text = scrape(server.url)
    values = samples(text)
    assert values[("fabtop_exporter_snapshot_available", ())] == 0.0
    assert values[("fabtop_exporter_info", (("link_metrics", "switch"),))] == 1.0
    assert all(name.startswith("fabtop_exporter_") for name, _ in values)
    lint = promtool("check", "metrics", stdin=text)
    assert lint.returncode == 0 and not lint.stdout.strip(), lint.stdout + lint.stderr


@pytest.mark.integration  # runs promtool
def test_the_mqtt_bridges_counters_are_exported_by_outcome_and_lint() -> None:
    from exporters.mqtt.schema import CommandStatsMsg, EventStatsMsg
    from exporters.prometheus.bridge_metrics import BridgeCounters

    commands = CommandStatsMsg(
        applied=7, refused=2, busy=1, duplicates=4, internal_errors=0, discarded=5,
        replies_lost=6, retained_cleared=0, read_only=False, allowed=None,
    )  # fmt: skip
    events = EventStatsMsg(sent=90, dropped=8, gaps=9)
    counters = BridgeCounters(
        connected=False, connections=3, telemetry_sent=40, commands=commands, events=events
    )
    with start_metrics_server(lambda: None, port=0, bridge=lambda: counters) as server:
        text = scrape(server.url)
    values = samples(text)
    commands = {
        dict(labels)["outcome"]: v
        for (name, labels), v in values.items()
        if name == "fabtop_mqtt_commands_total"
    }
    assert commands == {
        "applied": 7, "refused": 2, "duplicate": 4, "internal_error": 0, "discarded": 5
    }  # fmt: skip
    assert values[("fabtop_mqtt_connected", ())] == 0
    assert values[("fabtop_mqtt_connections_total", ())] == 3
    assert values[("fabtop_mqtt_commands_busy_total", ())] == 1
    assert values[("fabtop_mqtt_replies_lost_total", ())] == 6
    assert values[("fabtop_mqtt_events_total", (("outcome", "dropped"),))] == 8
    assert values[("fabtop_mqtt_events_total", (("outcome", "sent"),))] == 90
    assert values[("fabtop_mqtt_event_gaps_total", ())] == 9
    assert values[("fabtop_mqtt_telemetry_messages_total", ())] == 40
    lint = promtool("check", "metrics", stdin=text)
    assert lint.returncode == 0 and not lint.stdout.strip(), lint.stdout + lint.stderr


def parser() -> argparse.ArgumentParser:
    """The exporter's options as ``fabtop`` (the console) and ``fabtop serve`` add them."""
    p = argparse.ArgumentParser(prog="fabtop")
    add_metrics_options(p)
    return p


def test_cli_defaults() -> None:
    args = parser().parse_args([])
    assert args.metrics == ("127.0.0.1", 9464)
    assert args.link_metrics == "top:50"
    assert not args.no_metrics


def test_cli_starts_the_exporter_it_is_asked_for() -> None:
    args = parser().parse_args(["--metrics", "127.0.0.1:0", "--link-metrics", "switch"])
    host, port = args.metrics
    server, address = start_exporter(lambda: None, host, port, link_metrics=args.link_metrics)
    assert server is not None and address is not None and not address.endswith(":0")
    try:
        assert 'fabtop_exporter_info{link_metrics="switch"} 1.0' in scrape(server.url)
    finally:
        server.close()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--metrics", "9464"], "argument --metrics: '9464': missing port"),
        (["--metrics", "[::1"], "argument --metrics: '[::1': expected [IPv6]:PORT"),
        (["--link-metrics", "top:0"], "argument --link-metrics: 'top:0': N in top:N must be"),
    ],
)
def test_cli_bad_values_are_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
