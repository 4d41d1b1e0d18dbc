"""Core speed: the compiled tick against the numpy reference, in the same run.

    python benchmarks/bench_core.py [--sizes default,default-roce,...] [--ticks N]
                                    [--warmup N] [--repeat N] [--json FILE] [--startup]
                                    [--threads | --allocator | --per-tick N | --busy]

For each fabric both solvers (``Fabric(solver="compiled")`` and ``"reference"``) run
the same scenario, seed and warm-up, then ``--ticks`` measured ticks, best of
``--repeat`` (the machine is shared: the best run is the least disturbed one, and the
ratio of two runs made minutes apart would mean little). Without ``--ticks`` a window is
``MIN_WINDOW`` ticks, or a whole number of the periods of the scenario's bursts where
that is longer (``window_ticks``): every window then holds the same bursts, whichever
tick it starts at. Printed per fabric: entries
(hop, flow) per tick, ms per tick of each solver and their ratio, hop-updates/s and
simulated seconds per wall second of the compiled tick.

Fabrics: the bundled default scenario on native-400g, roce-400g and native-800g
(packet spraying); the bundled ``incast-100g`` (8 x 1 MiB into one 100G port on RoCE,
run to completion: its flow completion times must agree); a ~1k- and a ~10k-endpoint
3-tier fat-tree with all-to-all traffic (every GPU keeps ``outstanding`` 1 MiB flows
to uniformly random peers). The warm-up runs into the steady state (at least
``--warmup`` ticks, and until as many flows have finished as are in flight).

``--per-tick N`` instead times the compiled tick alone, N ticks one by one: the median
of the quiet ones (under ``QUIET_FLOWS`` flows in flight) and the mean of all, for
comparing two versions of the code run one after the other (the reference has changed
with them).

``--busy`` instead runs the compiled tick with busy ticks (flows starting and ending,
only by the background bulk and RPC workloads) one by one through ``Fabric.step`` and
several to a compiled call (``fabric_core.runtime.busy``), alternating on one fabric, and
prints the ratio. (``--per-tick`` times ``Fabric.step`` tick by tick: never at once.)

``--threads`` instead runs the compiled tick with the serial solve and index on one core,
with the solve and the index that share their loops over all the cores numba may use
(``NUMBA_NUM_THREADS``, ``kernels.solve.solve_tick_parallel``,
``kernels.index.entry_index_parallel``), and as the engine does (the faster lately of the
two, ``tick.faster_of_two``), alternating on one fabric, and prints the ratios to the
serial one; below ``PARALLEL_FROM_ENTRIES`` entries in flight every run is serial.
``--allocator`` likewise alternates glibc's malloc thresholds.

``--startup`` also times, in fresh processes, ``fabtop run default`` with an empty
kernel cache (numba compiles: the first run after install): to its first tick and to
its first compiled tick, with the ticks as Python while two helpers compile (the
default), with half compiled in the engine's process, and without helpers
(``kernels.warmup``); and a tick with the cache filled. Not a test: it prints figures
for the README.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_core.net.profiles import NATIVE_400G
from fabric_core.net.topology import fat_tree
from fabric_core.runtime import busy
from fabric_core.runtime.allocator import keep_freed_memory
from fabric_core.runtime.fabric import Fabric, Solver
from fabric_core.runtime.scenario import load_scenario
from fabric_core.workloads.traffic import Bulk


def scenario(name: str, profile: str | None = None) -> Callable[[Solver], Fabric]:
    return lambda solver: Fabric.from_scenario(load_scenario(name, profile=profile), solver)


def fat_tree_fabric(
    pods: int, leaves: int, spines: int, cores: int, gpus: int, outstanding: int
) -> Callable[[Solver], Fabric]:
    def build(solver: Solver) -> Fabric:
        topo = fat_tree(
            NATIVE_400G,
            pods=pods,
            leaves_per_pod=leaves,
            spines_per_pod=spines,
            cores_per_spine=cores,
            gpus_per_leaf=gpus,
        )
        wl = Bulk(
            name="all-to-all", traffic_class="bulk", size_bytes=1024**2, outstanding=outstanding
        )
        return Fabric(topo, NATIVE_400G, [wl], dt_s=1e-6, seed=1, solver=solver)

    return build


SIZES: dict[str, Callable[[Solver], Fabric]] = {
    "default": scenario("default"),
    "default-roce": scenario("default", "roce-400g"),
    # packet spraying carries each flow as up to 8 sub-flows
    "default-spray": scenario("default", "native-800g"),
    # 8 pods x 8 leaves x 16 GPUs = 1,024 GPUs; 8 spines/pod, 8 cores per spine group
    "1k": fat_tree_fabric(8, 8, 8, 8, 16, 4),
    # 16 pods x 20 leaves x 32 GPUs = 10,240 GPUs; 16 spines/pod, 16 cores per group
    "10k": fat_tree_fabric(16, 20, 16, 16, 32, 2),
}

#: Longest warm-up, ticks (the 1k fabric turns its flows over in about 600).
MAX_WARMUP = 3000
#: Fewest ticks in a measured window, and the most ``window_ticks`` makes one.
MIN_WINDOW = 50
MAX_WINDOW = 2000


def window_ticks(fabric: Fabric) -> int:
    """Ticks in a measured window: the least common multiple of the periods of the
    workloads that come in bursts (``period_s``: MoE rounds, incast bursts), in ticks, if
    it is between ``MIN_WINDOW`` and ``MAX_WINDOW``, else ``MIN_WINDOW``. The default
    scenario (2 µs ticks) starts a MoE round every 50 ticks and an incast burst every 250:
    its windows of 50 held a round's first ticks, the costliest (16,000 entries), or not,
    by the phase they started at, so its best of three was luck (docs/PERFORMANCE.md,
    session 35); windows of 250 each hold five rounds and one burst."""
    periods = [
        max(1, round(wl.period_s / fabric.dt_s))
        for wl in fabric.workloads
        if isinstance(getattr(wl, "period_s", None), float)
    ]
    window = math.lcm(*periods) if periods else MIN_WINDOW
    return window if MIN_WINDOW <= window <= MAX_WINDOW else MIN_WINDOW


def steady(fabric: Fabric, warmup: int) -> None:
    """Run into the steady state: flows finish and start every tick."""
    fabric.run_ticks(warmup)
    while fabric.completed_flows < fabric.flows.n_parents and fabric.tick < MAX_WARMUP:
        fabric.run_ticks(10)


def measure(fabric: Fabric, ticks: int, repeat: int) -> dict[str, float]:
    runs = []
    for _ in range(repeat):
        h0, t0 = fabric.hop_updates, fabric.sim_time_s
        w0 = time.perf_counter()
        fabric.run_ticks(ticks)
        wall = time.perf_counter() - w0
        runs.append((wall, fabric.hop_updates - h0, fabric.sim_time_s - t0))
    wall, updates, sim = min(runs)
    return {
        "ms_per_tick": wall / ticks * 1e3,
        "entries_per_tick": updates / ticks,
        "hop_updates_per_second": updates / wall,
        "sim_per_wall": sim / wall,
    }


def bench(name: str, ticks: int | None, warmup: int, repeat: int) -> dict[str, Any]:
    out: dict[str, Any] = {"fabric": name}
    for solver in ("compiled", "reference"):
        fabric = SIZES[name](solver)
        fabric.run_ticks(2)  # compiled: loads the kernels from the cache (or compiles)
        steady(fabric, warmup)
        out["window_ticks"] = ticks = ticks or window_ticks(fabric)
        out[solver] = measure(fabric, ticks, repeat)
        out["endpoints"] = int(fabric.topo.endpoints.size)
        out["links"] = len(fabric.topo.links)
    out["ratio"] = out["reference"]["ms_per_tick"] / out["compiled"]["ms_per_tick"]
    return out


def bench_incast(repeat: int) -> dict[str, Any]:
    """incast-100g to completion: wall time, simulated s per wall s, and the FCTs."""
    out: dict[str, Any] = {"fabric": "incast-100g"}
    # the tick the last flow finishes in, found tick by tick first; the timed runs then
    # run that many ticks in one call, as the engine does (uneventful ones at once)
    probe = SIZES["incast"]("compiled")
    while probe.completed_flows < 8:
        probe.step()
    last_tick = probe.tick
    for solver in ("compiled", "reference"):
        best = None
        for _ in range(repeat):
            fabric = SIZES["incast"](solver)
            fabric.run_ticks(2)
            w0 = time.perf_counter()
            fabric.run_ticks(last_tick - 2)
            wall = time.perf_counter() - w0
            assert fabric.completed_flows == 8, "the incast ends in the tick it ended in before"
            hist = fabric.class_hist["incast"].freeze()
            run = {
                "ms_per_tick": wall / (fabric.tick - 2) * 1e3,
                "sim_per_wall": (fabric.tick - 2) * fabric.dt_s / wall,
                "fct_p50_s": hist.quantile(0.5),
                "completed_at_s": fabric.sim_time_s,
            }
            if best is None or run["ms_per_tick"] < best["ms_per_tick"]:
                best = run
        out[solver] = best
    out["ratio"] = out["reference"]["ms_per_tick"] / out["compiled"]["ms_per_tick"]
    return out


SIZES["incast"] = scenario("incast-100g")


def alternate(
    name: str, ticks: int, warmup: int, repeat: int, setups: dict[str, Callable[[], object]]
) -> tuple[dict[str, float], float]:
    """The compiled tick on one fabric under each setup in turn, ``repeat`` rounds
    alternating (so that all see the same machine): the best ms a tick of each, and
    the mean entries a tick.

    Every run starts from a copy of the same warmed fabric, so every setup times the
    same ticks: run one after the other on one fabric, the setup that came first in a
    round always met the same phase of the traffic (on the 1k fat-tree three setups
    running the very same code came out 1.80, 2.13 and 2.16 ms a tick)."""
    warmed = SIZES[name]("compiled")
    warmed.run_ticks(2)
    steady(warmed, warmup)  # (as the engine runs: its choices made on the way)
    runs: dict[str, list[float]] = {label: [] for label in setups}
    entries = []
    for _ in range(repeat):
        for label, setup in setups.items():
            setup()
            fabric = copy.deepcopy(warmed)
            m = measure(fabric, ticks, 1)
            runs[label].append(m["ms_per_tick"])
            entries.append(m["entries_per_tick"])
    return {label: min(times) for label, times in runs.items()}, sum(entries) / len(entries)


def _keep_freed(keep: bool) -> Callable[[], None]:
    def setup() -> None:
        if not keep_freed_memory(keep):
            raise SystemExit("--allocator needs glibc: mallopt(3) is not there")

    return setup


def bench_allocator(name: str, ticks: int, warmup: int, repeat: int) -> dict[str, Any]:
    """The compiled tick with glibc's default thresholds and with freed memory kept
    (``fabric_core.runtime.allocator``), on one fabric, runs alternating."""
    best, _ = alternate(
        name, ticks, warmup, repeat, {"default": _keep_freed(False), "kept": _keep_freed(True)}
    )
    keep_freed_memory()
    return {
        "fabric": name,
        "default_ms_per_tick": best["default"],
        "kept_ms_per_tick": best["kept"],
        "ratio": best["default"] / best["kept"],
    }


def main_allocator(sizes: list[str], ticks: int, warmup: int, repeat: int) -> list[Any]:
    print(f"{'fabric':<14} {'glibc default ms':>16} {'memory kept ms':>15} {'ratio':>6}")
    rows = []
    for name in sizes:
        r = bench_allocator(name, ticks, warmup, repeat)
        rows.append(r)
        print(
            f"{name:<14} {r['default_ms_per_tick']:>16.3f} {r['kept_ms_per_tick']:>15.3f} "
            f"{r['ratio']:>6.2f}",
            flush=True,
        )
    return rows


def _busy_arm(enabled: bool) -> Callable[[], None]:
    def setup() -> None:
        busy.ENABLED = enabled

    return setup


def bench_busy(name: str, ticks: int, warmup: int, repeat: int) -> dict[str, Any]:
    """The compiled tick with busy ticks run one by one through Python and several to a
    compiled call (``fabric_core.runtime.busy``), on one fabric, runs alternating."""
    best, entries = alternate(
        name, ticks, warmup, repeat, {"one by one": _busy_arm(False), "at once": _busy_arm(True)}
    )
    busy.ENABLED = True
    return {
        "fabric": name,
        "entries_per_tick": entries,
        "one_by_one_ms_per_tick": best["one by one"],
        "at_once_ms_per_tick": best["at once"],
        "ratio": best["one by one"] / best["at once"],
    }


def main_busy(sizes: list[str], ticks: int, warmup: int, repeat: int) -> list[Any]:
    print(
        f"{'fabric':<14} {'entries/tick':>12} {'one by one ms':>14} {'at once ms':>11} {'ratio':>6}"
    )
    rows = []
    for name in sizes:
        r = bench_busy(name, ticks, warmup, repeat)
        rows.append(r)
        print(
            f"{name:<14} {r['entries_per_tick']:>12.0f} {r['one_by_one_ms_per_tick']:>14.3f} "
            f"{r['at_once_ms_per_tick']:>11.3f} {r['ratio']:>6.2f}",
            flush=True,
        )
    return rows


def _solve_arm(threads: int | None, only: int | None) -> Callable[[], None]:
    """Setup of one arm of ``--threads``: numba's threads, and the solve and index the
    engine runs."""

    def setup() -> None:
        from fabric_core.tick.kernels import tick
        from fabric_core.tick.kernels._jit import use_threads

        use_threads(threads)
        tick.ONLY_WAY = only

    return setup


def bench_threads(name: str, ticks: int, warmup: int, repeat: int) -> dict[str, Any]:
    """The compiled tick with the serial solve and index on one core, the two over all the
    cores, and the engine's own choice (the faster lately of the two), runs alternating.
    Below ``PARALLEL_FROM_ENTRIES`` entries they are the serial ones every way."""
    from fabric_core.tick.kernels import tick
    from fabric_core.tick.kernels._jit import MOST_THREADS, use_threads

    arms = {
        "serial": _solve_arm(1, 0),
        "parallel": _solve_arm(None, 1),
        "chosen": _solve_arm(None, None),
    }
    best, entries = alternate(name, ticks, warmup, repeat, arms)
    use_threads()
    tick.ONLY_WAY = None
    return {
        "fabric": name,
        "entries_per_tick": entries,
        "cores": MOST_THREADS,
        "parallel_from_entries": tick.PARALLEL_FROM_ENTRIES,
        "one_core_ms_per_tick": best["serial"],
        "all_cores_ms_per_tick": best["parallel"],
        "chosen_ms_per_tick": best["chosen"],
        "ratio": best["serial"] / best["parallel"],
        "chosen_ratio": best["serial"] / best["chosen"],
    }


def main_threads(sizes: list[str], ticks: int, warmup: int, repeat: int) -> list[Any]:
    rows: list[dict[str, Any]] = []
    for name in sizes:
        r = bench_threads(name, ticks, warmup, repeat)
        if not rows:
            print(
                f"{'fabric':<14} {'entries/tick':>12} {'serial ms':>10} "
                f"{str(r['cores']) + ' cores ms':>11} {'ratio':>6} {'chosen ms':>10} {'ratio':>6}"
            )
        rows.append(r)
        print(
            f"{name:<14} {r['entries_per_tick']:>12.0f} {r['one_core_ms_per_tick']:>10.3f} "
            f"{r['all_cores_ms_per_tick']:>11.3f} {r['ratio']:>6.2f} "
            f"{r['chosen_ms_per_tick']:>10.3f} {r['chosen_ratio']:>6.2f}",
            flush=True,
        )
    return rows


def startup() -> dict[str, float]:
    """A first run after an install (an empty kernel cache) against one with the cache
    filled: ``fabtop run default`` for 1 ms, the kernels compiled by two helpers while the
    ticks run as Python (``kernels.warmup``), then by the engine and a helper as before
    (``FABTOP_WARMUP_AS_PYTHON=0``), and without helpers (``FABTOP_WARMUP_HELPER=0``).
    For each, seconds from the start of the process to the end of its first tick and to
    the start of its first compiled tick (from the run's report: ``run.first_tick_seconds``,
    ``run.as_python``); then the end of a one-tick run from the filled cache. Each cold
    run waits for its helpers to end before the next starts, so that none runs beside
    another's."""
    cmd = [sys.executable, "-m", "console.cli", "run", "default", "--duration", "1ms"]
    arms: list[tuple[str, dict[str, str]]] = [
        ("", {}),
        ("_compiled_here", {"FABTOP_WARMUP_AS_PYTHON": "0"}),
        ("_no_helper", {"FABTOP_WARMUP_HELPER": "0"}),
    ]
    out = {}
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "run.json"
        for label, extra in arms:
            with tempfile.TemporaryDirectory() as cache:
                env = {**os.environ, "NUMBA_CACHE_DIR": cache, **extra}
                t0 = time.perf_counter()
                subprocess.run(
                    [*cmd, "--json", str(report)], env=env, check=True, capture_output=True
                )
                wall = time.perf_counter() - t0
                run = json.loads(report.read_text())["run"]
                ticks_from = wall - run["wall_seconds"]  # (the summary's printing counted in)
                python_s = run.get("as_python", {}).get("wall_seconds", 0.0)
                out[f"first_tick{label}_s"] = ticks_from + run["first_tick_seconds"]
                out[f"compiled{label}_s"] = ticks_from + max(python_s, run["first_tick_seconds"])
                _wait_for_helpers()
                if not label:
                    t0 = time.perf_counter()
                    subprocess.run([*cmd[:-1], "2us"], env=env, check=True, capture_output=True)
                    out["warm_cache_s"] = time.perf_counter() - t0
    return out


