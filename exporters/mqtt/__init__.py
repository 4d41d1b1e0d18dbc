"""The MQTT edge of fabtop: a bridge that serves an engine over a broker, and
a remote source that rebuilds the console's view from it (see docs/MQTT.md)."""
