"""One engine per plane: the planes in one process against each plane a Ray actor.

    python benchmarks/bench_planes.py [--leaves 64] [--gpus-per-leaf 32] [--ticks 400]
                                      [--warmup 300] [--batches 1,2,4,8,16,32,64]
                                      [--repeat 3] [--address ADDR] [--json FILE]

The fabric is the bundled ``planes-2`` (two planes, bulk, a MoE all-to-all and RPC
probes) with a bigger ``[topology]``: ``--leaves`` leaves and as many spines a plane,
``--gpus-per-leaf`` GPUs a leaf (by default 2,048 GPUs: a size where the planes'
stepping outweighs the coordinator's work and a round trip). For each batch size it runs
as ``PlanedFabric`` twice in this process, from the start: once with both planes in it
(``InProcessPool``, numba's threads as the engine has them) and once with each plane a
Ray actor of one thread (``cluster.ray_planes.RayPool``, on ``--address`` or
``RAY_ADDRESS``, else one local cluster of this machine's cores for the whole
benchmark). Both go through the same warm-up, then ``--repeat`` runs of ``--ticks``
ticks each, taking turns (a run of one, a run of the other) so that the machine's other
load falls on both alike; their i-th runs go through the very same simulated states, and
their reports are checked equal.

Printed per batch size: wall seconds per simulated ms of each run (the best run), the
median ratio of paired runs (over 1: distributed is faster), the Ray run's round trips
per simulated ms, what Ray costs a batch (the wall of the batch's ``advance`` call on the
actors less the slower plane's own time in it: sending the parts, the results back,
scheduling), what the faster plane waits for the slower a batch (the planes get
different messages: one of no more than an MTU goes over one plane) and the
coordinator's own time per tick (the workloads, the spray, the completions). Then the
round trip alone (``advance`` of 0 ticks and no parts on every actor, many times), the
coordinator's share of the in-process tick, and the batch that balances (the smallest
whose Ray run is within 10% of its fastest; a workload hears of a completion up to a
batch late). A longer batch also changes the run itself (closed-loop workloads start
their next message later), so the rows' wall times are not one fabric's alone; each
row's two runs are the same run. Not a test: it prints figures for docs/OPERATIONS.md.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster.ray_planes import RayPool, connect, disconnect, ray_pool_factory
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
        self.advance_cpu_s = 0.0
        self.batches = 0

    def call(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        t0, c0 = time.perf_counter(), time.process_time()
        out = self.pool.call(method, args)
        if method == "advance":
            self.advance_s += time.perf_counter() - t0
            self.advance_cpu_s += time.process_time() - c0
            self.batches += 1
        return out

    def call_one(self, plane: int, method: str, *args: Any) -> Any:
        return self.pool.call_one(plane, method, *args)

    def close(self) -> None:
        self.pool.close()

    def plane_s(self) -> tuple[float, float, float]:
        """The planes' own time in the ``advance`` calls since last asked: the sum over
        the calls of the slower plane's wall, the slower plane's sum of wall, and the
        CPU seconds of the plane that took the most (in-process: all of the calls'
        wall and CPU, the planes running one after the other)."""
        if not isinstance(self.pool, RayPool):
            return self.advance_s, self.advance_s, self.advance_cpu_s
        timings = self.pool.timings()
        wall = [[w for m, w, _ in t if m == "advance"] for t in timings]
        cpu = [sum(c for m, _, c in t if m == "advance") for t in timings]
        slower_each = float(np.max(np.array(wall), axis=0).sum()) if wall[0] else 0.0
        return slower_each, max(sum(t) for t in wall), max(cpu)


def timed(
    make: Callable[[Sequence[PlaneSpec]], PlanePool],
) -> Callable[[Sequence[PlaneSpec]], Timed]:
    return lambda specs: Timed(make(specs))


def empty_round_trip(pool: Timed, planes: int) -> dict[str, float]:
    """An ``advance`` of 0 ticks and no parts on every plane: the wall of a call (median
    and 90th percentile) and the busier plane's own time in it (mean), ms."""
    args = [(0, PlaneParts.empty())] * planes
    for _ in range(10):
        pool.pool.call("advance", args)
    pool.plane_s()
    walls = []
    for _ in range(EMPTY_CALLS):
        t0 = time.perf_counter()
        pool.pool.call("advance", args)
        walls.append(time.perf_counter() - t0)
    busy = pool.plane_s()[0] if isinstance(pool.pool, RayPool) else sum(walls)
    return {
        "median_ms": statistics.median(walls) * 1e3,
        "p90_ms": float(np.quantile(walls, 0.9)) * 1e3,
        "plane_ms": busy / EMPTY_CALLS * 1e3,
    }


