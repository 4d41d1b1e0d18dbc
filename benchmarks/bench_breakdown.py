"""Where a tick's time goes: each step of ``Fabric.step``, and in it the compiled kernels'
share (their calls from Python, numba's dispatch included) and the rest, Python's.

    python benchmarks/bench_breakdown.py [--sizes default,default-roce,...] [--ticks N]
                                         [--warmup N] [--top N] [--split N] [--json FILE]

Each fabric (``bench_core.SIZES``) runs into its steady state, then ``--ticks`` ticks one by
one (``Fabric.step``, never ticks at once) with every step and every kernel call timed.
Printed per fabric: the ms a tick of each step, its kernels' part and Python's, how many
index entries come and go a tick (what an index patched in place would touch), then the
kernels that cost most. The timers add about half a microsecond a call, so the total is a
little above an untimed tick's (``bench_core.py``); the shares are what this is for: it
compares the kernels with the Python around them, in the same run. Not a test.

``--split N`` prints the ticks that move more than ``N`` entries apart from the others,
each kind with its share of the ticks and of the time: on the default scenario the few
ticks that carry a MoE round (some 16,000 entries; ``--split 8000``) cost as much as all
the others, and for other reasons (kernel work per entry, not Python per call).
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

import numpy as np
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

    def clear(self) -> None:
        """Start counting again from zero."""
        self.step_s.clear()
        self.kernel_s.clear()
        self.kernel_calls.clear()
        self.kernels_in_step_s.clear()

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
    entries that come and go, what an index patched in place would have to touch. An
    entry is its flat place and its flow's start: a new flow takes the slot of one that
    ended (the lowest free), so by place alone it would not count as new (until session
    33 it did not: the 10k fat-tree read 17 entries a tick where some 850 come)."""

    def __init__(self) -> None:
        self._last: set[tuple[int, float]] | None = None
        self.came = self.went = self.entries = self.ticks = 0

    def saw(self, idx: EntryIndex | None, start_s: np.ndarray) -> tuple[int, int, int] | None:
        """Compare a tick's index (its entries' flat places, and when their flows started:
        ``start_s``, the flow table's) with the last one seen; returns (entries, came,
        went), None for the first."""
        now = (
            set(zip(idx.pos.tolist(), start_s[idx.flow].tolist(), strict=True))
            if idx is not None
            else set()
        )
        last, self._last = self._last, now
        if last is None:
            return None
        return len(now), len(now - last), len(last - now)

    def add(self, seen: tuple[int, int, int] | None) -> None:
        """Count one tick's churn (``saw``'s result) in."""
        if seen is not None:
            entries, came, went = seen
            self.entries += entries
            self.came += came
            self.went += went
            self.ticks += 1

    def summary(self) -> dict[str, float]:
        """Per tick: entries, entries that came, entries that went."""
        n = max(self.ticks, 1)
        return {"entries": self.entries / n, "came": self.came / n, "went": self.went / n}


class TickKind:
    """What the ticks of one kind took, added up: their wall time, entries, index churn and
    the timers' counts."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.timers = Timers()
        self.churn = IndexChurn()
        self.ticks = 0
        self.entries = 0
        self.wall_s = 0.0

    def add(self, tick: Timers, wall_s: float, entries: int) -> None:
        """One tick: its own timers' counts, wall time and entries moved."""
        total = self.timers
        total.step_s.update(tick.step_s)
        total.kernel_s.update(tick.kernel_s)
        total.kernel_calls.update(tick.kernel_calls)
        total.kernels_in_step_s.update(tick.kernels_in_step_s)
        self.ticks += 1
        self.entries += entries
        self.wall_s += wall_s


