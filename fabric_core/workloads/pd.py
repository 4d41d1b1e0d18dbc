"""Prefill/decode (PD) disaggregation: prefill pool → KV-cache transfer over the fabric → decode.

Requests arrive as a Poisson process. Each is assigned to the prefill instance
that frees first (a FIFO server per instance); its prefill time comes from the
model's FLOPs: ``2 · active_params · n`` for the dense part plus
``attn_flops_per_pair · layers · n² / 2`` for causal attention, over
``tp · gpu_flops · mfu``. Its KV cache (``kv_bytes_per_token · n``) then goes
to a decode instance (round robin) in ``kv_chunks`` messages through the
endpoint model and the fabric. The first decode step reads the weights and the
KV cache from HBM: ``(weight_bytes + kv_bytes) / (tp · hbm_Bps)``.

TTFT = queue + prefill + transfer + first decode step, each kept in its own
histogram. A prefill or decode *instance* is one endpoint of the fabric (one
NIC) standing for ``tp`` GPUs of compute: the transfer is not spread over
several NICs (conservative for the transfer share).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabric_core.endpoint import EndpointModel, EndpointParams, fault_masks, fifo_serve
from fabric_core.workloads.base import Completions, FlowRequests, Workload, pick_endpoints


@dataclass(frozen=True)
class ModelPreset:
    """What the PD model needs of an LLM, with sources."""

    name: str
    active_params: float
    layers: int
    kv_bytes_per_token: float
    attn_flops_per_pair: float  # per layer, per (query, key) pair: QK^T + AV multiply-adds x 2
    weight_bytes: float
    source: str


MODELS: dict[str, ModelPreset] = {
    m.name: m
    for m in (
        ModelPreset(
            "llama3-70b",
            70.6e9,
            80,
            327_680.0,
            4 * 8192.0,
            141.2e9,
            "Llama-3-70B config: 80 layers, d_model 8192, 8 KV heads x 128 → KV 2·80·8·128·2 B "
            "= 327,680 B/token; BF16 weights 2 B x 70.6e9 (derived)",
        ),
        ModelPreset(
            "deepseek-v3",
            37e9,
            61,
            70_272.0,
            2 * 128 * (192 + 128.0),
            37e9,
            "deepseek-ai/DeepSeek-V3 inference/model.py: 61 layers, MLA KV (512 + 64) · 2 B · 61 "
            "= 70,272 B/token; 37 B active params; 128 heads, qk 192 / v 128; FP8 weights, "
            "active experts only read per step (derived)",
        ),
    )
}

CHUNK_BITS = 16  # a KV message's tag: request << 16 | chunk (unique: routing hashes it)
GPU_FLOPS = 989e12  # H100 SXM dense BF16 (NVIDIA H100 datasheet)
HBM_BPS = 3.35e12  # H100 SXM HBM3 (NVIDIA H100 datasheet)
MFU = 0.4  # Llama 3 paper ("The Llama 3 Herd of Models"): 38-43 % BF16 MFU in training


def prefill_s(
    model: ModelPreset, n: NDArray[np.float64], tp: int, flops: float, mfu: float
) -> NDArray[np.float64]:
    """Prefill compute time of n-token prompts on one instance."""
    work = 2 * model.active_params * n + model.attn_flops_per_pair * model.layers * n * n / 2
    return work / (tp * flops * mfu)


def decode_step_s(
    model: ModelPreset, n: NDArray[np.float64], tp: int, hbm_Bps: float
) -> NDArray[np.float64]:
    """One decode step (memory bound): weights + KV cache read from HBM."""
    return (model.weight_bytes + n * model.kv_bytes_per_token) / (tp * hbm_Bps)


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
    model: str = "llama3-70b"
    tp: int = 8
    gpu_flops: float = GPU_FLOPS
    mfu: float = MFU
    hbm_Bps: float = HBM_BPS
    kv_chunks: int = 8
    endpoint: EndpointParams = field(default_factory=EndpointParams)
    prefill: NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    decode: NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    ep: EndpointModel | None = None
    n_req: int = 0
    done: int = 0
    _free_at: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    _rr: int = 0
    _rng: np.random.Generator = field(default_factory=np.random.default_rng)
    _cols: dict[str, NDArray[Any]] = field(default_factory=dict)
    _sums: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"model: unknown {self.model!r}; known: {', '.join(MODELS)}")
        if not 1 <= self.kv_chunks < 1 << CHUNK_BITS or self.tp < 1:
            raise ValueError(f"kv_chunks must be in 1..{(1 << CHUNK_BITS) - 1} and tp >= 1")
        self.preset = MODELS[self.model]

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
        self._free_at = np.zeros(self.prefill.size)
        self.ep = EndpointModel(self.endpoint, int(gpus.max()) + 1)
        self._rng = np.random.default_rng(int(rng.integers(1 << 31)))
        cap = 1024
        self._cols = {
            k: np.zeros(cap)
            for k in ("arrival", "start", "prefill_end", "transfer_end", "ctx", "left")
        }

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
        n = self.context_median * np.exp(self.context_sigma * self._rng.standard_normal(k))
        return np.clip(np.round(n), 1, self.context_max)

    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        assert self.ep is not None
        k = int(self._rng.poisson(self.rate_per_s * dt_s)) if self.running else 0
        if k:
            ids = np.arange(self.n_req, self.n_req + k)
            self.n_req += k
            self._grow(self.n_req)
            c = self._cols
            arrival = np.sort(now_s + self._rng.random(k) * dt_s)
            ctx = self._contexts(k)
            order = np.argsort(self._free_at, kind="stable")
            inst = order[np.arange(k) % order.size].astype(np.int64)
            service = prefill_s(self.preset, ctx, self.tp, self.gpu_flops, self.mfu)
            start = fifo_serve(inst, arrival, service, self._free_at)
            end = start + service
            c["arrival"][ids], c["start"][ids], c["prefill_end"][ids] = arrival, start, end
            c["ctx"][ids], c["left"][ids] = ctx, self.kv_chunks
            c["transfer_end"][ids] = end
            dec = self.decode[(self._rr + np.arange(k)) % self.decode.size]
            self._rr += k
            m = self.kv_chunks
            fail, hang = fault_masks(self.fabric)
            ok = self.ep.post(
                np.repeat(self.prefill[inst], m).astype(np.int64),
                np.repeat(dec, m).astype(np.int64),
                np.repeat(ctx * self.preset.kv_bytes_per_token / m, m),
                (np.repeat(ids, m) << CHUNK_BITS) + np.tile(np.arange(m), k),
                np.repeat(end, m),
                fail=fail,
                hang=hang,
            )
            lost = np.repeat(ids, m)[~ok]
            np.subtract.at(c["left"], lost, 1)
        req, _ = self.ep.release(now_s, dt_s)
        return req

    def on_complete(self, done: Completions, now_s: float) -> None:
        assert self.ep is not None
        self.ep.complete(done.src)
        c = self._cols
        req = done.tag >> CHUNK_BITS
        np.subtract.at(c["left"], req, 1)
        np.maximum.at(c["transfer_end"], req, done.finish_s)
        ids = np.unique(req)
        fin = ids[c["left"][ids] <= 0]
        if fin.size == 0:
            return
        c["left"][fin] = np.inf  # finished: never again
        queue = c["start"][fin] - c["arrival"][fin]
        prefill = c["prefill_end"][fin] - c["start"][fin]
        transfer = c["transfer_end"][fin] - c["prefill_end"][fin]
        decode = decode_step_s(self.preset, c["ctx"][fin], self.tp, self.hbm_Bps)
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
        return out
