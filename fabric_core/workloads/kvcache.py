"""KVCache offload/restore: a cache hit restores a request's KV from storage instead of prefilling.

Requests arrive at each serving GPU as a Poisson process (``rate_per_s`` per
GPU, drawn arrival by arrival: ``workloads.arrivals``, the same requests on any tick)
with ``context_tokens`` of context. With probability ``hit_rate`` the
KV of that context is in the storage tier: it is read back
(``context_tokens × kv_bytes_per_token`` in I/Os of ``io_bytes``) and
TTFT = restore time + first decode step. Otherwise the GPU prefills,
TTFT = prefill + first decode, and the new KV is offloaded (written) in the
background when ``offload``. Prefill and the first decode step come from the
same model as PD (``pd_presets.prefill_s`` / ``decode_step_s``: the model and
GPU presets, ``tp``, the one MFU), unless a scenario sets
``prefill_tokens_per_s`` / ``first_decode`` itself.
The GPU's own queue of requests is not modelled (each request is timed on its
own), so TTFT here is the storage-vs-prefill part the paths change.

A PD workload can use the same store beside it: run a ``kvcache`` workload
(``rate_per_s = 0`` if PD makes all the requests), find it in
``fabric.workloads`` and call ``store.restore(gpu_nodes, kv_bytes, t)`` /
``store.offload(...)`` (request ids back), then ``store.pop_done(upto)`` each
tick for the ids (and times) whose KV has landed. The KvCache workload
carries the flows and leaves those requests to their caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabric_core.workloads.arrivals import PoissonArrivals
from fabric_core.workloads.base import FlowRequests, require_positive
from fabric_core.workloads.pd_presets import (
    GPUS,
    MFU,
    MODELS,
    GpuPreset,
    ModelPreset,
    decode_step_s,
    prefill_s,
)
from fabric_core.workloads.storage_io import StorageClient, StorageWorkload

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]


class KvStore:
    """KV restore/offload requests over a ``StorageClient``: whole requests, not I/Os."""

    def __init__(self, client: StorageClient, targets: I64, io_bytes: float) -> None:
        self.client = client
        self.targets = targets
        self.io_bytes = min(io_bytes, client.max_io_bytes)
        self.left = np.zeros(16, dtype=np.int64)  # I/Os not landed, per request slot
        self.start = np.zeros(16)
        self.done_t = np.zeros(16)
        self.write = np.zeros(16, dtype=bool)
        self.external = np.zeros(16, dtype=bool)  # started by another workload (e.g. PD)
        self._n = 0  # slots ever used
        self._free: I64 = np.zeros(0, np.int64)
        self._popped: dict[bool, I64] = {True: np.zeros(0, np.int64), False: np.zeros(0, np.int64)}
        self._done: list[NDArray[Any]] = [np.zeros(0, np.int64), np.zeros(0)]

    @property
    def slots(self) -> int:
        """Request records allocated (live or free for reuse)."""
        return self._n

    @property
    def outstanding(self) -> int:
        """Requests with an I/O not landed yet."""
        return int(np.count_nonzero(self.left[: self._n]))

    def _new(self, n: int, t: F64) -> I64:
        """Slots for ``n`` requests: freed ones first (bounded memory in long runs)."""
        take = min(n, self._free.size)
        reused = self._free[self._free.size - take :]
        self._free = self._free[: self._free.size - take]
        fresh = np.arange(self._n, self._n + n - take, dtype=np.int64)
        self._n += n - take
        if self._n > self.left.size:
            cap = max(self._n, 2 * self.left.size)
            for name in ("left", "start", "done_t", "write", "external"):
                old = getattr(self, name)
                grown = np.zeros(cap, dtype=old.dtype)
                grown[: old.size] = old
                setattr(self, name, grown)
        rid = np.concatenate([reused, fresh])
        self.start[rid] = t
        self.done_t[rid] = 0.0
        return rid

    def _io(self, gpu: I64, kv_bytes: F64, t: F64, write: bool, external: bool) -> I64:
        rid = self._new(gpu.size, t)
        self.external[rid] = external
        n_io = np.maximum(1, np.ceil(kv_bytes / self.io_bytes - 1e-9)).astype(np.int64)
        self.left[rid] = n_io
        self.write[rid] = write
        r = np.repeat(rid, n_io)
        k = np.arange(r.size) - np.repeat(np.cumsum(n_io) - n_io, n_io)
        last = k == np.repeat(n_io, n_io) - 1
        size = np.where(last, np.repeat(kv_bytes, n_io) - self.io_bytes * k, self.io_bytes)
        client = np.repeat(gpu, n_io)
        # a request's blocks are striped over the targets (hashing by request id)
        target = self.targets[(r + k) % self.targets.size] if self.targets.size else client
        self.client.issue(client, target, size, np.repeat(t, n_io), r, write=write)
        return rid

    def restore(self, gpu: I64, kv_bytes: F64, t: F64, *, external: bool = True) -> I64:
        """Read KV back into the GPUs' memory from times ``t``; returns request ids."""
        return self._io(gpu, kv_bytes, t, write=False, external=external)

    def offload(self, gpu: I64, kv_bytes: F64, t: F64, *, external: bool = True) -> I64:
        """Write KV from the GPUs to storage from times ``t``; returns request ids."""
        return self._io(gpu, kv_bytes, t, write=True, external=external)

    def poll(self, upto_s: float) -> None:
        """Account I/Os landed before ``upto_s``."""
        ids, t = self.client.pop_landed(upto_s)
        if ids.size == 0:
            return
        r = self.client.io["user_tag"][ids]
        np.subtract.at(self.left, r, 1)
        np.maximum.at(self.done_t, r, t)
        fin = np.unique(r[self.left[r] == 0])
        self._done = [np.r_[self._done[0], fin], np.r_[self._done[1], self.done_t[fin]]]

    def quiet_until(self, *, external: bool = True) -> float:
        """The time before which ``pop_done`` (for ``external``'s caller) finds nothing
        and changes nothing: the client's (``StorageClient.quiet_until``), or minus
        infinity while requests are done and not yet taken, or the ids this caller took
        last wait to be freed."""
        if self._done[0].size or self._popped[external].size:
            return -np.inf
        return self.client.quiet_until()

    def pop_done(self, upto_s: float, *, external: bool = True) -> tuple[I64, F64]:
        """Requests (started by others, or by the KvCache workload itself) whose last
        I/O landed before ``upto_s``: (ids, times). Their records (``start``...) stay
        valid until this caller's next ``pop_done``; then the ids are reused."""
        # the ids handed out by this caller's previous call may now be reused
        self._free = np.concatenate([self._free, self._popped[external]])
        self.poll(upto_s)
        ids, t = self._done
        mine = self.external[ids] == external
        self._done = [ids[~mine], t[~mine]]
        self._popped[external] = ids[mine]
        return ids[mine], t[mine]