class Arm:
    """One of the two runs of a batch size: a ``PlanedFabric`` on a timed pool."""

    def __init__(
        self, scn: Scenario, make: Callable[[Sequence[PlaneSpec]], PlanePool], batch: int
    ) -> None:
        t0 = time.perf_counter()
        self.fabric = PlanedFabric(scn, timed(make), batch_ticks=batch)
        self.start_s = time.perf_counter() - t0
        pool = self.fabric.pool
        assert isinstance(pool, Timed)
        self.pool = pool
        self.runs: list[dict[str, float]] = []

    def measure(self, ticks: int) -> None:
        """``ticks`` ticks, timed."""
        fabric, pool = self.fabric, self.pool
        sim0, a0, c0, n0 = fabric.sim_time_s, pool.advance_s, pool.advance_cpu_s, pool.batches
        pool.plane_s()
        w0, cpu0 = time.perf_counter(), time.process_time()
        fabric.run_ticks(ticks)
        wall, cpu = time.perf_counter() - w0, time.process_time() - cpu0
        slower_each, slower_sum, plane_cpu = pool.plane_s()
        if isinstance(pool.pool, InProcessPool):
            plane_cpu = pool.advance_cpu_s - c0
        r = {
            "wall_s": wall,
            "sim_ms": (fabric.sim_time_s - sim0) * 1e3,
            "advance_s": pool.advance_s - a0,
            "planes_s": slower_each,
            "imbalance_s": slower_each - slower_sum,
            # CPU: the coordinator's own (this process's outside the planes' calls), and
            # the planes' (in-process: both; Ray: the plane that took the most)
            "coordinator_cpu_s": cpu - (pool.advance_cpu_s - c0),
            "planes_cpu_s": plane_cpu,
            "batches": pool.batches - n0,
        }
        r["wall_s_per_sim_ms"] = r["wall_s"] / r["sim_ms"]
        r["ms_per_tick"] = r["wall_s"] / ticks * 1e3
        r["coordinator_ms_per_tick"] = (r["wall_s"] - r["advance_s"]) / ticks * 1e3
        r["overhead_ms_per_batch"] = (r["advance_s"] - r["planes_s"]) / r["batches"] * 1e3
        r["imbalance_ms_per_batch"] = r["imbalance_s"] / r["batches"] * 1e3
        self.runs.append(r)

    def best(self) -> dict[str, float]:
        return min(self.runs, key=lambda r: r["wall_s"])


def bench_batch(
    scn: Scenario, address: str | None, batch: int, ticks: int, warmup: int, repeat: int
) -> dict[str, Any]:
    """Both runs of a batch size from the start: the same warm-up, then ``repeat`` runs
    of ``ticks`` ticks each, taking turns, so that the machine's other load falls on both
    alike and their i-th runs go through the same simulated states."""
    here = Arm(scn, InProcessPool, batch)
    ray = Arm(scn, ray_pool_factory(address), batch)
    try:
        for arm in (here, ray):
            arm.fabric.run_ticks(warmup)
        for _ in range(repeat):
            here.measure(ticks)
            ray.measure(ticks)
        out = {
            "batch": batch,
            "in_process": here.best(),
            "ray": ray.best(),
            "ratio": statistics.median(
                h["wall_s"] / r["wall_s"] for h, r in zip(here.runs, ray.runs, strict=True)
            ),
            "ray_start_s": ray.start_s,
            "reports_equal": summarise(here.fabric.snapshot()) == summarise(ray.fabric.snapshot()),
            "gpus": int(here.fabric.topo.gpus.size),
        }
        if batch == 1:
            out["empty_round_trip"] = {
                "ray": empty_round_trip(ray.pool, ray.fabric.planes),
                "in_process": empty_round_trip(here.pool, here.fabric.planes),
            }
        return out
    finally:
        here.fabric.close()
        ray.fabric.close()


