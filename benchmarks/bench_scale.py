"""Scale: start-up, tick rate and memory of the bundled 100k-GPU mixes from 1k to 100k GPUs.

    python benchmarks/bench_scale.py                      # 1k, 10k, 30k, 100k GPUs
    python benchmarks/bench_scale.py --sizes 1k,10k --ticks 20 --json scale.json
    python benchmarks/bench_scale.py --scenario cluster-100k-4plane
    python benchmarks/bench_scale.py --plot docs/scale.svg  # also draw the curve

Every size is a bundled scenario cut to fewer GPUs with the same workload mix:
background bulk from a tenth of the GPUs, a 256-rank MoE all-to-all, PD KV
transfers, NVMe-oF reads and RPC probes (the bulk grows with the fabric, the rest
does not). ``cluster-100k`` (the default) keeps its fat-tree's pods of 32 leaves ×
32 GPUs (1, 10, 30, 98 pods: 1,024 to 100,352 GPUs; 32 spines per pod, 32 cores per
spine group, non-blocking); ``cluster-100k-4plane`` keeps its planes' leaves of 256
GPUs (4, 40, 120, 392 leaves, 256 spines a plane). Each size runs in a fresh process,
so its peak memory is its own.

Printed per size: the scenario load, the fabric build (topology, routing tables,
flow table), the first tick (the first flows routed), the steady tick (best of
``--repeat`` runs of ``--ticks`` ticks after a warm-up), ticks/s, hop-updates/s and
peak resident memory; then each size's start-up per GPU and tick per (hop, flow)
entry as a ratio to the smallest size's, measured in the same run: 1.0 means the
cost grows linearly. Not a test: it prints figures for the README.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_core.runtime.scenario import bundled_dir

ROOT = Path(__file__).resolve().parents[1]

#: size label → GPUs (the largest is the bundled scenarios' own 100,352)
SIZES = {"1k": 1024, "10k": 10240, "30k": 30720, "100k": 100352}
#: the scenarios it cuts, and the topology key each is cut by
SCENARIOS = {"cluster-100k": "pods", "cluster-100k-4plane": "leaves"}

_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import parse_scenario
raw, ticks, warmup, repeat = json.loads(sys.argv[1])
scn = parse_scenario(raw, raw["name"])
t1 = time.perf_counter()
fabric = Fabric.from_scenario(scn)
t2 = time.perf_counter()
fabric.step()
t3 = time.perf_counter()
fabric.run_ticks(warmup)
best = float("inf")
entries = 0
for _ in range(repeat):
    e0, s = fabric.hop_updates, time.perf_counter()
    fabric.run_ticks(ticks)
    took = (time.perf_counter() - s) / ticks
    if took < best:
        best, entries = took, (fabric.hop_updates - e0) / ticks
print(json.dumps({
    "gpus": int(fabric.topo.gpus.size),
    "links": len(fabric.topo.links),
    "load_s": t1 - t0,
    "build_s": t2 - t1,
    "first_tick_s": t3 - t2,
    "tick_s": best,
    "entries": entries,
    "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
}))
"""


