"""``fabtop clear (FAULT_ID | --target TARGET | --all)``: clear faults of a served emulator.

The command-line twin of ``fabtop inject``: a refusal says "clear it first", and the
console's ``x`` key and MQTT's ``cmd/clear`` could, but a shell could not. Exit statuses
as ``fabtop inject``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import msgspec

from console.cli.inject import add_sending_options, deliver
from console.targets import normalise_target
from exporters.mqtt.options import CliError
from fabric_core.commands import ClearFault, CommandError, parse_command


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``fabtop clear``."""
    p = subparsers.add_parser(
        "clear",
        help="clear faults of an emulator served over MQTT",
        description=(
            "Clear one fault of a running `fabtop serve` by its id (f0), every fault on a "
            "target, or all of them, through the broker, and print the result. Exit "
            "status as `fabtop inject`'s: 0 applied, 1 refused (e.g. no such active "
            "fault), 2 usage error, 3 unreachable, 4 sent but no result in time."
        ),
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("fault_id", nargs="?", metavar="FAULT_ID", help="the fault's id, e.g. f0")
    which.add_argument(
        "--target",
        metavar="TARGET",
        help="every active fault on this link, switch, GPU or storage target "
        "(a link as leaf01:spine00 or 'leaf01->spine00')",
    )
    which.add_argument("--all", action="store_true", help="every active fault")
    add_sending_options(p, cluster_help="cluster to clear faults of (default: the one online)")
    p.set_defaults(func=main)


def command_of(args: argparse.Namespace) -> ClearFault:
    """The ``ClearFault`` that ``args`` ask for, checked as the emulator reads it (an
    ``--id`` it would refuse is refused here, before anything is sent).

    Raises:
        CliError: the emulator's words.
    """
    body: dict[str, object] = {}
    if args.all:
        body["all"] = True
    elif args.target is not None:
        body["target"] = normalise_target(args.target)
    else:
        body["fault_id"] = args.fault_id
    if args.id is not None:
        body["id"] = args.id
    try:
        command = parse_command(msgspec.json.encode(body), command="clear")
    except CommandError as exc:
        raise CliError(str(exc)) from None
    assert isinstance(command, ClearFault)
    return command


def main(args: argparse.Namespace) -> int:
    """Run ``fabtop clear``."""
    try:
        return asyncio.run(deliver(args, command_of(args)))  # (command_of: before a broker)
    except CliError as exc:
        print(f"fabtop clear: error: {exc}", file=sys.stderr)
        return exc.code
