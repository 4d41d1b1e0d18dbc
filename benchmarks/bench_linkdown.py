"""What a link-down costs to watch: wall time per simulated second before and after it.

    python benchmarks/bench_linkdown.py [--profiles native-400g,roce-400g] [--until 200ms]
                                        [--link 'leaf00->spine00'] [--dt 8us]

For each profile the bundled default scenario runs at the console's longest tick (4x
its own, 8 µs: ``--max-tick``'s default) to 10 ms, then the link goes down. Printed
every ``--every`` of simulated time after that: flows in flight, ms per tick and wall
seconds per simulated second over the stretch; at the end the cost per simulated
second before the fault and after it, and their ratio, measured in the same process
(the machine is shared: a ratio of runs made minutes apart would mean little).

What it shows: on the credit fabric a link-down is rerouted locally in microseconds
and costs nothing more to run; on RoCE, until BFD declares the link down (0.9 s) and
ECMP reconverges (0.1 s more), switches forward into the dead port, the flows hashed
onto it resend every tick and the open-loop probes keep adding flows behind it, so
each tick carries more entries than the last. ``--until 1.1s`` runs it to the end of
the reconvergence (many minutes on RoCE). Runs on one core. Not a test: it prints
figures for the README.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_core.commands import InjectFault, SetTick
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.units import format_duration, parse_duration

WARM_S = 10e-3  # the default scenario's traffic is in its steady state by then


def measure(profile: str, args: argparse.Namespace) -> tuple[float, float]:
    """Wall seconds per simulated second (before the fault, after it) on ``profile``."""
    fabric = Fabric.from_scenario(load_scenario("default", profile=profile))
    fabric.apply(SetTick(dt_s=args.dt))
    fabric.run_ticks(200)  # kernels loaded, flows under way: not counted
    start_sim, start_wall = fabric.sim_time_s, time.perf_counter()
    while fabric.sim_time_s < WARM_S:
        fabric.run_ticks(50)
    before = (time.perf_counter() - start_wall) / (fabric.sim_time_s - start_sim)
    fabric.apply(InjectFault(kind="link_down", target=args.link))
    fault_s, fault_wall = fabric.sim_time_s, time.perf_counter()
    mark_s, mark_wall, mark_tick = fault_s, fault_wall, fabric.tick
    print(f"{profile}: {before:.1f} wall s per simulated s before the fault")
    while fabric.sim_time_s < fault_s + args.until:
        fabric.run_ticks(50)
        if fabric.sim_time_s - mark_s >= args.every - 1e-12:
            now = time.perf_counter()
            per_tick = (now - mark_wall) / (fabric.tick - mark_tick)
            rate = (now - mark_wall) / (fabric.sim_time_s - mark_s)
            print(
                f"  +{format_duration(fabric.sim_time_s - fault_s):>9}  "
                f"{fabric.flows.n_parents:6,d} flows in flight  {per_tick * 1e3:6.2f} ms/tick  "
                f"{rate:7.1f} wall s per simulated s",
                flush=True,
            )
            mark_s, mark_wall, mark_tick = fabric.sim_time_s, now, fabric.tick
    after = (time.perf_counter() - fault_wall) / (fabric.sim_time_s - fault_s)
    return before, after


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", default="native-400g,roce-400g")
    ap.add_argument("--link", default="leaf00->spine00", help="the link that goes down")
    ap.add_argument("--until", type=parse_duration, default=0.2, help="simulated time after it")
    ap.add_argument("--every", type=parse_duration, default=0.02, help="a line per this much")
    ap.add_argument("--dt", type=parse_duration, default=8e-6, help="the tick (console: 8us)")
    args = ap.parse_args()
    rows = [(p, *measure(p, args)) for p in args.profiles.split(",")]
    print()
    print(
        f"{'profile':14s} {'before':>10s} {'after':>10s} {'ratio':>6s}   (wall s per simulated s)"
    )
    for p, before, after in rows:
        print(f"{p:14s} {before:10.1f} {after:10.1f} {after / before:6.2f}")
    print(
        f"(after: the {format_duration(args.until)} following the link-down; "
        f"tick {format_duration(args.dt)})"
    )


if __name__ == "__main__":
    main()
