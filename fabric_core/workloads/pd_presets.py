"""Model and GPU presets of the inference workloads (PD disaggregation, KV cache), with
sources, and the compute model both use: prefill FLOPs over the instance's FLOP/s, and
one decode step as a read of the weights and the KV cache from HBM.

Every preset field can be overridden from a scenario (``docs/ENDPOINTS.md`` lists the
keys); ``resolve_model`` / ``resolve_gpu`` apply the overrides.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabric_core.units import parse_rate, parse_size


@dataclass(frozen=True)
class ModelPreset:
    """What the inference model needs of an LLM, with sources."""

    name: str
    active_params: float  # parameters that take part in one token's forward pass
    layers: int
    kv_bytes_per_token: float
    attn_flops_per_pair: float  # per layer, per (query, key) pair: QK^T + AV multiply-adds x 2
    weight_bytes: float  # bytes of weights one decode step reads from HBM
    resident_bytes: float  # bytes of weights held in the instance's HBM
    reference_gpu: str  # the GPU preset used unless the scenario names one
    source: str


@dataclass(frozen=True)
class GpuPreset:
    """One GPU's dense compute, HBM bandwidth and capacity, with the source."""

    name: str
    flops: float  # dense BF16 FLOP/s
    hbm_Bps: float
    hbm_bytes: float
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
            141.2e9,
            "h100-sxm",
            "Llama-3-70B config: 80 layers, d_model 8192, 8 KV heads x 128 → KV 2·80·8·128·2 B "
            "= 327,680 B/token; BF16 weights 2 B x 70.6e9, all read each decode step (derived)",
        ),
        ModelPreset(
            "llama3-8b",
            8.03e9,
            32,
            131_072.0,
            4 * 4096.0,
            16.06e9,
            16.06e9,
            "h100-sxm",
            "Llama-3-8B config: 32 layers, d_model 4096, 8 KV heads x 128 → KV 2·32·8·128·2 B "
            "= 131,072 B/token; BF16 weights 2 B x 8.03e9 (derived)",
        ),
        ModelPreset(
            "deepseek-v3",
            37e9,
            61,
            70_272.0,
            2 * 128 * (192 + 128.0),
            37e9,
            671e9,
            "h200-sxm",
            "deepseek-ai/DeepSeek-V3 inference/model.py and README: 61 layers, MLA KV "
            "(512 + 64) · 2 B · 61 = 70,272 B/token; 671 B parameters, 37 B active per token, "
            "FP8 weights (1 B each): 671 GB resident, only the active 37 GB read per decode "
            "step; 128 heads, qk 192 / v 128. 671 GB does not fit 8 x 80 GB, so the reference "
            "GPU is the H200 (SGLang's DeepSeek-V3 deployment: one 8 x H200 node) (derived)",
        ),
    )
}

GPUS: dict[str, GpuPreset] = {
    g.name: g
    for g in (
        GpuPreset(
            "h100-sxm",
            989e12,
            3.35e12,
            80e9,
            "NVIDIA H100 SXM datasheet: 989 TFLOPS dense BF16 (1,979 with sparsity), 3.35 TB/s "
            "HBM3, 80 GB",
        ),
        GpuPreset(
            "h200-sxm",
            989e12,
            4.8e12,
            141e9,
            "NVIDIA H200 SXM datasheet: the H100's compute (989 TFLOPS dense BF16), 4.8 TB/s "
            "HBM3e, 141 GB",
        ),
        GpuPreset(
            "a100-sxm",
            312e12,
            2.039e12,
            80e9,
            "NVIDIA A100 datasheet (80 GB SXM): 312 TFLOPS dense BF16, 2,039 GB/s HBM2e, 80 GB",
        ),
    )
}

#: Model FLOPs utilisation of prefill, one figure for every inference workload (PD and the
#: KV cache's misses). An assumption, range 0.35-0.45: the Llama 3 paper ("The Llama 3 Herd
#: of Models") reports 38-43 % BF16 MFU in pre-training; inference prefill (large dense
#: matmuls over the prompt) is taken to be similar.
MFU = 0.4
#: Fraction of HBM a serving engine takes for weights + KV cache: vLLM's
#: ``gpu_memory_utilization`` default 0.9 (vLLM engine arguments); activations are not
#: counted apart (an assumption: they are small beside the KV at these contexts).
HBM_UTILISATION = 0.9
GPU_FLOPS = GPUS["h100-sxm"].flops  # the default GPU's figures (kept for importers)
HBM_BPS = GPUS["h100-sxm"].hbm_Bps

