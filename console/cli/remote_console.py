"""``fabtop console --mqtt URL``: the console attached to an emulator served elsewhere.

Same screens and fault dialog as the embedded console; the view is rebuilt
from telemetry (the links shown are the top links the server reports).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from console.source import FabricSource
from exporters.mqtt.options import (
    CliError,
    add_broker_options,
    broker_config,
    cluster_name,
    resolve_cluster,
)
from exporters.mqtt.remote import MqttSource


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``fabtop console``."""
    p = subparsers.add_parser(
        "console",
        help="attach the console to an emulator served over MQTT",
        description="Attach the terminal console to a `fabtop serve` through the broker.",
    )
    add_broker_options(p, cluster_help="cluster to attach to (default: the one online)")
    p.add_argument("--read-only", action="store_true", help="view only: no commands")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run ``fabtop console``."""
    try:
        return asyncio.run(_console(args))
    except CliError as exc:
        print(f"fabtop console: error: {exc}", file=sys.stderr)
        return exc.code


async def open_source(args: argparse.Namespace) -> MqttSource:
    """A started ``MqttSource`` for the cluster the options name (or the one online)."""
    config = broker_config(args)
    cluster = await resolve_cluster(config, cluster_name(args))
    source = MqttSource(config, cluster)
    source.start()
    return source


async def _console(args: argparse.Namespace) -> int:
    try:
        from console.app import FabtopApp
    except ImportError as exc:
        raise CliError(f"the console is not available in this build ({exc})", code=1) from None
    mqtt_source = await open_source(args)
    source: FabricSource = mqtt_source  # mypy checks MqttSource against the protocol here
    try:
        # the exporter runs with the emulator (`fabtop serve --metrics`), not here
        app = FabtopApp(source, read_only=args.read_only, metrics_address="on the server")
        await app.run_async()
    finally:
        await mqtt_source.close()
    # Textual prints the traceback of an exception that ended the app and sets 1 here:
    # a crash must not look like the operator quitting
    return app.return_code or 0
