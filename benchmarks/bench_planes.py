"""One engine per plane: the planes in one process against each plane a Ray actor.

    python benchmarks/bench_planes.py [--leaves 64] [--gpus-per-leaf 32] [--ticks 400]
                                      [--warmup 300] [--batches 1,2,4,8,16,32,64]
                                      [--repeat 3] [--address ADDR] [--json FILE]

The fabric is the bundled ``planes-2`` (two planes, bulk, a MoE all-to-all and RPC
probes) with a bigger ``[topology]``: ``--leaves`` leaves and as many spines a plane,
``--gpus-per-leaf`` GPUs a leaf (by default 2,048 GPUs: a size where the planes'
stepping outweighs the coordinator's work and a round trip). It runs as
``PlanedFabric`` twice in this process, once with both planes in it
(``InProcessPool``, numba's threads as the engine has them) and once with each plane
a Ray actor of one thread (``cluster.ray_planes.RayPool``, on ``--address`` or
``RAY_ADDRESS``, else a local cluster of this machine's cores). Both go through the
same warm-up and then, for each batch size in turn, ``--ticks`` ticks ``--repeat``
times (the best run counts: the machine is shared); both runs go through the very
same simulated states, taking turns (a run of one, a run of the other) so that the
machine's other load falls on both alike, and their reports are checked equal at the end.

Printed per batch size: wall seconds per simulated ms of each run, their ratio (over 1:
distributed is faster), the Ray run's round trips per simulated ms and its overhead per
batch (the wall of a batch's ``advance`` call on the actors less the busier plane's own
time in it). Then the per-batch cost of a round trip alone (``advance`` of 0 ticks and
no parts on every actor, the median of many), the per-batch cost fitted over the batch
sizes (wall per tick = a + b / batch: b), the coordinator's share of the in-process
tick, and the batch that balances (the smallest whose Ray run is within 10% of its
fastest; a workload hears of a completion up to a batch late). Not a test: it prints
figures for docs/OPERATIONS.md.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster.ray_planes import RayPool, ray_pool_factory
from fabric_core.planes.coordinator import PlanedFabric
from fabric_core.planes.plane import PlaneParts, PlaneSpec
from fabric_core.planes.pool import InProcessPool, PlanePool
from fabric_core.reports.run import summarise
from fabric_core.runtime.scenario import Scenario, bundled_dir, parse_scenario
from fabric_core.tick.kernels._jit import MOST_THREADS

#: a batch "balances" when its Ray run is within this of the fastest batch's
BALANCE = 1.10
#: round trips timed for the overhead of an empty one
EMPTY_CALLS = 200


def big_planes(leaves: int, gpus_per_leaf: int) -> Scenario:
    """``planes-2`` with ``leaves`` leaves and spines a plane, ``gpus_per_leaf`` GPUs a leaf."""
    table = tomllib.loads((bundled_dir() / "planes-2.toml").read_text())
    table = copy.deepcopy(table)
    table["topology"].update(leaves=leaves, spines=leaves, gpus_per_leaf=gpus_per_leaf)
    table["name"] = f"planes-2-{leaves * gpus_per_leaf}"
    return parse_scenario(table, "bench_planes")


class Timed:
    """A pool whose ``advance`` calls are timed (wall of each, and how many)."""

    def __init__(self, pool: PlanePool) -> None:
        self.pool = pool
        self.placement = pool.placement
        self.advance_s = 0.0
        self.batches = 0

    def call(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        t0 = time.perf_counter()
        out = self.pool.call(method, args)
        if method == "advance":
            self.advance_s += time.perf_counter() - t0
            self.batches += 1
        return out

    def call_one(self, plane: int, method: str, *args: Any) -> Any:
        return self.pool.call_one(plane, method, *args)

    def close(self) -> None:
        self.pool.close()

    def busy_s(self) -> float:
        """The busier plane's own time in its methods so far (in-process: all of it)."""
        if isinstance(self.pool, RayPool):
            return max(self.pool.busy_s())
        return self.advance_s


