"""The MQTT edge of fabtop (see docs/MQTT.md).

* ``MqttBridge`` serves a running engine over a broker: status, meta,
  telemetry and events out; commands in, answered once per id.
* ``MqttSource`` is the console's ``FabricSource`` for an emulator served
  elsewhere: a real ``Snapshot`` rebuilt from telemetry, commands sent back.
* ``send_command`` sends one command and waits for its result (``fabtop inject``).
* ``parse_broker_url`` reads ``mqtt[s]://[user[:password]@]host[:port][?options]``.

Module map: ``url`` (broker URLs), ``topics`` (the topic layout), ``schema``
(payload structs), ``encode`` / ``decode`` (snapshot ↔ payloads), ``inbox``
(command rules), ``client`` (aiomqtt clients, backoff, error text), ``bridge``,
``remote``, ``oneshot``, ``options`` (shared CLI options).
"""

from exporters.mqtt.bridge import MqttBridge
from exporters.mqtt.oneshot import NoAnswerError, send_command
from exporters.mqtt.remote import MqttSource, discover_clusters
from exporters.mqtt.topics import Topics
from exporters.mqtt.url import BrokerConfig, BrokerUrlError, parse_broker_url

__all__ = [
    "BrokerConfig",
    "BrokerUrlError",
    "MqttBridge",
    "MqttSource",
    "NoAnswerError",
    "Topics",
    "discover_clusters",
    "parse_broker_url",
    "send_command",
]
