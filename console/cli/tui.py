"""``fabtop`` with no subcommand: the embedded emulator, the Prometheus exporter and the console."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from console.cli._common import (
    DEFAULT_LINK_METRICS,
    add_max_tick_option,
    add_metrics_options,
    add_planes_options,
    build_fabric,
    load_from_args,
    metrics_bind_error,
    planes_from_args,
    seed_number,
    speed_value,
    tick_length,
    unit_warnings,
)
from console.fabrics import close_fabric
from exporters.mqtt.options import CliError
from fabric_core.net.profiles import PROFILES

if TYPE_CHECKING:
    from console.source import FabricSource
    from fabric_core.runtime.engine import Engine, EngineHealth
    from fabric_core.runtime.scenario import Scenario
    from fabric_core.runtime.snapshot import Snapshot

#: The console's default target speed (simulated seconds per wall second, ``--speed``).
#: The one place to change it: the option's default and its help text read it. With the
#: compiled tick the default scenario keeps up with 1.6-1.7e-2 at its 4x tick (8 µs) on
#: this project's 2-core machine, and the compare view with 1e-2 on each side (RoCE's the
#: slower): 1e-2 leaves room for the console and some other load (README, Performance).
DEFAULT_SPEED = 1e-2


def register(sub: Any) -> None:
    """Add the console's options to the main parser and make it the no-subcommand job.

    argparse gives a subparsers action no handle on its parser except ``container``
    (the group it was added to, which shares the parser's options and defaults), so
    the options go there: they are parsed by the main parser, before any subcommand.
    """
    main: argparse._ActionsContainer = getattr(sub, "console_group", sub.container)
    main.add_argument(
        "--scenario",
        default="default",
        metavar="NAME|PATH",
        help="console: a bundled scenario or a TOML file (default: default)",
    )
    main.add_argument("--profile", choices=sorted(PROFILES), help="console: override the profile")
    main.add_argument(
        "--seed", type=seed_number, help="console: override the scenario's seed (0 or more)"
    )
    main.add_argument("--dt", type=tick_length, help=argparse.SUPPRESS)
    main.add_argument(
        "--speed",
        type=speed_value,
        default=DEFAULT_SPEED,
        help=f"console: simulated seconds per wall second, 0 = flat out (default {DEFAULT_SPEED:g})",
    )
    add_max_tick_option(main, prefix="console: ")
    add_metrics_options(main, prefix="console: ")
    main.add_argument(
        "--read-only", action="store_true", help="console: watch only (no faults, pause, speed)"
    )
    main.add_argument(
        "--compare",
        metavar="PROFILE",
        choices=sorted(PROFILES),
        help="console: also run the scenario on PROFILE for the compare view (c)",
    )
    main.add_argument(
        "--in-process",
        action="store_true",
        help="console: run the engine(s) in the console's own process, sharing one core "
        "with the UI and each other (slower; by default each fabric runs in a process of "
        "its own)",
    )
    add_planes_options(main, prefix="console: ")
    main.set_defaults(default_func=run_console)


def start_exporter(
    get_snapshot: Any,
    host: str,
    port: int,
    health: Any = None,
    link_metrics: str = DEFAULT_LINK_METRICS,
) -> tuple[Any, str | None]:
    """The exporter (server, its address), or (None, None) after saying on stderr that
    this build has none.

    Raises:
        CliError: it cannot serve on ``host:port`` (e.g. the port is in use).
    """
    try:
        from exporters.prometheus import start_metrics_server
    except ImportError as exc:
        print(
            f"fabtop: Prometheus exporter unavailable ({exc}); running without it", file=sys.stderr
        )
        return None, None
    try:
        server = start_metrics_server(
            get_snapshot, host=host, port=port, link_metrics=link_metrics, health=health
        )
    except (OSError, ValueError) as exc:
        raise metrics_bind_error(
            exc, "run the console without the exporter", who_hint=True
        ) from None
    return server, str(server.address)


class ConsoleExporter:
    """The console's exporter: bound before the engines are built, so that a port in use
    is refused at once (not after a large fabric was built, nor behind the console's
    screen, where the message went unseen until the operator quit), and pointed at the
    engines once they run (``feed``): until then it has no snapshot and the pacing of an
    engine starting."""

    def __init__(self) -> None:
        self.server: Any = None  # (``bind`` starts it)
        #: where it serves, as the header shows it (None: no exporter)
        self.address: str | None = None
        self._latest: Callable[[], Snapshot | None] = lambda: None
        self._health: Callable[[], EngineHealth] | None = None

    @classmethod
    def bind(cls, args: argparse.Namespace) -> ConsoleExporter:
        """The exporter ``--metrics`` asks for (none with ``--no-metrics``).

        Raises:
            CliError: it cannot serve there (see ``start_exporter``).
        """
        exporter = cls()
        if not args.no_metrics:
            host, port = args.metrics
            exporter.server, exporter.address = start_exporter(
                exporter.latest, host, port, health=exporter.health, link_metrics=args.link_metrics
            )
        return exporter

    def feed(
        self, latest: Callable[[], Snapshot | None], health: Callable[[], EngineHealth]
    ) -> None:
        """Export ``latest()``'s snapshot and ``health()``'s pacing from now on."""
        self._latest, self._health = latest, health

    def latest(self) -> Snapshot | None:
        """The snapshot to export (None before the engines run)."""
        return self._latest()

    def health(self) -> EngineHealth:
        """The engine's pacing figures (an engine starting's before the engines run)."""
        if self._health is None:
            from console.process_source import STARTING

            return STARTING
        return self._health()

    def close(self) -> None:
        """Stop serving (nothing to do without an exporter)."""
        if self.server is not None:
            self.server.close()
            self.server = None


def run_console(args: argparse.Namespace) -> int:
    """Check the options, start the exporter, build the engine(s), run the app until the
    operator quits."""
    scn = load_from_args(args, args.scenario)
    if scn is None:
        return 2
    scenarios = [(scn, scn.name)]
    if args.compare == scn.profile.name:  # (the compare view's two sides would be one)
        print(
            f"fabtop: --compare {args.compare}: the scenario already runs on {args.compare}; "
            "name another profile (e.g. "
            f"{'roce-400g' if args.compare != 'roce-400g' else 'native-400g'})",
            file=sys.stderr,
        )
        return 2
    if args.compare:
        other_args = argparse.Namespace(**{**vars(args), "profile": args.compare})
        other_scn = load_from_args(other_args, args.scenario, warn=False)  # (said once)
        if other_scn is None:
            return 2
        scenarios.append((other_scn, args.compare))
    # a console asked for an exporter it cannot have does not start: running without
    # it would leave whoever scrapes that address reading another process, or nothing
    try:
        exporter = ConsoleExporter.bind(args)
    except CliError as exc:
        print(f"fabtop: error: {exc}", file=sys.stderr)
        return 2
    try:
        if args.in_process:
            return _console_in_process(args, scenarios, exporter)
        return _console_in_processes(args, scenarios, exporter)
    finally:
        exporter.close()


def _console_in_processes(
    args: argparse.Namespace, scenarios: list[tuple[Scenario, str]], exporter: ConsoleExporter
) -> int:
    """The default: each fabric's engine in a process of its own."""
    from console.process_source import EngineSpec, start_engines

    specs = [
        EngineSpec(
            scenario=s,
            description=f"engine process {label}"
            + (", one Ray actor per plane" if args.planes_distributed else ""),
            speed=args.speed,
            max_tick_s=args.max_tick.resolve(s.dt_s),
            planes=planes_from_args(args),
        )
        for s, label in scenarios
    ]
    # each fabric steps on its own core, in lockstep; the UI loads while they start
    group = start_engines(specs, meanwhile=lambda: importlib.import_module("console.app"))
    if group is None:
        return 2
    try:
        src, *others = group.sources
        compare = (src, others[0]) if others else None
        # the exporter reads on its own: fresh even while the view is frozen
        exporter.feed(src.latest_fresh, lambda: src.health)
        return _run_app(args, src, compare, exporter.address, scenarios[0][0])
    finally:
        group.close()