def _wait_for_helpers() -> None:
    """Until no warm-up helper (``python -m fabric_core.tick.kernels.warmup``) runs."""
    while any(
        b"fabric_core.tick.kernels.warmup" in _cmdline(p) for p in Path("/proc").glob("[0-9]*")
    ):
        time.sleep(0.1)


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


#: Flows in flight under which a tick of the default scenario is "quiet" (between its MoE
#: rounds, which put some 4,000 flows in flight for a tenth of the ticks).
QUIET_FLOWS = 300


def bench_per_tick(name: str, ticks: int, warmup: int) -> dict[str, Any]:
    """The compiled tick timed tick by tick: the median of the quiet ticks and the mean
    of all (what a console on this fabric pays a tick, bursts included)."""
    fabric = SIZES[name]("compiled")
    fabric.run_ticks(2)
    steady(fabric, warmup)
    quiet, every = [], []
    for _ in range(ticks):
        before = fabric.flows.n_parents
        t0 = time.perf_counter()
        fabric.step()
        wall = time.perf_counter() - t0
        every.append(wall)
        if max(before, fabric.flows.n_parents) < QUIET_FLOWS:
            quiet.append(wall)
    quiet.sort()
    return {
        "fabric": name,
        "quiet_ticks": len(quiet),
        "quiet_median_ms": quiet[len(quiet) // 2] * 1e3 if quiet else float("nan"),
        "mean_ms": sum(every) / len(every) * 1e3,
    }


def main_per_tick(sizes: list[str], ticks: int, warmup: int) -> list[Any]:
    print(f"{'fabric':<14} {'quiet ticks':>11} {'quiet median ms':>16} {'mean ms':>8}")
    rows = []
    for name in sizes:
        r = bench_per_tick(name, ticks, warmup)
        rows.append(r)
        print(
            f"{name:<14} {r['quiet_ticks']:>11} {r['quiet_median_ms']:>16.3f} {r['mean_ms']:>8.3f}",
            flush=True,
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--ticks",
        type=int,
        help=f"ticks a measured window (default: {MIN_WINDOW}, or whole periods of the "
        "scenario's bursts, see window_ticks; 50 for --threads, --allocator, --busy)",
    )
    ap.add_argument("--warmup", type=int, default=200, help="least ticks before measuring")
    ap.add_argument("--repeat", type=int, default=3, help="measured runs; the best counts")
    ap.add_argument(
        "--sizes",
        default="default,default-roce,default-spray,incast,1k,10k",
        help="of: " + ",".join(SIZES),
    )
    ap.add_argument("--startup", action="store_true", help="also time a cold and a warm start")
    ap.add_argument(
        "--allocator",
        action="store_true",
        help="instead: the compiled tick with glibc's default malloc thresholds and with "
        "freed memory kept (fabric_core.runtime.allocator), alternating on one fabric",
    )
    ap.add_argument(
        "--per-tick",
        type=int,
        metavar="N",
        help="instead: the compiled tick only, N ticks timed one by one after the warm-up "
        f"(the median of those with under {QUIET_FLOWS} flows in flight, the mean of all): "
        "to compare two versions of the code, run one after the other",
    )
    ap.add_argument(
        "--threads",
        action="store_true",
        help="instead: the compiled tick with its solve and index on one core and on all "
        "cores numba may use (NUMBA_NUM_THREADS), alternating on one fabric",
    )
    ap.add_argument(
        "--busy",
        action="store_true",
        help="instead: the compiled tick with busy ticks one by one and several to a "
        "compiled call (fabric_core.runtime.busy), alternating on one fabric",
    )
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    ticks = args.ticks or MIN_WINDOW  # (the modes below alternate on one fabric)
    if args.busy:
        sizes = [s for s in args.sizes.split(",") if s != "incast"]
        rows = main_busy(sizes, ticks, args.warmup, args.repeat)
    elif args.per_tick:
        sizes = [s for s in args.sizes.split(",") if s != "incast"]
        rows = main_per_tick(sizes, args.per_tick, args.warmup)
    elif args.threads:
        sizes = [s for s in args.sizes.split(",") if s != "incast"]
        rows = main_threads(sizes, ticks, args.warmup, args.repeat)
    elif args.allocator:
        sizes = [s for s in args.sizes.split(",") if s != "incast"]
        rows = main_allocator(sizes, ticks, args.warmup, args.repeat)
    else:
        rows = main_solvers(args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


def main_solvers(args: argparse.Namespace) -> list[Any]:
    """The compiled tick against the reference on each fabric (and the start-up)."""
    print(
        f"{'fabric':<14} {'window':>6} {'entries/tick':>12} {'compiled ms':>12} "
        f"{'reference ms':>13} {'ratio':>6} {'hop-updates/s':>14} {'sim s/wall s':>13}"
    )
    rows = []
    for name in args.sizes.split(","):
        if name == "incast":
            r = bench_incast(args.repeat)
        else:
            r = bench(name, args.ticks, args.warmup, args.repeat)
        rows.append(r)
        c, ref = r["compiled"], r["reference"]
        entries = f"{c['entries_per_tick']:>12.0f}" if "entries_per_tick" in c else f"{'':>12}"
        updates = (
            f"{c['hop_updates_per_second']:>14.3g}"
            if "hop_updates_per_second" in c
            else f"{'':>14}"
        )
        window = f"{r['window_ticks']:>6}" if "window_ticks" in r else f"{'':>6}"
        print(
            f"{r['fabric']:<14} {window} {entries} {c['ms_per_tick']:>12.3f} "
            f"{ref['ms_per_tick']:>13.3f} {r['ratio']:>6.1f} {updates} "
            f"{c['sim_per_wall']:>13.3g}",
            flush=True,
        )
        if name == "incast":
            print(
                f"{'':<14} flows done at {c['completed_at_s'] * 1e6:.1f} µs (reference "
                f"{ref['completed_at_s'] * 1e6:.1f} µs), FCT p50 {c['fct_p50_s'] * 1e6:.1f} µs "
                f"(reference {ref['fct_p50_s'] * 1e6:.1f} µs)"
            )
    if args.startup:
        s = startup()
        rows.append({"startup": s})
        print(
            "start-up of fabtop run default with an empty kernel cache (the first run after "
            "an install), seconds to the end of the first tick / to the first compiled tick: "
            f"{s['first_tick_s']:.1f} / {s['compiled_s']:.1f} with the ticks as Python while "
            f"two helpers compile, {s['first_tick_compiled_here_s']:.1f} / "
            f"{s['compiled_compiled_here_s']:.1f} compiling half here (ratio "
            f"{s['first_tick_compiled_here_s'] / s['first_tick_s']:.1f} to the first tick), "
            f"{s['first_tick_no_helper_s']:.1f} / {s['compiled_no_helper_s']:.1f} without "
            f"helpers; one tick with the cache filled {s['warm_cache_s']:.1f} s"
        )
    return rows


if __name__ == "__main__":
    main()
