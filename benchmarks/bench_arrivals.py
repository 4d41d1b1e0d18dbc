"""What an RPC workload's ``generate`` costs a tick, by the number of senders: its Poisson
process drawn arrival by arrival (``workloads.arrivals.PoissonArrivals``, the code) against
a count drawn for every sender every tick (the way before session 24, kept here as the
thing to compare with).

    python benchmarks/bench_arrivals.py [--senders 256,4096,102400] [--ticks 2000]

Per sender count: µs a tick for each way (best of 3, alternated), their ratio and the
messages a tick (5,000 a second per sender at a 2 µs tick, the default scenario's probes).
The count per sender costs a draw per sender per tick, whatever arrives; the arrivals
cost what arrives. Not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabric_core.tick.flows import FlowRequests
from fabric_core.workloads.traffic import Rpc, _random_peers, _requests, traffic_kernels

RATE_PER_S = 5000.0
DT_S = 2e-6

Generate = Callable[[Rpc, float, float, np.random.Generator], FlowRequests]


def a_count_per_sender(
    wl: Rpc, now_s: float, dt_s: float, rng: np.random.Generator
) -> FlowRequests:
    """The way before: a Poisson count for every sender, every tick."""
    counts = rng.poisson(wl.rate_per_s * dt_s, size=wl.senders.size)
    src = traffic_kernels.repeat_senders(wl.senders, counts)
    if src.size == 0:
        return FlowRequests.empty()
    dst = _random_peers(src, wl.pool, rng)
    return _requests(src, dst, wl.size_bytes, np.arange(src.size), now_s)


def arrival_by_arrival(
    wl: Rpc, now_s: float, dt_s: float, rng: np.random.Generator
) -> FlowRequests:
    """The code: ``Rpc.generate``."""
    return wl.generate(now_s, dt_s, rng)


def probes(senders: int) -> Rpc:
    wl = Rpc(name="probe", traffic_class="rpc", rate_per_s=RATE_PER_S)
    gpus = np.arange(senders, dtype=np.int32)
    wl.bind(gpus, np.zeros(0, np.int32), np.random.default_rng(1))
    return wl


def per_tick_us(way: Generate, senders: int, ticks: int) -> tuple[float, float]:
    """µs a tick and messages a tick of ``ticks`` ticks of a fresh workload."""
    wl, rng = probes(senders), np.random.default_rng(2)
    sent = 0
    started = time.perf_counter()
    for i in range(ticks):
        sent += len(way(wl, i * DT_S, DT_S, rng))
    return (time.perf_counter() - started) / ticks * 1e6, sent / ticks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--senders", default="256,4096,102400")
    parser.add_argument("--ticks", type=int, default=2000)
    args = parser.parse_args()
    for way in (arrival_by_arrival, a_count_per_sender):  # (the kernels loaded first)
        per_tick_us(way, 16, 10)
    print(
        f"{'senders':>8s} {'arrivals µs':>12s} {'counts µs':>10s} {'ratio':>6s} {'msgs/tick':>10s}"
    )
    for senders in (int(s) for s in args.senders.split(",")):
        new, old = [], []
        for _ in range(3):
            t, msgs = per_tick_us(arrival_by_arrival, senders, args.ticks)
            new.append(t)
            old.append(per_tick_us(a_count_per_sender, senders, args.ticks)[0])
        print(
            f"{senders:8d} {min(new):12.1f} {min(old):10.1f} {min(old) / min(new):6.1f} "
            f"{msgs:10.1f}"
        )


if __name__ == "__main__":
    main()
