"""Where a tick's time goes: each step of ``Fabric.step``, and in it the compiled kernels'
share (their calls from Python, numba's dispatch included) and the rest, Python's.

    python benchmarks/bench_breakdown.py [--sizes default,default-roce,...] [--ticks N]
                                         [--warmup N] [--top N] [--json FILE]

Each fabric (``bench_core.SIZES``) runs into its steady state, then ``--ticks`` ticks one by
one (``Fabric.step``, never ticks at once) with every step and every kernel call timed.
Printed per fabric: the ms a tick of each step, its kernels' part and Python's, how many
index entries come and go a tick (what an index patched in place would touch), then the
kernels that cost most. The timers add about half a microsecond a call, so the total is a
little above an untimed tick's (``bench_core.py``); the shares are what this is for: it
compares the kernels with the Python around them, in the same run. Not a test.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import SIZES, steady
from numba.core.registry import CPUDispatcher

from fabric_core.runtime.fabric import Fabric
from fabric_core.tick.lazy import LazyModule
from fabric_core.tick.step import EntryIndex


class Timers:
    """Seconds spent per step, per kernel, and in kernels per step."""

    def __init__(self) -> None:
        self.step_s: Counter[str] = Counter()
        self.kernel_s: Counter[str] = Counter()
        self.kernel_calls: Counter[str] = Counter()
        self.kernels_in_step_s: Counter[str] = Counter()
        self.current = "step"  # the step running now ("step": outside the listed ones)
        self.returned: dict[str, Any] = {}  # each step's last result

    def step(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` (a step), timed as ``name``."""

        def timed(*args: Any, **kwargs: Any) -> Any:
            outer, self.current = self.current, name
            started = time.perf_counter()
            try:
                self.returned[name] = result = fn(*args, **kwargs)
                return result
            finally:
                self.step_s[name] += time.perf_counter() - started
                self.current = outer

        return timed

    def kernel_took(self, name: str, seconds: float) -> None:
        """A call of kernel ``name`` took ``seconds``, in the step running."""
        self.kernel_s[name] += seconds
        self.kernel_calls[name] += 1
        self.kernels_in_step_s[self.current] += seconds


#: the fabric's timers while it is measured (``breakdown``): the kernels' timers tell them
_timing: list[Timers] = []