def idle_ratio(h: dict[str, float], r: dict[str, float], ticks: int) -> float:
    """In-process over Ray wall per tick on cores nothing else uses, from what each run
    spent in CPU: in-process, the coordinator's and both planes' (an upper bound: numba
    may spread a plane over both cores); Ray, the coordinator's, the plane's that took
    the most, and Ray's cost a batch as measured here (an upper bound: it includes the
    waits for a core on a busy machine)."""
    here = h["coordinator_cpu_s"] + h["planes_cpu_s"]
    ray = r["coordinator_cpu_s"] + r["planes_cpu_s"] + r["advance_s"] - r["planes_s"]
    return here / ray


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
    if 1 not in batches:
        batches.insert(0, 1)  # the round trip alone is timed there
    scn = big_planes(args.leaves, args.gpus_per_leaf)
    dt_us = scn.dt_s * 1e6
    load0 = os.getloadavg()[0]
    owns = connect(args.address, planes=2)  # one cluster for every batch size
    rows = []
    try:
        print(
            f"{scn.name}, dt {dt_us:g} us: per batch size, both runs from the start, "
            f"{args.warmup} ticks of warm-up, then {args.repeat} runs of {args.ticks} ticks "
            f"taking turns; in-process with {MOST_THREADS} numba threads, Ray with 2 actors "
            f"of 1 thread; load average {load0:.2f} on {os.cpu_count()} cores",
            flush=True,
        )
        print(
            f"{'batch':>5} {'delay us':>8} {'in-proc s/sim-ms':>16} {'ray s/sim-ms':>12} "
            f"{'ratio':>6} {'trips/sim-ms':>12} {'ray ms/batch':>12} {'wait ms/batch':>13} "
            f"{'coord ms/tick':>13} {'cpu: coord':>10} {'planes':>6} {'ray plane':>9} "
            f"{'idle ratio':>10} {'same':>4}"
        )
        for b in batches:
            row = bench_batch(scn, args.address, b, args.ticks, args.warmup, args.repeat)
            rows.append(row)
            h, r = row["in_process"], row["ray"]
            row["idle_ratio"] = idle_ratio(h, r, args.ticks)
            print(
                f"{b:>5} {b * dt_us:>8g} {h['wall_s_per_sim_ms']:>16.3f} "
                f"{r['wall_s_per_sim_ms']:>12.3f} {row['ratio']:>6.2f} "
                f"{r['batches'] / r['sim_ms']:>12.0f} {r['overhead_ms_per_batch']:>12.2f} "
                f"{r['imbalance_ms_per_batch']:>13.2f} "
                f"{r['coordinator_ms_per_tick']:>13.3f} "
                f"{h['coordinator_cpu_s'] / args.ticks * 1e3:>10.3f} "
                f"{h['planes_cpu_s'] / args.ticks * 1e3:>6.3f} "
                f"{r['planes_cpu_s'] / args.ticks * 1e3:>9.3f} {row['idle_ratio']:>10.2f} "
                f"{'yes' if row['reports_equal'] else 'NO':>4}",
                flush=True,
            )
    finally:
        if owns:
            disconnect()
    fastest = min(r["ray"]["ms_per_tick"] for r in rows)
    balance = next(r["batch"] for r in rows if r["ray"]["ms_per_tick"] <= BALANCE * fastest)
    last = rows[-1]["in_process"]
    coord = last["coordinator_ms_per_tick"] / last["ms_per_tick"]
    trip = rows[0]["empty_round_trip"]
    er, eh = trip["ray"], trip["in_process"]
    print(
        f"{rows[0]['gpus']} GPUs; Ray's actors up in {rows[0]['ray_start_s']:.1f} s; "
        f"load average now {os.getloadavg()[0]:.2f}"
    )
    print(
        f"empty round trip (advance of 0 ticks on both planes): Ray {er['median_ms']:.2f} ms "
        f"median, {er['p90_ms']:.2f} ms p90, of which the planes {er['plane_ms']:.3f} ms; "
        f"in-process {eh['median_ms'] * 1e3:.0f} us"
    )
    print(
        f"coordinator's share of the in-process tick at batch {rows[-1]['batch']}: "
        f"{coord:.0%}; batch that balances (Ray within {BALANCE - 1:.0%} of its fastest): "
        f"{balance} ticks ({balance * dt_us:g} us of reaction delay)"
    )
    same = all(r["reports_equal"] for r in rows)
    if args.json:
        out = {
            "scenario": scn.name,
            "gpus": rows[0]["gpus"],
            "ticks": args.ticks,
            "warmup": args.warmup,
            "repeat": args.repeat,
            "numba_threads_in_process": MOST_THREADS,
            "load_average_at_start": load0,
            "rows": rows,
            "balanced_batch": balance,
            "reports_equal": same,
        }
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