@dataclass
class KvCache(StorageWorkload):
    """KV cache offload/restore beside a serving workload; see the module docstring."""

    kind: str = "kvcache"
    gpus_spec: Any = "all"
    rate_per_s: float = 20.0
    context_tokens: int = 4096
    preset: ModelPreset = MODELS["llama3-70b"]
    gpu: GpuPreset = GPUS["h100-sxm"]
    tp: int = 8
    mfu: float = MFU
    hit_rate: float = 0.5
    prefill_tokens_per_s: float = 0.0  # > 0: a fixed rate instead of the model's prefill
    first_decode_s: float = 0.0  # > 0: a fixed first decode step instead of the model's
    io_bytes: float = 1024**2
    offload: bool = True
    gpus: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    store: KvStore | None = None
    hits: int = 0
    misses: int = 0
    _arrivals: PoissonArrivals | None = None

    def bind(
        self, gpus: NDArray[np.int32], storage: NDArray[np.int32], rng: np.random.Generator
    ) -> None:
        self.gpus = self.bind_clients(self.gpus_spec, "gpus", gpus, storage, rng)
        if not 0.0 <= self.hit_rate <= 1.0:
            raise ValueError(f"workload {self.name!r}: hit_rate must be in [0, 1]")
        require_positive(self.name, {"context_tokens": self.context_tokens, "tp": self.tp})
        if self.prefill_tokens_per_s < 0:
            raise ValueError(
                f"workload {self.name!r}: the prefill rate must be >= 0, "
                f"got {self.prefill_tokens_per_s:g}"
            )

    @property
    def kv_bytes_per_token(self) -> float:
        """KV bytes per token of the model."""
        return self.preset.kv_bytes_per_token

    @property
    def prefill_seconds(self) -> float:
        """Prefill of one request: the PD compute model, or the scenario's fixed rate."""
        if self.prefill_tokens_per_s > 0:
            return self.context_tokens / self.prefill_tokens_per_s
        n = np.array([float(self.context_tokens)])
        return float(prefill_s(self.preset, n, self.tp, self.gpu.flops, self.mfu)[0])

    @property
    def decode_seconds(self) -> float:
        """The first decode step: PD's HBM-bound step, or the scenario's fixed figure."""
        if self.first_decode_s > 0:
            return self.first_decode_s
        n = np.array([float(self.context_tokens)])
        return float(decode_step_s(self.preset, n, self.tp, self.gpu.hbm_Bps)[0])

    def attach(self, fabric: Any) -> None:
        super().attach(fabric)
        self.store = KvStore(self.io, self.targets, self.io_bytes)

    @property
    def kv_bytes(self) -> float:
        """KV bytes of one request's context."""
        return self.context_tokens * self.kv_bytes_per_token

    def stop(self) -> None:
        super().stop()
        self._arrivals = None  # (the process starts afresh with the workload)

    def quiet_until(self, now_s: float, dt_s: float) -> float:
        if self.store is None:
            return now_s
        first = self.store.quiet_until(external=False)
        if self.running and self.gpus.size:
            if self._arrivals is None:
                return now_s  # the first tick draws the first arrivals
            first = min(first, self._arrivals.next_s)
        # a tick takes the requests that arrive, and the I/Os ready or landed, before its end
        return first - dt_s

    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        assert self.store is not None
        end = now_s + dt_s
        if self.running and self.gpus.size:
            if self._arrivals is None:
                rate = self.rate_per_s * self.gpus.size
                self._arrivals = PoissonArrivals(rate, self.gpus.size, now_s)
            # the requests that arrive in the tick, each at its own time and GPU; its
            # uniform number decides whether its KV is in the store
            t, at, u = self._arrivals.take(end, rng)
            gpu = self.gpus[at]
            if gpu.size:
                hit = u < self.hit_rate
                self.hits += int(hit.sum())
                self.misses += int((~hit).sum())
                kv = np.full(gpu.size, self.kv_bytes)
                if hit.any():
                    self.store.restore(gpu[hit], kv[hit], t[hit], external=False)
                miss = ~hit
                if miss.any():
                    prefill = self.prefill_seconds
                    ttft = np.full(int(miss.sum()), prefill + self.decode_seconds)
                    self.histogram("ttft_seconds").observe_many(ttft)
                    self.histogram("ttft_miss_seconds").observe_many(ttft)
                    if self.offload:
                        self.store.offload(gpu[miss], kv[miss], t[miss] + prefill, external=False)
        ids, t_done = self.store.pop_done(end, external=False)
        if ids.size:
            is_restore = ~self.store.write[ids]
            r = ids[is_restore]
            restore_s = t_done[is_restore] - self.store.start[r]
            self.histogram("restore_seconds").observe_many(restore_s)
            self.histogram("ttft_seconds").observe_many(restore_s + self.decode_seconds)
            self.histogram("ttft_hit_seconds").observe_many(restore_s + self.decode_seconds)
        return self.io.flows_due(now_s, dt_s)

    def kpis(self, now_s: float) -> Mapping[str, float]:
        def q(name: str, p: float) -> float:
            h = self.histograms.get(name)
            return h.freeze().quantile(p) if h is not None else float("nan")

        total = self.hits + self.misses
        out = {
            "ttft_p50_seconds": q("ttft_seconds", 0.5),
            "ttft_p99_seconds": q("ttft_seconds", 0.99),
            "ttft_hit_p50_seconds": q("ttft_hit_seconds", 0.5),
            "ttft_miss_p50_seconds": q("ttft_miss_seconds", 0.5),
            "restore_p50_seconds": q("restore_seconds", 0.5),
            "restore_p99_seconds": q("restore_seconds", 0.99),
            "hit_fraction": self.hits / total if total else float("nan"),
            # restores and offloads not done yet: their TTFT is not in the figures above
            "requests_outstanding": float(self.store.outstanding) if self.store else 0.0,
            "prefill_seconds": self.prefill_seconds,
            "first_decode_seconds": self.decode_seconds,
            "kv_bytes_per_request": self.kv_bytes,
        }
        out.update(self.io.kpis(self.gpus, now_s))
        return out