def breakdown(name: str, ticks: int, warmup: int, split: int | None = None) -> list[dict[str, Any]]:
    """Steady state, then ``ticks`` ticks of ``name`` one by one, timed step by step: one
    result for all of them, or (``split``) one for the ticks that move at most ``split``
    entries and one for those that move more."""
    fabric: Fabric = SIZES[name]("compiled")
    fabric.run_ticks(2)  # the kernels loaded (or compiled) before any timer goes on
    steady(fabric, warmup)
    timers = Timers()
    _time_kernels()
    _timing[:] = [timers]
    for step in Fabric.STEPS:
        setattr(fabric, step, timers.step(step, getattr(fabric, step)))
    if split is None:
        small = large = TickKind("all")
    else:
        small, large = TickKind(f"<= {split:,} entries"), TickKind(f"> {split:,} entries")
    churn = IndexChurn()  # (from the tick before, whatever its kind)
    for _ in range(ticks):
        h0 = fabric.hop_updates
        timers.clear()  # (each tick's counts added to its kind's after it)
        started = time.perf_counter()
        fabric.step()
        wall = time.perf_counter() - started
        # (off the clock; a tick with no flow in flight builds no index)
        entries = fabric.hop_updates - h0
        kind = large if split is not None and entries > split else small
        kind.add(timers, wall, entries)
        kind.churn.add(churn.saw(timers.returned.pop("_current_index", None), fabric.flows.start_s))
    _timing.clear()
    kinds = [small] if large is small else [small, large]
    return [_result(name, kind, ticks) for kind in kinds if kind.ticks]


def _result(name: str, kind: TickKind, all_ticks: int) -> dict[str, Any]:
    """The figures of one kind of tick, per tick of that kind."""
    n, t = kind.ticks, kind.timers
    per_tick_ms = {k: v / n * 1e3 for k, v in t.step_s.items()}
    kernels_ms = {k: v / n * 1e3 for k, v in t.kernels_in_step_s.items()}
    return {
        "fabric": name,
        "kind": kind.kind,
        "ticks": n,
        "share_of_ticks": n / all_ticks,
        "wall_s": kind.wall_s,
        "entries_per_tick": kind.entries / n,
        "index_churn": kind.churn.summary(),
        "ms_per_tick": kind.wall_s / n * 1e3,
        "steps": {
            step: {
                "ms": per_tick_ms.get(step, 0.0),
                "kernels_ms": kernels_ms.get(step, 0.0),
            }
            for step in Fabric.STEPS
        },
        "kernels": {
            k: {
                "ms": v / n * 1e3,
                "calls_per_tick": t.kernel_calls[k] / n,
            }
            for k, v in t.kernel_s.most_common()
        },
    }


def report(out: dict[str, Any], top: int) -> None:
    steps = out["steps"]
    in_steps = sum(s["ms"] for s in steps.values())
    kernels = sum(s["kernels_ms"] for s in steps.values())
    total = out["ms_per_tick"]
    kind = "" if out["kind"] == "all" else f", the ticks of {out['kind']}"
    print(
        f"\n{out['fabric']}{kind}: {total:.3f} ms a tick (timed), "
        f"{out['entries_per_tick']:,.0f} entries a tick"
    )
    if out["kind"] != "all":
        print(f"  {out['share_of_ticks']:.0%} of the ticks, {out['share_of_time']:.0%} of the time")
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
    ap.add_argument(
        "--split",
        type=int,
        metavar="N",
        help="print the ticks that move more than N entries apart from the others",
    )
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args()
    if args.split is not None and args.split < 0:
        ap.error(f"--split must be at least 0, not {args.split}")
    names = args.sizes.split(",")
    unknown = [n for n in names if n not in SIZES]
    if unknown:
        ap.error(f"unknown size(s) {', '.join(unknown)}; known: {', '.join(SIZES)}")
    results = []
    for name in names:
        kinds = breakdown(name, args.ticks, args.warmup, args.split)
        wall = sum(out["wall_s"] for out in kinds)
        for out in kinds:
            out["share_of_time"] = out["wall_s"] / wall if wall > 0 else 0.0
            report(out, args.top)
        results.extend(kinds)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
