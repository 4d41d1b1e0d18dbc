"""Argument helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import errno
import math
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from console.fabrics import DEFAULT_PLANE_BATCH, PlaneOptions, make_fabric
from exporters.mqtt.options import CliError
from fabric_core.commands import MAX_TICK_S, MIN_TICK_S, speed_problem
from fabric_core.net.profiles import PROFILES
from fabric_core.planes.split import plane_cut_problem
from fabric_core.reports.run import ticks_for
from fabric_core.runtime.fabric import Fabric, Solver
from fabric_core.runtime.scenario import Scenario, ScenarioError, load_scenario
from fabric_core.units import format_bytes, format_duration, parse_duration, parse_size

if TYPE_CHECKING:
    from fabric_core.planes.coordinator import PlanedFabric

#: the longest batch of plane ticks (a workload hears of completions only at its end)
MAX_PLANE_BATCH = 10_000

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
        bare = float(t)
    except ValueError:
        pass
    else:
        if not math.isfinite(bare):  # ("nan", "inf": no unit makes them a duration)
            raise argparse.ArgumentTypeError(f"duration must be a finite number, got {text!r}")
        if bare == 0:  # (no unit makes 0 positive: "e.g. 0ms" would be refused in turn)
            raise argparse.ArgumentTypeError(f"duration must be positive, got {text!r}")
        raise argparse.ArgumentTypeError(
            f"duration {text!r} needs a unit ({DURATION_UNITS}): e.g. {t}ms or {t}s"
        )
    try:
        return parse_duration(t)
    except ValueError as exc:
        if "must be >" in str(exc):  # zero (parse_duration's other "must be" is not finite)
            raise argparse.ArgumentTypeError(f"duration must be positive, got {text!r}") from None
        raise argparse.ArgumentTypeError(str(exc)) from None


def _whole_number(text: str, least: int, says: str) -> int:
    """``text`` as a whole number of at least ``least``, else a usage error that ``says``
    what it must be."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be {says}, got {text!r}")
    return value


def seed_number(text: str) -> int:
    """argparse type: ``--seed``, a whole number of 0 or more."""
    return _whole_number(text, 0, "0 or more")


def count(text: str) -> int:
    """argparse type: a whole number of at least 1 (``--rounds``)."""
    return _whole_number(text, 1, "at least 1")


def message_size(text: str) -> int:
    """argparse type: one message's bytes (``4096``, ``4KiB``), 1 B to the largest an RDMA
    operation carries (``workloads.fields.MAX_MESSAGE_BYTES``)."""
    from fabric_core.workloads.fields import MAX_MESSAGE_BYTES

    try:
        value = parse_size(text, signed=True)  # (a negative one: the range below says it)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not 1 <= value <= MAX_MESSAGE_BYTES:
        raise argparse.ArgumentTypeError(
            f"a message is 1 B to {format_bytes(MAX_MESSAGE_BYTES)}, got {text!r}"
        )
    return int(value)


def _number_above_zero(text: str, noun: str) -> float:
    """``text`` as a finite number above 0, else a usage error naming it ``noun``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be {noun} above 0, got {text!r}")
    return value


def factor(text: str) -> float:
    """argparse type: a finite number above 0 (``--scale``)."""
    return _number_above_zero(text, "a finite number")


def positive_seconds(text: str) -> float:
    """argparse type: a number of seconds above 0 (``--timeout 2.5``)."""
    return _number_above_zero(text, "a number of seconds")


def tick_length(text: str) -> float:
    """argparse type: ``--dt``, a tick length with a unit (``1us``), in the range a fabric
    accepts; in seconds."""
    value = duration(text)
    if not MIN_TICK_S <= value <= MAX_TICK_S:
        raise argparse.ArgumentTypeError(
            f"the tick must be between {MIN_TICK_S:g} and {MAX_TICK_S:g} s, got {text!r}"
        )
    return value


def speed_value(text: str) -> float:
    """argparse type: ``--speed``, simulated seconds per wall second (0 = flat out), in the
    range the engine accepts (``fabric_core.commands.MIN_SPEED`` to ``MAX_SPEED``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"speed must be a number, got {text!r}") from None
    problem = speed_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return 0.0 if value == 0 else value  # (not -0.0)


#: Where the embedded exporter listens unless told (``exporters.prometheus.options``'s
#: defaults, written out: importing the exporter takes half a second, too long for
#: ``fabtop --help``).
DEFAULT_METRICS = ("127.0.0.1", 9464)
DEFAULT_LINK_METRICS = "top:50"


