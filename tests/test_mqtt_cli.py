"""``fabtop inject`` and ``fabtop watch`` as a script would run them."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator

import msgspec
import pytest

from console.cli.inject import check_fault
from console.cli.watch import format_line, json_line
from exporters.mqtt._tasks import cancel_and_wait
from exporters.mqtt.client import make_client
from exporters.mqtt.oneshot import NoAnswerError, send_command
from exporters.mqtt.topics import Topics
from exporters.mqtt.url import parse_broker_url
from fabric_core.commands import CommandError, CommandResult, InjectFault
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from tests._mosquitto import (  # noqa: F401  (fixtures)
    REPO,
    Mosquitto,
    Served,
    broker,
    mosquitto,
)
from tests._ports import free_port
from tests.helpers import until

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


def test_clear_clears_a_fault_by_id_target_or_all(broker: Mosquitto, served: Served) -> None:  # noqa: F811
    """A refusal said "clear it first", and no command of fabtop's could."""
    url = ("--mqtt", broker.url, "--cluster", "clitest")
    r = fabtop("inject", "link_down", "leaf00:spine00", *url)
    assert r.returncode == 0, r.stderr
    fault = json.loads(fabtop("inject", "link_down", "leaf01:spine00", *url, "--json").stdout)
    first, second = (
        r.stdout.split("fault_id=")[1].split()[0].rstrip(","),
        fault["detail"]["fault_id"],
    )
    r = fabtop("clear", first, *url)
    assert r.returncode == 0 and r.stdout.startswith("ok [id cli-"), r.stderr
    r = fabtop("clear", first, *url)  # cleared already
    assert r.returncode == 1 and f"fault {first!r} is already cleared" in r.stdout
    r = fabtop("clear", "--target", "leaf01:spine00", *url)
    assert r.returncode == 0, r.stdout + r.stderr
    r = fabtop("clear", second, *url)
    assert r.returncode == 1  # the --target clear took it
    assert fabtop("clear", "--all", *url).returncode == 0
    r = fabtop("clear", "f0", "--target", "x", *url)
    assert r.returncode == 2 and "not allowed with" in r.stderr


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
    assert re.search(r"command cli-[0-9a-f]{12} was sent", r.stderr), r.stderr
    # a port nobody listens on
    r = fabtop(
        "inject", "link_down", "a->b", "--mqtt", f"mqtt://127.0.0.1:{free_port()}", "--cluster", "c"
    )
    assert r.returncode == 3 and "connection refused" in r.stderr


def test_inject_says_a_command_an_online_cluster_did_not_answer_may_be_applied(
    broker: Mosquitto,  # noqa: F811
) -> None:
    """It exited 3 ("unreachable") and never named the generated id, so a script retried
    under a new id and applied the fault twice. A cluster whose status says online here
    answers nothing (no emulator behind it): exit 4, naming the id to send it again under."""
    broker.cli().pub("fabtop/mute/status", "online", retain=True)
    r = fabtop("inject", "link_down", "a->b", "--mqtt", broker.url, "--cluster", "mute",
               "--timeout", "0.5")  # fmt: skip
    said = re.search(r"command (cli-[0-9a-f]{12}) was sent and may have been applied", r.stderr)
    assert r.returncode == 4 and said is not None, r.stderr
    assert f"send it again under its id (--id {said[1]})" in r.stderr
    broker.cli().pub("fabtop/mute/status", "", retain=True)


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
    assert (format_line(t, "fabtop/c/event", b"garbage") or "").startswith(
        "unreadable fabtop/c/event"
    )
    assert (
        json_line("fabtop/c/status", b"online") == '{"topic":"fabtop/c/status","payload":"online"}'
    )


class Responder:
    """Stands in for a served emulator: records the commands on ``cmd/#`` and answers
    each with ``ok``, after publishing ``say_first`` (topic, payload, retained) if given."""

    def __init__(self, url: str, cluster: str, say_first: tuple[str, str] | None = None) -> None:
        self.config = parse_broker_url(url)
        self.topics = Topics(cluster)
        self.say_first = say_first
        self.received: list[str] = []
        self.subscribed = asyncio.Event()

    async def run(self) -> None:
        async with make_client(self.config, role="responder") as client:
            await client.subscribe(self.topics.cmd_filter, qos=1)
            self.subscribed.set()
            async for message in client.messages:
                body = json.loads(bytes(message.payload))
                self.received.append(body["id"])
                if self.say_first is not None:
                    await client.publish(*self.say_first, qos=1, retain=True)
                reply = CommandResult(id=body["id"], ok=True, detail={"fault_id": "f0"})
                await client.publish(self.topics.result(body["id"]), reply.to_json(), qos=1)


