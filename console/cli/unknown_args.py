"""Errors for arguments the command line does not know, said where they went wrong.

argparse reports a mistyped option after a subcommand with the top-level usage and
``fabtop: error: unrecognized arguments: --durtion``, and a mistyped console option
(``fabtop --sped 2``) as ``invalid choice: '2'`` for the subcommand, since the value
left over is read as one. Here the error names the option, suggests the one meant,
and comes from the parser it belongs to (``fabtop run: error: ...`` under ``run``'s
usage); a console option given after a subcommand is said to be the console's.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from typing import NoReturn


def _options(parser: argparse.ArgumentParser) -> list[str]:
    """The option strings ``parser`` takes (``--duration``, ``-h``, ...)."""
    return [s for action in parser._actions for s in action.option_strings]


def _is_option(token: str) -> bool:
    """Whether ``token`` is written as an option (not a value such as ``-5ms``)."""
    return token.startswith("-") and len(token) > 1 and not (token[1].isdigit() or token[1] == ".")


def _known(name: str, options: Sequence[str]) -> bool:
    """Whether argparse would take ``name`` as one of ``options``: the option itself, or
    the start of exactly one long option (argparse's abbreviations)."""
    if name in options:
        return True
    return name.startswith("--") and sum(o.startswith(name) for o in options) == 1


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """``parser``'s subcommands, each with its parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _subparser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser:
    """The parser of subcommand ``name`` (``parser`` itself for none)."""
    return _subcommands(parser).get(name or "", parser)


def unknown_option_message(name: str, options: Sequence[str]) -> str:
    """``unknown option --durtion (did you mean --duration?)``."""
    # (a cutoff above difflib's 0.6, which offered --mqtt for --at)
    close = difflib.get_close_matches(
        name, [o for o in options if o.startswith("--")], n=1, cutoff=0.7
    )
    return f"unknown option {name}" + (f" (did you mean {close[0]}?)" if close else "")


def unknown_arguments(
    parser: argparse.ArgumentParser, subcommand: str | None, extras: Sequence[str]
) -> tuple[argparse.ArgumentParser, str]:
    """The parser that should report ``extras`` (what ``parse_known_args`` left over
    after ``subcommand``) and its message."""
    target = _subparser(parser, subcommand)
    top_options = _options(parser)
    for token in extras:
        if not _is_option(token):
            continue
        name = token.split("=", 1)[0]
        if target is not parser and _known(name, top_options):
            return target, (
                f"{name} is an option of the console (fabtop {name} ..., with no "
                f"subcommand), not of `{target.prog}`; see `{target.prog} --help`"
            )
        return (
            target,
            f"{unknown_option_message(name, _options(target))}; see `{target.prog} --help`",
        )
    return target, (
        f"unexpected argument{'s' if len(extras) > 1 else ''} {' '.join(extras)}: "
        f"`{target.prog} --help` lists what it takes"
    )


def first_unknown_option(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """The first option in ``argv`` before its subcommand that ``parser`` (the top level)
    does not take: what made argparse read the next value as a subcommand."""
    options = _options(parser)
    commands = _subcommands(parser)
    for token in argv:
        if token in commands:
            return None
        if _is_option(token):
            name = token.split("=", 1)[0]
            if not _known(name, options):
                return name
    return None


class TopLevelParser(argparse.ArgumentParser):
    """``fabtop``'s own parser: a value that reads as an unknown subcommand because the
    option before it is unknown is reported as that option (``parse`` keeps the argv)."""

    argv: Sequence[str] = ()

    def parse(self, argv: Sequence[str]) -> argparse.Namespace:
        """``parse_args(argv)``, with the errors above for what it does not know."""
        self.argv = argv
        args, extras = self.parse_known_args(list(argv))
        if extras:
            target, message = unknown_arguments(self, getattr(args, "subcommand", None), extras)
            target.error(message)
        return args

    def error(self, message: str) -> NoReturn:
        """argparse's error, unless an unknown option explains it."""
        if "argument SUBCOMMAND: invalid choice" in message:
            unknown = first_unknown_option(self, self.argv)
            if unknown is not None:
                message = f"{unknown_option_message(unknown, _options(self))}; see `fabtop --help`"
        super().error(message)
