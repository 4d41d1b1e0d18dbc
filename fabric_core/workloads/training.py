"""Training data loading: a GPU step needs its batch; the loader prefetches over a storage path.

Every GPU runs steps of ``compute_s``. Step ``b`` consumes batch ``b``
(``batch_bytes``, read as I/Os of ``io_bytes``); it starts when the GPU is
free *and* the whole batch has landed in GPU memory. The loader keeps up to
``prefetch`` batches fetched or in flight ahead of the GPU (the PyTorch
``DataLoader`` prefetch window): fetching batch ``b + prefetch`` starts when
step ``b`` starts and frees its buffer. Nothing is written in: GPU utilisation
is ``compute_s`` over the measured interval between step starts, and that
interval comes out of the storage queues, the CPU costs and the fabric.
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


@dataclass
class Training(StorageWorkload):
    """Data-parallel training whose steps wait for their batches; see the module docstring."""

    kind: str = "training"
    gpus_spec: Any = "all"
    batch_bytes: float = 128 * 1024**2
    compute_s: float = 30e-3
    io_bytes: float = 1024**2
    prefetch: int = 2
    gpus: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    _ring: int = 0
    _n_io: int = 0
    _sizes: F64 = field(default_factory=lambda: np.zeros(0))
    _started: bool = False

    def bind(
        self, gpus: NDArray[np.int32], storage: NDArray[np.int32], rng: np.random.Generator
    ) -> None:
        self.gpus = self.bind_clients(self.gpus_spec, "gpus", gpus, storage, rng)
        if self.prefetch < 1:
            raise ValueError(f"workload {self.name!r}: prefetch must be >= 1")
        require_positive(
            self.name,
            {"batch": self.batch_bytes, "io_size": self.io_bytes, "compute": self.compute_s},
        )
        G = self.gpus.size
        self._ring = self.prefetch + 1
        self.left = np.zeros((G, self._ring), dtype=np.int64)  # I/Os of a batch not landed yet
        self.ready_t = np.zeros((G, self._ring))  # when a batch's last I/O landed
        self.issued = np.zeros(G, dtype=np.int64)  # batches whose fetch started
        self.steps = np.zeros(G, dtype=np.int64)  # steps started
        self.free_at = np.zeros(G)  # GPU busy until
        self.last_start = np.zeros(G)
        self.interval_sum = 0.0  # Σ time between consecutive step starts (all GPUs)
        self.intervals = 0
        self.wait_sum = 0.0  # Σ time a GPU waited for its batch (after its first step)

    def attach(self, fabric: Any) -> None:
        super().attach(fabric)
        io = min(self.io_bytes, self.io.max_io_bytes)
        self._n_io = max(1, math.ceil(self.batch_bytes / io - 1e-9))
        sizes = np.full(self._n_io, io)
        sizes[-1] = self.batch_bytes - io * (self._n_io - 1)
        self._sizes = sizes

    # ---------------------------------------------------------------- loader
    def _fetch(self, gi: I64, t: F64) -> None:
        """Start fetching the next batch of GPUs ``gi`` at times ``t``."""
        if gi.size == 0:
            return
        G, n = self.gpus.size, self._n_io
        b = self.issued[gi]
        self.left[gi, b % self._ring] = n
        self.ready_t[gi, b % self._ring] = 0.0
        self.issued[gi] += 1
        g_rep = np.repeat(gi, n)
        client = self.gpus[g_rep]
        k = np.tile(np.arange(n), gi.size)
        # stripe a batch's I/Os over the targets, each GPU from its own offset
        if self.targets.size:
            target = self.targets[(g_rep + np.repeat(b, n) * n + k) % self.targets.size]
        else:
            target = client
        tag = np.repeat(b, n) * G + g_rep
        self.io.issue(client, target, np.tile(self._sizes, gi.size), np.repeat(t, n), tag)

    def _next_act_s(self) -> float:
        """The first tick fetches the first batches; then a GPU whose next batch has
        landed starts its step, which fetches another."""
        if not self.running:
            return np.inf
        if not self._started:
            return -np.inf
        gpu = np.arange(self.gpus.size)
        slot = self.steps % self._ring
        ready = (self.issued > self.steps) & (self.left[gpu, slot] == 0)
        if not ready.any():
            return np.inf
        return float(np.maximum(self.free_at, self.ready_t[gpu, slot])[ready].min())

    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        io = self.io
        G = self.gpus.size
        if self.running and not self._started:
            self._started = True
            for _ in range(self.prefetch):
                self._fetch(np.arange(G), np.full(G, now_s))
        end = now_s + dt_s
        ids, t = io.pop_landed(end)
        if ids.size:
            tag = io.io["user_tag"][ids]
            gi, slot = tag % G, (tag // G) % self._ring
            np.subtract.at(self.left, (gi, slot), 1)
            np.maximum.at(self.ready_t, (gi, slot), t)
        self._start_steps(end)
        return io.flows_due(now_s, dt_s)

    def _start_steps(self, end: float) -> None:
        G = np.arange(self.gpus.size)
        while self.running:
            slot = self.steps % self._ring
            have = (self.issued > self.steps) & (self.left[G, slot] == 0)
            start = np.maximum(self.free_at, self.ready_t[G, slot])
            go = np.flatnonzero(have & (start < end))
            if go.size == 0:
                return
            s = start[go]
            later = self.steps[go] > 0
            if later.any():
                gap = s[later] - self.last_start[go[later]]
                self.interval_sum += float(gap.sum())
                self.intervals += int(later.sum())
                self.wait_sum += float((s[later] - self.free_at[go[later]]).sum())
                self.histogram("step_seconds").observe_many(gap)
            self.last_start[go] = s
            self.free_at[go] = s + self.compute_s
            self.steps[go] += 1
            # the step frees its batch buffer: the loader may fetch one more batch
            self._fetch(go, s)

    # ---------------------------------------------------------------- figures
    def kpis(self, now_s: float) -> Mapping[str, float]:
        step = self.interval_sum / self.intervals if self.intervals else float("nan")
        out = {
            "gpu_utilisation": self.compute_s / step if self.intervals else float("nan"),
            "step_seconds_mean": step,
            "compute_seconds": self.compute_s,
            "data_wait_fraction": self.wait_sum / self.interval_sum
            if self.interval_sum
            else float("nan"),
            "steps_started": float(self.steps.sum()),
            "demand_bytes_per_second": self.batch_bytes / self.compute_s * self.gpus.size,
        }
        out.update(self.io.kpis(self.gpus, now_s))
        out["loader_bytes_per_second"] = out.pop("storage_bytes_per_second")
        return out
