"""``fabtop inject`` and ``fabtop watch`` as a script would run them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from console.cli.watch import format_line, json_line
from exporters.mqtt.topics import Topics
from tests._mosquitto import (  # noqa: F401  (fixtures)
    REPO,
    Mosquitto,
    Served,
    broker,
    mosquitto,
)
from tests._ports import free_port

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def served(broker: Mosquitto) -> Iterator[Served]:  # noqa: F811
    s = Served(broker.url, "clitest")
    try:
        s.wait_online(broker.cli())
        yield s
    finally:
        s.stop()


def fabtop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_inject_prints_ok_and_exits_zero(broker: Mosquitto, served: Served) -> None:  # noqa: F811
    # no --cluster: the one online cluster is found on the broker
    r = fabtop("inject", "link_degraded", "leaf01->spine01", "-p", "ber=1e-6", "--mqtt", broker.url)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok [id cli-")


def test_inject_refused_exits_one_with_the_reason(broker: Mosquitto, served: Served) -> None:  # noqa: F811
    r = fabtop(
        "inject", "link_down", "leaf01->spine99", "--mqtt", broker.url, "--cluster", "clitest"
    )
    assert r.returncode == 1
    assert "unknown link 'leaf01->spine99'" in r.stdout


def test_inject_usage_errors_exit_two_before_sending(broker: Mosquitto) -> None:  # noqa: F811
    r = fabtop("inject", "link_down", "x", "-p", "novalue", "--mqtt", broker.url)
    assert r.returncode == 2 and "expected KEY=VALUE" in r.stderr
    r = fabtop("inject", "link_down", "x", "--mqtt", "http://h")
    assert r.returncode == 2 and "unknown scheme 'http'" in r.stderr


def test_inject_without_emulator_or_broker_exits_three(broker: Mosquitto) -> None:  # noqa: F811
    r = fabtop(
        "inject", "link_down", "a->b", "--mqtt", broker.url, "--cluster", "ghost", "--timeout", "1"
    )
    assert r.returncode == 3 and "no result from fabtop/ghost" in r.stderr
    # a port nobody listens on
    r = fabtop(
        "inject", "link_down", "a->b", "--mqtt", f"mqtt://127.0.0.1:{free_port()}", "--cluster", "c"
    )
    assert r.returncode == 3 and "connection refused" in r.stderr


def test_watch_of_a_cluster_that_never_ran_says_so(broker: Mosquitto) -> None:  # noqa: F811
    """It printed nothing and exited 0, as a watch of a quiet cluster would."""
    r = fabtop("watch", "--mqtt", broker.url, "--cluster", "ghost", "--timeout", "1")
    assert r.returncode == 3 and r.stdout == ""
    assert "nothing from fabtop/ghost in 1 s: no emulator of that name" in r.stderr
    r = fabtop("watch", "--mqtt", broker.url, "--count", "0")
    assert r.returncode == 2 and "--count: must be at least 1, got '0'" in r.stderr


def test_watch_prints_status_results_and_events(broker: Mosquitto, served: Served) -> None:  # noqa: F811
    with subprocess.Popen(
        [sys.executable, "-m", "console.cli", "watch", "--mqtt", broker.url, "--timeout", "60"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as watch:
        try:
            assert watch.stdout is not None
            assert watch.stdout.readline().strip() == "status online"
            broker.cli().pub(
                "fabtop/clitest/cmd/inject",
                '{"id": "w1", "kind": "link_down", "target": "leaf00->spine00"}',
            )
            lines: list[str] = []
            while not (
                "result w1 ok" in lines
                and any(ln.startswith("event ") and "leaf00->spine00" in ln for ln in lines)
            ):
                line = watch.stdout.readline()
                assert line, f"watch ended early: {lines}"
                lines.append(line.strip())
        finally:
            watch.terminate()


def test_cluster_discovery_needs_exactly_one_online(mosquitto: Mosquitto) -> None:  # noqa: F811
    r = fabtop("inject", "link_down", "a->b", "--mqtt", mosquitto.url)
    assert r.returncode == 3 and "no fabtop emulator is online" in r.stderr
    cli = mosquitto.cli()
    cli.pub("fabtop/alpha/status", "online", retain=True)
    cli.pub("fabtop/beta/status", "online", retain=True)
    cli.pub("fabtop/gamma/status", "offline", retain=True)
    r = fabtop("watch", "--mqtt", mosquitto.url, "--count", "1")
    assert r.returncode == 2
    assert "several clusters are online (alpha, beta): choose one with --cluster" in r.stderr


def test_watch_lines_for_scripts() -> None:
    t = Topics("c")
    event = b'{"v":1,"run_id":"r","time_s":0.00201,"severity":"warning","kind":"fault_detected","target":"leaf00->spine01","message":"down"}'
    assert format_line(t, "fabtop/c/event", event) == (
        "event 0.002010s warning fault_detected leaf00->spine01: down"
    )
    assert format_line(t, "fabtop/c/status", b"offline") == "status offline"
    bad = b'{"id":"x","ok":false,"error":"unknown link","detail":{}}'
    assert format_line(t, "fabtop/c/result/x", bad) == "result x error: unknown link"
    assert format_line(t, "fabtop/c/event", b"garbage").startswith("unreadable fabtop/c/event")
    assert (
        json_line("fabtop/c/status", b"online") == '{"topic":"fabtop/c/status","payload":"online"}'
    )
