"""Prefill/decode (PD) disaggregation: prefill pool → KV-cache transfer over the fabric → decode.

Requests arrive as a Poisson process (drawn arrival by arrival, ``workloads.arrivals``:
the same requests on any tick) and wait in one FIFO queue. The head starts on
the prefill instance that can take it soonest: its compute is free (one prefill at a
time) and it has room for the request's KV. The KV stays in the prefill instance's
HBM until it has been sent (the decode side has it), so a slow transfer holds
memory and, at load, builds the queue:

* ``kv_hold = "memory"`` (default): an instance holds the KV of any number of
  requests waiting to be sent, up to ``kv_memory_bytes`` (its engine's share of HBM
  minus the weights); vLLM's NixlConnector frees a prefill request's blocks only
  once the decode instance has read them.
* ``kv_hold = "slot"``: the instance takes no new request until the KV of its last
  one is sent (a connector that sends synchronously).
* ``kv_hold = "none"``: the KV is forgotten once computed (no hold; for comparison).

Prefill time comes from the model's FLOPs (``pd_presets.prefill_s``); the KV
(``kv_bytes_per_token · n``) goes to a decode instance (round robin) in
``kv_chunks`` messages, after prefill (``kv_transfer = "after"``) or layer-wise,
each chunk of layers as soon as it is computed (``"layerwise"``), over RDMA (the
endpoint model and the fabric) or kernel TCP (``pd_tcp``: the storage TCP host
costs). The first decode step reads the weights and the KV from HBM.

TTFT = queue + prefill + transfer (prefill end → last KV byte landed) + first decode
step, each kept in its own histogram. A prefill or decode *instance* is one endpoint
of the fabric (one NIC) standing for ``tp`` GPUs of compute.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
from numpy.typing import NDArray

from fabric_core.endpoints.model import EndpointModel, EndpointParams, fault_masks
from fabric_core.storage.model import StorageParams, storage_system
from fabric_core.workloads.arrivals import PoissonArrivals
from fabric_core.workloads.base import Completions, FlowRequests, Workload, pick_endpoints
from fabric_core.workloads.moe import nic_payload_Bps
from fabric_core.workloads.pd_presets import (
    GPU_FLOPS,
    GPUS,
    HBM_BPS,
    MFU,
    MODELS,
    GpuPreset,
    ModelPreset,
    decode_step_s,
    kv_memory_bytes,
    prefill_s,
)
from fabric_core.workloads.pd_tcp import TcpTransport

__all__ = [
    "GPUS",
    "GPU_FLOPS",
    "HBM_BPS",
    "MFU",
    "MODELS",
    "ModelPreset",
    "PDDisagg",
    "decode_step_s",
    "prefill_s",
]

CHUNK_BITS = 16  # a KV message's tag: request << 16 | chunk (unique: routing hashes it)
KV_HOLDS = ("memory", "slot", "none")
KV_TRANSFERS = ("after", "layerwise")
TRANSPORTS = ("rdma", "tcp")
_COLS = ("arrival", "start", "prefill_end", "transfer_end", "ctx", "left", "inst")


@dataclass
class PDDisagg(Workload):
    """PD disaggregation; see the module docstring."""

    kind: str = "pd"
    prefill_spec: Any = 0.5
    decode_spec: Any = 0.5
    rate_per_s: float = 20.0
    context_tokens: int = 0  # fixed context length; 0 = lognormal below
    context_median: float = 2048.0
    context_sigma: float = 1.0
    context_max: int = 131072
    preset: ModelPreset = MODELS["llama3-70b"]
    gpu: GpuPreset = GPUS["h100-sxm"]
    tp: int = 8
    mfu: float = MFU
    kv_chunks: int = 8
    kv_hold: str = "memory"
    kv_memory_bytes: float = 0.0  # per prefill instance; 0 = derived from HBM and weights
    kv_transfer: str = "after"
    transport: str = "rdma"
    storage: StorageParams = field(default_factory=StorageParams)  # TCP host costs
    endpoint: EndpointParams = field(default_factory=EndpointParams)
    prefill: NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    decode: NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    ep: EndpointModel | None = None
    tcp: TcpTransport | None = None
    n_req: int = 0
    done: int = 0
    waiting_max: int = 0
    held_max_bytes: float = 0.0
    _queue: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    _compute_free: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    _room_at: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    _held_bytes: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    _held_n: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    _releases: list[NDArray[Any]] = field(default_factory=list)  # inst, bytes, time
    _rr: int = 0
    _rng: np.random.Generator = field(default_factory=np.random.default_rng)
    # the contexts' own stream: drawn request by request, apart from the arrivals' blocks,
    # so that a request's context does not depend on the ticks either
    _context_rng: np.random.Generator = field(default_factory=np.random.default_rng)
    _arrivals: PoissonArrivals | None = None
    _cols: dict[str, NDArray[Any]] = field(default_factory=dict)
    _sums: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 1 <= self.kv_chunks < 1 << CHUNK_BITS or self.tp < 1:
            raise ValueError(f"kv_chunks must be in 1..{(1 << CHUNK_BITS) - 1} and tp >= 1")
        for key, value, known in (
            ("kv_hold", self.kv_hold, KV_HOLDS),
            ("kv_transfer", self.kv_transfer, KV_TRANSFERS),
            ("transport", self.transport, TRANSPORTS),
        ):
            if value not in known:
                raise ValueError(f"{key}: expected one of {', '.join(known)}, got {value!r}")
        if self.kv_transfer == "layerwise" and self.kv_chunks > self.preset.layers:
            raise ValueError(
                f"kv_chunks ({self.kv_chunks}) must be <= the model's {self.preset.layers} "
                "layers for a layer-wise transfer"
            )
        if not 0 < self.mfu <= 1:
            raise ValueError(f"mfu must be in (0, 1], got {self.mfu!r}")
        if self.kv_hold == "memory" and not self.kv_memory_bytes:
            self.kv_memory_bytes = kv_memory_bytes(self.preset, self.gpu, self.tp)
        self._releases = [np.zeros(0, np.int64), np.zeros(0), np.zeros(0)]

    @property
    def model(self) -> str:
        """The model preset's name."""
        return self.preset.name

    def bind(
        self, gpus: NDArray[np.int32], storage: NDArray[np.int32], rng: np.random.Generator
    ) -> None:
        self.prefill = pick_endpoints(
            self.prefill_spec, gpus, rng, f"workload {self.name!r} prefill"
        )
        rest = np.setdiff1d(gpus, self.prefill).astype(np.int32)
        if rest.size == 0:
            raise ValueError(f"workload {self.name!r}: no GPUs left for the decode pool")
        self.decode = pick_endpoints(self.decode_spec, rest, rng, f"workload {self.name!r} decode")
        n = self.prefill.size
        self._compute_free, self._room_at, self._held_bytes = np.zeros(n), np.zeros(n), np.zeros(n)
        self._held_n = np.zeros(n, np.int64)
        if self.transport == "rdma":
            self.ep = EndpointModel(self.endpoint, int(gpus.max()) + 1)
        self._rng = np.random.default_rng(int(rng.integers(1 << 31)))
        self._context_rng = np.random.default_rng(int(self._rng.integers(1 << 31)))
        self._cols = {k: np.zeros(1024) for k in _COLS}

    def attach(self, fabric: Any) -> None:
        super().attach(fabric)
        if self.ep is not None:  # a NIC sends its transfers one after another, at line rate
            self.ep.wire_Bps = nic_payload_Bps(fabric)[: self.ep.n_nodes]
        if self.transport == "tcp":  # the host queues storage workloads of the fabric use too
            self.tcp = TcpTransport(storage_system(fabric, self.storage))

    def _grow(self, need: int) -> None:
        cap = self._cols["arrival"].size
        if need <= cap:
            return
        new = max(need, 2 * cap)
        for k, v in self._cols.items():
            g = np.zeros(new)
            g[:cap] = v
            self._cols[k] = g

    def _contexts(self, k: int) -> NDArray[np.float64]:
        if self.context_tokens:
            return np.full(k, float(self.context_tokens))
        n = self.context_median * np.exp(self.context_sigma * self._context_rng.standard_normal(k))
        return np.clip(np.round(n), 1, self.context_max)

    # ---------------------------------------------------------------- prefill scheduling
    def _apply_releases(self, upto_s: float) -> None:
        """Free the KV memory of requests whose transfer ended before ``upto_s``."""
        inst, nbytes, t = self._releases
        due = t < upto_s
        if not due.any():
            return
        np.subtract.at(self._held_bytes, inst[due], nbytes[due])
        np.subtract.at(self._held_n, inst[due], 1)
        np.maximum.at(self._room_at, inst[due], t[due])
        self._releases = [inst[~due], nbytes[~due], t[~due]]

    def _fits(self, kv: float) -> NDArray[np.bool_]:
        alone: NDArray[np.bool_] = self._held_n == 0
        if self.kv_hold == "slot":
            return alone
        if self.kv_hold == "memory":  # a request larger than the memory runs alone
            room: NDArray[np.bool_] = self._held_bytes + kv <= self.kv_memory_bytes
            return room | alone
        return np.ones(self._held_n.size, dtype=bool)

    @overload
    def _kv_bytes(self, ids: int) -> float: ...
    @overload
    def _kv_bytes(self, ids: NDArray[np.int64]) -> NDArray[np.float64]: ...
    def _kv_bytes(self, ids: int | NDArray[np.int64]) -> float | NDArray[np.float64]:
        """The KV cache of request ``ids`` (one or many), bytes: its context's tokens at the
        model's KV bytes per token."""
        kv: float | NDArray[np.float64] = self._cols["ctx"][ids] * self.preset.kv_bytes_per_token
        return kv

    def _start_times(self, r: int, kv: float) -> NDArray[np.float64]:
        """When request ``r`` (``kv`` bytes of KV) could start on each prefill instance:
        its arrival, the instance's compute free and its last release of KV memory, or
        never where its KV does not fit now."""
        t = np.maximum(np.maximum(self._compute_free, self._room_at), self._cols["arrival"][r])
        return np.where(self._fits(kv), t, np.inf)

    def _dispatch(self, end_s: float) -> NDArray[np.int64]:
        """Start queued requests (FIFO) that can start before ``end_s``; returns them.

        A request starts at the latest of its arrival, the instance's compute being free
        and the last release of KV memory there (what made room for it, if it waited)."""
        c = self._cols
        started = []
        while self._queue.size:
            r = int(self._queue[0])
            kv = self._kv_bytes(r)
            t = self._start_times(r, kv)
            i = int(np.argmin(t))
            if not t[i] < end_s:
                break
            service = float(prefill_s(self.preset, c["ctx"][r : r + 1], self.tp, *self._fm)[0])
            c["start"][r], c["prefill_end"][r], c["inst"][r] = t[i], t[i] + service, i
            c["transfer_end"][r] = t[i] + service
            self._compute_free[i] = t[i] + service
            if self.kv_hold != "none":
                self._held_bytes[i] += kv
                self._held_n[i] += 1
            self._queue = self._queue[1:]
            started.append(r)
        self.held_max_bytes = max(self.held_max_bytes, float(self._held_bytes.max(initial=0)))
        return np.array(started, dtype=np.int64)

    @property
    def _fm(self) -> tuple[float, float]:
        return self.gpu.flops, self.mfu

    # ---------------------------------------------------------------- KV transfer
    def _send(self, ids: NDArray[np.int64]) -> None:
        """Post the KV chunks of requests just started (at prefill end, or layer-wise)."""
        c = self._cols
        m, k = self.kv_chunks, ids.size
        kv = self._kv_bytes(ids)
        c["left"][ids] = m
        dec = self.decode[(self._rr + np.arange(k)) % self.decode.size]
        self._rr += k
        if self.kv_transfer == "layerwise":  # chunk j holds layers [L·j/m, L·(j+1)/m)
            bound = np.floor(np.arange(m + 1) * self.preset.layers / m)
            frac = np.diff(bound) / self.preset.layers
            done = bound[1:] / self.preset.layers  # share of prefill computed when it is ready
            span = c["prefill_end"][ids] - c["start"][ids]
            ready = (c["start"][ids][:, None] + span[:, None] * done[None, :]).ravel()
            size = (kv[:, None] * frac[None, :]).ravel()
        else:
            ready = np.repeat(c["prefill_end"][ids], m)
            size = np.repeat(kv / m, m)
        src = np.repeat(self.prefill[c["inst"][ids].astype(np.int64)], m).astype(np.int64)
        dst = np.repeat(dec, m).astype(np.int64)
        tag = (np.repeat(ids, m) << CHUNK_BITS) + np.tile(np.arange(m), k)
        if self.tcp is not None:
            self.tcp.send(src, dst, size, tag, ready)
            return
        assert self.ep is not None
        fail, hang = fault_masks(self.fabric.topo.nodes, self.fabric.faults)
        ok = self.ep.post(src, dst, size, tag, ready, fail=fail, hang=hang)
        np.subtract.at(c["left"], np.repeat(ids, m)[~ok], 1)

    def stop(self) -> None:
        super().stop()
        self._arrivals = None  # (the process starts afresh with the workload)

    def quiet_until(self, now_s: float, dt_s: float) -> float:
        """Until the first of: the next arrival, a release of KV memory (applied by the
        first tick that starts after it), the queue's first request starting, and a KV
        message due from its transport. An arrival, a start or a message counts from a
        tick before it: a tick acts on what comes before its end."""
        if self.running and self._arrivals is None:
            return now_s  # the first tick starts the arrival process
        first = float("inf")
        if self.running and self._arrivals is not None:
            first = self._arrivals.next_s - dt_s
        if self._releases[2].size:
            first = min(first, float(self._releases[2].min()))
        if self._queue.size:
            r = int(self._queue[0])
            first = min(first, float(self._start_times(r, self._kv_bytes(r)).min()) - dt_s)
        if self.tcp is not None:
            first = min(first, self.tcp.quiet_until() - dt_s)
        elif self.ep is not None:
            first = min(first, self.ep.quiet_until(now_s, dt_s))
        return first

    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        arrivals = np.zeros(0)
        if self.running:
            if self._arrivals is None:
                self._arrivals = PoissonArrivals(self.rate_per_s, 1, now_s)
            arrivals, _, _ = self._arrivals.take(now_s + dt_s, self._rng)
        k = arrivals.size
        if k:
            ids = np.arange(self.n_req, self.n_req + k)
            self.n_req += k
            self._grow(self.n_req)
            self._cols["arrival"][ids] = arrivals  # (in the order they come)
            self._cols["ctx"][ids] = self._contexts(k)
            self._queue = np.r_[self._queue, ids]
        self._apply_releases(now_s)  # releases found in earlier ticks (their time has passed)
        started = self._dispatch(now_s + dt_s)
        self.waiting_max = max(self.waiting_max, int(self._queue.size))
        if started.size:
            self._send(started)
        if self.tcp is not None:
            return self.tcp.flows_due(now_s, dt_s)
        assert self.ep is not None
        req, _ = self.ep.release(now_s, dt_s)
        return req

    def on_complete(self, done: Completions, now_s: float) -> None:
        c = self._cols
        if self.tcp is not None:
            landed = self.tcp.landed(done)
        else:
            assert self.ep is not None
            self.ep.complete(done.src)
            landed = done.finish_s
        req = done.tag >> CHUNK_BITS
        np.subtract.at(c["left"], req, 1)
        np.maximum.at(c["transfer_end"], req, landed)
        ids = np.unique(req)
        fin = ids[c["left"][ids] <= 0]
        if fin.size == 0:
            return
        c["left"][fin] = np.inf  # finished: never again
        if self.kv_hold != "none":  # the prefill instance frees the KV once it is sent
            inst, kv = (
                c["inst"][fin].astype(np.int64),
                self._kv_bytes(fin),
            )
            old = self._releases
            self._releases = [
                np.r_[old[0], inst],
                np.r_[old[1], kv],
                np.r_[old[2], c["transfer_end"][fin]],
            ]
        queue = c["start"][fin] - c["arrival"][fin]
        prefill = c["prefill_end"][fin] - c["start"][fin]
        transfer = c["transfer_end"][fin] - c["prefill_end"][fin]
        decode = decode_step_s(self.preset, c["ctx"][fin], self.tp, self.gpu.hbm_Bps)
        ttft = queue + prefill + transfer + decode
        for name, v in (
            ("ttft", ttft),
            ("queue", queue),
            ("prefill", prefill),
            ("transfer", transfer),
            ("decode", decode),
        ):
            self.histogram(f"{name}_seconds").observe_many(v)
            self._sums[name] = self._sums.get(name, 0.0) + float(v.sum())
        self.done += int(fin.size)

    def kpis(self, now_s: float) -> Mapping[str, float]:
        def q(name: str, p: float) -> float:
            h = self.histograms.get(name)
            return h.freeze().quantile(p) if h is not None else float("nan")

        n = self.done
        mean = {k: (v / n if n else float("nan")) for k, v in self._sums.items()}
        out = {
            "requests_arrived": float(self.n_req),
            "requests_completed": float(n),
            "requests_waiting": float(self._queue.size),
            "requests_waiting_max": float(self.waiting_max),
            "kv_held_bytes": float(self._held_bytes.sum()),
            "kv_held_max_bytes": self.held_max_bytes,
            "kv_memory_bytes": self.kv_memory_bytes if self.kv_hold == "memory" else 0.0,
            "ttft_p50_seconds": q("ttft_seconds", 0.5),
            "ttft_p99_seconds": q("ttft_seconds", 0.99),
            "ttft_mean_seconds": mean.get("ttft", float("nan")),
            "queue_mean_seconds": mean.get("queue", float("nan")),
            "prefill_mean_seconds": mean.get("prefill", float("nan")),
            "transfer_mean_seconds": mean.get("transfer", float("nan")),
            "decode_mean_seconds": mean.get("decode", float("nan")),
            "transfer_share_of_ttft": self._sums.get("transfer", 0.0) / self._sums["ttft"]
            if self._sums.get("ttft")
            else float("nan"),
        }
        if self.ep is not None:
            out.update(self.ep.kpis(self.prefill, now_s))
        if self.tcp is not None:
            out.update(self.tcp.kpis(now_s))
        return out
