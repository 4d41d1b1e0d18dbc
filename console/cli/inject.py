"""``fabtop inject KIND TARGET --mqtt URL``: inject a fault into a served emulator.

Prints the result; exit status 0 when applied, 1 when refused (the message says
why), 2 for a usage error, 3 when the broker or the emulator cannot be reached, 4 when
the command went to a cluster that said it was online but no result came in time (it may
have been applied: the message names its id, under which sending it again is safe).

What the emulator would refuse without looking at its fabric (the command's form,
the fault's kind, its parameters' names, types and ranges) is refused here, exit
status 2, before anything is sent and in the emulator's words; the target, and
what depends on the fabric, only the emulator can check (exit status 1).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys

import aiomqtt
import msgspec

import fabric_core.runtime.fabric  # noqa: F401  (registers every kind a served fabric knows)
from console.cli._common import duration, positive_seconds
from console.targets import normalise_target
from exporters.mqtt.client import explain
from exporters.mqtt.oneshot import NoAnswerError, send_command
from exporters.mqtt.options import (
    CliError,
    add_broker_options,
    broker_config,
    cluster_name,
    resolve_cluster,
)
from fabric_core.commands import (
    Command,
    CommandError,
    CommandResult,
    InjectFault,
    parse_command,
)
from fabric_core.faults.book import checked_params, fault_kind

#: Exit status of a command sent to an online cluster whose result did not come in time
MAYBE_APPLIED = 4


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``fabtop inject``."""
    p = subparsers.add_parser(
        "inject",
        help="inject a fault into an emulator served over MQTT",
        description=(
            "Inject a fault into a running `fabtop serve` through the broker and print "
            "the result. Exit status: 0 applied, 1 refused, 2 usage error, 3 unreachable "
            "(nothing applied), 4 sent but no result in time (it may have been applied: "
            "send it again with the --id the message names)."
        ),
    )
    p.add_argument("kind", metavar="KIND", help="fault kind, e.g. link_down, link_degraded")
    p.add_argument(
        "target",
        metavar="TARGET",
        help="link, switch, GPU or storage target; a link as leaf01:spine00 (no quotes "
        "needed) or 'leaf01->spine00' (quoted: > redirects in a shell)",
    )
    p.add_argument(
        "--param",
        "-p",
        metavar="K=V",
        action="append",
        default=[],
        help="fault parameter (repeatable); numbers are read as numbers, e.g. ber=1e-6",
    )
    p.add_argument(
        "--duration",
        type=duration,
        metavar="DURATION",
        help="clear after this much simulated time (e.g. 5ms)",
    )
    add_sending_options(p, cluster_help="cluster to inject into (default: the one online)")
    p.set_defaults(func=main)


def add_sending_options(p: argparse.ArgumentParser, *, cluster_help: str) -> None:
    """The options of a command sent to a served emulator (``deliver``): ``--id``,
    ``--timeout``, ``--json`` and the broker's."""
    p.add_argument("--id", metavar="ID", help="command id (default: generated); retries reuse it")
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=10.0,
        metavar="S",
        help="seconds to wait for the result (default 10)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_broker_options(p, cluster_help=cluster_help)


def parse_params(items: list[str]) -> dict[str, float | str]:
    """``["ber=1e-6", "mode=x"]`` → ``{"ber": 1e-6, "mode": "x"}``; a key given twice is
    refused (which value was meant is unknown)."""
    params: dict[str, float | str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise CliError(f"--param {item!r}: expected KEY=VALUE")
        if key in params:
            raise CliError(f"--param {item!r}: {key} is given twice; give each parameter once")
        try:
            number = float(value)
        except ValueError:
            params[key] = value
            continue
        if not math.isfinite(number):  # (JSON has no NaN: it would go as null)
            raise CliError(f"--param {item!r}: {key} must be a finite number")
        params[key] = number
    return params


def check_fault(cmd: InjectFault) -> None:
    """Refuse what the emulator would refuse in ``cmd`` without its fabric (an unknown
    kind, a parameter the kind does not take, one that is not a number or out of its
    range), with the core's own checks and words.

    Raises:
        CommandError: the emulator's message.
    """
    checked_params(fault_kind(cmd.kind), cmd.params)


def describe(result: CommandResult) -> str:
    """One line for a human."""
    if not result.ok:
        return f"error: {result.error} [id {result.id}]"
    extra = ", ".join(f"{k}={v}" for k, v in result.detail.items())
    return f"ok [id {result.id}]" + (f": {extra}" if extra else "")


def main(args: argparse.Namespace) -> int:
    """Run ``fabtop inject``."""
    try:
        return asyncio.run(_inject(args))
    except CliError as exc:
        print(f"fabtop inject: error: {exc}", file=sys.stderr)
        return exc.code


async def _inject(args: argparse.Namespace) -> int:
    body: dict[str, object] = {"kind": args.kind, "target": normalise_target(args.target)}
    body["params"] = parse_params(args.param)
    if args.duration is not None:
        body["duration_s"] = args.duration
    if args.id is not None:
        body["id"] = args.id
    try:  # the checks the emulator makes without its fabric, before anything is sent
        command = parse_command(msgspec.json.encode(body), command="inject")
        assert isinstance(command, InjectFault)
        check_fault(command)
    except CommandError as exc:
        raise CliError(str(exc)) from None
    return await deliver(args, command)


async def deliver(args: argparse.Namespace, command: Command) -> int:
    """Send ``command`` to the cluster of ``args`` (``--mqtt``, ``--cluster``), wait
    ``--timeout`` for its result, print it (``--json``: as JSON) and return the exit
    status: 0 applied, 1 refused; CliError with 3 (unreachable) or ``MAYBE_APPLIED``."""
    config = broker_config(args)
    cluster = await resolve_cluster(config, cluster_name(args))
    try:
        result = await send_command(config, cluster, command, timeout_s=args.timeout)
    except aiomqtt.MqttError as exc:
        raise CliError(explain(exc, config), code=3) from None
    except NoAnswerError as exc:
        raise CliError(str(exc), code=MAYBE_APPLIED if exc.maybe_applied else 3) from None
    print(result.to_json().decode() if args.json else describe(result))
    return 0 if result.ok else 1
