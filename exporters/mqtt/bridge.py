"""The bridge: serves a running engine over an MQTT broker.

Out: ``status`` (retained ``online``; the will and a clean exit say
``offline``), the retained ``meta``, ``telemetry`` (QoS 0, ``telemetry_hz``
times a second at most) and ``event`` (QoS 1). In: ``cmd/#`` (QoS 1), answered
on ``result/<id>`` by ``CommandInbox``.

When the broker goes away the bridge reconnects with exponential backoff; the
engine keeps running, nothing is queued meanwhile (telemetry resumes from the
latest snapshot; events still in the snapshot's window are sent on reconnect).

Events are read from every snapshot the engine publishes, not only from those
telemetry samples, and published from a bounded queue of their own: a burst of
events between two telemetry messages is sent whole, unless more than a
snapshot's window of them happen between two snapshots (counted, ``EventCursor``).

One cluster, one emulator: at its first connection the bridge refuses to serve a
cluster whose retained status says ``online`` (``ClusterTakenError``), and while it
serves it publishes its status and meta again when another client overwrites them.

Hardening (docs/MQTT.md, "Limits"): each command is handled in a task of its own,
so one message can neither block the others nor end the bridge (an exception is
logged and answered "internal error"); ``offline`` is published on every exit
from a connection, not only a clean stop; operator commands (pause, resume,
clear) are read ahead of a flood (``CommandQueue``) and answered "busy" never;
incoming messages paho had to discard are counted. The bridge speaks MQTT 5 and
subscribes with "retain as published", so a retained command is seen as
retained even when it arrives while subscribed: it is refused and cleared (an
empty retained message on its topic), once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

import aiomqtt
import msgspec
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from exporters.mqtt._tasks import cancel_and_wait
from exporters.mqtt.client import Backoff, explain, make_client, payload_bytes, printable
from exporters.mqtt.encode import EventCursor, encode_event, encode_meta, encode_telemetry
from exporters.mqtt.inbox import OPERATOR_COMMANDS, CommandInbox, Submit, lenient_id
from exporters.mqtt.logbudget import LogBudget
from exporters.mqtt.schema import CommandStatsMsg, EventStatsMsg, encoder
from exporters.mqtt.topics import Topics
from exporters.mqtt.url import BrokerConfig
from fabric_core.commands import CommandResult
from fabric_core.runtime.bus import SnapshotBus
from fabric_core.runtime.engine import EngineHealth
from fabric_core.runtime.snapshot import Event, NodeTable, Snapshot

log = logging.getLogger("fabtop.mqtt")

ONLINE = b"online"
OFFLINE = b"offline"
#: Longest gap between two telemetry messages, even when nothing changed (paused engine).
HEARTBEAT_S = 1.0
#: Commands handled at once (each waits for its reply to be published); the reader
#: waits for a place, so a flood backs up into the bounded incoming queue.
MAX_HANDLERS = 256
#: Operator commands kept in their own lane of the incoming queue, even when it is full.
URGENT_QUEUE = 256
#: The incoming queue's bounds: a flood of small commands waits here to be answered
#: ("busy" if need be) instead of being discarded; its bytes bound the memory it takes.
QUEUED_MESSAGES = 100_000
QUEUED_BYTES = 32 * 2**20
#: Events taken from snapshots and waiting to be published (the broker slow or away);
#: past it the oldest are dropped, and counted.
QUEUED_EVENTS = 10_000
#: How long the event reader waits for a newer tick before it looks at the latest
#: snapshot again: a paused engine publishes the events of the commands it applies
#: in snapshots of the same tick.
EVENT_POLL_S = 0.1
#: Least time between two re-publications of the status and meta: two emulators that
#: each re-assert their own would otherwise overwrite each other as fast as the broker goes.
REASSERT_PAUSE_S = 1.0


class ClusterTakenError(Exception):
    """Another emulator's retained status says it serves this cluster (``str`` names
    the cluster and the other run; ``cluster`` and ``run_id`` hold them)."""

    def __init__(
        self, cluster: str, run_id: str | None, scenario: str | None, *, while_away: bool = False
    ) -> None:
        run = f"run {run_id}" if run_id else "its run unknown"
        of = f", scenario {scenario}" if scenario else ""
        taken = (
            "was taken by another emulator while this one was away from the broker"
            if while_away
            else "is served already by another emulator"
        )
        super().__init__(f"cluster {cluster!r} {taken} ({run}{of})")
        self.cluster = cluster
        self.run_id = run_id
        self.while_away = while_away


def _claim_options() -> SubscribeOptions:
    # no local: the bridge's own status and meta need not come back to it
    return SubscribeOptions(qos=1, noLocal=True)


class _RunOf(msgspec.Struct):
    """The fields of a ``meta`` that name its run (read from any fabtop's meta)."""

    run_id: str | None = None
    scenario: str | None = None


_run_decoder = msgspec.json.Decoder(_RunOf)


def _meta_run(data: bytes) -> tuple[str | None, str | None]:
    """(run_id, scenario) of a meta payload; None for what cannot be read."""
    try:
        run = _run_decoder.decode(data)
    except msgspec.DecodeError:  # (a ValidationError is one)
        return None, None
    return run.run_id, run.scenario


def _receive_all() -> Properties:
    """MQTT 5 CONNECT properties: let the broker send up to 65535 commands unacknowledged.

    With the default (the broker's own, 20 for mosquitto) a flood waits in the broker's
    per-client queue (1000 messages for mosquitto), and the broker drops what does not
    fit without telling anyone; in the bridge's own queue it is answered ("busy").
    """
    props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
    props.ReceiveMaximum = 65535
    return props


def _size(message: aiomqtt.Message) -> int:
    payload = message.payload
    return len(payload) if isinstance(payload, bytes | bytearray | str) else 0


def _urgent(message: aiomqtt.Message) -> bool:
    return str(message.topic).rsplit("/", 1)[-1] in OPERATOR_COMMANDS


class _TwoLanes:
    """The deque behind ``CommandQueue``: operator commands first, then the rest."""

    def __init__(self) -> None:
        self.urgent: deque[aiomqtt.Message] = deque()
        self.other: deque[aiomqtt.Message] = deque()
        self.bytes = 0  # payload bytes queued

    def __len__(self) -> int:
        return len(self.other)  # what counts against the queue's size limit

    def append(self, message: aiomqtt.Message) -> None:
        self.bytes += _size(message)
        (self.urgent if _urgent(message) else self.other).append(message)

    def popleft(self) -> aiomqtt.Message:
        message = self.urgent.popleft() if self.urgent else self.other.popleft()
        self.bytes -= _size(message)
        return message


class CommandQueue(asyncio.Queue):  # type: ignore[type-arg]
    """aiomqtt's incoming queue with operator commands (pause, resume, clear) read first
    and never discarded for lack of room (up to ``URGENT_QUEUE`` of them); the others are
    bounded by count (``maxsize``) and by bytes (``QUEUED_BYTES``)."""

    _queue: _TwoLanes
    _forcing = False

    def _init(self, maxsize: int) -> None:
        self._queue = _TwoLanes()

    def qsize(self) -> int:
        return len(self._queue.urgent) + len(self._queue.other)

    def empty(self) -> bool:
        return self.qsize() == 0

    def full(self) -> bool:
        if self._forcing:
            return False
        return 0 < self.maxsize <= len(self._queue.other) or self._queue.bytes >= QUEUED_BYTES

    def put_nowait(self, item: Any) -> None:
        self._forcing = _urgent(item) and len(self._queue.urgent) < URGENT_QUEUE
        try:
            super().put_nowait(item)
        finally:
            self._forcing = False


class _CountDiscards(logging.Handler):
    """Counts the messages aiomqtt discards because its incoming queue is full."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.discarded = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "Discarding message" in record.getMessage():
            self.discarded += 1


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
        read_only: bool = False,
        allowed: frozenset[str] | None = None,
        health: Callable[[], EngineHealth] | None = None,
        max_in_flight: int = 64,
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
            read_only: refuse every command ("read-only").
            allowed: the only command kinds accepted (None: all).
            health: the engine's pacing figures for telemetry (``Engine.health``).
            max_in_flight: commands waiting for the engine at once before "busy".
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
        self.read_only = read_only
        self.allowed = allowed
        self.health = health
        self.max_in_flight = max_in_flight
        self.internal_errors = 0
        self.replies_lost = 0  # replies that could not be published (broker gone)
        self.retained_cleared = 0
        #: (topic, digest) of the retained commands cleared (the last 1024)
        self._cleared: OrderedDict[tuple[str, bytes], None] = OrderedDict()
        #: what a sender controls is logged within a budget (a flood must not fill the disk)
        self._refusals_logged = LogBudget(log, "refused commands")
        self._clears_logged = LogBudget(log, "retained commands cleared")
        self._discards = _CountDiscards()
        self._mqtt_log = logging.getLogger(f"fabtop.mqtt.client.{id(self):x}")
        self._mqtt_log.addHandler(self._discards)
        self._mqtt_log.propagate = False
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
        #: events read from snapshots, not yet published (``QUEUED_EVENTS`` at most)
        self._events: deque[Event] = deque()
        self._events_waiting = asyncio.Event()
        self.events_dropped = 0
        #: set when another client overwrote the retained status or meta
        self._overwritten = asyncio.Event()
        self._claim_checked = False  # the first connection looked for another emulator
        #: times the status and meta were published again after being overwritten
        self.reasserted = 0

    def stop(self) -> None:
        """Ask ``run`` to say ``offline`` and return."""
        self._stop.set()

    async def run(self) -> None:
        """Serve until ``stop`` or until the engine stops; reconnects on its own."""
        first = self.bus.latest or await self.bus.next_after(-1)
        if first is None:
            return
        topics = Topics(self.cluster or first.cluster)
        self.inbox = CommandInbox(
            topics,
            self.submit,
            memory=self.command_memory,
            read_only=self.read_only,
            allowed=self.allowed,
            max_in_flight=self.max_in_flight,
        )
        will = aiomqtt.Will(topics.status, OFFLINE, qos=1, retain=True)
        backoff = Backoff()
        while not self._stop.is_set():
            client = make_client(
                self.config,
                role=f"serve-{topics.cluster}",
                will=will,
                protocol=aiomqtt.ProtocolVersion.V5,
                queue_type=CommandQueue,
                logger=self._mqtt_log,
                max_queued_incoming=QUEUED_MESSAGES,
                properties=_receive_all(),
            )
            try:
                async with client:
                    self.connected = True
                    self.connections += 1
                    backoff.reset()
                    log.info("connected to %s as %s", self.config.display(), topics.root)
                    # before anything is published: a refusal leaves the broker as it was
                    # (the clean disconnect suppresses the will)
                    await self._watch_claim(client, topics)
                    try:
                        await self._serve(client, topics)
                    finally:
                        # on any exit (a stop, an error, a cancellation): the clean
                        # disconnect suppresses the will, so say it here
                        await self._say_offline(client, topics)
                    return
            except aiomqtt.MqttError as exc:
                delay = backoff.next_delay()
                log.warning("%s; reconnecting in %.1f s", explain(exc, self.config), delay)
            finally:
                self.connected = False
                self._meta_nodes = None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)

    async def _say_offline(self, client: aiomqtt.Client, topics: Topics) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                client.publish(topics.status, OFFLINE, qos=1, retain=True), timeout=2.0
            )
            self.said_offline = True

    async def _watch_claim(self, client: aiomqtt.Client, topics: Topics) -> None:
        """Subscribe to the cluster's status and meta; refuse a cluster that another
        emulator serves: at the first connection, one whose retained status says
        ``online``; at a reconnection, one whose retained status says ``online`` under
        another run's meta. While this bridge was away its will said ``offline``, so a
        second emulator could take the cluster; the two then re-published their status
        and meta over each other once a second, each with a warning, for as long as both
        ran. The one that took the cluster while it was free keeps it.

        Raises:
            ClusterTakenError: as above.
        """
        wanted = [(topics.status, _claim_options()), (topics.meta, _claim_options())]
        granted = await client.subscribe(wanted)
        if any(getattr(code, "is_failure", False) for code in granted):
            log.warning(
                "the broker does not let this emulator read %s (its ACL): another emulator "
                "serving the same cluster would go unnoticed",
                topics.status,
            )
        # a second round trip: the retained messages come with the first SUBACK
        # (mosquitto: just before it), so they are all in by the answer to the next request
        await client.subscribe(wanted)
        retained: dict[str, bytes] = {}
        while len(client.messages):
            message = await anext(client.messages)
            retained[str(message.topic)] = payload_bytes(message)
        if retained.get(topics.status) == ONLINE:
            run_id, scenario = _meta_run(retained.get(topics.meta, b""))
            # (at a reconnection, an online status under this run's meta is this bridge's
            # own, kept by a broker that keeps retained messages across its restarts)
            if not self._claim_checked or run_id != self.run_id:
                raise ClusterTakenError(
                    topics.cluster, run_id, scenario, while_away=self._claim_checked
                )
        self._claim_checked = True

    def _note_claim(self, topics: Topics, topic: str, data: bytes, retained: bool) -> None:
        """Mark the status or meta as overwritten when another client changed them."""
        if retained:
            return  # the state when the bridge subscribed: its own follows at once
        ours = data == ONLINE if topic == topics.status else _meta_run(data)[0] == self.run_id
        if not ours:
            self._overwritten.set()

    async def _keep_claim(self, client: aiomqtt.Client, topics: Topics) -> None:
        """Publish the status and meta again whenever another client overwrites them.

        Watching the topics (rather than re-publishing them on a timer) costs nothing
        while nobody interferes, and a subscriber sees each change once; the pause
        after each re-publication bounds the traffic when two emulators disagree.
        """
        while True:
            await self._overwritten.wait()
            self._overwritten.clear()
            self.reasserted += 1
            log.warning(
                "another client overwrote %s/status or meta: published this emulator's again"
                " (is a second emulator serving this cluster?)",
                topics.root,
            )
            snap = self.bus.latest
            if snap is not None:
                self._meta_nodes = None
                await self._publish_meta(client, topics, snap)
            await client.publish(topics.status, ONLINE, qos=1, retain=True)
            await asyncio.sleep(REASSERT_PAUSE_S)

    async def _serve(self, client: aiomqtt.Client, topics: Topics) -> None:
        """One connection's life: returns on stop, raises MqttError if the broker goes."""
        snap = self.bus.latest
        if snap is not None:
            await self._publish_meta(client, topics, snap)
        # retain as published: a retained command keeps its flag even when it arrives
        # while the bridge is subscribed (MQTT 3.1.1 brokers clear it then)
        await client.subscribe(
            topics.cmd_filter, options=SubscribeOptions(qos=1, retainAsPublished=True)
        )
        # online only once the SUBACK is in: a client that sends a command as soon as
        # it sees online must not lose it to a subscription still on its way
        await client.publish(topics.status, ONLINE, qos=1, retain=True)
        self._overwritten.clear()  # what the retained state said before is overwritten now
        tasks = [
            asyncio.create_task(self._telemetry(client, topics)),
            asyncio.create_task(self._follow_events()),
            asyncio.create_task(self._publish_events(client, topics)),
            asyncio.create_task(self._commands(client, topics)),
            asyncio.create_task(self._keep_claim(client, topics)),
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
            msg = encode_telemetry(
                snap,
                run_id=self.run_id,
                top_k=self.top_links,
                health=None if self.health is None else self.health(),
                commands=self.command_stats(),
                events=self.event_stats(),
            )
            await client.publish(topics.telemetry, encoder.encode(msg), qos=0)
            self.telemetry_sent += 1
            await asyncio.sleep(1.0 / self.telemetry_hz)

    async def _follow_events(self) -> None:
        """Queue the new events of every snapshot the engine publishes.

        Telemetry samples a few snapshots a second; a burst of events between two of
        them would overflow a snapshot's window of 100. Reading every snapshot (the
        engine publishes one per batch that applied commands, and ten a second
        otherwise) loses events only when more than 100 happen between two of them.
        """
        tick = -1
        while True:
            snap = await self._next_snapshot(tick, EVENT_POLL_S)
            if snap is None:  # the engine stopped: so does the bridge
                self._stop.set()
                return
            tick = snap.tick
            self._queue_events(self._cursor.new_events(snap.events))

    def _queue_events(self, events: tuple[Event, ...]) -> None:
        for event in events:
            if len(self._events) >= QUEUED_EVENTS:
                self._events.popleft()
                self.events_dropped += 1
            self._events.append(event)
        if events:
            self._events_waiting.set()

    async def _publish_events(self, client: aiomqtt.Client, topics: Topics) -> None:
        """Publish the queued events, oldest first (QoS 1: each waits for the broker);
        those a lost connection left queued go first."""
        while True:
            while self._events:
                event = self._events.popleft()
                payload = encoder.encode(encode_event(event, run_id=self.run_id))
                try:
                    await client.publish(topics.event, payload, qos=1)
                except BaseException:
                    self._events.appendleft(event)  # the next connection sends it
                    raise
                self.events_sent += 1
            self._events_waiting.clear()  # (nothing was queued since the check above)
            await self._events_waiting.wait()

    async def _next_snapshot(self, tick: int, wait_s: float = HEARTBEAT_S) -> Snapshot | None:
        """A snapshot newer than ``tick``, or after ``wait_s`` the latest one again.

        The engine publishes nothing new while paused; repeating the latest state
        lets a console that attaches meanwhile see the fabric (and that it is paused).
        """
        waiter = asyncio.ensure_future(self.bus.next_after(tick))
        done, _ = await asyncio.wait([waiter], timeout=wait_s)
        if waiter in done:
            return waiter.result()
        await cancel_and_wait([waiter])
        return None if self.bus.closed else self.bus.latest

    def command_stats(self) -> CommandStatsMsg:
        """The bridge's command counters (every message is counted in exactly one of
        applied, refused, duplicates, internal_errors, discarded)."""
        inbox = self.inbox
        return CommandStatsMsg(
            applied=0 if inbox is None else inbox.applied,
            refused=0 if inbox is None else inbox.refused,
            busy=0 if inbox is None else inbox.busy,
            duplicates=0 if inbox is None else inbox.duplicates,
            internal_errors=self.internal_errors,
            discarded=self._discards.discarded,
            replies_lost=self.replies_lost,
            retained_cleared=self.retained_cleared,
            read_only=self.read_only,
            allowed=None if self.allowed is None else sorted(self.allowed),
        )

    def event_stats(self) -> EventStatsMsg:
        """The bridge's event counters (see ``EventStatsMsg``)."""
        return EventStatsMsg(
            sent=self.events_sent, dropped=self.events_dropped, gaps=self._cursor.gaps
        )

    async def _commands(self, client: aiomqtt.Client, topics: Topics) -> None:
        """Read commands and hand each to a task of its own (at most ``MAX_HANDLERS``);
        the cluster's status and meta go to ``_note_claim``."""
        places = asyncio.Semaphore(MAX_HANDLERS)
        handlers: set[asyncio.Task[None]] = set()
        try:
            async for message in client.messages:
                data = payload_bytes(message)
                topic = str(message.topic)
                if topic in (topics.status, topics.meta):
                    self._note_claim(topics, topic, data, bool(message.retain))
                    continue
                if message.retain and not data:
                    continue  # a retained command being cleared: nothing to answer
                await places.acquire()
                task = asyncio.create_task(
                    self._handle(client, topics, topic, data, bool(message.retain))
                )
                handlers.add(task)
                task.add_done_callback(handlers.discard)
                task.add_done_callback(lambda _t: places.release())
        finally:
            await cancel_and_wait(list(handlers))

    async def _handle(
        self, client: aiomqtt.Client, topics: Topics, topic: str, data: bytes, retained: bool
    ) -> None:
        """One command: never raises (an exception is logged and answered)."""
        assert self.inbox is not None
        try:
            reply_topic, result = await self.inbox.handle(topic, data, retained=retained)
        except Exception:
            self.internal_errors += 1
            log.exception("command on %s failed", printable(topic))
            cid = None
            with contextlib.suppress(Exception):
                cid = lenient_id(data)
            reply_topic = topics.result(cid)
            result = CommandResult(
                id=cid, ok=False, error="internal error: the command was not applied"
            )
        if not result.ok:  # "busy" at debug level: a flood must not flood the log too
            level = logging.DEBUG if (result.error or "").startswith("busy:") else logging.INFO
            self._refusals_logged.log(
                level, "command on %s refused: %s", printable(topic), printable(result.error or "")
            )
        try:
            await client.publish(reply_topic, result.to_json(), qos=1)
            if retained:
                await self._clear_retained(client, topic, data)
        except aiomqtt.MqttError as exc:
            self.replies_lost += 1
            log.warning("reply to %s not sent: %s", topic, exc)

    async def _clear_retained(self, client: aiomqtt.Client, topic: str, data: bytes) -> None:
        """Delete a refused retained command from the broker (once per topic and body)."""
        key = (topic, hashlib.sha256(data).digest())
        if key in self._cleared:
            return
        self._cleared[key] = None
        while len(self._cleared) > 1024:
            self._cleared.popitem(last=False)
        await client.publish(topic, b"", qos=1, retain=True)
        self.retained_cleared += 1
        self._clears_logged.log(
            logging.INFO, "cleared the retained command on %s", printable(topic)
        )
