"""Issue 20, defect 1: no exception from one message ends the bridge; offline on any exit.

In-process (so the test can make the bridge's own code fail) against a real mosquitto.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import aiomqtt
import pytest

from exporters.mqtt.bridge import MqttBridge
from exporters.mqtt.inbox import CommandInbox
from exporters.mqtt.url import parse_broker_url
from fabric_core.commands import CommandResult
from fabric_core.runtime.engine import Engine, EngineHealth
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from tests._mosquitto import Mosquitto, mosquitto  # noqa: F401  (fixture)
from tests.helpers import until

pytestmark = pytest.mark.integration


async def _reply(mosquitto: Mosquitto, topic: str, payload: str, result: str) -> dict[str, object]:  # noqa: F811
    cli = mosquitto.cli()
    sub = await asyncio.to_thread(cli.sub_start, result, count=1)
    await asyncio.to_thread(cli.pub, topic, payload)
    got = await asyncio.to_thread(cli.sub_collect, sub)
    assert got, f"no reply on {result}"
    reply: dict[str, object] = json.loads(got[0][1])
    return reply


async def test_an_exception_in_one_command_is_answered_and_the_bridge_goes_on(
    mosquitto: Mosquitto,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = Engine(Fabric.from_scenario(load_scenario("tiny")))
    bridge = MqttBridge(parse_broker_url(mosquitto.url), engine.bus, engine.submit, cluster="ex")
    real = CommandInbox.handle

    async def handle(
        self: CommandInbox, topic: str, payload: bytes, *, retained: bool = False
    ) -> tuple[str, CommandResult]:
        if b"boom" in payload:
            raise RecursionError("maximum recursion depth exceeded")  # what nesting used to do
        return await real(self, topic, payload, retained=retained)

    monkeypatch.setattr(CommandInbox, "handle", handle)
    tasks = [asyncio.create_task(engine.run()), asyncio.create_task(bridge.run())]
    try:
        await until(lambda: bridge.connected, "connected")
        bad = await _reply(
            mosquitto, "fabtop/ex/cmd/pause", '{"id": "bx-1", "boom": 1}', "fabtop/ex/result/bx-1"
        )
        assert bad == {
            "id": "bx-1",
            "ok": False,
            "error": "internal error: the command was not applied",
            "detail": {},
        }
        assert bridge.internal_errors == 1 and not tasks[1].done()
        good = await _reply(
            mosquitto, "fabtop/ex/cmd/pause", '{"id": "bx-2"}', "fabtop/ex/result/bx-2"
        )
        assert good["ok"] is True
        status = await asyncio.to_thread(mosquitto.cli().sub, "fabtop/ex/status")
        assert status == [("fabtop/ex/status", b"online")]
    finally:
        bridge.stop()
        engine.stop()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_bridge_that_fails_says_offline(mosquitto: Mosquitto) -> None:  # noqa: F811
    engine = Engine(Fabric.from_scenario(load_scenario("tiny")))
    calls = 0

    def health() -> EngineHealth:
        nonlocal calls
        calls += 1
        if calls > 3:
            raise RuntimeError("a bug in the bridge's own code")
        return engine.health

    bridge = MqttBridge(
        parse_broker_url(mosquitto.url),
        engine.bus,
        engine.submit,
        cluster="dies",
        telemetry_hz=20,
        health=health,
    )
    engine_task = asyncio.create_task(engine.run())
    try:
        with pytest.raises(RuntimeError, match="a bug in the bridge"):
            await asyncio.wait_for(bridge.run(), 60)
        # the clean disconnect suppressed the will: the bridge said offline itself
        assert bridge.said_offline
        status = await asyncio.to_thread(mosquitto.cli().sub, "fabtop/dies/status")
        assert status == [("fabtop/dies/status", b"offline")]
    finally:
        engine.stop()
        await engine_task


async def test_a_command_sent_on_seeing_online_is_answered(
    mosquitto: Mosquitto,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``online`` promises the bridge hears commands: it is said after the SUBACK.

    CI once lost a command sent right after ``online`` on a loaded machine, where the
    subscription left later than the status. The slowed subscribe makes that gap wide.
    """
    real_subscribe = aiomqtt.Client.subscribe

    async def late_subscribe(self: aiomqtt.Client, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(1.0)  # a process with a fraction of a core
        return await real_subscribe(self, *args, **kwargs)

    monkeypatch.setattr(aiomqtt.Client, "subscribe", late_subscribe)
    engine = Engine(Fabric.from_scenario(load_scenario("tiny")))
    bridge = MqttBridge(parse_broker_url(mosquitto.url), engine.bus, engine.submit, cluster="on")
    cli = mosquitto.cli()
    replies = await asyncio.to_thread(cli.sub_start, "fabtop/on/result/on-1", timeout_s=10)
    tasks = [asyncio.create_task(engine.run()), asyncio.create_task(bridge.run())]
    try:
        await asyncio.to_thread(
            cli.wait_for, "fabtop/on/status", lambda _t, p: p == b"online", timeout_s=30
        )
        await asyncio.to_thread(cli.pub, "fabtop/on/cmd/pause", '{"id": "on-1"}')
        got = await asyncio.to_thread(cli.sub_collect, replies)
        assert [json.loads(p)["ok"] for _t, p in got] == [True], got
    finally:
        bridge.stop()
        engine.stop()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_flood_of_refused_commands_is_logged_within_a_budget(
    mosquitto: Mosquitto,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every bad command is answered, but the log holds at most ``LINES_PER_WINDOW`` of
    them a window, and a bidi override in a topic (mosquitto refuses control characters
    in topics, not it) is escaped, not sent to the terminal."""
    from exporters.mqtt.logbudget import LINES_PER_WINDOW

    engine = Engine(Fabric.from_scenario(load_scenario("tiny")))
    bridge = MqttBridge(parse_broker_url(mosquitto.url), engine.bus, engine.submit, cluster="fl")
    tasks = [asyncio.create_task(engine.run()), asyncio.create_task(bridge.run())]
    n = LINES_PER_WINDOW + 15
    try:
        with caplog.at_level(logging.INFO, "fabtop.mqtt"):
            await until(lambda: bridge.connected, "connected")
            cli = mosquitto.cli()
            for i in range(n):
                await asyncio.to_thread(cli.pub, "fabtop/fl/cmd/\u202ex", f'{{"id": "fl-{i}"}}')
            await until(lambda: bridge.inbox is not None and bridge.inbox.refused >= n, "refused")
    finally:
        bridge.stop()
        engine.stop()
        await asyncio.gather(*tasks, return_exceptions=True)
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == LINES_PER_WINDOW
    assert all("\u202e" not in line and "\\u202ex" in line for line in refusals), refusals[0]
