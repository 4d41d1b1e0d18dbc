"""``fabtop watch --mqtt URL``: a plain-text stream of a served emulator, for scripts.

One line per message, flushed at once::

    status online
    event 12.000150s warning link_down leaf00->spine01: link leaf00->spine01 down
    result op-7 ok
    result op-8 error: unknown link 'leaf07->spine99' (did you mean 'leaf07->spine09'?)
    telemetry tick=1200 t=0.012000s running faults=1 throughput=1.2e+11B/s

(``telemetry`` lines only with ``--telemetry``, at most one a second.) ``--json``
prints ``{"topic": ..., "payload": ...}`` lines instead. The stream survives
broker restarts (a ``# ...`` line on stderr says so).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time

import aiomqtt
import msgspec

from console.cli._common import count, positive_seconds
from exporters.mqtt.client import Backoff, explain, make_client, printable
from exporters.mqtt.options import (
    CliError,
    add_broker_options,
    broker_config,
    cluster_name,
    resolve_cluster,
)
from exporters.mqtt.schema import event_decoder, telemetry_decoder
from exporters.mqtt.topics import Topics
from exporters.mqtt.url import BrokerConfig


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``fabtop watch``."""
    p = subparsers.add_parser(
        "watch",
        help="print a served emulator's events as plain text (for scripts)",
        description="Print status changes, events and command results, one line each.",
    )
    p.add_argument("--telemetry", action="store_true", help="also a summary line each second")
    p.add_argument("--json", action="store_true", help="print JSON lines (topic and payload)")
    p.add_argument("--count", type=count, metavar="N", help="exit after N lines (1 or more)")
    p.add_argument("--timeout", type=positive_seconds, metavar="S", help="exit after S seconds")
    add_broker_options(p, cluster_help="cluster to watch (default: the one online)")
    p.set_defaults(func=main)


def seconds(x: float) -> str:
    """Seconds to the microsecond, in a bounded width: ``1e+308``, not 309 digits."""
    return f"{x:.6f}" if abs(x) < 1e9 else f"{x:.6g}"


def integer(n: int) -> str:
    """An integer in a bounded width (JSON allows one of thousands of digits)."""
    if abs(n) < 10**15:
        return str(n)
    try:
        return f"{n:.6g}"
    except OverflowError:  # beyond a float: still say how big
        return f"{'-' if n < 0 else ''}2^{n.bit_length() - 1}+"


def format_line(topics: Topics, topic: str, data: bytes) -> str | None:
    """The text line for one message (its text escaped by ``printable``), or None if it is
    not shown."""
    line = _format(topics, topic, data)
    return None if line is None else printable(line)


def _format(topics: Topics, topic: str, data: bytes) -> str | None:
    try:
        if topic == topics.status:
            return f"status {data.decode(errors='replace') or '(cleared)'}"
        if topic == topics.event:
            e = event_decoder.decode(data)
            return f"event {seconds(e.time_s)}s {e.severity} {e.kind} {e.target}: {e.message}"
        if topic == topics.telemetry:
            t = telemetry_decoder.decode(data)
            active = sum(1 for f in t.faults if f.cleared_at_s is None)
            state = "running" if t.running else "paused"
            return (
                f"telemetry tick={integer(t.tick)} t={seconds(t.sim_time_s)}s {state} "
                f"faults={active} throughput={t.totals.throughput_Bps:.3g}B/s"
            )
        if topic.startswith(topics.result(None)):
            r = json.loads(data)
            cid = r.get("id") or "-"
            return f"result {cid} ok" if r.get("ok") else f"result {cid} error: {r.get('error')}"
    # RecursionError: json.loads of a deeply nested payload ("[[[[..."); one message
    # must not end the stream
    except (msgspec.DecodeError, ValueError, AttributeError, RecursionError) as exc:
        return f"unreadable {topic}: {exc}"
    return None


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def json_line(topic: str, data: bytes) -> str:
    """``{"topic": ..., "payload": ...}`` (the payload parsed when it is JSON, else as
    text). The line is strict JSON: ``json.dumps`` escapes control characters, and a
    payload with NaN or Infinity, which Python would pass through, is kept as text."""
    try:
        payload: object = json.loads(data, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        payload = data.decode(errors="replace")
    return json.dumps({"topic": topic, "payload": payload}, separators=(",", ":"))


def main(args: argparse.Namespace) -> int:
    """Run ``fabtop watch``."""
    try:
        return asyncio.run(_watch(args))
    except CliError as exc:
        print(f"fabtop watch: error: {exc}", file=sys.stderr)
        return exc.code


async def _watch(args: argparse.Namespace) -> int:
    config = broker_config(args)
    cluster = await resolve_cluster(config, cluster_name(args))
    topics = Topics(cluster)
    printed = [0]
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(args.timeout):
            await _stream(config, topics, args, printed)
    if printed[0] == 0:  # not even the retained status an emulator leaves: none ever ran
        raise CliError(
            f"nothing from {topics.root} in {args.timeout:g} s: no emulator of that name "
            "has published on this broker (without --cluster, watch finds the one online)",
            code=3,
        )
    return 0


async def _stream(
    config: BrokerConfig, topics: Topics, args: argparse.Namespace, printed: list[int]
) -> None:
    """Print the cluster's messages as lines until ``--count`` of them (``printed[0]``
    counts them, for the caller to read after a timeout)."""
    last_telemetry = 0.0
    backoff = Backoff()
    while True:
        try:
            async with make_client(config, role="watch") as client:
                for topic in (topics.status, topics.event, topics.result_filter):
                    await client.subscribe(topic, qos=1)
                if args.telemetry:
                    await client.subscribe(topics.telemetry, qos=0)
                backoff.reset()
                async for message in client.messages:
                    topic = str(message.topic)
                    payload = message.payload
                    data = bytes(payload) if isinstance(payload, bytes | bytearray) else b""
                    if topic == topics.telemetry:
                        now = time.monotonic()
                        if now - last_telemetry < 1.0:
                            continue
                        last_telemetry = now
                    line = json_line(topic, data) if args.json else format_line(topics, topic, data)
                    if line is None:
                        continue
                    print(line, flush=True)
                    printed[0] += 1
                    if args.count is not None and printed[0] >= args.count:
                        return
        except aiomqtt.MqttError as exc:
            delay = backoff.next_delay()
            print(f"# {explain(exc, config)}; reconnecting in {delay:.1f} s", file=sys.stderr)
            await asyncio.sleep(delay)
