"""The MQTT topic layout of one emulated cluster (see docs/MQTT.md).

::

    fabtop/<cluster>/status          "online" (retained) / "offline" (will, and on clean exit)
    fabtop/<cluster>/meta            run description and node table (JSON, retained)
    fabtop/<cluster>/telemetry       compact state, a few times a second (JSON, QoS 0)
    fabtop/<cluster>/event           one message per event (JSON, QoS 1)
    fabtop/<cluster>/cmd/<command>   commands in (JSON with an id, QoS 1, never retained)
    fabtop/<cluster>/result/<id>     the reply to command <id> (JSON, QoS 1)
    fabtop/<cluster>/result          the reply to a command that had no usable id

Replies live outside ``cmd/`` so the bridge never hears its own answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabric_core.runtime.scenario import CLUSTER_NAME

PREFIX = "fabtop"


class TopicError(ValueError):
    """A cluster name that cannot be a topic level."""


def check_cluster(name: str) -> str:
    """Return ``name`` if it can be one topic level (no ``/``, ``+``, ``#``, spaces).

    Raises:
        TopicError: with the reason.
    """
    if not CLUSTER_NAME.fullmatch(name):
        raise TopicError(
            f"cluster name {name!r} must be 1-64 characters among letters, digits, '_', '.', '-'"
        )
    return name


@dataclass(frozen=True, slots=True)
class Topics:
    """Every topic of one cluster."""

    cluster: str

    def __post_init__(self) -> None:
        check_cluster(self.cluster)

    @property
    def root(self) -> str:
        """``fabtop/<cluster>``."""
        return f"{PREFIX}/{self.cluster}"

    @property
    def status(self) -> str:
        """Retained ``online``; ``offline`` from the will or a clean shutdown."""
        return f"{self.root}/status"

    @property
    def meta(self) -> str:
        """Retained run description (scenario, profile, node table)."""
        return f"{self.root}/meta"

    @property
    def telemetry(self) -> str:
        """Compact state, QoS 0."""
        return f"{self.root}/telemetry"

    @property
    def event(self) -> str:
        """Events, QoS 1."""
        return f"{self.root}/event"

    @property
    def cmd_filter(self) -> str:
        """What the bridge subscribes to."""
        return f"{self.root}/cmd/#"

    def cmd(self, command: str) -> str:
        """The topic a command named ``command`` is sent to."""
        return f"{self.root}/cmd/{command}"

    def command_name(self, topic: str) -> str | None:
        """The ``<command>`` part of a ``cmd/`` topic (may contain ``/``), else None."""
        head = f"{self.root}/cmd/"
        return topic[len(head) :] if topic.startswith(head) else None

    @property
    def result_filter(self) -> str:
        """Every reply, identified or not."""
        return f"{self.root}/result/#"

    def result(self, command_id: str | None) -> str:
        """Where the reply to ``command_id`` goes (``result`` when there is no id)."""
        base = f"{self.root}/result"
        return base if command_id is None else f"{base}/{command_id}"

    @staticmethod
    def status_filter() -> str:
        """The status of every cluster on the broker (for discovery)."""
        return f"{PREFIX}/+/status"

    @staticmethod
    def cluster_of(topic: str) -> str | None:
        """The cluster a ``fabtop/<cluster>/...`` topic belongs to."""
        parts = topic.split("/")
        return parts[1] if len(parts) >= 3 and parts[0] == PREFIX else None
