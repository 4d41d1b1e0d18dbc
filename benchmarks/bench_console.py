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

``--live`` measures a real ``fabtop --no-metrics [--scenario NAME]`` instead: the console
run in a pseudo-terminal of 200x60 with its engine in a process of its own; after
``--warm`` seconds of start-up (default 40) the console process's CPU over ``--seconds``
(read from /proc: the whole process, its main thread, which runs the UI, and its other
threads, which receive the engine process's snapshots) and the engine process's.

``--against DIR`` compares with other code: DIR is a checkout of it (``git worktree add
/tmp/before REV``, or ``git archive REV | tar -x -C DIR``) whose own bench_console.py is run in
turn with this one, each in a fresh process, the order swapped every round (this, other;
other, this; ...), so that both see the machine in the same state.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import os
import pty
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
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


def _cpu_s(stat: str) -> float:
    """utime + stime of a /proc stat file, in seconds."""
    with open(stat) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_sample(pid: int) -> tuple[float, float, float, dict[int, float]]:
    """(monotonic time, process CPU, its main thread's CPU, each child process's CPU)."""
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        children = [int(c) for c in f.read().split()]
    kids = {}
    for child in children:
        with contextlib.suppress(OSError):  # it just ended
            kids[child] = _cpu_s(f"/proc/{child}/stat")
    main = _cpu_s(f"/proc/{pid}/task/{pid}/stat")
    return time.monotonic(), _cpu_s(f"/proc/{pid}/stat"), main, kids


def live(tree: Path, scenario: str | None, warm_s: float, seconds: float) -> str:
    """``fabtop --no-metrics`` from ``tree`` in a 200x60 pseudo-terminal: CPU shares."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 200, 0, 0))
    command = [sys.executable, "-m", "console.cli", "--no-metrics"]
    command += ["--scenario", scenario] if scenario else []
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(tree)}
    proc = subprocess.Popen(
        command, cwd=tree, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)

    def drain() -> None:  # the terminal's output, read and dropped
        with contextlib.suppress(OSError):
            while os.read(master, 1 << 16):
                pass

    threading.Thread(target=drain, daemon=True).start()
    try:
        time.sleep(warm_s)
        if proc.poll() is not None:
            raise SystemExit(f"fabtop from {tree} ended early (exit code {proc.returncode})")
        t0, p0, m0, k0 = _cpu_sample(proc.pid)
        time.sleep(seconds)
        t1, p1, m1, k1 = _cpu_sample(proc.pid)
    finally:
        with contextlib.suppress(OSError):
            os.write(master, b"q")
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(master)
    wall = t1 - t0
    engines = [100 * (k1[k] - k0[k]) / wall for k in k1 if k in k0]
    return (
        f"console process {100 * (p1 - p0) / wall:.1f}% of a core over {wall:.0f} s "
        f"(main thread, the UI, {100 * (m1 - m0) / wall:.1f}%; other threads, receiving the "
        f"snapshots, {100 * (p1 - p0 - m1 + m0) / wall:.1f}%); engine process "
        f"{max(engines, default=0.0):.1f}%; load {os.getloadavg()[0]:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="console refresh cost and CPU share")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--scenario", help="measure this scenario (e.g. cluster-100k) only")
    parser.add_argument(
        "--against", type=Path, help="a checkout of other code to run in turn with this one"
    )
    parser.add_argument("--rounds", type=int, default=2, help="rounds of --against (default 2)")
    parser.add_argument(
        "--live", action="store_true", help="a real fabtop with its engine process (see above)"
    )
    parser.add_argument(
        "--warm", type=float, default=40.0, help="--live: seconds of start-up left out"
    )
    args = parser.parse_args()
    if args.live:
        here = Path(__file__).resolve().parents[1]
        trees = [("this", here)]
        if args.against is not None:
            trees.append(("other", args.against.resolve()))
        label = args.scenario or "default"
        for r in range(args.rounds if args.against is not None else 1):
            for name, tree in trees if r % 2 == 0 else trees[::-1]:
                result = live(tree, args.scenario, args.warm, args.seconds)
                print(f"round {r + 1} {name:>5} ({tree}) {label}: {result}", flush=True)
        return
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