async def responding(responder: Responder) -> asyncio.Task[None]:
    task = asyncio.create_task(responder.run())
    await asyncio.wait_for(responder.subscribed.wait(), 30)
    return task


INJECT = InjectFault(kind="link_down", target="leaf00->spine01")


async def test_inject_sends_nothing_to_an_offline_cluster(mosquitto: Mosquitto) -> None:  # noqa: F811
    """It sent the command, then said offline: a stale offline (an emulator serving all
    the same) applied it while the script heard "unreachable" and retried."""
    await asyncio.to_thread(mosquitto.cli().pub, "fabtop/stale/status", "offline", retain=True)
    responder = Responder(mosquitto.url, "stale")
    task = await responding(responder)
    try:
        with pytest.raises(NoAnswerError) as refused:
            await send_command(parse_broker_url(mosquitto.url), "stale", INJECT, timeout_s=5)
        # a command sent after it reaches the responder after anything sent before it
        await asyncio.to_thread(mosquitto.cli().pub, "fabtop/stale/cmd/pause", '{"id": "after"}')
        await until(lambda: responder.received != [], "the later command")
        assert responder.received == ["after"]
        assert str(refused.value) == "fabtop/stale is offline: no emulator is serving it (not sent)"
    finally:
        await cancel_and_wait([task])


async def test_inject_waits_for_the_result_whatever_the_status_says_after(
    mosquitto: Mosquitto,  # noqa: F811
) -> None:
    await asyncio.to_thread(mosquitto.cli().pub, "fabtop/late/status", "online", retain=True)
    responder = Responder(mosquitto.url, "late", say_first=("fabtop/late/status", "offline"))
    task = await responding(responder)
    try:
        command = msgspec.structs.replace(INJECT, id="op-late")
        result = await send_command(parse_broker_url(mosquitto.url), "late", command, timeout_s=30)
        assert result.ok and result.detail == {"fault_id": "f0"}
        assert responder.received == ["op-late"]
    finally:
        await cancel_and_wait([task])


FAULTS_REFUSED_WITHOUT_A_FABRIC = [
    ("link_degraded", "leaf00->spine01", {"ber": "abc"}),
    ("link_degraded", "leaf00->spine01", {"ber": 0.5}),
    ("link_degraded", "leaf00->spine01", {"bogus": 1.0}),
    ("link_flap", "leaf00->spine01", {"down_fraction": 2.0}),
    ("incast", "gpu0001", {"senders": 0.5}),
    ("link_melt", "leaf00->spine01", {}),
]


@pytest.mark.parametrize(("kind", "target", "params"), FAULTS_REFUSED_WITHOUT_A_FABRIC)
def test_inject_checks_a_fault_as_the_emulator_does(
    kind: str, target: str, params: dict[str, float | str]
) -> None:
    """The local check refuses what the core refuses, in its words (the core's check
    needs a fabric: it looks at the target first)."""
    command = InjectFault(id="c", kind=kind, target=target, params=params)
    core = Engine(Fabric.from_scenario(load_scenario("tiny"))).apply(command)
    with pytest.raises(CommandError) as local:
        check_fault(command)
    assert not core.ok and str(local.value) == core.error


def test_inject_refuses_bad_parameters_before_sending() -> None:
    """They were sent and refused by the emulator (exit 1), but for NaN (exit 2): the
    broker here is a port nobody listens on, so a command sent would exit 3."""
    url = f"mqtt://127.0.0.1:{free_port()}"
    target = ["link_degraded", "leaf00:spine01", "--mqtt", url, "--cluster", "c"]
    r = fabtop("inject", *target, "-p", "ber=0.5")
    assert r.returncode == 2
    assert "fabtop inject: error: link_degraded: ber must be in [1e-15, 0.001], got 0.5" in r.stderr
    r = fabtop("inject", *target, "-p", "ber=1e-6", "-p", "ber=1e-5")
    assert r.returncode == 2
    assert "--param 'ber=1e-5': ber is given twice; give each parameter once" in r.stderr
    r = fabtop("inject", *target, "-p", "bogus=1")
    assert r.returncode == 2 and "link_degraded takes no parameter(s) 'bogus'" in r.stderr


async def test_the_mqtt_librarys_own_errors_do_not_reach_the_terminal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A broker killed under `fabtop watch` printed the library's "failed to receive on
    socket: [Errno 104] Connection reset by peer" (logging's last resort) beside watch's
    own "# ... reconnecting"."""
    from exporters.mqtt.client import make_client
    from exporters.mqtt.url import parse_broker_url

    client = make_client(parse_broker_url("mqtt://127.0.0.1:1"), role="watch")
    caplog.set_level(logging.DEBUG)
    client._logger.error("failed to receive on socket: %s", "[Errno 104]")
    assert caplog.records == []  # (nothing reaches the root logger, nor its last resort)