def scenario(name: str, gpus: int) -> dict[str, Any]:
    """The bundled scenario ``name`` cut to ``gpus`` GPUs (whole pods or leaves)."""
    raw = tomllib.loads((bundled_dir() / f"{name}.toml").read_text())
    topo = raw["topology"]
    key = SCENARIOS[name]
    per_unit = topo["gpus_per_leaf"] * (topo["leaves_per_pod"] if key == "pods" else 1)
    topo[key] = max(1, gpus // per_unit)
    return raw


def measure(raw: dict[str, Any], ticks: int, warmup: int, repeat: int) -> dict[str, Any]:
    """One size, in a fresh process."""
    arg = json.dumps([raw, ticks, warmup, repeat])
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, arg], capture_output=True, text=True, cwd=ROOT
    )
    if out.returncode != 0:
        raise SystemExit(f"{raw['name']} at {raw['topology']} failed:\n{out.stderr}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _plot(rows: list[dict[str, Any]], path: str, title: str) -> None:
    try:
        import matplotlib
    except ImportError:
        raise SystemExit(
            "--plot needs matplotlib (pip install -e '.[plots]'); the table above stands"
        ) from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gpus = [r["gpus"] for r in rows]
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
    start = [r["load_s"] + r["build_s"] + r["first_tick_s"] for r in rows]
    ax[0].loglog(gpus, start, "o-", label="start-up (load, build, first tick)")
    ax[0].loglog(gpus, [start[0] * g / gpus[0] for g in gpus], ":", label="linear")
    ax[0].set(xlabel="GPUs", ylabel="seconds", title="Start-up")
    ax[1].loglog(gpus, [r["tick_s"] for r in rows], "o-", label="tick")
    ax[1].loglog(gpus, [rows[0]["tick_s"] * g / gpus[0] for g in gpus], ":", label="linear")
    ax[1].set(xlabel="GPUs", ylabel="seconds", title="Steady tick")
    for a in ax:
        a.legend(fontsize=8)
        a.grid(True, which="both", alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="cluster-100k", choices=SCENARIOS)
    ap.add_argument("--sizes", default=",".join(SIZES), help=f"of: {','.join(SIZES)}")
    ap.add_argument("--ticks", type=int, default=10, help="measured ticks per run")
    ap.add_argument("--warmup", type=int, default=20, help="ticks before measuring")
    ap.add_argument("--repeat", type=int, default=2, help="measured runs; the best counts")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--plot", help="also draw the curve to this SVG (needs matplotlib)")
    a = ap.parse_args()
    names = [s.strip() for s in a.sizes.split(",") if s.strip()]
    bad = [s for s in names if s not in SIZES]
    if bad:
        ap.error(f"unknown size {bad[0]!r}; known: {', '.join(SIZES)}")
    rows = []
    head = (
        f"{'size':>5} {'GPUs':>8} {'links':>9} {'load s':>7} {'build s':>8} {'1st tick s':>10} "
        f"{'tick ms':>8} {'ticks/s':>8} {'hop-upd/s':>10} {'peak RSS':>9}"
    )
    print(f"{a.scenario} cut to {', '.join(names)} GPUs")
    print(head)
    for name in names:
        r = measure(scenario(a.scenario, SIZES[name]), a.ticks, a.warmup, a.repeat)
        r["size"] = name
        rows.append(r)
        print(
            f"{name:>5} {r['gpus']:>8,} {r['links']:>9,} {r['load_s']:>7.2f} {r['build_s']:>8.2f} "
            f"{r['first_tick_s']:>10.2f} {r['tick_s'] * 1e3:>8.1f} {1 / r['tick_s']:>8.1f} "
            f"{r['entries'] / r['tick_s']:>10.3g} {r['peak_rss_bytes'] / 2**30:>7.2f} GiB",
            flush=True,
        )
    base = rows[0]
    print(f"\ncost relative to {base['size']} (1.0 = linear in the size):")
    for r in rows:
        start = (r["load_s"] + r["build_s"] + r["first_tick_s"]) / r["gpus"]
        start0 = (base["load_s"] + base["build_s"] + base["first_tick_s"]) / base["gpus"]
        per_entry = r["tick_s"] / max(r["entries"], 1)
        per_entry0 = base["tick_s"] / max(base["entries"], 1)
        per_link = r["tick_s"] / r["links"]
        per_link0 = base["tick_s"] / base["links"]
        print(
            f"{r['size']:>5}: start-up per GPU {start / start0:5.2f}x, tick per entry "
            f"{per_entry / per_entry0:5.2f}x, tick per link {per_link / per_link0:5.2f}x"
        )
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2))
    if a.plot:
        _plot(rows, a.plot, f"{a.scenario}: cost by size (bench_scale.py)")


if __name__ == "__main__":
    main()
