"""What each workload of a scenario costs a tick: the scenario with all its workloads, then
with each one stopped from the start, in one process.

    python benchmarks/bench_workloads.py [--scenario NAME] [--profile P] [--ticks N]
                                         [--warmup N] [--repeat N] [--json FILE]

Each variant builds the scenario afresh (same seed), stops the workload left out before the
first tick (``Workload.stop``: it starts nothing), runs ``--warmup`` ticks, then times
``--repeat`` runs of ``--ticks`` ticks (``Fabric.run_ticks``, quiet ticks at once as the
engine runs them) and keeps the best (the machine is shared: the best run is the least
disturbed one). Printed: ms a tick of each variant and what it saves against all
workloads running: about what the workload left out costs, its flows' starts, completions
and share of the index and the solve included. Not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario


def timed(
    scenario: str, profile: str | None, stopped: str | None, ticks: int, warmup: int, repeat: int
) -> float:
    """Best ms a tick of ``scenario`` with the workload ``stopped`` (None: none) stopped."""
    fabric = Fabric.from_scenario(load_scenario(scenario, profile=profile))
    for wl in fabric.workloads:
        if wl.name == stopped:
            wl.stop()
    fabric.run_ticks(warmup)
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fabric.run_ticks(ticks)
        best = min(best, (time.perf_counter() - started) / ticks * 1e3)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="default", help="a bundled scenario or a file")
    ap.add_argument("--profile", help="a fabric profile in place of the scenario's own")
    ap.add_argument("--ticks", type=int, default=2000, help="ticks a timed run")
    ap.add_argument("--warmup", type=int, default=3000, help="ticks before the first run")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs; the best counts")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    names = [
        wl.name
        for wl in Fabric.from_scenario(load_scenario(args.scenario, profile=args.profile)).workloads
    ]
    rows: list[dict[str, Any]] = []
    print(f"{'stopped':<24} {'ms/tick':>8} {'saves ms':>9} {'share':>6}", flush=True)
    every = 0.0
    for stopped in (None, *names):
        ms = timed(args.scenario, args.profile, stopped, args.ticks, args.warmup, args.repeat)
        every = ms if stopped is None else every
        saves = every - ms
        rows.append({"stopped": stopped, "ms_per_tick": ms, "saves_ms": saves})
        print(
            f"{stopped or '(none)':<24} {ms:>8.3f} {saves:>9.3f} {saves / every:>6.0%}",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps({"scenario": args.scenario, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
