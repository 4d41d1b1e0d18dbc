"""Checkpoint bursts: every GPU writes its shard at once, large sequential writes.

At ``start_s`` (and every ``period_s`` after it, when > 0) each GPU writes
``size_bytes`` as I/Os of ``io_bytes``, keeping ``depth`` of them in flight
(a new write starts the moment one lands). Writes stripe over the storage
targets. A burst ends when the last write of the last GPU is durable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabric_core.workloads.base import FlowRequests, require_positive
from fabric_core.workloads.storage_io import StorageWorkload

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]


def group_rank(keys: I64) -> I64:
    """0, 1, 2, ... within each run of equal keys, in the given order (keys need not be sorted)."""
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    first = np.r_[True, k[1:] != k[:-1]]
    idx = np.arange(k.size)
    start = np.maximum.accumulate(np.where(first, idx, 0))
    rank = np.empty(k.size, dtype=np.int64)
    rank[order] = idx - start
    return rank


@dataclass
class Checkpoint(StorageWorkload):
    """Periodic all-GPU checkpoint writes; see the module docstring."""

    kind: str = "checkpoint"
    gpus_spec: Any = "all"
    size_bytes: float = 64 * 1024**2
    io_bytes: float = 1024**2
    depth: int = 8
    start_s: float = 0.0
    period_s: float = 0.0
    gpus: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    _burst: int = 0
    _burst_start: float = 0.0
    _next_s: float = 0.0
    _n_io: int = 0
    _io: float = 0.0
    last_burst_s: float = float("nan")
    in_burst: bool = False

    def bind(
        self, gpus: NDArray[np.int32], storage: NDArray[np.int32], rng: np.random.Generator
    ) -> None:
        self.gpus = self.bind_clients(self.gpus_spec, "gpus", gpus, storage, rng)
        require_positive(
            self.name, {"depth": self.depth, "size": self.size_bytes, "io_size": self.io_bytes}
        )
        G = self.gpus.size
        self.todo = np.zeros(G, dtype=np.int64)  # writes not started
        self.inflight = np.zeros(G, dtype=np.int64)
        self.written = np.zeros(G, dtype=np.int64)  # writes started in this burst
        self._next_s = self.start_s

    def attach(self, fabric: Any) -> None:
        super().attach(fabric)
        self._io = min(self.io_bytes, self.io.max_io_bytes)
        self._n_io = max(1, math.ceil(self.size_bytes / self._io - 1e-9))

    def _write(self, gi: I64, t: F64) -> None:
        if gi.size == 0:
            return
        G = self.gpus.size
        k = self.written[gi] + group_rank(gi)
        np.add.at(self.written, gi, 1)
        np.subtract.at(self.todo, gi, 1)
        np.add.at(self.inflight, gi, 1)
        client = self.gpus[gi]
        target = self.targets[(gi + k) % self.targets.size] if self.targets.size else client
        size = np.where(
            k == self._n_io - 1, self.size_bytes - self._io * (self._n_io - 1), self._io
        )
        self.io.issue(client, target, size, t, self._burst * G + gi, write=True)

    def _next_act_s(self) -> float:
        """The next burst (its writes after the first go as writes land)."""
        return self._next_s if self.running and not self.in_burst else np.inf

    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        io = self.io
        end = now_s + dt_s
        G = self.gpus.size
        if self.running and not self.in_burst and self._next_s < end:
            start = max(self._next_s, now_s)
            self.in_burst = True
            self._burst += 1
            self._burst_start = start
            self.todo[:] = self._n_io
            self.written[:] = 0
            first = np.repeat(np.arange(G), min(self.depth, self._n_io))
            self._write(first, np.full(first.size, start))
            self._next_s = start + self.period_s if self.period_s > 0 else float("inf")
        while True:
            ids, t = io.pop_landed(end)
            if ids.size == 0:
                break
            gi = io.io["user_tag"][ids] % G
            np.subtract.at(self.inflight, gi, 1)
            self.histogram("write_seconds").observe_many(t - io.io["issue"][ids])
            # each landed write frees a slot: the next write of that GPU starts then
            ok = group_rank(gi) < self.todo[gi]
            self._write(gi[ok], t[ok])
            if self.in_burst and not self.todo.any() and not self.inflight.any():
                self.in_burst = False
                self.last_burst_s = float(t.max()) - self._burst_start
                self.histogram("checkpoint_seconds").observe_many(np.array([self.last_burst_s]))
        return io.flows_due(now_s, dt_s)

    def start(self) -> None:
        """Start (again): an operator's start takes a checkpoint now unless one is running."""
        super().start()
        if not self.in_burst:
            self._next_s = 0.0

    def kpis(self, now_s: float) -> Mapping[str, float]:
        out = {
            "checkpoint_seconds_last": self.last_burst_s,
            "checkpoint_bytes_per_second_last": self.size_bytes * self.gpus.size / self.last_burst_s
            if self.last_burst_s > 0
            else float("nan"),
            "bursts_started": float(self._burst),
            "in_burst": float(self.in_burst),
        }
        out.update(self.io.kpis(self.gpus, now_s))
        return out
