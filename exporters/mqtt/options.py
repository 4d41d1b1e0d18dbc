"""Command-line options shared by the MQTT subcommands (serve, console, inject, watch)."""

from __future__ import annotations

import argparse
import os

import aiomqtt

from exporters.mqtt.client import explain
from exporters.mqtt.remote import discover_clusters
from exporters.mqtt.topics import TopicError, check_cluster
from exporters.mqtt.url import DEFAULT_URL, BrokerConfig, BrokerUrlError, parse_broker_url

URL_ENV = "FABTOP_MQTT_URL"
CLUSTER_ENV = "FABTOP_CLUSTER"


class CliError(Exception):
    """A problem to print as ``fabtop <cmd>: error: ...`` and exit with ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def add_broker_options(parser: argparse.ArgumentParser, *, cluster_help: str) -> None:
    """``--mqtt URL`` and ``--cluster NAME``."""
    parser.add_argument(
        "--mqtt",
        metavar="URL",
        default=os.environ.get(URL_ENV, DEFAULT_URL),
        help=(
            "broker URL: mqtt[s]://[USER[:PASSWORD]@]HOST[:PORT][?ca=..&cert=..&key=..]"
            f" (default ${URL_ENV} or {DEFAULT_URL}; password also from $FABTOP_MQTT_PASSWORD)"
        ),
    )
    parser.add_argument(
        "--cluster",
        metavar="NAME",
        default=os.environ.get(CLUSTER_ENV),
        help=cluster_help.replace("(default: ", f"(default: ${CLUSTER_ENV}, else ", 1),
    )


def broker_config(args: argparse.Namespace) -> BrokerConfig:
    """The broker from ``--mqtt``; CliError if the URL or its TLS files are unusable."""
    try:
        config = parse_broker_url(args.mqtt)
        config.tls_context()  # read the certificate files now, not at the first connection
    except BrokerUrlError as exc:
        raise CliError(str(exc)) from None
    return config


def cluster_name(args: argparse.Namespace) -> str | None:
    """``--cluster`` checked as a topic level (None when not given)."""
    if args.cluster is None:
        return None
    try:
        return check_cluster(args.cluster)
    except TopicError as exc:
        raise CliError(str(exc)) from None


async def resolve_cluster(config: BrokerConfig, given: str | None) -> str:
    """``given``, or the one cluster the broker says is online.

    Raises:
        CliError: broker unreachable (code 3), no cluster online or several (code 2).
    """
    if given is not None:
        return given
    try:
        found = await discover_clusters(config, wait_s=0.5)
    except aiomqtt.MqttError as exc:
        raise CliError(explain(exc, config), code=3) from None
    online = sorted(name for name, status in found.items() if status == "online")
    if len(online) == 1:
        return online[0]
    if not online:
        raise CliError(
            f"no fabtop emulator is online on {config.display()}"
            " (start one with `fabtop serve --mqtt URL`, or name it with --cluster)",
            code=3,
        )
    raise CliError(f"several clusters are online ({', '.join(online)}): choose one with --cluster")
