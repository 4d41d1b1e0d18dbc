"""Workloads: what generates the traffic. ``build_workload`` makes one from a scenario table.

May import ``endpoints``, ``storage``, ``faults``, ``tick``, ``net`` and the top-level
vocabulary. A workload reads the fabric it runs on through ``base.WorkloadHost``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fabric_core.textfile import plain_text
from fabric_core.units import parse_size
from fabric_core.workloads.base import Completions, FlowRequests, Workload
from fabric_core.workloads.fields import (
    MAX_MESSAGE_RATE_PER_S,
    MAX_OUTSTANDING,
    duration,
    number,
    size,
    whole,
)
from fabric_core.workloads.traffic import AllToAll, Bulk, Incast, Pairs, Rpc, Scripted

__all__ = [
    "RETRYING_KINDS",
    "WORKLOAD_KINDS",
    "Completions",
    "FlowRequests",
    "Workload",
    "build_workload",
]

#: The kinds whose senders take a refused flow's slot back and try again
#: (``Workload.retries_refused``), for a report's reader, who has the kind's name
RETRYING_KINDS = frozenset(
    c.kind for c in (AllToAll, Bulk, Incast, Pairs, Rpc, Scripted) if c.retries_refused
)


def _bulk(name: str, cls: str, t: Mapping[str, Any]) -> Workload:
    hotspots = whole(t, "hotspots", 0)
    fraction = number(t, "hotspot_fraction", 0.0, maximum=1.0)
    if fraction > 0 and hotspots == 0:  # (it was accepted, and sent nothing to a hot spot)
        raise ValueError(
            f"hotspot_fraction: {fraction:g} of the flows go to hot spots, but hotspots is 0;"
            " give hotspots = N (the GPUs that are hot)"
        )
    return Bulk(
        name=name,
        traffic_class=cls,
        senders_spec=t.get("senders", "all"),
        size_bytes=size(t, "size", "4MiB"),
        outstanding=whole(t, "outstanding", 1, minimum=1, maximum=MAX_OUTSTANDING),
        hotspots=hotspots,
        hotspot_fraction=fraction,
    )


def _incast(name: str, cls: str, t: Mapping[str, Any]) -> Workload:
    return Incast(
        name=name,
        traffic_class=cls,
        senders_spec=t.get("senders", 8),
        target_index=whole(t, "target", 0),
        size_bytes=size(t, "size", "256KiB"),
        period_s=duration(t, "period", "100us"),
        start_s=duration(t, "start", "0s", allow_zero=True),
        count=whole(t, "count", 0),
    )


def _alltoall(name: str, cls: str, t: Mapping[str, Any]) -> Workload:
    return AllToAll(
        name=name,
        traffic_class=cls,
        ranks_spec=t.get("ranks", 8),
        size_bytes=size(t, "size", "64KiB"),
        period_s=duration(t, "period", "50us"),
    )


def _rpc(name: str, cls: str, t: Mapping[str, Any]) -> Workload:
    return Rpc(
        name=name,
        traffic_class=cls,
        senders_spec=t.get("senders", "all"),
        size_bytes=size(t, "size", "4KiB"),
        rate_per_s=number(t, "rate_per_s", 1e5, maximum=MAX_MESSAGE_RATE_PER_S),
    )


def _pairs(name: str, cls: str, t: Mapping[str, Any]) -> Workload:
    pairs = t.get("pairs")
    if not isinstance(pairs, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(n, str) for n in p) for p in pairs
    ):
        raise ValueError("pairs: must be a list of [src, dst] endpoint names")
    if not pairs:  # (it ran, sending nothing, without a word)
        raise ValueError("pairs: names no pair; give at least one [src, dst]")
    start_s = duration(t, "start", "0s", allow_zero=True)
    until_s = duration(t, "until") if "until" in t else float("inf")
    if until_s <= start_s:
        raise ValueError(f"until: {t['until']!r} is not after start ({t.get('start', '0s')!r})")
    return Pairs(
        name=name,
        traffic_class=cls,
        pair_names=[(a, b) for a, b in pairs],
        size_bytes=size(t, "size", "1MiB"),
        outstanding=whole(t, "outstanding", 1, minimum=1, maximum=MAX_OUTSTANDING),
        start_s=start_s,
        until_s=until_s,
    )


#: kind -> (builder, the keys it accepts besides name/kind/class)
WORKLOAD_KINDS: dict[
    str, tuple[Callable[[str, str, Mapping[str, Any]], Workload], frozenset[str]]
] = {
    "bulk": (_bulk, frozenset({"senders", "size", "outstanding", "hotspots", "hotspot_fraction"})),
    "incast": (_incast, frozenset({"senders", "target", "size", "period", "start", "count"})),
    "alltoall": (_alltoall, frozenset({"ranks", "size", "period"})),
    "rpc": (_rpc, frozenset({"senders", "size", "rate_per_s"})),
    "pairs": (_pairs, frozenset({"pairs", "size", "outstanding", "start", "until"})),
}

# storage workloads (issue 5): registered by their own module
from fabric_core.workloads.storage_kinds import STORAGE_KINDS  # noqa: E402

WORKLOAD_KINDS.update(STORAGE_KINDS)


#: The longest workload or traffic class name (the bundled ones have at most 16 characters)
MAX_WORKLOAD_NAME_CHARS = 64


def build_workload(table: Mapping[str, Any], where: str) -> Workload:
    """A workload from its scenario table; errors name the key at fault (``where``)."""
    kind = table.get("kind")
    if kind is None:
        raise ValueError(f"{where}.kind: missing; known: {', '.join(WORKLOAD_KINDS)}")
    if kind not in WORKLOAD_KINDS:
        raise ValueError(
            f"{where}.kind: unknown workload kind {kind!r}; known: {', '.join(WORKLOAD_KINDS)}"
        )
    builder, keys = WORKLOAD_KINDS[kind]
    extra = sorted(set(table) - keys - {"name", "kind", "class", "start_stopped"})
    if extra:
        raise ValueError(
            f"{where}: unknown key(s) {', '.join(extra)} for a {kind!r} workload; accepted: {', '.join(sorted(keys))}"
        )
    # a workload's name is how reports, telemetry, metrics and start/stop know it
    name = plain_text(table.get("name", kind), f"{where}.name", MAX_WORKLOAD_NAME_CHARS)
    traffic_class = plain_text(table.get("class", kind), f"{where}.class", MAX_WORKLOAD_NAME_CHARS)
    try:
        wl = builder(name, traffic_class, table)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{where}: {exc}") from None
    stopped = table.get("start_stopped", False)
    if not isinstance(stopped, bool):  # ("false", a string, was taken as true)
        raise ValueError(f"{where}.start_stopped: expected true or false, got {stopped!r}")
    if stopped:
        wl.running = False
    return wl


_ = Scripted  # re-exported for tests and programmatic use


# --- GPU endpoints and inference workloads (issue 4) ---------------------------------------
from fabric_core.workloads.pd_presets import INFERENCE_KEYS  # noqa: E402

_ENDPOINT_KEYS = frozenset({"control", "data_path", "endpoint"})


def _endpoint_params(t: Mapping[str, Any]) -> Any:
    from fabric_core.endpoints.model import EndpointParams

    over = dict(t.get("endpoint", {}))
    for key in ("control", "data_path"):
        if key in t:
            over[key] = str(t[key])
    return EndpointParams().with_overrides(**over)


def _dispatch_dtype(t: Mapping[str, Any]) -> str:
    """``dispatch_dtype``, one of ``moe.DISPATCH_DTYPES`` (named by its key: the error said
    "dtype", when the fabric was built)."""
    from fabric_core.workloads.moe import DISPATCH_DTYPES

    value = t.get("dispatch_dtype", "fp8")
    if value not in DISPATCH_DTYPES:
        raise ValueError(
            f"dispatch_dtype: expected {' or '.join(map(repr, DISPATCH_DTYPES))}, got {value!r}"
        )
    return str(value)


def _moe(name: str, cls: str, t: Mapping[str, Any]) -> Workload:
    from fabric_core.workloads.moe import MoEAllToAll

    return MoEAllToAll(
        name=name,
        traffic_class=cls,
        ranks_spec=t.get("ranks", 8),
        tokens_per_rank=whole(t, "tokens_per_rank", 128, minimum=1),
        top_k=whole(t, "top_k", 8, minimum=1),
        hidden=whole(t, "hidden", 7168, minimum=1),
        experts=whole(t, "experts", 0),
        dispatch_dtype=_dispatch_dtype(t),
        layers=whole(t, "layers", 0),
        expert_compute_s=duration(t, "expert_compute", "20us"),
        attention_compute_s=duration(t, "attention_compute", "50us"),
        endpoint=_endpoint_params(t),
    )


WORKLOAD_KINDS["moe"] = (
    _moe,
    frozenset(
        {
            "ranks",
            "tokens_per_rank",
            "top_k",
            "hidden",
            "experts",
            "dispatch_dtype",
            "layers",
            "expert_compute",
            "attention_compute",
        }
    )
    | _ENDPOINT_KEYS,
)


def _pd(name: str, cls: str, t: Mapping[str, Any]) -> Workload:
    from fabric_core.storage.model import parse_params
    from fabric_core.workloads.pd import PDDisagg
    from fabric_core.workloads.pd_presets import MFU, resolve_gpu, resolve_model

    model = resolve_model(t)
    median, most = (
        number(t, "context_median", 2048, positive=True),
        whole(t, "context_max", 131072, minimum=1),
    )
    if median > most:  # (every drawn context was cut to the max: the median said nothing)
        raise ValueError(f"context_median: {median:g} is above context_max ({most})")
    return PDDisagg(
        name=name,
        traffic_class=cls,
        prefill_spec=t.get("prefill", 0.5),
        decode_spec=t.get("decode", "all"),
        rate_per_s=number(t, "rate_per_s", 20.0, maximum=MAX_MESSAGE_RATE_PER_S),
        context_tokens=whole(t, "context_tokens", 0),
        context_median=median,
        context_sigma=number(t, "context_sigma", 1.0),
        context_max=most,
        preset=model,
        gpu=resolve_gpu(t, model),
        tp=whole(t, "tp", 8, minimum=1),
        mfu=number(t, "mfu", MFU, maximum=1.0, positive=True),
        kv_chunks=whole(t, "kv_chunks", 8, minimum=1),
        kv_hold=str(t.get("kv_hold", "memory")),
        kv_memory_bytes=parse_size(t.get("kv_memory", 0)),
        kv_transfer=str(t.get("kv_transfer", "after")),
        transport=str(t.get("transport", "rdma")),
        storage=parse_params(t.get("storage")),
        endpoint=_endpoint_params(t),
    )


WORKLOAD_KINDS["pd"] = (
    _pd,
    frozenset(
        {
            "prefill",
            "decode",
            "rate_per_s",
            "context_tokens",
            "context_median",
            "context_sigma",
            "context_max",
            "kv_chunks",
            "kv_hold",
            "kv_memory",
            "kv_transfer",
            "transport",
            "storage",
        }
    )
    | INFERENCE_KEYS
    | _ENDPOINT_KEYS,
)
