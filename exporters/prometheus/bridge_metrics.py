"""The MQTT bridge's counters as metrics, where one process runs the bridge and the
exporter (``fabtop serve``): a Grafana alert on lost events or refused commands needs them
in Prometheus, not only in the telemetry topic's ``commands`` and ``events`` blocks."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import Metric

from exporters.prometheus import families as fam

if TYPE_CHECKING:  # (the exporter runs without the MQTT client's packages: the console's)
    from exporters.mqtt.schema import CommandStatsMsg, EventStatsMsg

#: What became of a command (``fabtop_mqtt_commands_total{outcome}``): every message on
#: ``cmd/#`` is counted under exactly one
COMMAND_OUTCOMES = ("applied", "refused", "duplicate", "internal_error", "discarded")


@dataclass(frozen=True)
class BridgeCounters:
    """The bridge's figures since it started: its connection counters, and the command
    and event counters its telemetry carries (``MqttBridge.command_stats``,
    ``event_stats``)."""

    connected: bool
    connections: int
    telemetry_sent: int
    commands: CommandStatsMsg
    events: EventStatsMsg


def bridge_families(c: BridgeCounters) -> Iterator[Metric]:
    """The families of ``c`` (docs/METRICS.md, "MQTT bridge")."""
    yield fam.gauge(
        "fabtop_mqtt_connected",
        "1 while the MQTT bridge is connected to its broker, 0 while it reconnects.",
        [{}],
        [float(c.connected)],
    )
    yield fam.counter(
        "fabtop_mqtt_connections_total",
        "Connections the MQTT bridge made to its broker (more than 1: it reconnected).",
        [{}],
        [float(c.connections)],
    )
    yield fam.counter(
        "fabtop_mqtt_telemetry_messages_total",
        "Telemetry messages the MQTT bridge published.",
        [{}],
        [float(c.telemetry_sent)],
    )
    cmd = c.commands
    outcomes = (cmd.applied, cmd.refused, cmd.duplicates, cmd.internal_errors, cmd.discarded)
    yield fam.counter(
        "fabtop_mqtt_commands_total",
        "Messages on the command topics, by what became of them: applied, refused (an "
        "error reply; busy ones included), duplicate (an id answered before), "
        "internal_error, discarded (the incoming queue was full).",
        [{"outcome": o} for o in COMMAND_OUTCOMES],
        [float(n) for n in outcomes],
    )
    yield fam.counter(
        "fabtop_mqtt_commands_busy_total",
        "Commands refused because the engine had too many in flight (part of outcome=refused).",
        [{}],
        [float(cmd.busy)],
    )
    yield fam.counter(
        "fabtop_mqtt_replies_lost_total",
        "Command replies that could not be published (the broker went away).",
        [{}],
        [float(cmd.replies_lost)],
    )
    yield fam.counter(
        "fabtop_mqtt_events_total",
        "Events the MQTT bridge read from the engine, by what became of them: sent, or "
        "dropped (its queue of events to publish was full: the broker slow or away).",
        [{"outcome": "sent"}, {"outcome": "dropped"}],
        [float(c.events.sent), float(c.events.dropped)],
    )
    yield fam.counter(
        "fabtop_mqtt_event_gaps_total",
        "Times more events happened between two snapshots the bridge read than a "
        "snapshot holds, so that some, an unknown number, were never seen.",
        [{}],
        [float(c.events.gaps)],
    )
