"""The console's own cost: time per refresh and CPU share of the UI.

Usage: ``python benchmarks/bench_console.py [--seconds 10] [--scenario NAME]
[--against DIR [--rounds 2]]``

For each fabric (the bundled ``default`` scenario, ~800 links, and a generated
leaf-spine of 10,240 links) the script precomputes a ring of real snapshots
(the fabric stepped by hand), then runs the app headless at the normal render
rate while a feeder publishes the next snapshot every render interval, so
every refresh has new data (``--scenario cluster-100k``: that scenario instead,
six snapshots two ticks apart). It reports:

* refresh time: the app's ``refresh_view`` (ingest: rates, latency window,
  event log, severities; then every widget's update by difference), per call;
* UI CPU share: process CPU seconds / wall seconds over the run, which adds
  Textual's layout and compositing to the above (no engine runs in this
  process: the snapshots are ready-made).

``--against DIR`` compares with other code: DIR is a checkout of it (``git worktree add
/tmp/before REV``, or ``git archive REV | tar -x -C DIR``) whose own bench_console.py is run in
turn with this one, each in a fresh process, the order swapped every round (this, other;
other, this; ...), so that both see the machine in the same state.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.app import RENDER_INTERVAL_S, FabtopApp
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.runtime.snapshot import Snapshot

BIG_TOML = """
name = "bench-10k"
description = "10,240 directed links: 64 leaves x 64 GPUs, 16 spines"
cluster = "bench"
seed = 1
dt = "2us"
profile = "native-400g"

[topology]
kind = "leaf-spine"
leaves = 64
spines = 16
gpus_per_leaf = 64

[classes]
bulk = 0
rpc = 1

[[workload]]
name = "background"
kind = "bulk"
class = "bulk"
senders = 0.25
size = "2MiB"
outstanding = 1

[[workload]]
name = "probe"
kind = "rpc"
class = "rpc"
size = "4KiB"
rate_per_s = 20000
"""


class RingSource:
    """A FabricSource that publishes precomputed snapshots in turn."""

    description = "benchmark"

    def __init__(self, snaps: list[Snapshot]) -> None:
        self.snaps = snaps
        self.i = 0

    def latest(self) -> Snapshot:
        return self.snaps[self.i % len(self.snaps)]

    def advance(self) -> None:
        self.i += 1

    async def submit(self, command: object) -> object:  # pragma: no cover - not used
        raise NotImplementedError


def snapshots(scenario: str, count: int, ticks_between: int) -> list[Snapshot]:
    """``count`` real snapshots ``ticks_between`` ticks apart."""
    fabric = Fabric.from_scenario(load_scenario(scenario))
    out = []
    for _ in range(count):
        fabric.run_ticks(ticks_between)
        out.append(
            fabric.snapshot(wall_time_s=0.0, target_speed=1e-3, measured_speed=0.0, running=True)
        )
    return out


async def measure(snaps: list[Snapshot], seconds: float) -> dict[str, float]:
    source = RingSource(snaps)
    app = FabtopApp(source, render_interval_s=RENDER_INTERVAL_S)  # type: ignore[arg-type]
    times: list[float] = []
    original = app.refresh_view

    def timed(force: bool = False) -> None:
        t0 = time.perf_counter()
        original(force)
        times.append(time.perf_counter() - t0)

    app.refresh_view = timed  # type: ignore[method-assign]
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause(1.0)  # first layout
        times.clear()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        while time.perf_counter() - wall0 < seconds:
            source.advance()
            await asyncio.sleep(RENDER_INTERVAL_S)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    times.sort()
    return {
        "refreshes": len(times),
        "refresh_median_ms": statistics.median(times) * 1e3,
        "refresh_p95_ms": times[int(0.95 * (len(times) - 1))] * 1e3,
        "refresh_max_ms": times[-1] * 1e3,
        "ui_cpu_share": cpu / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="console refresh cost and CPU share")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--scenario", help="measure this scenario (e.g. cluster-100k) only")
    parser.add_argument(
        "--against", type=Path, help="a checkout of other code to run in turn with this one"
    )
    parser.add_argument("--rounds", type=int, default=2, help="rounds of --against (default 2)")
    args = parser.parse_args()
    if args.against is not None:
        alternate(args.against, args.rounds, args.seconds, args.scenario)
        return
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "bench-10k.toml"
        big.write_text(BIG_TOML)
        cases = [("default", "default", 12, 20), ("10k links", str(big), 8, 3)]
        if args.scenario:
            cases = [(args.scenario, args.scenario, 6, 2)]
        for label, scenario, count, ticks in cases:
            snaps = snapshots(scenario, count, ticks)
            result = asyncio.run(measure(snaps, args.seconds))
            print(
                f"{label:>10}: {len(snaps[0].links):>6} links  "
                f"refresh median {result['refresh_median_ms']:.1f} ms, "
                f"p95 {result['refresh_p95_ms']:.1f} ms, max {result['refresh_max_ms']:.1f} ms "
                f"over {result['refreshes']:.0f} refreshes; "
                f"UI CPU {result['ui_cpu_share'] * 100:.1f}% of one core "
                f"(render every {RENDER_INTERVAL_S * 1e3:.0f} ms)"
            )


def alternate(other: Path, rounds: int, seconds: float, scenario: str | None) -> None:
    """Run this benchmark here and in ``other`` in turn, ``rounds`` times each."""
    here = Path(__file__).resolve().parents[1]
    there = other.resolve()
    if not (there / "benchmarks" / "bench_console.py").is_file():
        raise SystemExit(f"{there}: no benchmarks/bench_console.py there")
    extra = ["--seconds", str(seconds)] + (["--scenario", scenario] if scenario else [])
    for r in range(rounds):
        order = [("this", here), ("other", there)]
        for label, tree in order if r % 2 == 0 else order[::-1]:
            command = [sys.executable, str(tree / "benchmarks" / "bench_console.py"), *extra]
            run = subprocess.run(command, cwd=tree, capture_output=True, text=True, check=True)
            for line in run.stdout.splitlines():
                print(f"round {r + 1} {label:>5} ({tree}): {line.strip()}", flush=True)


if __name__ == "__main__":
    main()
