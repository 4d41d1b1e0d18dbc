"""The bridge and the remote source in this process, against a real mosquitto.

In-process so that the test can look at the engine while the broker is away
(simulated time must keep advancing) and feed the remote source directly.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from exporters.mqtt.bridge import MqttBridge
from exporters.mqtt.remote import MqttSource
from exporters.mqtt.url import parse_broker_url
from fabric_core.commands import InjectFault
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from tests._mosquitto import Mosquitto, mosquitto  # noqa: F401  (fixture)
from tests.helpers import until

pytestmark = pytest.mark.integration


@dataclass
class Served:
    engine: Engine
    bridge: MqttBridge
    tasks: list[asyncio.Task[None]]


@pytest.fixture
async def served(mosquitto: Mosquitto) -> AsyncIterator[Served]:  # noqa: F811
    engine = Engine(Fabric.from_scenario(load_scenario("tiny")))
    bridge = MqttBridge(
        parse_broker_url(mosquitto.url), engine.bus, engine.submit, cluster="ip", telemetry_hz=10
    )
    tasks = [asyncio.create_task(engine.run()), asyncio.create_task(bridge.run())]
    try:
        yield Served(engine, bridge, tasks)
    finally:
        bridge.stop()
        engine.stop()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_broker_restart_reconnects_and_telemetry_resumes(
    mosquitto: Mosquitto,  # noqa: F811
    served: Served,
) -> None:
    cli = mosquitto.cli()
    await until(lambda: served.bridge.connected, "first connection")
    _, first = await asyncio.to_thread(cli.wait_for, "fabtop/ip/telemetry", lambda _t, _p: True)
    tick_before = json.loads(first)["tick"]

    await asyncio.to_thread(mosquitto.stop)
    await until(lambda: not served.bridge.connected, "the bridge notices the broker is gone")
    tick_lost = served.engine.fabric.tick
    await until(lambda: served.engine.fabric.tick > tick_lost + 100, "engine runs on")
    sim_during = served.engine.fabric.sim_time_s
    assert not served.bridge.connected  # still away: the ticks above ran without a broker

    await asyncio.to_thread(mosquitto.start)
    # Wait on the events themselves (the bridge reconnected; then its messages arrive), each
    # with a generous upper bound that is a failure limit, not a budget load can exceed:
    # under load (two suites at once) a reconnection took longer than the fixed 20 s before.
    await until(lambda: served.bridge.connections == 2, "the bridge reconnects", 120.0)
    _, resumed = await asyncio.to_thread(
        cli.wait_for,
        "fabtop/ip/telemetry",
        lambda _t, p: json.loads(p)["sim_time_s"] >= sim_during,
        timeout_s=120,
    )
    assert json.loads(resumed)["tick"] > tick_before
    assert served.bridge.connections == 2
    # the restarted broker has no retained state: the bridge said online again (retained,
    # so a subscriber that arrives after it still gets it)
    _, status = await asyncio.to_thread(
        cli.wait_for, "fabtop/ip/status", lambda _t, _p: True, timeout_s=120
    )
    assert status == b"online"


async def test_remote_source_rebuilds_the_view_and_injects(
    mosquitto: Mosquitto,  # noqa: F811
    served: Served,
) -> None:
    async with MqttSource(parse_broker_url(mosquitto.url), "ip") as source:
        snap = await source.wait_snapshot(30)
        assert snap is not None, source.problem
        assert snap.cluster == "tiny"  # the scenario's name; "ip" is only the topic level
        assert snap.scenario == "tiny" and "gpu0000" in snap.nodes.index
        assert source.description == f"mqtt://127.0.0.1:{mosquitto.port} fabtop/ip"
        assert 0 < len(snap.links) <= 32
        assert len(source.all_link_names) == len(served.engine.fabric.snapshot().links)

        result = await source.submit(InjectFault(kind="link_down", target="leaf01->spine00"))
        assert result.ok, result
        assert any(f.target == "leaf01->spine00" for f in served.engine.fabric.snapshot().faults)

        seen = await source.wait_snapshot(30, after_tick=snap.tick)
        while seen is not None and not any(f.target == "leaf01->spine00" for f in seen.faults):
            seen = await source.wait_snapshot(30, after_tick=seen.tick)
        assert seen is not None
        i = seen.links.index["leaf01->spine00"]
        assert seen.link_state.status[i] == 1

        refused = await source.submit(InjectFault(kind="link_down", target="leaf01->spine77"))
        assert not refused.ok and "unknown link 'leaf01->spine77'" in (refused.error or "")


async def test_remote_source_says_why_without_an_emulator(mosquitto: Mosquitto) -> None:  # noqa: F811
    async with MqttSource(
        parse_broker_url(mosquitto.url), "nobody", submit_timeout_s=0.5
    ) as source:
        assert await source.wait_connected(30)
        result = await source.submit(InjectFault(kind="link_down", target="x->y"))
        assert not result.ok and "is `fabtop serve` running there?" in (result.error or "")
        await asyncio.to_thread(mosquitto.stop)
        await until(lambda: not source.connected, "the source notices the broker is gone")
        assert "broker unreachable" in source.description
        result = await source.submit(InjectFault(kind="link_down", target="x->y"))
        assert not result.ok and result.error is not None
        assert result.error.startswith("no broker connection: ")
