"""A ``FabricSource`` for a remote emulator: the console's view rebuilt from MQTT.

``MqttSource`` subscribes to one cluster's ``status``, ``meta``, ``telemetry``,
``event`` and ``result/+`` topics, rebuilds a real ``Snapshot`` from each
telemetry message (see ``decode`` for what a remote snapshot lacks: links
beyond the reported top links, events from before attaching) and sends
commands to ``cmd/<command>``, waiting for ``result/<id>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections import deque
from types import TracebackType
from typing import Self

import aiomqtt
import msgspec

from exporters.mqtt._tasks import cancel_and_wait
from exporters.mqtt.client import Backoff, explain, make_client
from exporters.mqtt.decode import check_meta, decode_event, node_table, snapshot_from
from exporters.mqtt.schema import MetaMsg, TelemetryMsg, event_decoder, meta_decoder
from exporters.mqtt.schema import telemetry_decoder as _telemetry_decoder
from exporters.mqtt.topics import Topics
from exporters.mqtt.url import BrokerConfig
from fabric_core.commands import Command, CommandResult, encode_command
from fabric_core.runtime.snapshot import Event, NodeTable, Snapshot

log = logging.getLogger("fabtop.mqtt")

_result_decoder = msgspec.json.Decoder(CommandResult)


def command_name(cmd: Command) -> str:
    """The ``cmd/<command>`` topic level of a command (its JSON tag)."""
    return str(cmd.__struct_config__.tag)


class MqttSource:
    """A remote emulator seen through the broker (use as ``async with``)."""

    def __init__(
        self,
        config: BrokerConfig,
        cluster: str,
        *,
        submit_timeout_s: float = 10.0,
        max_events: int = 500,
    ) -> None:
        self.config = config
        self.topics = Topics(cluster)
        self.submit_timeout_s = submit_timeout_s
        self._where = f"{config.display()} {self.topics.root}"
        #: "online" / "offline" as the served emulator last said; None = not heard yet.
        self.status: str | None = None
        self.connected = False
        #: The last connection or decoding problem, for the operator.
        self.problem: str | None = None
        self.events: deque[Event] = deque(maxlen=max_events)
        self._meta: MetaMsg | None = None
        self._nodes: NodeTable | None = None
        self._telemetry: TelemetryMsg | None = None
        self._latest: Snapshot | None = None
        self._client: aiomqtt.Client | None = None
        self._pending: dict[str, asyncio.Future[CommandResult]] = {}
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._changed = asyncio.Event()

    # ------------------------------------------------------------ FabricSource
    @property
    def description(self) -> str:
        """Broker and cluster, plus what is wrong when something is (for the header)."""
        if not self.connected:
            return f"{self._where} (broker unreachable: showing the last state received)"
        if self.status == "offline":
            return f"{self._where} (emulator offline: showing its last state)"
        return self._where

    @description.setter
    def description(self, text: str) -> None:
        self._where = text  # the base text; the state notes are still added

    def latest(self) -> Snapshot | None:
        """The snapshot rebuilt from the latest telemetry (None before the first)."""
        return self._latest

    async def submit(self, command: Command) -> CommandResult:
        """Send a command; its result, or an error saying why there is none."""
        if command.id is None:
            command = msgspec.structs.replace(command, id=f"console-{secrets.token_hex(6)}")
        cid = command.id
        assert cid is not None
        client = self._client
        if client is None or not self.connected:
            why = self.problem or "not connected yet"
            return CommandResult(id=cid, ok=False, error=f"no broker connection: {why}")
        future: asyncio.Future[CommandResult] = asyncio.get_running_loop().create_future()
        self._pending[cid] = future
        try:
            payload = encode_command(command)
            await client.publish(self.topics.cmd(command_name(command)), payload, qos=1)
            return await asyncio.wait_for(future, self.submit_timeout_s)
        except aiomqtt.MqttError as exc:
            return CommandResult(id=cid, ok=False, error=explain(exc, self.config))
        except TimeoutError:
            state = f"it says {self.status!r}" if self.status else "no status heard"
            return CommandResult(
                id=cid,
                ok=False,
                error=f"no result within {self.submit_timeout_s:g} s from {self.topics.root}"
                f" ({state}): is `fabtop serve` running there?",
            )
        finally:
            self._pending.pop(cid, None)

    @property
    def all_link_names(self) -> tuple[str, ...]:
        """Every link of the served fabric (from ``meta``), not only the reported top links.

        A fault form can check a target against these: the snapshot's link table
        holds only the links the latest telemetry reported.
        """
        return tuple(self._meta.link_names) if self._meta is not None else ()

    # ------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def start(self) -> None:
        """Connect in the background (and keep reconnecting)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="fabtop-mqtt-source")

    async def close(self) -> None:
        """Disconnect."""
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None

    async def wait_connected(self, timeout_s: float) -> bool:
        """True once subscribed to the cluster's topics, False after ``timeout_s``."""
        try:
            await asyncio.wait_for(self._ready.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def wait_snapshot(self, timeout_s: float, *, after_tick: int = -1) -> Snapshot | None:
        """The first snapshot newer than ``after_tick``, or None after ``timeout_s``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self._latest is None or self._latest.tick <= after_tick:
            self._changed.clear()
            left = deadline - loop.time()
            if left <= 0:
                return None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)
        return self._latest

    # ------------------------------------------------------------ receiving
    async def _run(self) -> None:
        backoff = Backoff()
        t = self.topics
        while True:
            try:
                async with make_client(self.config, role="console") as client:
                    for topic in (t.status, t.meta, t.event, t.result_filter):
                        await client.subscribe(topic, qos=1)
                    await client.subscribe(t.telemetry, qos=0)
                    self._client, self.connected, self.problem = client, True, None
                    backoff.reset()
                    self._ready.set()
                    async for message in client.messages:
                        self._receive(str(message.topic), message.payload)
            except aiomqtt.MqttError as exc:
                self.problem = explain(exc, self.config)
                log.warning("%s", self.problem)
            finally:
                self._client, self.connected = None, False
                self._ready.clear()
            await asyncio.sleep(backoff.next_delay())

    def _receive(self, topic: str, payload: object) -> None:
        data = payload.encode() if isinstance(payload, str) else payload
        if not isinstance(data, bytes | bytearray):
            data = b""
        t = self.topics
        try:
            if topic == t.telemetry:
                self._telemetry = _telemetry_decoder.decode(data)
                self._rebuild()
            elif topic == t.status:
                self.status = bytes(data).decode(errors="replace") or None
            elif topic == t.meta:
                meta = meta_decoder.decode(data)
                check_meta(meta)
                self._meta, self._nodes = meta, node_table(meta.nodes)
                self._rebuild()
            elif topic == t.event:
                self.events.append(decode_event(event_decoder.decode(data)))
            elif topic.startswith(t.result(None) + "/"):
                result = _result_decoder.decode(data)
                future = self._pending.get(topic.rsplit("/", 1)[1])
                if future is not None and not future.done():
                    future.set_result(result)
        except (msgspec.DecodeError, ValueError) as exc:
            self.problem = f"unreadable message on {topic}: {exc}"
            log.warning("%s", self.problem)

    def _rebuild(self) -> None:
        meta, tm, nodes = self._meta, self._telemetry, self._nodes
        if meta is None or tm is None or nodes is None or meta.run_id != tm.run_id:
            return  # wait until meta and telemetry describe the same run
        self._latest = snapshot_from(meta, tm, nodes, tuple(self.events))
        self._changed.set()


async def discover_clusters(config: BrokerConfig, *, wait_s: float = 1.0) -> dict[str, str]:
    """Every cluster with a retained status on the broker: ``{cluster: status}``.

    Raises:
        aiomqtt.MqttError: the broker cannot be reached.
    """
    found: dict[str, str] = {}
    async with make_client(config, role="discover") as client:
        await client.subscribe(Topics.status_filter(), qos=1)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                async for message in client.messages:
                    cluster = Topics.cluster_of(str(message.topic))
                    payload = message.payload
                    if cluster is not None and isinstance(payload, bytes | bytearray):
                        found[cluster] = bytes(payload).decode(errors="replace")
    return found
