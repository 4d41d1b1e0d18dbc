"""Scenario builders of the storage workloads (``[[workload]] kind = "training"`` ...).

Every storage workload takes ``path`` (an access path of ``fabric_core.storage.model.PATHS``)
and an optional ``storage = { ... }`` table of ``StorageParams`` overrides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fabric_core.storage.model import get_path, parse_params
from fabric_core.workloads.base import Workload
from fabric_core.workloads.checkpoint import Checkpoint
from fabric_core.workloads.fields import (
    MAX_MESSAGE_RATE_PER_S,
    MAX_OUTSTANDING,
    duration,
    number,
    size,
    whole,
)
from fabric_core.workloads.kvcache import KvCache
from fabric_core.workloads.pd_presets import INFERENCE_KEYS, MFU, resolve_gpu, resolve_model
from fabric_core.workloads.storage_io import StorageProbe
from fabric_core.workloads.training import Training

#: Batches a training loader keeps ahead at most: more would hold the whole epoch in
#: flight (the loader's state is a row per batch ahead).
MAX_PREFETCH = 1024

_COMMON = frozenset({"path", "storage"})


#: The largest checkpoint a GPU writes (``size``, split into ``io_size`` writes): 1 TiB,
#: more than any GPU holds (192 GB of HBM3e on a B200).
MAX_CHECKPOINT_BYTES = float(1 << 40)
#: The largest training batch a GPU reads a step (``batch``, in ``io_size`` reads): the same
#: bound, for the same reason (a step's batch is staged in the GPU's memory).
MAX_BATCH_BYTES = MAX_CHECKPOINT_BYTES


def _path(t: Mapping[str, Any], default: str) -> str:
    name = str(t.get("path", default))
    get_path(name)  # validates
    return name


def _probe(name: str, cls: str, t: Mapping[str, Any]) -> Workload:
    return StorageProbe(
        name=name,
        traffic_class=cls,
        path_name=_path(t, "nvmeof"),
        params=parse_params(t.get("storage")),
        clients_spec=t.get("clients", 1),
        size_bytes=size(t, "size", "4KiB"),
        depth=whole(t, "depth", 1, minimum=1, maximum=MAX_OUTSTANDING),
        write=bool(t.get("write", False)),
    )


def _training(name: str, cls: str, t: Mapping[str, Any]) -> Workload:
    return Training(
        name=name,
        traffic_class=cls,
        path_name=_path(t, "nfs-rdma"),
        params=parse_params(t.get("storage")),
        gpus_spec=t.get("gpus", "all"),
        batch_bytes=size(t, "batch", "128MiB", maximum=MAX_BATCH_BYTES),
        compute_s=duration(t, "compute", "30ms"),
        io_bytes=size(t, "io_size", "1MiB"),
        prefetch=whole(t, "prefetch", 2, maximum=MAX_PREFETCH),
    )


def _checkpoint(name: str, cls: str, t: Mapping[str, Any]) -> Workload:
    return Checkpoint(
        name=name,
        traffic_class=cls,
        path_name=_path(t, "nfs-rdma"),
        params=parse_params(t.get("storage")),
        gpus_spec=t.get("gpus", "all"),
        size_bytes=size(t, "size", "64MiB", maximum=MAX_CHECKPOINT_BYTES),
        io_bytes=size(t, "io_size", "1MiB"),
        depth=whole(t, "depth", 8, minimum=1, maximum=MAX_OUTSTANDING),
        start_s=duration(t, "start", "0s", allow_zero=True),
        period_s=duration(t, "period", "0s", allow_zero=True),
    )


def _kvcache(name: str, cls: str, t: Mapping[str, Any]) -> Workload:
    model = resolve_model(t)
    return KvCache(
        name=name,
        traffic_class=cls,
        path_name=_path(t, "xds"),
        params=parse_params(t.get("storage")),
        gpus_spec=t.get("gpus", "all"),
        rate_per_s=number(t, "rate_per_s", 20.0, maximum=MAX_MESSAGE_RATE_PER_S),
        context_tokens=whole(t, "context_tokens", 4096),
        preset=model,
        gpu=resolve_gpu(t, model),
        tp=whole(t, "tp", 8, minimum=1),
        mfu=number(t, "mfu", MFU, maximum=1.0, positive=True),
        hit_rate=number(t, "hit_rate", 0.5, maximum=1.0),
        prefill_tokens_per_s=number(t, "prefill_tokens_per_s", 0.0),
        first_decode_s=duration(t, "first_decode", "0s", allow_zero=True),
        io_bytes=size(t, "io_size", "1MiB"),
        offload=bool(t.get("offload", True)),
    )


Builder = Callable[[str, str, Mapping[str, Any]], Workload]

STORAGE_KINDS: dict[str, tuple[Builder, frozenset[str]]] = {
    "storage_io": (_probe, _COMMON | {"clients", "size", "depth", "write"}),
    "training": (_training, _COMMON | {"gpus", "batch", "compute", "io_size", "prefetch"}),
    "checkpoint": (
        _checkpoint,
        _COMMON | {"gpus", "size", "io_size", "depth", "start", "period"},
    ),
    "kvcache": (
        _kvcache,
        _COMMON
        | {
            "gpus",
            "rate_per_s",
            "context_tokens",
            "hit_rate",
            "prefill_tokens_per_s",
            "first_decode",
            "io_size",
            "offload",
        }
        | INFERENCE_KEYS,
    ),
}