def timed(
    make: Callable[[Sequence[PlaneSpec]], PlanePool],
) -> Callable[[Sequence[PlaneSpec]], Timed]:
    return lambda specs: Timed(make(specs))


def empty_round_trip(pool: PlanePool, planes: int) -> dict[str, float]:
    """An ``advance`` of 0 ticks and no parts on every plane: median and 90th percentile, ms."""
    args = [(0, PlaneParts.empty())] * planes
    for _ in range(10):
        pool.call("advance", args)
    walls = []
    for _ in range(EMPTY_CALLS):
        t0 = time.perf_counter()
        pool.call("advance", args)
        walls.append(time.perf_counter() - t0)
    return {
        "median_ms": statistics.median(walls) * 1e3,
        "p90_ms": float(np.quantile(walls, 0.9)) * 1e3,
    }


class Arm:
    """One of the two runs: a ``PlanedFabric`` on a timed pool, and its best runs."""

    def __init__(self, scn: Scenario, make: Callable[[Sequence[PlaneSpec]], PlanePool]) -> None:
        t0 = time.perf_counter()
        self.fabric = PlanedFabric(scn, timed(make))
        self.start_s = time.perf_counter() - t0
        pool = self.fabric.pool
        assert isinstance(pool, Timed)
        self.pool = pool
        self.best: dict[int, dict[str, float]] = {}

    def measure(self, batch: int, ticks: int) -> None:
        """``ticks`` ticks in batches of ``batch``; kept if the best so far for the batch."""
        fabric, pool = self.fabric, self.pool
        fabric.batch_ticks = batch
        sim0, a0, n0, busy0 = fabric.sim_time_s, pool.advance_s, pool.batches, pool.busy_s()
        w0 = time.perf_counter()
        fabric.run_ticks(ticks)
        wall = time.perf_counter() - w0
        r = {
            "batch": batch,
            "wall_s": wall,
            "sim_ms": (fabric.sim_time_s - sim0) * 1e3,
            "advance_s": pool.advance_s - a0,
            "planes_s": pool.busy_s() - busy0,
            "batches": pool.batches - n0,
        }
        r["wall_s_per_sim_ms"] = r["wall_s"] / r["sim_ms"]
        r["ms_per_tick"] = r["wall_s"] / ticks * 1e3
        r["coordinator_ms_per_tick"] = (r["wall_s"] - r["advance_s"]) / ticks * 1e3
        r["overhead_ms_per_batch"] = (r["advance_s"] - r["planes_s"]) / r["batches"] * 1e3
        if batch not in self.best or wall < self.best[batch]["wall_s"]:
            self.best[batch] = r

    def finish(self) -> dict[str, Any]:
        try:
            return {
                "placement": self.pool.placement,
                "start_s": self.start_s,
                "rows": [self.best[b] for b in self.best],
                "empty_round_trip": empty_round_trip(self.pool.pool, self.fabric.planes),
                "report": summarise(self.fabric.snapshot()),
                "gpus": int(self.fabric.topo.gpus.size),
            }
        finally:
            self.fabric.close()


