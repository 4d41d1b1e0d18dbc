"""Argument helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import sys

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
