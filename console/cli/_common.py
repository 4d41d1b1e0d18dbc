"""Argument helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from fabric_core.commands import MAX_TICK_S, MIN_TICK_S
from fabric_core.net.profiles import PROFILES
from fabric_core.runtime.fabric import Fabric, Solver
from fabric_core.runtime.scenario import Scenario, ScenarioError, load_scenario
from fabric_core.units import parse_duration

#: The units a duration on the command line must carry.
DURATION_UNITS = "ns, us, ms, s"


def duration(text: str) -> float:
    """argparse type: a positive duration with a unit (``5ms``).

    A bare number is refused rather than read as seconds: ``--duration 5`` would run five
    simulated seconds, many CPU-minutes, when the user most likely meant 5 ms.
    """
    t = text.strip()
    if t.startswith("-"):
        raise argparse.ArgumentTypeError(f"duration must be positive, got {text!r}")
    try:
        float(t)
    except ValueError:
        pass
    else:
        raise argparse.ArgumentTypeError(
            f"duration {text!r} needs a unit ({DURATION_UNITS}): e.g. {t}ms or {t}s"
        )
    try:
        return parse_duration(t)
    except ValueError as exc:
        if "must be" in str(exc):  # zero
            raise argparse.ArgumentTypeError(f"duration must be positive, got {text!r}") from None
        raise argparse.ArgumentTypeError(str(exc)) from None


#: Options whose value may start with "-" (a negative number a user typed by mistake):
#: ``--duration -1ms`` is joined into ``--duration=-1ms`` before parsing, so the user
#: hears "must be positive" instead of argparse's "expected one argument".
VALUE_OPTIONS = frozenset(
    {"--duration", "--timeout", "--max-tick", "--speed", "--seed", "--scale", "--size", "--rounds"}
)


def join_negative_values(argv: list[str]) -> list[str]:
    """``["--duration", "-1ms"]`` -> ``["--duration=-1ms"]`` (see ``VALUE_OPTIONS``)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if (
            a in VALUE_OPTIONS
            and len(nxt) > 1
            and nxt[0] == "-"
            and (nxt[1].isdigit() or nxt[1] == ".")
        ):
            out.append(f"{a}={nxt}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


#: Longest tick a live engine adapts to by default, as a multiple of the scenario's tick:
#: on the default scenario a tick up to 4x longer leaves the latencies as they are on
#: either fabric, while 10x starts to move them (docs/MODEL.md "Time scales").
DEFAULT_MAX_TICK = "4x"


@dataclass(frozen=True)
class MaxTick:
    """``--max-tick``: a duration, or a multiple of the scenario's tick (``4x``)."""

    seconds: float | None = None
    times: float | None = None

    def resolve(self, dt_s: float) -> float | None:
        """The longest tick in seconds for a fabric whose tick is ``dt_s`` (None: fixed)."""
        value = self.seconds if self.times is None else self.times * dt_s
        if value is None or value <= dt_s:
            return None
        return min(value, MAX_TICK_S)


def max_tick(text: str) -> MaxTick:
    """argparse type: a duration (``100us``) or a multiple of the tick (``4x``); 0 or 1x
    keeps the tick fixed."""
    t = text.strip()
    if t.endswith("x"):
        try:
            times = float(t[:-1])
        except ValueError:
            times = -1.0
        if not 0 <= times <= 1e6:
            raise argparse.ArgumentTypeError(
                f"max tick must be a duration (100us) or a multiple of the tick (4x), got {text!r}"
            )
        return MaxTick(times=times)
    try:
        value = parse_duration(t, allow_zero=True)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"max tick must be a duration (100us) or a multiple of the tick (4x), got {text!r}"
        ) from None
    if value != 0 and not MIN_TICK_S <= value <= MAX_TICK_S:
        raise argparse.ArgumentTypeError(
            f"max tick must be 0 (fixed) or between {MIN_TICK_S:g} and {MAX_TICK_S:g} s, "
            f"got {text!r}"
        )
    return MaxTick(seconds=value or None)


def add_max_tick_option(parser: argparse._ActionsContainer, prefix: str = "") -> None:
    """``--max-tick``: how far a live engine may lengthen the tick to keep up."""
    parser.add_argument(
        "--max-tick",
        type=max_tick,
        default=max_tick(DEFAULT_MAX_TICK),
        metavar="DURATION|Nx",
        help=(
            f"{prefix}longest tick the engine may switch to when it cannot keep up with "
            "the speed, as a duration or a multiple of the scenario's tick; 0 keeps the "
            f"tick fixed (default {DEFAULT_MAX_TICK})"
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


def build_fabric(scn: Scenario, solver: Solver = "compiled") -> Fabric | None:
    """A fabric for the scenario, or None after printing the error to stderr."""
    try:
        return Fabric.from_scenario(scn, solver)
    except ScenarioError as exc:
        print(f"fabtop: {exc}", file=sys.stderr)
        return None