def metrics_address(text: str) -> tuple[str, int]:
    """argparse type: ``--metrics`` as ``fabtop serve`` reads it: ``HOST:PORT``,
    ``[IPv6]:PORT`` or ``:PORT``; port 0 picks a free one."""
    from exporters.prometheus.options import OptionError, parse_metrics_address

    try:
        return parse_metrics_address(text)
    except OptionError as exc:
        raise argparse.ArgumentTypeError(exc.reason) from None


def link_metrics(text: str) -> str:
    """argparse type: ``--link-metrics`` (``all``, ``top:N`` or ``switch``), checked."""
    from exporters.prometheus.options import OptionError, parse_link_metrics

    try:
        return str(parse_link_metrics(text))
    except OptionError as exc:
        raise argparse.ArgumentTypeError(exc.reason) from None


def add_metrics_options(parser: argparse._ActionsContainer, prefix: str = "") -> None:
    """``--metrics``, ``--no-metrics`` and ``--link-metrics``: the exporter's options, the
    same for the console and ``fabtop serve`` (bad values: a usage error)."""
    parser.add_argument(
        "--metrics",
        type=metrics_address,
        default=DEFAULT_METRICS,
        metavar="HOST:PORT",
        help=f"{prefix}Prometheus exporter address, [IPv6]:PORT for IPv6, port 0 for any "
        "free one (default {}:{})".format(*DEFAULT_METRICS),
    )
    parser.add_argument("--no-metrics", action="store_true", help=f"{prefix}no exporter")
    parser.add_argument(
        "--link-metrics",
        type=link_metrics,
        default=DEFAULT_LINK_METRICS,
        metavar="MODE",
        help=f"{prefix}the exporter's per-link series: all, top:N (the N hottest links, plus "
        f"links down or with errors) or switch (default {DEFAULT_LINK_METRICS})",
    )


#: Options whose value may start with "-" (a negative number a user typed by mistake):
#: ``--duration -1ms`` is joined into ``--duration=-1ms`` before parsing, so the user
#: hears "must be positive" instead of argparse's "expected one argument".
VALUE_OPTIONS = frozenset(
    {
        "--duration",
        "--dt",
        "--timeout",
        "--max-tick",
        "--speed",
        "--seed",
        "--scale",
        "--size",
        "--rounds",
    }
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
        if 0 < times < 1:  # (the tick never goes below the scenario's: it was fixed, unsaid)
            raise argparse.ArgumentTypeError(
                f"max tick must be a multiple of at least 1 (1x or 0 keep the tick fixed), "
                f"got {text!r}"
            )
        return MaxTick(times=times)
    try:
        value = parse_duration(t, allow_zero=True)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"max tick must be a duration (100us) or a multiple of the tick (4x), got {text!r}"
        ) from None
    if value != 0 and re.fullmatch(r"[-+]?[0-9.eE+-]+", t):  # (as --duration: 5 is 5 s)
        raise argparse.ArgumentTypeError(
            f"max tick {text!r} needs a unit (ns, us, ms, s), e.g. {t}us, or an x for a "
            f"multiple of the tick, e.g. {t}x"
        )
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
    parser.add_argument(
        "--seed", type=seed_number, help="override the scenario's random seed (0 or more)"
    )
    parser.add_argument(
        "--dt",
        type=tick_length,
        metavar="DURATION",
        help="override the scenario's tick length, with a unit (e.g. 1us)",
    )


def load_from_args(
    args: argparse.Namespace, scenario: str | None = None, *, warn: bool = True
) -> Scenario | None:
    """The scenario the options name, or None after printing the error to stderr; with
    ``warn``, its durations without a unit are warned of (``warn_of_units``)."""
    try:
        scn = load_scenario(
            scenario or args.scenario, profile=args.profile, seed=args.seed, dt=args.dt
        )
    except ScenarioError as exc:
        print(f"fabtop: {exc}", file=sys.stderr)
        return None
    if warn:
        warn_of_units(scn)
    return scn


def warn_of_units(scn: Scenario) -> None:
    """Say on stderr, before anything runs (even with --quiet: every figure may hang on
    it), each duration the scenario file writes without a unit (``unit_warnings``)."""
    for warning in unit_warnings(scn):
        print(f"fabtop: warning: {warning}", file=sys.stderr)