def run_both(
    scn: Scenario,
    address: str | None,
    batches: Sequence[int],
    ticks: int,
    warmup: int,
    repeat: int,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both runs through the same warm-up and batches, taking turns (each batch size: a
    run of each, ``repeat`` times), so the machine's other load falls on both alike and
    both go through the same simulated states."""
    here, ray = Arm(scn, InProcessPool), Arm(scn, ray_pool_factory(address))
    try:
        for arm in (here, ray):
            arm.fabric.run_ticks(warmup)
        for b in batches:
            for _ in range(repeat):
                here.measure(b, ticks)
                ray.measure(b, ticks)
    except BaseException:
        here.fabric.close()
        ray.fabric.close()
        raise
    return here.finish(), ray.finish()


def fit_per_batch(rows: Sequence[dict[str, Any]]) -> tuple[float, float]:
    """Wall per tick = a + b / batch, least squares: (a, b) in ms."""
    x = np.array([1.0 / r["batch"] for r in rows])
    y = np.array([r["ms_per_tick"] for r in rows])
    b, a = np.polyfit(x, y, 1)
    return float(a), float(b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--leaves", type=int, default=64)
    ap.add_argument("--gpus-per-leaf", type=int, default=32)
    ap.add_argument("--ticks", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--batches", default="1,2,4,8,16,32,64")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--address", default=None, help="a Ray cluster (default: RAY_ADDRESS, else local)"
    )
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    scn = big_planes(args.leaves, args.gpus_per_leaf)

    here, ray = run_both(scn, args.address, batches, args.ticks, args.warmup, args.repeat)
    same = here["report"] == ray["report"]
    dt_us = scn.dt_s * 1e6
    print(
        f"{scn.name}: {here['gpus']} GPUs on 2 planes, dt {dt_us:g} us, {args.ticks} ticks a "
        f"run after {args.warmup}, best of {args.repeat}; in-process with {MOST_THREADS} numba "
        f"threads, Ray with 2 actors of 1 thread (actors up in {ray['start_s']:.1f} s)"
    )
    print(
        f"{'batch':>5} {'delay us':>8} {'in-proc s/sim-ms':>16} {'ray s/sim-ms':>12} "
        f"{'ratio':>6} {'trips/sim-ms':>12} {'overhead ms/batch':>17} {'coord ms/tick':>13}"
    )
    table = []
    for h, r in zip(here["rows"], ray["rows"], strict=True):
        ratio = h["wall_s_per_sim_ms"] / r["wall_s_per_sim_ms"]
        table.append({"batch": h["batch"], "in_process": h, "ray": r, "ratio": ratio})
        print(
            f"{h['batch']:>5} {h['batch'] * dt_us:>8g} {h['wall_s_per_sim_ms']:>16.3f} "
            f"{r['wall_s_per_sim_ms']:>12.3f} {ratio:>6.2f} "
            f"{r['batches'] / r['sim_ms']:>12.0f} {r['overhead_ms_per_batch']:>17.2f} "
            f"{r['coordinator_ms_per_tick']:>13.3f}",
            flush=True,
        )
    a_here, b_here = fit_per_batch(here["rows"])
    a_ray, b_ray = fit_per_batch(ray["rows"])
    fastest = min(r["ms_per_tick"] for r in ray["rows"])
    balance = next(r["batch"] for r in ray["rows"] if r["ms_per_tick"] <= BALANCE * fastest)
    coord = here["rows"][-1]["coordinator_ms_per_tick"] / here["rows"][-1]["ms_per_tick"]
    er, eh = ray["empty_round_trip"], here["empty_round_trip"]
    print(
        f"empty round trip (advance of 0 ticks on both planes): Ray {er['median_ms']:.2f} ms "
        f"median, {er['p90_ms']:.2f} ms p90; in-process {eh['median_ms'] * 1e3:.0f} us"
    )
    print(
        f"fitted wall per tick = a + b/batch: Ray a {a_ray:.3f} ms, b {b_ray:.2f} ms a batch; "
        f"in-process a {a_here:.3f} ms, b {b_here:.2f} ms a batch"
    )
    print(
        f"coordinator's share of the in-process tick at batch {here['rows'][-1]['batch']}: "
        f"{coord:.0%}; batch that balances (Ray within {BALANCE - 1:.0%} of its fastest): "
        f"{balance} ticks ({balance * dt_us:g} us of reaction delay)"
    )
    print(f"reports equal: {'yes' if same else 'NO'}")
    if args.json:
        out = {
            "scenario": scn.name,
            "gpus": here["gpus"],
            "ticks": args.ticks,
            "warmup": args.warmup,
            "repeat": args.repeat,
            "numba_threads_in_process": MOST_THREADS,
            "rows": table,
            "empty_round_trip_ms": {"ray": er, "in_process": eh},
            "fit_ms": {"ray": [a_ray, b_ray], "in_process": [a_here, b_here]},
            "balanced_batch": balance,
            "reports_equal": same,
        }
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
