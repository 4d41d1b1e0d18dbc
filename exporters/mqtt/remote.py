"""A ``FabricSource`` for a remote emulator: the console's view rebuilt from MQTT.

``MqttSource`` subscribes to one cluster's ``status``, ``meta``, ``telemetry``,
``event`` and ``result/+`` topics, rebuilds a real ``Snapshot`` from each
telemetry message (see ``decode`` for what a remote snapshot lacks: links
beyond the reported top links, events from before attaching) and sends
commands to ``cmd/<command>``, waiting for ``result/<id>``. ``link_loss`` says when
its view no longer follows the emulator: the broker is gone, the emulator said
``offline``, nothing was heard from it, or its telemetry stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import deque
from types import TracebackType
from typing import NamedTuple, Self

import aiomqtt
import msgspec

from exporters.mqtt._tasks import cancel_and_wait
from exporters.mqtt.client import Backoff, explain, make_client, printable
from exporters.mqtt.decode import check_meta, decode_event, node_table, snapshot_from
from exporters.mqtt.schema import MetaMsg, TelemetryMsg, event_decoder, meta_decoder
from exporters.mqtt.schema import telemetry_decoder as _telemetry_decoder
from exporters.mqtt.topics import Topics
from exporters.mqtt.url import BrokerConfig
from fabric_core.commands import Command, CommandResult, encode_command
from fabric_core.runtime.snapshot import Event, NodeTable, Snapshot

log = logging.getLogger("fabtop.mqtt")

_result_decoder = msgspec.json.Decoder(CommandResult)

#: Seconds subscribed without the emulator's status before the source says nothing was
#: heard from it: the status is retained, so a broker that has one sends it at once.
UNHEARD_AFTER_S = 3.0

#: Seconds without telemetry from an emulator whose status says online before the source
#: says it has gone silent (a hung or stopped process: its will says offline only when
#: the broker gives up on its connection, some 15 s later), and the most telemetry
#: intervals (as measured) it may miss: a bridge sends at least one message a second, a
#: paused engine's too, unless its ``--telemetry-hz`` is lower.
SILENT_AFTER_S = 5.0
SILENT_INTERVALS = 4.0

#: ``LinkLoss.state``: the broker cannot be reached, the emulator said it is offline (its
#: retained status, or its will), nothing was heard from it on this connection, it says
#: it is online but its telemetry stopped.
NO_BROKER, OFFLINE, UNHEARD, SILENT = "no broker", "offline", "unheard", "silent"

#: What ``description`` adds for each ``LinkLoss.state``: (with a snapshot, without one).
_LOSS_NOTES = {
    NO_BROKER: ("broker unreachable: showing the last state received", "broker unreachable"),
    OFFLINE: ("emulator offline: showing its last state", "emulator offline (its status)"),
    UNHEARD: (
        "nothing heard from the emulator: showing the last state received",
        "nothing heard from the emulator: is `fabtop serve` running?",
    ),
    SILENT: (
        "the emulator's telemetry stopped: showing the last state received",
        "no telemetry from the emulator, though its status says online",
    ),
}


class LinkLoss(NamedTuple):
    """Why the view no longer follows the emulator (``MqttSource.link_loss``)."""

    #: ``NO_BROKER``, ``OFFLINE``, ``UNHEARD`` or ``SILENT``: the state the header shows
    state: str
    #: the same in a few words naming the broker or the cluster, for a console that has
    #: no snapshot to show (and so no cluster name of its own)
    note: str


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
        unheard_after_s: float = UNHEARD_AFTER_S,
        silent_after_s: float = SILENT_AFTER_S,
    ) -> None:
        self.config = config
        self.topics = Topics(cluster)
        self.submit_timeout_s = submit_timeout_s
        self.unheard_after_s = unheard_after_s
        self.silent_after_s = silent_after_s
        #: ``time.monotonic()`` of the last telemetry message on this connection, and the
        #: usual interval between two (an average), for ``SILENT``
        self._telemetry_at: float | None = None
        self._telemetry_interval_s = 0.0
        self._where = f"{config.display()} {self.topics.root}"
        #: "online" / "offline" as the served emulator last said; None = not heard yet.
        #: (Forgotten at each connection: a restarted broker may not have it any more.)
        self.status: str | None = None
        self.connected = False
        #: A connection failed or was lost (until the next one is made: ``NO_BROKER``);
        #: False while the first one is under way.
        self._lost = False
        #: ``time.monotonic()`` when the current connection subscribed.
        self._subscribed_at: float | None = None
        #: The last connection or decoding problem, for the operator.
        self.problem: str | None = None
        #: (``_kind`` of its topic, why) of the last message refused, until a good one
        #: of the same kind arrives.
        self._refused: tuple[str, str] | None = None
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
        """Broker and cluster, plus what is wrong when something is (for the header):
        the link (``link_loss``), and the last message refused until a good one replaces
        it."""
        notes = []
        loss = self.link_loss
        if loss is not None:
            with_snapshot, without = _LOSS_NOTES[loss.state]
            notes.append(with_snapshot if self._latest is not None else without)
        if self._refused is not None:
            notes.append(self._refused[1])
        return f"{self._where} ({'; '.join(notes)})" if notes else self._where

    @description.setter
    def description(self, text: str) -> None:
        self._where = text  # the base text; the state notes are still added

    @property
    def link_loss(self) -> LinkLoss | None:
        """Why the view no longer follows the emulator, None while it does (and while the
        first connection is under way): the broker cannot be reached, the emulator said
        ``offline``, subscribed ``unheard_after_s`` without hearing its status, or it says
        it is online but its telemetry stopped (``_silent_for``)."""
        cluster = self.topics.cluster
        if not self.connected:
            lost = LinkLoss(NO_BROKER, f"no broker at {self.config.display()}")
            return lost if self._lost else None
        if self.status == "offline":
            return LinkLoss(OFFLINE, f"emulator {cluster} offline (its status)")
        if self._unheard():
            return LinkLoss(UNHEARD, f"nothing heard from emulator {cluster}")
        quiet_s = self._silent_for()
        if quiet_s is not None:
            return LinkLoss(SILENT, f"no telemetry from emulator {cluster} for {quiet_s:.0f} s")
        return None

    def _silent_for(self) -> float | None:
        """Seconds since the last telemetry (or since subscribing, before any) when it is
        longer than an emulator that says it is online leaves between two: at least
        ``silent_after_s`` and ``SILENT_INTERVALS`` of its usual interval; else None."""
        last = self._telemetry_at if self._telemetry_at is not None else self._subscribed_at
        if self.status != "online" or last is None:
            return None
        quiet_s = time.monotonic() - last
        limit = max(self.silent_after_s, SILENT_INTERVALS * self._telemetry_interval_s)
        return quiet_s if quiet_s >= limit else None

    def _heard_telemetry(self) -> None:
        """Note a telemetry message's arrival (whether or not it could be shown: the
        emulator is alive either way)."""
        now = time.monotonic()
        if self._telemetry_at is not None:
            gap = now - self._telemetry_at
            usual = self._telemetry_interval_s
            self._telemetry_interval_s = gap if usual == 0 else 0.8 * usual + 0.2 * gap
        self._telemetry_at = now

    def _unheard(self) -> bool:
        """No status heard in the ``unheard_after_s`` or more since subscribing."""
        since = self._subscribed_at
        waited = since is not None and time.monotonic() - since >= self.unheard_after_s
        return self.status is None and waited

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
                    # heard again on this connection, or not at all (see ``link_loss``)
                    self.status, self._subscribed_at = None, time.monotonic()
                    self._telemetry_at = None
                    backoff.reset()
                    self._ready.set()
                    async for message in client.messages:
                        self._receive(str(message.topic), message.payload)
            except aiomqtt.MqttError as exc:
                self.problem = explain(exc, self.config)
                log.warning("%s", self.problem)
            finally:
                self._client, self.connected, self._lost = None, False, True
                self._subscribed_at = None
                self._ready.clear()
            await asyncio.sleep(backoff.next_delay())

    def _receive(self, topic: str, payload: object) -> None:
        """Take one message; one that cannot be read or used is refused and reported
        (``problem``, the log, the header), never raised: this runs in the receiving
        loop, which must go on for the next telemetry and the command results."""
        data = payload.encode() if isinstance(payload, str) else payload
        if not isinstance(data, bytes | bytearray):
            data = b""
        try:
            self._handle(topic, bytes(data))
        except (msgspec.DecodeError, ValueError) as exc:
            self._refuse(topic, f"unreadable message on {topic}: {exc}")
        except Exception as exc:  # a defect here must not stop the receiving loop
            self._refuse(topic, f"message on {topic} not handled: {exc!r}", trace=True)
        else:
            if self._refused is not None and self._refused[0] == self._kind(topic):
                self._refused = None  # a good message of the same kind replaces it

    def _handle(self, topic: str, data: bytes) -> None:
        t = self.topics
        if topic == t.telemetry:
            self._heard_telemetry()
            tm = _telemetry_decoder.decode(data)
            # kept only once a snapshot was built from it: a refused message leaves the
            # last good telemetry (and snapshot) in place
            self._rebuild(self._meta, tm, self._nodes)
            self._telemetry = tm
        elif topic == t.status:
            self.status = data.decode(errors="replace") or None
        elif topic == t.meta:
            meta = meta_decoder.decode(data)
            check_meta(meta)
            nodes = node_table(meta.nodes)
            self._meta, self._nodes = meta, nodes
            try:
                self._rebuild(meta, self._telemetry, nodes)
            except ValueError as exc:
                # the retained meta is the run's truth: what does not fit is the telemetry
                # kept from before it (not checked then: no meta of its run yet)
                self._telemetry = None
                self._refuse(t.telemetry, f"unreadable message on {t.telemetry}: {exc}")
        elif topic == t.event:
            self.events.append(decode_event(event_decoder.decode(data)))
        elif topic.startswith(t.result(None) + "/"):
            future = self._pending.get(topic.rsplit("/", 1)[1])
            try:
                result = _result_decoder.decode(data)
            except msgspec.DecodeError as exc:
                if future is not None and not future.done():
                    # the sender learns now why, rather than after its timeout
                    cid = topic.rsplit("/", 1)[1]
                    error = printable(f"unreadable reply on {topic}: {exc}")
                    future.set_result(CommandResult(id=cid, ok=False, error=error))
                raise
            if future is not None and not future.done():
                future.set_result(result)

    def _refuse(self, topic: str, why: str, *, trace: bool = False) -> None:
        """Report a refused message: logged once per distinct reason (telemetry repeats
        several times a second), kept in ``problem`` and shown in ``description``."""
        why = printable(why)  # the topic of a reply holds any id the sender chose
        if why != self.problem:
            log.warning("%s", why, exc_info=trace)
        self.problem = why
        self._refused = (self._kind(topic), why)

    def _kind(self, topic: str) -> str:
        """The topic, with every ``result/<id>`` as one (a refused reply is not followed
        by another on its topic)."""
        result = self.topics.result(None)
        return result if topic.startswith(result + "/") else topic

    def _rebuild(
        self, meta: MetaMsg | None, tm: TelemetryMsg | None, nodes: NodeTable | None
    ) -> None:
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
