"""The bridge and the remote source in this process, against a real mosquitto.

In-process so that the test can look at the engine while the broker is away
(simulated time must keep advancing) and feed the remote source directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from exporters.mqtt import bridge as bridge_module
from exporters.mqtt.bridge import ClusterTakenError, MqttBridge
from exporters.mqtt.client import make_client
from exporters.mqtt.remote import MqttSource
from exporters.mqtt.schema import EventStatsMsg
from exporters.mqtt.url import parse_broker_url
from fabric_core.commands import Command, CommandResult, InjectFault
from fabric_core.runtime.bus import SnapshotBus
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.runtime.snapshot import Event
from tests._mosquitto import Mosquitto, mosquitto  # noqa: F401  (fixture)
from tests.helpers import until

pytestmark = pytest.mark.integration


class Recorder:
    """Stands in for ``Engine.submit``: records the commands, applies none."""

    def __init__(self) -> None:
        self.submitted: list[Command] = []

    async def __call__(self, command: Command) -> CommandResult:
        self.submitted.append(command)
        return CommandResult(id=command.id, ok=True)


@dataclass
class Served:
    engine: Engine
    bridge: MqttBridge
    tasks: list[asyncio.Task[None]]


@contextlib.asynccontextmanager
async def serving(url: str, cluster: str, telemetry_hz: float) -> AsyncIterator[Served]:
    """``tiny``'s engine and a bridge to the broker at ``url``, running until the end."""
    engine = Engine(Fabric.from_scenario(load_scenario("tiny")))
    bridge = MqttBridge(
        parse_broker_url(url), engine.bus, engine.submit, cluster=cluster, telemetry_hz=telemetry_hz
    )
    tasks = [asyncio.create_task(engine.run()), asyncio.create_task(bridge.run())]
    try:
        yield Served(engine, bridge, tasks)
    finally:
        bridge.stop()
        engine.stop()
        await asyncio.gather(*tasks, return_exceptions=True)


@pytest.fixture
async def served(mosquitto: Mosquitto) -> AsyncIterator[Served]:  # noqa: F811
    async with serving(mosquitto.url, "ip", telemetry_hz=10) as running:
        yield running


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


async def test_a_burst_of_events_reaches_the_event_topic_whole(
    mosquitto: Mosquitto,  # noqa: F811
) -> None:
    """200 ``set`` commands sent at once make a ``param_set`` event each applied, more
    than a snapshot's window of 100 between two telemetry messages: every one is
    published (the bridge reads every snapshot, not only those telemetry samples)."""
    config = parse_broker_url(mosquitto.url)
    async with serving(mosquitto.url, "burst", telemetry_hz=4) as running:
        bridge = running.bridge
        await until(lambda: bridge.connected, "connected")
        async with make_client(config, role="test") as client:
            await client.subscribe("fabtop/burst/event", qos=1)
            await client.subscribe("fabtop/burst/result/#", qos=1)
            for i in range(200):
                body = json.dumps({"id": f"ev{i}", "name": "reroute_s", "value": 0.001})
                await client.publish("fabtop/burst/cmd/set", body, qos=1)
            events = results = applied = 0
            async with asyncio.timeout(60):  # a bound against a hang
                async for message in client.messages:
                    got = json.loads(bytes(message.payload))
                    if str(message.topic) == "fabtop/burst/event":
                        events += got["kind"] == "param_set"
                    else:
                        results += 1
                        applied += got["ok"]  # (a few may be "busy")
                    if results == 200:
                        break
            # the events of the last commands follow their results; until the engine has
            # published a few more snapshots (a bound: lost events never come)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    async for message in client.messages:
                        if str(message.topic) == "fabtop/burst/event":
                            events += json.loads(bytes(message.payload))["kind"] == "param_set"
                        if events == applied:
                            break
        assert applied > 100, "the burst must not fit in a snapshot's window"
        assert events == applied
        assert bridge.event_stats().gaps == 0


async def test_a_second_bridge_on_a_served_cluster_is_refused(
    mosquitto: Mosquitto,  # noqa: F811
    served: Served,
) -> None:
    """It answered the same command ids and, on its exit, left the status offline and
    its own meta behind while the first kept serving."""
    cli = mosquitto.cli()
    await asyncio.to_thread(cli.wait_for, "fabtop/ip/status", lambda _t, p: p == b"online")
    bus = SnapshotBus()
    bus.publish(Fabric.from_scenario(load_scenario("tiny")).snapshot())
    recorder = Recorder()
    second = MqttBridge(parse_broker_url(mosquitto.url), bus, recorder, cluster="ip")
    with pytest.raises(
        ClusterTakenError, match=f"'ip' is served already .*run {served.bridge.run_id}"
    ):
        await asyncio.wait_for(second.run(), 60)
    assert not second.said_offline and recorder.submitted == []
    # the first one's retained status and meta are untouched
    assert await asyncio.to_thread(cli.sub, "fabtop/ip/status") == [("fabtop/ip/status", b"online")]
    ((_, meta),) = await asyncio.to_thread(cli.sub, "fabtop/ip/meta")
    assert json.loads(meta)["run_id"] == served.bridge.run_id