#: scenario key -> (preset field, parser) for the overridable fields
MODEL_KEYS: dict[str, tuple[str, Any]] = {
    "active_params": ("active_params", float),
    "layers": ("layers", int),
    "kv_bytes_per_token": ("kv_bytes_per_token", parse_size),
    "attn_flops_per_pair": ("attn_flops_per_pair", float),
    "weight_bytes": ("weight_bytes", parse_size),
    "resident_bytes": ("resident_bytes", parse_size),
}
GPU_KEYS: dict[str, tuple[str, Any]] = {
    "gpu_flops": ("flops", float),
    "hbm_bandwidth": ("hbm_Bps", lambda v: parse_rate(v) if isinstance(v, str) else float(v)),
    "hbm_capacity": ("hbm_bytes", parse_size),
}

#: scenario keys of the inference workloads (PD, KV cache) that choose the model and GPU
INFERENCE_KEYS = frozenset({"model", "gpu", "tp", "mfu"} | set(MODEL_KEYS) | set(GPU_KEYS))


def _apply(preset: Any, keys: Mapping[str, tuple[str, Any]], t: Mapping[str, Any]) -> Any:
    over = {f: parse(t[k]) for k, (f, parse) in keys.items() if k in t}
    for k, (f, _) in keys.items():
        if f in over and not over[f] > 0:
            raise ValueError(f"{k} must be > 0, got {t[k]!r}")
    return dataclasses.replace(preset, **over) if over else preset


def resolve_model(t: Mapping[str, Any], default: str = "llama3-70b") -> ModelPreset:
    """The model preset ``t["model"]`` with the scenario's overrides applied."""
    name = str(t.get("model", default))
    if name not in MODELS:
        raise ValueError(f"model: unknown {name!r}; known: {', '.join(MODELS)}")
    m: ModelPreset = _apply(MODELS[name], MODEL_KEYS, t)
    return m


def resolve_gpu(t: Mapping[str, Any], model: ModelPreset) -> GpuPreset:
    """The GPU preset ``t["gpu"]`` (default: the model's reference GPU), with overrides."""
    name = str(t.get("gpu", model.reference_gpu))
    if name not in GPUS:
        raise ValueError(f"gpu: unknown {name!r}; known: {', '.join(GPUS)}")
    g: GpuPreset = _apply(GPUS[name], GPU_KEYS, t)
    return g


def prefill_s(
    model: ModelPreset, n: NDArray[np.float64], tp: int, flops: float, mfu: float
) -> NDArray[np.float64]:
    """Prefill compute time of n-token prompts on one instance of ``tp`` GPUs."""
    work = 2 * model.active_params * n + model.attn_flops_per_pair * model.layers * n * n / 2
    return work / (tp * flops * mfu)


def decode_step_s(
    model: ModelPreset, n: NDArray[np.float64], tp: int, hbm_Bps: float
) -> NDArray[np.float64]:
    """One decode step (memory bound): the weights it reads + the KV cache, from HBM."""
    return (model.weight_bytes + n * model.kv_bytes_per_token) / (tp * hbm_Bps)


def kv_memory_bytes(model: ModelPreset, gpu: GpuPreset, tp: int) -> float:
    """HBM an instance has for KV: the engine's share of ``tp`` GPUs' HBM minus the weights.

    Raises:
        ValueError: the weights do not fit (naming the figures).
    """
    free = HBM_UTILISATION * tp * gpu.hbm_bytes - model.resident_bytes
    if free <= 0:
        raise ValueError(
            f"{model.name}: {model.resident_bytes / 1e9:.0f} GB of weights do not fit "
            f"{HBM_UTILISATION:.0%} of {tp} x {gpu.hbm_bytes / 1e9:.0f} GB ({gpu.name}); "
            "raise tp or pick a larger gpu"
        )
    return free
