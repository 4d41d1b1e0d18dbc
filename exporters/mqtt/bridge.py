"""The bridge: serves a running engine over an MQTT broker.

Out: ``status`` (retained ``online``; the will and a clean exit say
``offline``), the retained ``meta``, ``telemetry`` (QoS 0, ``telemetry_hz``
times a second at most) and ``event`` (QoS 1). In: ``cmd/#`` (QoS 1), answered
on ``result/<id>`` by ``CommandInbox``.

When the broker goes away the bridge reconnects with exponential backoff; the
engine keeps running, nothing is queued meanwhile (telemetry resumes from the
latest snapshot; events still in the snapshot's window are sent on reconnect).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets

import aiomqtt

from exporters.mqtt._tasks import cancel_and_wait
from exporters.mqtt.client import Backoff, explain, make_client
from exporters.mqtt.encode import EventCursor, encode_event, encode_meta, encode_telemetry
from exporters.mqtt.inbox import CommandInbox, Submit
from exporters.mqtt.schema import encoder
from exporters.mqtt.topics import Topics
from exporters.mqtt.url import BrokerConfig
from fabric_core.bus import SnapshotBus
from fabric_core.snapshot import NodeTable, Snapshot

log = logging.getLogger("fabtop.mqtt")

ONLINE = b"online"
OFFLINE = b"offline"
#: Longest gap between two telemetry messages, even when nothing changed (paused engine).
HEARTBEAT_S = 1.0


class MqttBridge:
    """Publishes an engine's snapshots and applies commands from the broker."""

    def __init__(
        self,
        config: BrokerConfig,
        bus: SnapshotBus,
        submit: Submit,
        *,
        cluster: str | None = None,
        telemetry_hz: float = 4.0,
        top_links: int = 32,
        command_memory: int = 1024,
    ) -> None:
        """Create a bridge (``run`` starts it).

        Args:
            config: the broker.
            bus: where the engine publishes snapshots.
            submit: applies a command (``Engine.submit``).
            cluster: topic level ``fabtop/<cluster>``; default: the snapshot's cluster.
            telemetry_hz: most telemetry messages per second.
            top_links: links per telemetry message (see ``encode.top_links``).
            command_memory: how many applied command ids are remembered.
        """
        if not 0 < telemetry_hz <= 50:
            raise ValueError(f"telemetry rate must be in (0, 50] Hz, got {telemetry_hz}")
        self.config = config
        self.bus = bus
        self.submit = submit
        self.cluster = cluster
        self.telemetry_hz = telemetry_hz
        self.top_links = top_links
        self.command_memory = command_memory
        self.run_id = secrets.token_hex(6)
        self.connected = False
        self.connections = 0
        self.telemetry_sent = 0
        self.events_sent = 0
        #: True once a clean stop published ``offline`` (else the broker sends the will).
        self.said_offline = False
        self.inbox: CommandInbox | None = None
        self._stop = asyncio.Event()
        self._cursor = EventCursor()
        self._meta_nodes: NodeTable | None = None

    def stop(self) -> None:
        """Ask ``run`` to say ``offline`` and return."""
        self._stop.set()

    async def run(self) -> None:
        """Serve until ``stop`` or until the engine stops; reconnects on its own."""
        first = self.bus.latest or await self.bus.next_after(-1)
        if first is None:
            return
        topics = Topics(self.cluster or first.cluster)
        self.inbox = CommandInbox(topics, self.submit, memory=self.command_memory)
        will = aiomqtt.Will(topics.status, OFFLINE, qos=1, retain=True)
        backoff = Backoff()
        while not self._stop.is_set():
            client = make_client(self.config, role=f"serve-{topics.cluster}", will=will)
            try:
                async with client:
                    self.connected = True
                    self.connections += 1
                    backoff.reset()
                    log.info("connected to %s as %s", self.config.display(), topics.root)
                    await self._serve(client, topics)
                    await client.publish(topics.status, OFFLINE, qos=1, retain=True)
                    self.said_offline = True
                    return
            except aiomqtt.MqttError as exc:
                delay = backoff.next_delay()
                log.warning("%s; reconnecting in %.1f s", explain(exc, self.config), delay)
            finally:
                self.connected = False
                self._meta_nodes = None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)

    async def _serve(self, client: aiomqtt.Client, topics: Topics) -> None:
        """One connection's life: returns on stop, raises MqttError if the broker goes."""
        snap = self.bus.latest
        if snap is not None:
            await self._publish_meta(client, topics, snap)
        await client.publish(topics.status, ONLINE, qos=1, retain=True)
        await client.subscribe(topics.cmd_filter, qos=1)
        tasks = [
            asyncio.create_task(self._telemetry(client, topics)),
            asyncio.create_task(self._commands(client, topics)),
            asyncio.create_task(self._stop.wait()),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(tasks)
        for task in done:
            exc = task.exception()
            if exc is not None:
                raise exc

    async def _publish_meta(self, client: aiomqtt.Client, topics: Topics, snap: Snapshot) -> None:
        if snap.nodes is not self._meta_nodes:
            meta = encoder.encode(encode_meta(snap, run_id=self.run_id))
            await client.publish(topics.meta, meta, qos=1, retain=True)
            self._meta_nodes = snap.nodes

    async def _telemetry(self, client: aiomqtt.Client, topics: Topics) -> None:
        tick = -1
        while not self._stop.is_set():
            snap = await self._next_snapshot(tick)
            if snap is None:  # the engine stopped: so does the bridge
                self._stop.set()
                return
            tick = snap.tick
            await self._publish_meta(client, topics, snap)
            msg = encode_telemetry(snap, run_id=self.run_id, top_k=self.top_links)
            await client.publish(topics.telemetry, encoder.encode(msg), qos=0)
            self.telemetry_sent += 1
            for event in self._cursor.new_events(snap.events):
                payload = encoder.encode(encode_event(event, run_id=self.run_id))
                await client.publish(topics.event, payload, qos=1)
                self.events_sent += 1
            await asyncio.sleep(1.0 / self.telemetry_hz)

    async def _next_snapshot(self, tick: int) -> Snapshot | None:
        """A snapshot newer than ``tick``, or after ``HEARTBEAT_S`` the latest one again.

        The engine publishes nothing new while paused; repeating the latest state
        lets a console that attaches meanwhile see the fabric (and that it is paused).
        """
        waiter = asyncio.ensure_future(self.bus.next_after(tick))
        done, _ = await asyncio.wait([waiter], timeout=HEARTBEAT_S)
        if waiter in done:
            return waiter.result()
        await cancel_and_wait([waiter])
        return None if self.bus.closed else self.bus.latest

    async def _commands(self, client: aiomqtt.Client, topics: Topics) -> None:
        assert self.inbox is not None
        async for message in client.messages:
            payload = message.payload
            if isinstance(payload, str):
                data = payload.encode()
            elif isinstance(payload, bytes | bytearray):
                data = bytes(payload)
            else:
                data = b""
            reply_topic, result = await self.inbox.handle(
                str(message.topic), data, retained=bool(message.retain)
            )
            if not result.ok:
                log.info("command on %s refused: %s", message.topic, result.error)
            await client.publish(reply_topic, result.to_json(), qos=1)
