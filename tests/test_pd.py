"""PD disaggregation: TTFT and the KV transfer's share of it (C9)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from console.cli import main
from fabric_core.fabric import Fabric
from fabric_core.report import run_for
from fabric_core.scenario import parse_scenario
from fabric_core.workloads.pd import MODELS, decode_step_s, prefill_s


def _pd(context: int, model: str = "llama3-70b", profile: str = "native-400g") -> dict[str, Any]:
    data = {
        "name": "pd-small",
        "dt": "100us",
        "seed": 3,
        "profile": profile,
        "topology": {"kind": "leaf-spine", "leaves": 2, "spines": 2, "gpus_per_leaf": 4},
        "workload": [
            {
                "name": "pd",
                "kind": "pd",
                "prefill": 4,
                "rate_per_s": 5,
                "context_tokens": context,
                "model": model,
            }
        ],
    }
    fabric = Fabric.from_scenario(parse_scenario(data))
    kpis: dict[str, Any] = run_for(fabric, 2.0)["workloads"]["pd"]["kpis"]
    return kpis


def test_kv_bytes_per_token_presets() -> None:
    assert MODELS["llama3-70b"].kv_bytes_per_token == 327_680
    assert MODELS["deepseek-v3"].kv_bytes_per_token == pytest.approx(70e3, rel=0.01)


def test_ttft_is_the_sum_of_its_parts() -> None:
    k = _pd(2048)
    assert k["requests_completed"] >= 3
    parts = sum(k[f"{p}_mean_seconds"] for p in ("queue", "prefill", "transfer", "decode"))
    assert k["ttft_mean_seconds"] == pytest.approx(parts, rel=1e-9)
    # the transfer moves the KV cache at no more than line rate
    kv = 2048 * 327_680
    assert k["transfer_mean_seconds"] >= 0.97 * kv / 50e9  # (sub-tick start: see the report)


def test_transfer_share_of_ttft_grows_with_context_length() -> None:
    shares = [_pd(n)["transfer_share_of_ttft"] for n in (256, 1024, 4096)]
    assert all(np.isfinite(shares))
    assert shares[0] < shares[1] < shares[2]


def test_quadratic_attention_eventually_outgrows_the_linear_kv_transfer() -> None:
    """The model's own limit of claim C9: prefill attention is O(n^2), KV bytes O(n)."""
    m = MODELS["llama3-70b"]
    n = np.array([4096.0, 262144.0])
    pre = prefill_s(m, n, 8, 989e12, 0.4)
    xfer = n * m.kv_bytes_per_token / 50e9
    share = xfer / (pre + xfer + decode_step_s(m, n, 8, 3.35e12))
    assert share[1] < share[0]


def test_pd_runs_under_fabtop_run_and_any_profile() -> None:
    for profile in ("native-800g", "roce-400g"):
        assert _pd(1024, model="deepseek-v3", profile=profile)["requests_completed"] >= 1
    assert main(["run", "pd-llama70b", "--duration", "200ms", "--quiet"]) == 0
