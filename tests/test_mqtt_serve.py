"""``fabtop serve`` behind a real mosquitto, driven with mosquitto_pub / mosquitto_sub.

One served emulator (cluster "e2e") answers the command tests; the status and
will tests start their own so they can stop or kill it.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._mosquitto import REPO, Mosquitto, Served, broker, mosquitto  # noqa: F401  (fixtures)
from tests._ports import free_port

pytestmark = pytest.mark.integration

LINK = "leaf00->spine01"


@pytest.fixture(scope="module")
def served(broker: Mosquitto) -> Iterator[Served]:  # noqa: F811
    s = Served(broker.url, "e2e")
    try:
        s.wait_online(broker.cli())
        yield s
    finally:
        s.stop()


def telemetry(
    broker: Mosquitto,  # noqa: F811
    cluster: str,
    pred: Callable[[dict[str, Any]], bool] = lambda t: True,
) -> dict[str, Any]:
    """The first telemetry message ``pred`` accepts."""
    _, payload = broker.cli().wait_for(
        f"fabtop/{cluster}/telemetry", lambda _t, p: pred(json.loads(p))
    )
    result: dict[str, Any] = json.loads(payload)
    return result


def send(
    broker: Mosquitto,  # noqa: F811
    topic: str,
    payload: bytes | str,
    result_topic: str,
) -> dict[str, Any]:
    """Publish a command as an operator would and return the reply it gets."""
    cli = broker.cli()
    sub = cli.sub_start(result_topic, count=1)
    cli.pub(topic, payload)
    got = cli.sub_collect(sub)
    assert got, f"no reply on {result_topic}"
    reply: dict[str, Any] = json.loads(got[0][1])
    return reply


def test_late_subscriber_gets_online_and_a_kill_leaves_offline(broker: Mosquitto) -> None:  # noqa: F811
    s = Served(broker.url, "willtest")
    cli = broker.cli()
    s.wait_online(cli)
    assert cli.sub("fabtop/willtest/status") == [("fabtop/willtest/status", b"online")]
    s.kill()
    cli.wait_for("fabtop/willtest/status", lambda _t, p: p == b"offline")
    # retained: a subscriber arriving later still learns the emulator is gone
    assert cli.sub("fabtop/willtest/status") == [("fabtop/willtest/status", b"offline")]
    # and a script trying to inject learns at once that nobody serves that cluster
    cluster_args = ["--mqtt", broker.url, "--cluster", "willtest"]
    r = subprocess.run(
        [sys.executable, "-m", "console.cli", "inject", "link_down", LINK, *cluster_args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 3 and "fabtop/willtest is offline" in r.stderr, r.stderr


def test_clean_stop_says_offline(broker: Mosquitto) -> None:  # noqa: F811
    s = Served(broker.url, "cleanstop")
    cli = broker.cli()
    s.wait_online(cli)
    assert s.stop() == 0, s.output()
    assert cli.sub("fabtop/cleanstop/status") == [("fabtop/cleanstop/status", b"offline")]
    assert "offline announced" in s.output()


def test_meta_is_retained_for_late_consoles(broker: Mosquitto, served: Served) -> None:  # noqa: F811
    ((_, payload),) = broker.cli().sub("fabtop/e2e/meta")
    meta = json.loads(payload)
    assert meta["scenario"] == "tiny" and "gpu0000" in meta["nodes"]["name"]


def test_fault_command_applied_once_and_seen_in_telemetry(
    broker: Mosquitto,  # noqa: F811
    served: Served,
) -> None:
    body = json.dumps({"id": "op-1", "kind": "link_down", "target": LINK})
    first = send(broker, "fabtop/e2e/cmd/inject", body, "fabtop/e2e/result/op-1")
    assert first["ok"] is True and first["id"] == "op-1", first
    tm = telemetry(broker, "e2e", lambda t: any(f["target"] == LINK for f in t["faults"]))
    faults = [f for f in tm["faults"] if f["target"] == LINK]
    assert len(faults) == 1 and faults[0]["kind"] == "link_down"
    links = tm["links"]
    assert links["status"][links["name"].index(LINK)] == 1  # down, and reported

    again = send(broker, "fabtop/e2e/cmd/inject", body, "fabtop/e2e/result/op-1")
    assert again["ok"] is True and again["detail"]["duplicate"] is True
    tick = tm["tick"]
    later = telemetry(broker, "e2e", lambda t: t["tick"] > tick)
    assert len([f for f in later["faults"] if f["target"] == LINK]) == 1

    cleared = send(
        broker,
        "fabtop/e2e/cmd/clear",
        json.dumps({"id": "op-2", "target": LINK}),
        "fabtop/e2e/result/op-2",
    )
    assert cleared["ok"] is True, cleared


def test_paused_emulator_still_shows_in_telemetry(broker: Mosquitto, served: Served) -> None:  # noqa: F811
    paused = send(broker, "fabtop/e2e/cmd/pause", '{"id": "pz-1"}', "fabtop/e2e/result/pz-1")
    assert paused["ok"] is True, paused
    try:
        # nothing changes while paused, yet a console attaching now gets the state
        first = telemetry(broker, "e2e", lambda t: t["running"] is False)
        again = telemetry(broker, "e2e")
        assert again["running"] is False and again["tick"] == first["tick"]
    finally:
        resumed = send(broker, "fabtop/e2e/cmd/resume", '{"id": "pz-2"}', "fabtop/e2e/result/pz-2")
    assert resumed["ok"] is True, resumed
    telemetry(broker, "e2e", lambda t: t["running"] is True and t["tick"] > first["tick"])


BAD = [
    ("inject", b"not json {", "fabtop/e2e/result", "malformed JSON"),
    ("inject", b"", "fabtop/e2e/result", "empty command"),
    (
        "inject",
        b'{"id": "b-types", "kind": "link_down", "target": 5}',
        "fabtop/e2e/result/b-types",
        "target must be a string, got 5",
    ),
    (
        "inject",
        b'{"id": "b-kind", "kind": "link_melt", "target": "leaf00->spine01"}',
        "fabtop/e2e/result/b-kind",
        "link_melt",
    ),
    (
        "inject",
        b'{"id": "b-link", "kind": "link_down", "target": "leaf00->spine99"}',
        "fabtop/e2e/result/b-link",
        "unknown link 'leaf00->spine99'",
    ),
    (
        "inject",
        b'{"id": "b-huge", "kind": "link_down", "target": "x", "pad": "' + b"x" * 200_000 + b'"}',
        "fabtop/e2e/result/b-huge",
        "the limit is",
    ),
    (
        "inject",
        b'{"id": "b-field", "kind": "link_down", "target": "leaf00->spine01", "colour": 1}',
        "fabtop/e2e/result/b-field",
        "inject has no field 'colour'",
    ),
    ("explode", b'{"id": "b-cmd"}', "fabtop/e2e/result/b-cmd", "unknown command 'explode'"),
    ("injekt", b'{"id": "b-typo"}', "fabtop/e2e/result/b-typo", "did you mean 'inject'"),
    (
        "inject",
        b'{"kind": "link_down", "target": "leaf00->spine01"}',
        "fabtop/e2e/result",
        "has no 'id'",
    ),
]


@pytest.mark.parametrize(
    ("command", "payload", "reply_topic", "needle"),
    BAD,
    ids=[
        "not-json",
        "empty",
        "wrong-type",
        "unknown-kind",
        "unknown-link",
        "huge",
        "unknown-field",
        "unknown-cmd",
        "typo",
        "no-id",
    ],
)
def test_bad_commands_get_a_specific_error(
    broker: Mosquitto,  # noqa: F811
    served: Served,
    command: str,
    payload: bytes,
    reply_topic: str,
    needle: str,
) -> None:
    reply = send(broker, f"fabtop/e2e/cmd/{command}", payload, reply_topic)
    assert reply["ok"] is False and needle in reply["error"], reply
    # and the emulator keeps running
    tick = telemetry(broker, "e2e")["tick"]
    telemetry(broker, "e2e", lambda t: t["tick"] > tick)
    assert served.proc.poll() is None


def test_serve_also_serves_prometheus_metrics(broker: Mosquitto) -> None:  # noqa: F811
    # port 0: serve binds a free port itself and logs it (a port found free by the test
    # could be taken by another process before serve binds it)
    s = Served(broker.url, "metrics", "--metrics", "127.0.0.1:0")
    try:
        s.wait_online(broker.cli())
        said = re.search(r"metrics on (http://127\.0\.0\.1:(\d+)/metrics)", s.output())
        assert said is not None and int(said[2]) > 0, s.output()
        with urllib.request.urlopen(said[1], timeout=10) as r:
            body = r.read().decode()
        assert "fabtop_fabric_info" in body
        assert "fabtop_mqtt_connected 1.0" in body
        assert 'fabtop_mqtt_commands_total{outcome="refused"} 0.0' in body
        # the bridge's counters, as Grafana reads them: a refused command and its event
        reply = send(
            broker,
            "fabtop/metrics/cmd/explode",
            b'{"id": "m-1"}',
            "fabtop/metrics/result/m-1",
        )
        assert reply["ok"] is False

        def scraped() -> str:
            with urllib.request.urlopen(said[1], timeout=10) as r:
                return str(r.read().decode())

        deadline = time.monotonic() + 60  # (a bound against a hang: the engine runs on)
        while 'fabtop_mqtt_commands_total{outcome="refused"} 1.0' not in (body := scraped()):
            assert time.monotonic() < deadline, body
            time.sleep(0.1)
        assert 'fabtop_mqtt_commands_total{outcome="applied"} 0.0' in body
        assert "fabtop_mqtt_connections_total 1.0" in body
    finally:
        assert s.stop() == 0, s.output()


def test_serve_started_before_the_broker_goes_online_when_it_comes(tmp_path: Path) -> None:
    later = Mosquitto(tmp_path, free_port())  # nothing listens there yet
    s = Served(later.url, "early")
    try:
        for _ in range(600):  # bounded wait (60 s) for its first failed attempt
            if "no broker at" in s.output():  # it says why it is waiting
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"serve never reported the missing broker:\n{s.output()}")
        later.start()
        s.wait_online(later.cli())
        # its engine runs: the ticks advance (the first telemetry may still say tick 0
        # when the engine was loading its kernels while the broker came up)
        later.cli().wait_for(
            "fabtop/early/telemetry", lambda _t, p: json.loads(p)["tick"] > 0, timeout_s=60
        )
    finally:
        s.stop()
        later.stop()


def serve_tiny(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """``fabtop serve tiny --mqtt URL ...`` run to its end (for the ones that refuse)."""
    return subprocess.run(
        [sys.executable, "-m", "console.cli", "serve", "tiny", "--mqtt", url, *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_serve_refuses_a_cluster_another_emulator_serves(mosquitto: Mosquitto) -> None:  # noqa: F811
    """A second serve answered the same commands as the first and, on its exit, left the
    status offline and its meta behind. Here the first is its retained status and meta
    (the scenario's cluster, no --cluster: the banner names it, not a placeholder)."""
    cli = mosquitto.cli()
    cli.pub("fabtop/tiny/meta", '{"run_id": "5f0c2a9e41b7", "scenario": "tiny"}', retain=True)
    cli.pub("fabtop/tiny/status", "online", retain=True)
    r = serve_tiny(mosquitto.url, "--no-metrics")
    assert r.returncode == 1, r.stderr
    assert "(topics fabtop/tiny/...)" in r.stderr
    assert (
        "error: cluster 'tiny' is served already by another emulator (run 5f0c2a9e41b7, "
        "scenario tiny): stop it first, or serve this one under another name with --cluster NAME"
    ) in r.stderr
    # nothing published: the first one's status and meta are as they were
    assert cli.sub("fabtop/tiny/status") == [("fabtop/tiny/status", b"online")]
    ((_, meta),) = cli.sub("fabtop/tiny/meta")
    assert json.loads(meta)["run_id"] == "5f0c2a9e41b7"


def test_a_metrics_port_in_use_says_what_to_do() -> None:
    """A second serve with the default options stops at the exporter's port; it said
    "[Errno 98] cannot serve metrics on 127.0.0.1:9464: Address already in use" and no more."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = serve_tiny("mqtt://127.0.0.1:1", "--metrics", f"127.0.0.1:{port}")
    assert r.returncode == 2, r.stderr
    assert (
        f"error: cannot serve metrics on 127.0.0.1:{port}: Address already in use; choose "
        "another address with --metrics HOST:PORT (port 0: any free one) or serve without "
        "it with --no-metrics"
    ) in r.stderr
    assert "Errno" not in r.stderr


def test_serve_refuses_an_empty_allow_list(mosquitto: Mosquitto) -> None:  # noqa: F811
    r = serve_tiny(mosquitto.url, "--no-metrics", "--allow", "")
    assert r.returncode == 2
    assert "--allow '' names no command kind; to refuse every command use --read-only" in r.stderr
