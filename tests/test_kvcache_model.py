"""The KV-cache workload's prefill and first decode step are PD's (issue 22 item 7)."""

from __future__ import annotations

import numpy as np
import pytest

from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import parse_scenario
from fabric_core.workloads.kvcache import KvCache
from fabric_core.workloads.pd_presets import GPUS, MFU, MODELS, decode_step_s, prefill_s


def _kv(**over: object) -> KvCache:
    raw = {
        "name": "kv",
        "dt": "100us",
        "topology": {
            "kind": "leaf-spine",
            "leaves": 1,
            "spines": 1,
            "gpus_per_leaf": 2,
            "storage_targets": 1,
        },
        "workload": [
            {"name": "kv", "kind": "kvcache", "path": "xds", "context_tokens": 1024} | over
        ],
    }
    fabric = Fabric.from_scenario(parse_scenario(raw))
    w = fabric.workloads[0]
    assert isinstance(w, KvCache)
    return w


def test_one_decode_model_and_one_mfu_for_pd_and_the_kv_cache() -> None:
    w = _kv()
    m, g, n = MODELS["llama3-70b"], GPUS["h100-sxm"], np.array([1024.0])
    assert w.decode_seconds == pytest.approx(float(decode_step_s(m, n, 8, g.hbm_Bps)[0]))
    assert w.decode_seconds == pytest.approx(5.28e-3, rel=0.01)  # was a fixed 30 ms
    assert w.prefill_seconds == pytest.approx(float(prefill_s(m, n, 8, g.flops, MFU)[0]))
    assert w.kv_bytes_per_token == m.kv_bytes_per_token


def test_the_presets_move_the_kv_cache_figures_as_their_formulas_say() -> None:
    base = _kv()
    h200 = _kv(gpu="h200-sxm")
    assert base.decode_seconds / h200.decode_seconds == pytest.approx(4.8 / 3.35, rel=1e-9)
    assert base.prefill_seconds == h200.prefill_seconds  # same compute
    tp4 = _kv(tp=4)
    assert tp4.prefill_seconds == pytest.approx(2 * base.prefill_seconds, rel=1e-12)
    assert _kv(mfu=0.2).prefill_seconds == pytest.approx(2 * base.prefill_seconds, rel=1e-12)
    small = _kv(model="llama3-8b")
    assert small.kv_bytes == 1024 * 131_072
    # a scenario may still fix either figure itself
    fixed = _kv(prefill_tokens_per_s=20000, first_decode="30ms")
    assert (fixed.prefill_seconds, fixed.decode_seconds) == (1024 / 20000, 30e-3)
