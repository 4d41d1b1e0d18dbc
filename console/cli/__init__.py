"""The ``fabtop`` command line: one module per subcommand, registered here."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from console.cli.unknown_args import TopLevelParser

#: Subcommand modules in ``console.cli``, in the order ``fabtop --help`` lists them.
#: Each defines ``register(subparsers)`` which adds its parser and sets ``func``.
SUBCOMMANDS: tuple[str, ...] = (
    "run",
    "replay",
    "compare",
    "scenarios",
    "storage",
    "check",
    "claims",
    "serve",
    "remote_console",
    "inject",
    "clear",
    "watch",
    "tui",
)


def build_parser() -> TopLevelParser:
    """The full argument parser (used by ``main`` and by the docs)."""
    from console.cli.unknown_args import TopLevelParser

    parser = TopLevelParser(
        prog="fabtop",
        description=(
            "A live emulator of an AI-cluster RDMA fabric: native credit-based lossless "
            "links vs RoCEv2 (PFC + ECN/DCQCN), with a terminal console and a Prometheus "
            "exporter. With no subcommand, runs the default scenario with the console "
            "and the exporter."
        ),
    )
    sub = parser.add_subparsers(
        dest="subcommand",
        metavar="SUBCOMMAND",
        title="subcommands",
        parser_class=argparse.ArgumentParser,  # (the top level's errors are its own)
    )
    # the console's options (no subcommand) get their own heading in --help, not
    # "positional arguments" (the group argparse puts the subcommands in)
    sub.console_group = parser.add_argument_group(  # type: ignore[attr-defined]
        "console options (fabtop with no subcommand)"
    )
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"console.cli.{name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fabtop`` console script."""
    from console.cli._common import join_negative_values, planes_problem

    parser = build_parser()
    args = parser.parse(join_negative_values(list(sys.argv[1:] if argv is None else argv)))
    problem = planes_problem(args)
    if problem is not None:
        parser.error(problem)
    func = getattr(args, "func", None)
    if func is None:
        default = getattr(args, "default_func", None)
        if default is None:
            parser.print_help()
            return 0
        func = default
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`fabtop scenarios | head`): not an error; keep Python
        # from complaining again when it flushes stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
