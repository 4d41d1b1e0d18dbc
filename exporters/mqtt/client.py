"""aiomqtt clients built from a ``BrokerConfig``, reconnection backoff, error text, and
wire text made safe to print."""

from __future__ import annotations

import asyncio
import logging
import random
import secrets

import aiomqtt
from aiomqtt.exceptions import MqttConnectError
from paho.mqtt.properties import Properties

from exporters.mqtt.url import BrokerConfig


def payload_bytes(message: aiomqtt.Message) -> bytes:
    """A received message's payload as bytes (b"" for none)."""
    payload = message.payload
    if isinstance(payload, str):
        return payload.encode(errors="surrogateescape")
    return bytes(payload) if isinstance(payload, bytes | bytearray) else b""


def printable(text: str) -> str:
    """``text`` safe to print as one terminal line: every character ``str.isprintable``
    rejects (ESC and the other controls, newlines, bidi overrides) is escaped as
    ``repr`` shows it (``\\x1b``, ``\\n``, ``\\u202e``), so a message from the wire can
    neither drive the terminal nor forge lines (``fabtop watch``, the remote console's
    header and log)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


#: Bounds on paho's queues: nothing grows without bound while the broker is away.
MAX_QUEUED_OUTGOING = 1000
MAX_QUEUED_INCOMING = 1000


#: Where the MQTT library's own log goes by default: nowhere. Its errors ("failed to
#: receive on socket: [Errno 104] Connection reset by peer") reached a user's terminal
#: through logging's last resort, beside the sentence the caller prints for the same
#: failure (``explain``); a caller that wants them passes a logger of its own (the bridge).
QUIET_LOG = logging.getLogger("fabtop.mqtt.library")
QUIET_LOG.addHandler(logging.NullHandler())
QUIET_LOG.propagate = False


def make_client(
    config: BrokerConfig,
    *,
    role: str,
    will: aiomqtt.Will | None = None,
    timeout_s: float = 10.0,
    protocol: aiomqtt.ProtocolVersion | None = None,
    queue_type: type[asyncio.Queue[aiomqtt.Message]] | None = None,
    logger: logging.Logger | None = None,
    max_queued_incoming: int = MAX_QUEUED_INCOMING,
    properties: Properties | None = None,
) -> aiomqtt.Client:
    """A new (not yet connected) client; ``role`` prefixes the generated client id.
    ``logger`` takes the MQTT library's log; by default it goes nowhere (``QUIET_LOG``).

    Raises:
        BrokerUrlError: the TLS files cannot be read.
    """
    return aiomqtt.Client(
        config.host,
        config.port,
        username=config.username,
        password=config.password,
        identifier=config.client_id or f"fabtop-{role}-{secrets.token_hex(4)}",
        will=will,
        keepalive=config.keepalive_s,
        timeout=timeout_s,
        tls_context=config.tls_context(),
        max_queued_outgoing_messages=MAX_QUEUED_OUTGOING,
        max_queued_incoming_messages=max_queued_incoming,
        properties=properties,
        protocol=protocol,
        queue_type=queue_type,
        logger=logger or QUIET_LOG,
    )


def explain(exc: BaseException, config: BrokerConfig) -> str:
    """An operator-facing sentence for a failed or lost broker connection."""
    where = config.display()
    text = str(exc) or type(exc).__name__
    lowered = text.lower()
    if isinstance(exc, MqttConnectError):
        if "not authori" in lowered or "bad user" in lowered or "code:4]" in lowered:
            return f"the broker at {where} refused the login ({text})"
        return f"the broker at {where} refused the connection ({text})"
    if "refused" in lowered:
        return f"no broker at {where} (connection refused)"
    if "certificate" in lowered or "ssl" in lowered:
        return f"TLS with {where} failed: {text}"
    if "timed out" in lowered:
        return f"the broker at {where} did not answer in time"
    return f"connection to {where} failed or was lost: {text}"


class Backoff:
    """Exponential reconnection delays with jitter: 0.5 s, 1 s, 2 s ... up to ``max_s``."""

    def __init__(self, initial_s: float = 0.5, max_s: float = 10.0, factor: float = 2.0) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self.factor = factor
        self._next = initial_s

    def reset(self) -> None:
        """Back to the first delay (after a successful connection)."""
        self._next = self.initial_s

    def next_delay(self) -> float:
        """The next delay in seconds (±20 % jitter so clients do not reconnect in step)."""
        delay = self._next
        self._next = min(self.max_s, self._next * self.factor)
        return delay * random.uniform(0.8, 1.2)