async def test_a_served_cluster_takes_back_its_overwritten_status_and_meta(
    mosquitto: Mosquitto,  # noqa: F811
    served: Served,
) -> None:
    """What a second emulator left behind on its exit (before it was refused): the
    retained status offline and its own meta, while the first kept publishing."""
    cli = mosquitto.cli()
    run_id = served.bridge.run_id
    await asyncio.to_thread(cli.wait_for, "fabtop/ip/status", lambda _t, p: p == b"online")
    await asyncio.to_thread(cli.pub, "fabtop/ip/meta", '{"run_id": "gone"}', retain=True)
    await asyncio.to_thread(cli.pub, "fabtop/ip/status", "offline", retain=True)
    await asyncio.to_thread(cli.wait_for, "fabtop/ip/status", lambda _t, p: p == b"online")
    await asyncio.to_thread(
        cli.wait_for, "fabtop/ip/meta", lambda _t, p: json.loads(p)["run_id"] == run_id
    )
    assert served.bridge.reasserted >= 1


class _GatedClient:
    """An MQTT client whose connection waits for ``gate`` (the rest is the client's)."""

    def __init__(self, client: Any, gate: asyncio.Event) -> None:
        self._client, self._gate = client, gate

    async def __aenter__(self) -> Any:
        await self._gate.wait()
        await self._client.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        return await self._client.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


async def test_a_cluster_taken_while_the_bridge_was_away_is_given_up(
    mosquitto: Mosquitto,  # noqa: F811
    served: Served,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the broker was away the bridge's will said offline, so a second emulator
    could take the cluster. Back, the bridge did not look: the two re-published their
    status and meta over each other once a second, for as long as both ran. It now gives
    the cluster up to the one that took it while it was free."""
    await until(lambda: served.bridge.connections == 1, "first connection")
    gate = asyncio.Event()  # the bridge reconnects once the second emulator is in place
    make = bridge_module.make_client
    monkeypatch.setattr(
        bridge_module, "make_client", lambda *a, **k: _GatedClient(make(*a, **k), gate)
    )
    await asyncio.to_thread(mosquitto.stop)
    await until(lambda: not served.bridge.connected, "the bridge notices the broker is gone")
    await asyncio.to_thread(mosquitto.start)
    cli = mosquitto.cli()
    other = '{"run_id": "9d1e07c3b2aa", "scenario": "default"}'
    await asyncio.to_thread(cli.pub, "fabtop/ip/meta", other, retain=True)
    await asyncio.to_thread(cli.pub, "fabtop/ip/status", "online", retain=True)
    gate.set()
    bridge_task = served.tasks[1]
    await asyncio.wait_for(asyncio.gather(bridge_task, return_exceptions=True), 120)
    taken = bridge_task.exception()
    assert isinstance(taken, ClusterTakenError) and taken.while_away
    assert str(taken) == (
        "cluster 'ip' was taken by another emulator while this one was away from the broker"
        " (run 9d1e07c3b2aa, scenario default)"
    )
    assert served.bridge.connections == 2
    # the other one's status and meta are as it left them
    assert await asyncio.to_thread(cli.sub, "fabtop/ip/status") == [("fabtop/ip/status", b"online")]
    ((_, meta),) = await asyncio.to_thread(cli.sub, "fabtop/ip/meta")
    assert json.loads(meta)["run_id"] == "9d1e07c3b2aa"


def test_events_past_the_bridges_queue_are_dropped_and_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The broker slow or away: the queue of events to publish keeps the newest."""
    monkeypatch.setattr(bridge_module, "QUEUED_EVENTS", 3)
    bridge = MqttBridge(parse_broker_url("mqtt://127.0.0.1"), SnapshotBus(), Recorder())
    events = tuple(Event(float(i), "info", "k", "t", f"m{i}") for i in range(5))
    bridge._queue_events(events)
    assert list(bridge._events) == list(events[2:])
    assert bridge.event_stats() == EventStatsMsg(sent=0, dropped=2, gaps=0)
