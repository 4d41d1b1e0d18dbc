"""PD disaggregation: TTFT and the KV transfer's share of it (C9)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from console.cli import main
from fabric_core.reports.run import run_for
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import ScenarioError, parse_scenario
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


def test_each_part_of_ttft_follows_its_own_formula() -> None:
    """Llama-3-70B, 2,048-token prompts, tp 8 on H100s (989 TFLOP/s BF16, MFU 0.4, HBM
    3.35 TB/s), computed by hand:

    * prefill: (2 · 70.6e9 · 2048 + 4 · 8192 · 80 · 2048² / 2) FLOP
      = 2.94675e14 FLOP over 8 · 989e12 · 0.4 FLOP/s = 93.110 ms;
    * first decode step: (141.2e9 + 2048 · 327,680) B = 141.871 GB over 8 · 3.35e12 B/s
      = 5.2937 ms;
    * transfer: the KV cache, 2048 · 327,680 B = 640 MiB, at the payload rate of one 400G
      link (50e9 B/s · 4096 / 4126) = 13.520 ms, within two 100 µs ticks (sub-tick start);
    * queue: none (4 instances busy 93 ms each, 5 requests/s: a wait needs 5 arrivals
      within 93 ms, and this seeded run has none).
    """
    k = _pd(2048)
    assert k["requests_completed"] >= 3
    assert k["prefill_mean_seconds"] == pytest.approx(93.11020e-3, rel=1e-6)
    assert k["decode_mean_seconds"] == pytest.approx(5.293698e-3, rel=1e-6)
    assert k["transfer_mean_seconds"] == pytest.approx(13.5201e-3, abs=200e-6)
    assert k["queue_mean_seconds"] == 0.0
    # and TTFT is their sum
    parts = sum(k[f"{p}_mean_seconds"] for p in ("queue", "prefill", "transfer", "decode"))
    assert k["ttft_mean_seconds"] == pytest.approx(parts, rel=1e-9)


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


def test_a_context_median_above_the_max_is_refused() -> None:
    """Every context drawn was cut to the max, so the median said nothing, unsaid."""
    data = {
        "name": "pd",
        "topology": {"kind": "leaf-spine", "leaves": 2, "spines": 2, "gpus_per_leaf": 4},
        "workload": [
            {"name": "pd", "kind": "pd", "context_median": 65536, "context_max": 1024},
        ],
    }
    with pytest.raises(ScenarioError, match=r"context_median: 65536 is above context_max \(1024\)"):
        parse_scenario(data)
