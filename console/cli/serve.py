"""``fabtop serve [SCENARIO] --mqtt URL``: the emulator without a console.

Runs the engine, the MQTT bridge (telemetry and events out, commands in) and
the Prometheus exporter (``--metrics``, on 127.0.0.1:9464 unless told
otherwise). Stops cleanly on SIGINT/SIGTERM, saying ``offline`` first. Refuses
(exit status 1, nothing published) a cluster that another emulator serves.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import logging
import signal
import sys
from typing import Any

from console.cli._common import (
    add_max_tick_option,
    add_metrics_options,
    add_planes_options,
    add_scenario_options,
    build_fabric,
    load_from_args,
    metrics_bind_error,
    planes_from_args,
    speed_value,
)
from console.fabrics import close_fabric
from exporters.mqtt.bridge import ClusterTakenError, MqttBridge
from exporters.mqtt.inbox import check_allowed
from exporters.mqtt.options import CliError, add_broker_options, broker_config, cluster_name
from fabric_core.commands import COMMAND_NAMES
from fabric_core.runtime.engine import DEFAULT_SPEED as ENGINE_DEFAULT_SPEED
from fabric_core.runtime.engine import Engine

log = logging.getLogger("fabtop.serve")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``fabtop serve``."""
    p = subparsers.add_parser(
        "serve",
        help="run the emulator behind an MQTT broker (no console); attach with `fabtop console`",
        description=(
            "Run the emulator with the MQTT bridge and the Prometheus exporter, without a "
            "console. Consoles attach with `fabtop console --mqtt URL`; scripts use "
            "`fabtop inject` and `fabtop watch`."
        ),
    )
    add_scenario_options(p)
    p.add_argument(
        "--speed",
        type=speed_value,
        metavar="X",
        help=f"simulated s per wall s, 0 = flat out (default {ENGINE_DEFAULT_SPEED:g})",
    )
    add_max_tick_option(p)
    add_planes_options(p)
    add_broker_options(p, cluster_help="topic level fabtop/<NAME> (default: the scenario's)")
    p.add_argument(
        "--telemetry-hz",
        type=float,
        default=4.0,
        metavar="HZ",
        help="telemetry messages a second (default 4)",
    )
    p.add_argument(
        "--top-links",
        type=int,
        default=32,
        metavar="K",
        help="the hottest links in each telemetry message (default 32)",
    )
    add_metrics_options(p)
    p.add_argument(
        "--read-only",
        action="store_true",
        help='telemetry and metrics only: every command is answered "read-only"',
    )
    p.add_argument(
        "--allow",
        metavar="KINDS",
        help="comma-separated command kinds accepted, e.g. pause,resume,clear (default: all;"
        f" none: --read-only); known: {', '.join(COMMAND_NAMES)}",
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="what the server logs to standard error (default info)",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run ``fabtop serve`` until interrupted."""
    logging.basicConfig(
        level=args.log_level.upper(), format="fabtop serve: %(message)s", stream=sys.stderr
    )
    try:
        return asyncio.run(_serve(args))
    except CliError as exc:
        if str(exc):  # empty when the reason was printed already
            print(f"fabtop serve: error: {exc}", file=sys.stderr)
        return exc.code


def _build_engine(args: argparse.Namespace) -> tuple[Engine, str]:
    """The engine, and the scenario's cluster name (the topic level by default)."""
    scn = load_from_args(args)
    fabric = build_fabric(scn, planes=planes_from_args(args)) if scn is not None else None
    if scn is None or fabric is None:  # the reason is printed already
        raise CliError("", code=2)
    kwargs = {} if args.speed is None else {"speed": args.speed}
    try:
        return Engine(fabric, max_tick_s=args.max_tick.resolve(fabric.dt_s), **kwargs), scn.cluster
    except ValueError as exc:
        close_fabric(fabric)
        raise CliError(str(exc)) from None


async def _start_metrics(args: argparse.Namespace, engine: Engine, bridge: MqttBridge) -> Any:
    """The Prometheus exporter, or None (``--no-metrics`` or not in this build)."""
    if args.no_metrics:
        return None
    try:
        from exporters.prometheus import start_metrics_server
        from exporters.prometheus.bridge_metrics import BridgeCounters
    except ImportError:
        log.warning("Prometheus exporter unavailable in this build; serving without /metrics")
        return None

    def counters() -> BridgeCounters:
        return BridgeCounters(
            connected=bridge.connected,
            connections=bridge.connections,
            telemetry_sent=bridge.telemetry_sent,
            commands=bridge.command_stats(),
            events=bridge.event_stats(),
        )

    host, port = args.metrics
    try:
        server = start_metrics_server(
            lambda: engine.bus.latest,
            host,
            port,
            link_metrics=args.link_metrics,
            health=lambda: engine.health,
            bridge=counters,
        )
        if inspect.isawaitable(server):
            server = await server
    except (OSError, ValueError) as exc:
        raise metrics_bind_error(exc, "serve without it", who_hint=False) from None
    log.info("metrics on http://%s/metrics", _address(server.address))
    return server


def _allowed(text: str | None) -> frozenset[str] | None:
    """``--allow`` as a set of command kinds (None when not given); an empty list is
    refused: serving without any command is ``--read-only``, which says so."""
    if text is None:
        return None
    kinds = frozenset(w.strip() for w in text.split(",") if w.strip())
    if not kinds:
        raise CliError(
            f"--allow {text!r} names no command kind; to refuse every command use --read-only"
        )
    try:
        return check_allowed(kinds)
    except ValueError as exc:
        raise CliError(f"--allow {text!r}: {exc}") from None


def _taken(exc: ClusterTakenError, cluster: str) -> str:
    """What to do when another emulator serves the cluster."""
    return (
        f"{exc}: stop it first, or serve this one under another name with --cluster NAME."
        " If it stopped without saying so (its retained status is stale), clear the status:"
        f" mosquitto_pub -r -n -t fabtop/{cluster}/status"
    )


def _address(address: Any) -> str:
    if isinstance(address, tuple):
        from exporters.prometheus.server import host_port  # (lazily, as the exporter)

        return host_port(str(address[0]), address[1])
    return str(address)


async def _serve(args: argparse.Namespace) -> int:
    config = broker_config(args)
    cluster = cluster_name(args)
    if not 0 < args.telemetry_hz <= 50:
        raise CliError(f"--telemetry-hz must be in (0, 50], got {args.telemetry_hz}")
    if args.top_links < 1:
        raise CliError(f"--top-links must be at least 1, got {args.top_links}")
    allowed = _allowed(args.allow)
    engine, scenario_cluster = _build_engine(args)
    try:
        return await _serve_engine(args, engine, config, cluster or scenario_cluster, allowed)
    finally:
        close_fabric(engine.fabric)


async def _serve_engine(
    args: argparse.Namespace,
    engine: Engine,
    config: Any,
    cluster: str,
    allowed: frozenset[str] | None,
) -> int:
    bridge = MqttBridge(
        config,
        engine.bus,
        engine.submit,
        cluster=cluster,
        telemetry_hz=args.telemetry_hz,
        top_links=args.top_links,
        read_only=args.read_only,
        allowed=allowed,
        health=lambda: engine.health,
    )
    metrics = await _start_metrics(args, engine, bridge)
    if args.read_only:
        log.info("read-only: commands are refused")
    elif allowed is not None:
        log.info("commands allowed: %s", ", ".join(sorted(allowed)))
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        log.info("%s: stopping", sig.name)
        bridge.stop()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    engine_task = asyncio.create_task(engine.run(), name="fabtop-engine")
    engine_task.add_done_callback(lambda _: bridge.stop())
    log.info(
        "serving scenario %r on %s (topics fabtop/%s/...)", args.scenario, config.display(), cluster
    )
    try:
        await bridge.run()
    except ClusterTakenError as exc:
        raise CliError(_taken(exc, cluster), code=1) from None
    finally:
        engine.stop()
        await asyncio.gather(engine_task, return_exceptions=True)
        if metrics is not None:
            closed = metrics.close()
            if inspect.isawaitable(closed):
                await closed
    if engine_task.done() and not engine_task.cancelled() and engine_task.exception():
        log.error("the engine failed: %r", engine_task.exception())
        return 1
    if engine.ended is not None:
        log.error("the run stopped: %s", engine.ended)
        return 1
    if bridge.said_offline:
        log.info("stopped (offline announced)")
    else:
        log.info("stopped without reaching the broker (its will message says offline)")
    return 0