def _timed_kernel(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            if _timing:
                _timing[-1].kernel_took(name, time.perf_counter() - started)

    return timed


def _time_kernels() -> None:
    """Put a timer on every kernel the core calls from Python: the compiled functions
    the core's modules (and their ``LazyModule`` stand-ins) hold. Once: a timer is not a
    compiled function, so a second pass leaves it as it is."""
    timed: dict[int, Callable[..., Any]] = {}

    def wrapped(name: str, fn: Any) -> Callable[..., Any]:
        return timed.setdefault(id(fn), _timed_kernel(name, fn))

    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith("fabric_core"):
            continue
        for name, value in list(vars(module).items()):
            if isinstance(value, CPUDispatcher):
                setattr(module, name, wrapped(name, value))
            elif isinstance(value, LazyModule):
                real = importlib.import_module(value._name)
                for attr, fn in list(vars(real).items()):
                    if isinstance(fn, CPUDispatcher):
                        setattr(value, attr, wrapped(attr, fn))


class IndexChurn:
    """How much of the entry index changes from one tick to the next: the (hop, flow)
    entries that come and go, what an index patched in place would have to touch."""

    def __init__(self) -> None:
        self._last: set[int] | None = None
        self.came = self.went = self.entries = self.ticks = 0

    def saw(self, idx: EntryIndex | None) -> None:
        """Compare a tick's index (its entries' flat places) with the last one seen."""
        now = set(idx.pos.tolist()) if idx is not None else set()
        if self._last is not None:
            self.came += len(now - self._last)
            self.went += len(self._last - now)
            self.entries += len(now)
            self.ticks += 1
        self._last = now

    def summary(self) -> dict[str, float]:
        """Per tick: entries, entries that came, entries that went."""
        n = max(self.ticks, 1)
        return {"entries": self.entries / n, "came": self.came / n, "went": self.went / n}


def breakdown(name: str, ticks: int, warmup: int) -> dict[str, Any]:
    """Steady state, then ``ticks`` ticks of ``name`` one by one, timed step by step."""
    fabric: Fabric = SIZES[name]("compiled")
    fabric.run_ticks(2)  # the kernels loaded (or compiled) before any timer goes on
    steady(fabric, warmup)
    timers = Timers()
    _time_kernels()
    _timing[:] = [timers]
    for step in Fabric.STEPS:
        setattr(fabric, step, timers.step(step, getattr(fabric, step)))
    h0 = fabric.hop_updates
    churn = IndexChurn()
    wall = 0.0
    for _ in range(ticks):
        started = time.perf_counter()
        fabric.step()
        wall += time.perf_counter() - started
        # (off the clock; a tick with no flow in flight builds no index)
        churn.saw(timers.returned.pop("_current_index", None))
    _timing.clear()
    per_tick_ms = {k: v / ticks * 1e3 for k, v in timers.step_s.items()}
    kernels_ms = {k: v / ticks * 1e3 for k, v in timers.kernels_in_step_s.items()}
    return {
        "fabric": name,
        "ticks": ticks,
        "entries_per_tick": (fabric.hop_updates - h0) / ticks,
        "index_churn": churn.summary(),
        "ms_per_tick": wall / ticks * 1e3,
        "steps": {
            step: {
                "ms": per_tick_ms.get(step, 0.0),
                "kernels_ms": kernels_ms.get(step, 0.0),
            }
            for step in Fabric.STEPS
        },
        "kernels": {
            k: {
                "ms": v / ticks * 1e3,
                "calls_per_tick": timers.kernel_calls[k] / ticks,
            }
            for k, v in timers.kernel_s.most_common()
        },
    }


def report(out: dict[str, Any], top: int) -> None:
    steps = out["steps"]
    in_steps = sum(s["ms"] for s in steps.values())
    kernels = sum(s["kernels_ms"] for s in steps.values())
    total = out["ms_per_tick"]
    print(
        f"\n{out['fabric']}: {total:.3f} ms a tick (timed), "
        f"{out['entries_per_tick']:,.0f} entries a tick"
    )
    print(f"  {'step':22s} {'ms/tick':>8s} {'kernels':>8s} {'Python':>8s}")
    for step, s in steps.items():
        if s["ms"] >= 0.0005:
            py = s["ms"] - s["kernels_ms"]
            print(f"  {step:22s} {s['ms']:8.3f} {s['kernels_ms']:8.3f} {py:8.3f}")
    rest = total - in_steps
    print(f"  {'(step, between)':22s} {rest:8.3f} {0.0:8.3f} {rest:8.3f}")
    print(
        f"  {'all':22s} {total:8.3f} {kernels:8.3f} {total - kernels:8.3f}"
        f"   kernels {kernels / total:.0%}, Python {1 - kernels / total:.0%}"
    )
    c = out["index_churn"]
    print(
        f"  index churn: {c['came']:,.1f} entries came and {c['went']:,.1f} went a tick, "
        f"of {c['entries']:,.0f}"
    )
    print(f"  {'kernel':30s} {'ms/tick':>8s} {'calls/tick':>10s}")
    for k, v in list(out["kernels"].items())[:top]:
        print(f"  {k:30s} {v['ms']:8.3f} {v['calls_per_tick']:10.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="default,default-roce,default-spray")
    ap.add_argument("--ticks", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--top", type=int, default=10, help="kernels listed per fabric")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args()
    names = args.sizes.split(",")
    unknown = [n for n in names if n not in SIZES]
    if unknown:
        ap.error(f"unknown size(s) {', '.join(unknown)}; known: {', '.join(SIZES)}")
    results = []
    for name in names:
        out = breakdown(name, args.ticks, args.warmup)
        report(out, args.top)
        results.append(out)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