def unit_warnings(scn: Scenario) -> list[str]:
    """Each duration the scenario file writes without a unit, read as seconds, with the
    file's name: what ``warn_of_units`` says on stderr, and what the console shows on its
    screen as it opens, since its operator would see stderr only after quitting. (The
    flows the fabric-wide cap refuses are said in the event log as they are refused.)"""
    return [f"{scn.source}: {note}" for note in scn.unit_notes]


def build_fabric(
    scn: Scenario, solver: Solver = "compiled", planes: PlaneOptions | None = None
) -> Fabric | PlanedFabric | None:
    """A fabric for the scenario (one engine per plane with ``planes``), or None after
    printing the error to stderr."""
    if planes is not None:
        problem = plane_cut_problem(scn.topology)
        if problem is not None:  # (said before the Ray actors are said to start)
            print(f"fabtop: {scn.source}: one engine per plane: {problem}", file=sys.stderr)
            return None
        print(
            f"fabtop: starting {scn.name}'s planes, one Ray actor each (batches of "
            f"{planes.batch_ticks} ticks)",
            file=sys.stderr,
        )
    try:
        return make_fabric(scn, solver, planes)
    except (ScenarioError, ImportError, RuntimeError) as exc:
        print(f"fabtop: {exc}", file=sys.stderr)
        return None


def plane_batch(text: str) -> int:
    """argparse type: ticks per batch of the planes, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of ticks, got {text!r}"
        ) from None
    if not 1 <= value <= MAX_PLANE_BATCH:
        raise argparse.ArgumentTypeError(
            f"the batch must be between 1 and {MAX_PLANE_BATCH} ticks, got {value}"
        )
    return value


def add_planes_options(parser: argparse._ActionsContainer, *, prefix: str = "") -> None:
    """``--planes-distributed`` and ``--plane-batch``."""
    parser.add_argument(
        "--planes-distributed",
        action="store_true",
        help=f"{prefix}run a multi-plane fabric one engine per plane, each a Ray actor on the "
        "cluster at RAY_ADDRESS, or on a local cluster started for it (needs the cluster "
        "extra: pip install -e '.[cluster]'; docs/OPERATIONS.md)",
    )
    parser.add_argument(
        "--plane-batch",
        type=plane_batch,
        default=None,  # (given without --planes-distributed: a usage error, see planes_problem)
        metavar="TICKS",
        help=f"{prefix}with --planes-distributed: ticks the planes run per round trip; a "
        "workload hears of its completions at a batch's end (default "
        f"{DEFAULT_PLANE_BATCH})",
    )


def planes_problem(args: argparse.Namespace) -> str | None:
    """Why the plane options cannot be taken as given (None: they can): ``--plane-batch``
    alone would be ignored."""
    if getattr(args, "plane_batch", None) is not None and not args.planes_distributed:
        return "--plane-batch needs --planes-distributed (it sets the batch of the planes' engines)"
    return None


def planes_from_args(args: argparse.Namespace) -> PlaneOptions | None:
    """The plane options the command line asked for (None: one process)."""
    if not getattr(args, "planes_distributed", False):
        return None
    batch = args.plane_batch
    return PlaneOptions(batch_ticks=DEFAULT_PLANE_BATCH if batch is None else batch)


def whole_ticks_note(duration_s: float, dt_s: float) -> str | None:
    """What a ``--duration`` that is not whole ticks runs instead (None where it is)."""
    ticks = ticks_for(duration_s, dt_s)
    if math.isclose(ticks * dt_s, duration_s, rel_tol=1e-9):
        return None
    return (
        f"--duration {format_duration(duration_s)} runs as {count_of(ticks, 'tick')} of "
        f"{format_duration(dt_s)}, {format_duration(ticks * dt_s)} (a run is whole ticks)"
    )


def count_of(n: int, noun: str) -> str:
    """``1 tick``, ``2,000 ticks``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def metrics_bind_error(exc: OSError | ValueError, without: str, *, who_hint: bool) -> CliError:
    """The error for a ``--metrics`` address the exporter cannot serve on (the console's
    and ``serve``'s): an ``OSError``'s strerror is the server's whole message, address
    included ("[Errno 98]" left out), then what to do; ``without`` says how to run
    without the exporter, and ``who_hint`` adds who may hold a port in use."""
    if isinstance(exc, ValueError):
        return CliError(str(exc))
    taken = " (by another fabtop?)" if who_hint and exc.errno == errno.EADDRINUSE else ""
    return CliError(
        f"{exc.strerror or exc}{taken}; choose another address with --metrics HOST:PORT"
        f" (port 0: any free one) or {without} with --no-metrics"
    )
