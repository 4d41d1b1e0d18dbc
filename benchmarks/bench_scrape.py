"""Scrape time and size of the Prometheus exporter by ``--link-metrics`` mode and fabric size.

Builds leaf-spine fabrics of about 1k, 10k and 100k directed links with the
core's topology builder, runs a bulk workload (plus an all-to-all at the
smaller sizes) for some ticks so the counters, queues and histograms hold real
values, takes one snapshot, and scrapes it over HTTP as Prometheus would
(text format), reporting the median wall time of a full scrape (request to last
byte) and the body size. Each scrape gets a new snapshot object, as from a live engine,
so each is encoded (the exporter serves a snapshot it has encoded from its cache). The
engine is not running during the scrapes, so the figures are the exporter's alone.

    python benchmarks/bench_scrape.py                       # 1k, 10k, 100k links
    python benchmarks/bench_scrape.py --sizes 10k --repeat 20
    python benchmarks/bench_scrape.py --scenario cluster-100k --modes switch,top:50
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from exporters.prometheus import start_metrics_server
from fabric_core.net.profiles import get_profile
from fabric_core.net.topology import leaf_spine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.runtime.snapshot import Snapshot
from fabric_core.workloads import build_workload

#: (leaves, spines, GPUs per leaf) → directed links = 2 × (leaves × (GPUs per leaf + spines)).
SIZES = {
    "1k": (24, 8, 16),  # 1,152 links, 384 GPUs
    "10k": (160, 16, 16),  # 10,240 links, 2,560 GPUs
    "100k": (1024, 32, 16),  # 98,304 links, 16,384 GPUs
}
MODES = ("switch", "top:50", "all")


def build_snapshot(size: str, ticks: int) -> Snapshot:
    """A fabric of ``size`` after ``ticks`` ticks of traffic, as one snapshot."""
    leaves, spines, per_leaf = SIZES[size]
    profile = get_profile("native-400g")
    topo = leaf_spine(profile, leaves=leaves, spines=spines, gpus_per_leaf=per_leaf)
    workloads = [
        build_workload(
            {
                "name": "background",
                "kind": "bulk",
                "class": "bulk",
                "senders": 0.5,
                "size": "2MiB",
                "outstanding": 1,
            },
            "bench",
        )
    ]
    if size != "100k":
        workloads.append(
            build_workload(
                {
                    "name": "moe",
                    "kind": "alltoall",
                    "class": "alltoall",
                    "ranks": 64,
                    "size": "7408B",
                    "period": "100us",
                },
                "bench",
            )
        )
    fabric = Fabric(
        topo, profile, workloads, dt_s=2e-6, seed=1, cluster="bench", scenario=f"bench-{size}"
    )
    fabric.run_ticks(ticks)
    return fabric.snapshot(wall_time_s=0.0, target_speed=0.0, measured_speed=0.0, running=True)


def scenario_snapshot(scenario: str, ticks: int) -> Snapshot:
    """A bundled (or file) scenario after ``ticks`` ticks, as one snapshot."""
    fabric = Fabric.from_scenario(load_scenario(scenario))
    fabric.run_ticks(ticks)
    return fabric.snapshot(wall_time_s=0.0, target_speed=0.0, measured_speed=0.0, running=True)


def measure(snap: Snapshot, mode: str, repeat: int) -> tuple[float, float, float, int, int]:
    """(median, max) seconds per scrape, the last collect time, body bytes and samples."""
    # a new snapshot object per scrape, as a live engine publishes: the exporter encodes
    # once per snapshot, and the same one again would be served from its cache
    server = start_metrics_server(lambda: copy.copy(snap), port=0, link_metrics=mode)
    try:
        times = []
        body = b""
        for _ in range(repeat + 1):  # the first scrape builds the static labels: not counted
            start = time.perf_counter()
            with urllib.request.urlopen(server.url, timeout=600) as response:
                body = response.read()
            times.append(time.perf_counter() - start)
    finally:
        server.close()
    lines = [line for line in body.splitlines() if line and not line.startswith(b"#")]
    (collect,) = [
        float(line.split()[1])
        for line in lines
        if line.startswith(b"fabtop_exporter_collect_duration_seconds ")
    ]
    return statistics.median(times[1:]), max(times[1:]), collect, len(body), len(lines)


def main() -> int:
    """Run the benchmark and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1k,10k,100k", help="comma-separated: 1k,10k,100k")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes")
    parser.add_argument("--repeat", type=int, default=5, help="scrapes per mode (median)")
    parser.add_argument("--ticks", type=int, default=50, help="ticks of traffic before")
    parser.add_argument(
        "--scenario", help="scrape this scenario (e.g. cluster-100k) instead of the --sizes"
    )
    args = parser.parse_args()
    print("| links | mode | scrape median | scrape max | of which collect | body | samples |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for size in [args.scenario] if args.scenario else args.sizes.split(","):
        t0 = time.perf_counter()
        if args.scenario:
            snap = scenario_snapshot(args.scenario, args.ticks)
        else:
            snap = build_snapshot(size, args.ticks)
        print(
            f"<!-- {size}: fabric built and run in {time.perf_counter() - t0:.1f} s -->",
            file=sys.stderr,
        )
        for mode in args.modes.split(","):
            median, worst, collect, size_b, lines = measure(snap, mode, args.repeat)
            print(
                f"| {len(snap.links):,} | {mode} | {median * 1e3:,.1f} ms | {worst * 1e3:,.1f} ms"
                f" | {collect * 1e3:,.1f} ms | {size_b / 1e6:,.2f} MB | {lines:,} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
