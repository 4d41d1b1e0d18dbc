"""Argument helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import sys

from fabric_core.commands import MAX_TICK_S, MIN_TICK_S
from fabric_core.fabric import Fabric
from fabric_core.profiles import PROFILES
from fabric_core.scenario import Scenario, ScenarioError, load_scenario
from fabric_core.units import parse_duration


def duration(text: str) -> float:
    """argparse type: a duration with a unit (``5ms``)."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


#: Longest tick a live engine adapts to by default: 50 times the default scenario's 2 µs,
#: well inside the range over which the model's results are tested not to change.
DEFAULT_MAX_TICK = "100us"


def max_tick(text: str) -> float | None:
    """argparse type: the longest tick the engine may adapt to; 0 keeps the tick fixed."""
    try:
        value = parse_duration(text, allow_zero=True)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value == 0:
        return None
    if not MIN_TICK_S <= value <= MAX_TICK_S:
        raise argparse.ArgumentTypeError(
            f"max tick must be 0 (fixed) or between {MIN_TICK_S:g} and {MAX_TICK_S:g} s, "
            f"got {text!r}"
        )
    return value


def add_max_tick_option(parser: argparse._ActionsContainer, prefix: str = "") -> None:
    """``--max-tick``: how far a live engine may lengthen the tick to keep up."""
    parser.add_argument(
        "--max-tick",
        type=max_tick,
        default=max_tick(DEFAULT_MAX_TICK),
        metavar="DURATION",
        help=(
            f"{prefix}longest tick the engine may switch to when it cannot keep up with "
            f"the speed; 0 keeps the scenario's tick (default {DEFAULT_MAX_TICK})"
        ),
    )


def add_scenario_options(parser: argparse.ArgumentParser, *, positional: bool = True) -> None:
    """SCENARIO plus --profile / --seed / --dt."""
    if positional:
        parser.add_argument(
            "scenario",
            nargs="?",
            default="default",
            metavar="SCENARIO",
            help="a bundled scenario's name (see `fabtop scenarios`) or a path to a TOML file (default: default)",
        )
    parser.add_argument(
        "--profile", choices=sorted(PROFILES), help="override the scenario's fabric profile"
    )
    parser.add_argument("--seed", type=int, help="override the scenario's random seed")
    parser.add_argument("--dt", help="override the tick length (e.g. 1us)")


def load_from_args(args: argparse.Namespace, scenario: str | None = None) -> Scenario | None:
    """The scenario the options name, or None after printing the error to stderr."""
    try:
        return load_scenario(
            scenario or args.scenario, profile=args.profile, seed=args.seed, dt=args.dt
        )
    except ScenarioError as exc:
        print(f"fabtop: {exc}", file=sys.stderr)
        return None


def build_fabric(scn: Scenario) -> Fabric | None:
    """A fabric for the scenario, or None after printing the error to stderr."""
    try:
        return Fabric.from_scenario(scn)
    except ScenarioError as exc:
        print(f"fabtop: {exc}", file=sys.stderr)
        return None