def _console_in_process(
    args: argparse.Namespace, scenarios: list[tuple[Scenario, str]], exporter: ConsoleExporter
) -> int:
    """``--in-process``: the engines as asyncio tasks of the console's process."""
    from fabric_core.runtime.engine import Engine

    engines: list[Engine] = []
    for scn, _ in scenarios:
        fabric = build_fabric(scn, planes=planes_from_args(args))
        if fabric is None:
            for e in engines:
                close_fabric(e.fabric)
            return 2
        engines.append(
            Engine(fabric, speed=args.speed, max_tick_s=args.max_tick.resolve(fabric.dt_s))
        )
    try:
        return _run_engines_in_process(args, scenarios, engines, exporter)
    finally:
        for e in engines:
            close_fabric(e.fabric)


def _run_engines_in_process(
    args: argparse.Namespace,
    scenarios: list[tuple[Scenario, str]],
    engines: list[Engine],
    exporter: ConsoleExporter,
) -> int:
    from console.source import EngineSource
    from fabric_core.runtime.engine import Engine

    engine = engines[0]
    source = EngineSource(engine, description=f"embedded {scenarios[0][1]}")
    compare = None
    if len(engines) > 1:
        Engine.lockstep(*engines)  # both sides at the same simulated time
        compare = (source, EngineSource(engines[1], f"embedded {scenarios[1][1]}"))
    exporter.feed(lambda: engine.bus.latest, lambda: engine.health)
    return _run_app(args, source, compare, exporter.address, scenarios[0][0])


def _run_app(
    args: argparse.Namespace,
    source: FabricSource,
    compare: tuple[FabricSource, FabricSource] | None,
    metrics_address: str | None,
    scn: Scenario,
) -> int:
    """Run the app until it quits (the header shows ``metrics_address``: None, off; it
    shows the warnings of ``scn``, the main view's scenario, as it opens)."""
    from console.app import FabtopApp

    app = FabtopApp(
        source,
        read_only=args.read_only,
        metrics_address=metrics_address,
        compare_sources=compare,
        warnings=unit_warnings(scn),
    )
    app.run()
    # Textual prints the traceback of an exception that ended the app and sets 1 here:
    # a crash must not look like the operator quitting
    return app.return_code or 0
