"""Latency "now": quantiles over a sliding window of recent samples, plus their history.

Snapshot histograms are cumulative since the start of the run; a quantile of
those barely moves after a while. The console subtracts the counts of a sample
a few refreshes back, so p99 shows the last moments, and keeps a short history
of those windowed figures for the sparklines. The window is counted in samples
(not wall seconds) so that a seeded, hand-stepped run renders identically.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fabric_core.runtime.snapshot import Snapshot
from fabric_core.tick.histogram import HistogramView

QUANTILES = (0.5, 0.99, 0.999)


@dataclass(frozen=True, slots=True)
class ClassLatency:
    """One traffic class: windowed quantiles (seconds, NaN if no traffic) and p99 history."""

    name: str
    p50_s: float
    p99_s: float
    p999_s: float
    count: int  # observations in the window
    p99_history_s: tuple[float, ...]

    @property
    def stalled(self) -> bool:
        """Nothing of the class completed in the window: the quantiles are the last ones
        measured, not what its messages wait now (a RoCE link down before BFD sees it
        held a class's old, short p99 on screen while its messages waited)."""
        return self.count == 0 and not math.isnan(self.p99_s)


class LatencyWindow:
    """Tracks per-class histograms across samples; see the module docstring."""

    def __init__(self, window_samples: int = 5, history: int = 60) -> None:
        self.window_samples = window_samples
        self._counts: dict[str, deque[NDArray[np.int64]]] = {}
        self._history: dict[str, deque[float]] = {}
        self._history_len = history
        self._last_tick: int | None = None
        self.current: dict[str, ClassLatency] = {}

    def update(self, snap: Snapshot) -> dict[str, ClassLatency]:
        """Take a new sample (ignored if the tick did not advance; a tick that went back
        is a new run, and starts the window again)."""
        if snap.tick == self._last_tick:
            return self.current
        if self._last_tick is not None and snap.tick < self._last_tick:
            # a new run: its histograms count from zero, so the old samples cannot be
            # subtracted from them (the window would hold negative counts)
            self._counts.clear()
            self._history.clear()
            self.current = {}
        self._last_tick = snap.tick
        out: dict[str, ClassLatency] = {}
        for name in sorted(snap.latency):
            hist = snap.latency[name]
            window = self._counts.setdefault(name, deque(maxlen=self.window_samples + 1))
            counts = np.asarray(hist.counts)
            if window and (window[0].shape != counts.shape or (counts < window[0]).any()):
                # counts that went down (a new run whose first tick came after the old
                # run's last, or a remote emulator's telemetry that lies): the samples
                # before cannot be subtracted; the window starts again here
                window.clear()
            window.append(counts)
            delta = window[-1] - window[0] if len(window) > 1 else window[-1]
            view = HistogramView(counts=delta, sum_s=0.0)
            n = view.count
            p50, p99, p999 = (view.quantile(q) if n else math.nan for q in QUANTILES)
            history = self._history.setdefault(name, deque(maxlen=self._history_len))
            previous = self.current.get(name)
            if n:
                history.append(p99)
            elif previous is not None:
                # Nothing completed in the window (a slow workload): keep the last figures.
                p50, p99, p999 = previous.p50_s, previous.p99_s, previous.p999_s
            out[name] = ClassLatency(name, p50, p99, p999, n, tuple(history))
        self.current = out
        return out
