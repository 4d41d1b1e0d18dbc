"""Thin adapters over fabtop snapshots: Prometheus, MQTT, Grafana assets."""
