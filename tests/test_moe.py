"""MoE all-to-all in the DeepEP style: IBGDA vs proxy under many small messages (C2)."""

from __future__ import annotations

from typing import Any

import pytest

from console.cli import main
from fabric_core.reports.run import run_for
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario, parse_scenario
from fabric_core.workloads.moe import dispatch_bytes


def test_deepep_message_sizes() -> None:
    assert dispatch_bytes(7168, "fp8") == 7408
    assert dispatch_bytes(7168, "bf16") == 14352


def _moe(control: str, profile: str = "native-400g", **extra: Any) -> dict[str, Any]:
    data = {
        "name": "moe-small",
        "dt": "1us",
        "profile": profile,
        "topology": {"kind": "leaf-spine", "leaves": 2, "spines": 4, "gpus_per_leaf": 4},
        "workload": [
            {
                "name": "moe",
                "kind": "moe",
                "ranks": 8,
                "tokens_per_rank": 64,
                "hidden": 2048,
                "top_k": 8,
                "layers": 1,
                "control": control,
                **extra,
            }
        ],
    }
    fabric = Fabric.from_scenario(parse_scenario(data))
    report = run_for(fabric, 400e-6)
    kpis: dict[str, Any] = report["workloads"]["moe"]["kpis"]
    return kpis


def test_ibgda_beats_the_proxy_on_message_rate_and_all_to_all_time() -> None:
    ibgda = _moe("ibgda")
    proxy = _moe("proxy")
    assert ibgda["layers_completed"] == proxy["layers_completed"] == 1
    assert ibgda["dispatch_last_seconds"] < proxy["dispatch_last_seconds"]
    total_i = ibgda["dispatch_last_seconds"] + ibgda["combine_last_seconds"]
    total_p = proxy["dispatch_last_seconds"] + proxy["combine_last_seconds"]
    assert total_i < total_p
    # (combine alone, BF16 messages twice the size, is wire-bound on both paths: there the
    # proxy's pacing is no handicap; docs/ENDPOINTS.md shows the figures)
    assert ibgda["message_rate_per_second_per_rank"] > proxy["message_rate_per_second_per_rank"]
    # the cause: the proxy's CPU queue (and no CPU at all on the IBGDA path)
    assert proxy["post_queue_wait_max_seconds"] > 3 * ibgda["post_queue_wait_max_seconds"]
    assert proxy["host_cpu_busy_seconds"] > 0 == ibgda["host_cpu_busy_seconds"]
    assert ibgda["wqe_post_errors_total"] == 0 and ibgda["messages_failed"] == 0


def test_bf16_dispatch_carries_more_bytes_and_takes_longer() -> None:
    fp8 = _moe("ibgda")
    bf16 = _moe("ibgda", dispatch_dtype="bf16")
    assert bf16["dispatch_last_seconds"] > fp8["dispatch_last_seconds"]


@pytest.mark.parametrize("profile", ["native-400g", "native-800g", "roce-400g"])
def test_moe_runs_under_any_profile(profile: str) -> None:
    k = _moe("ibgda", profile=profile)
    assert k["layers_completed"] == 1
    assert k["rdma_bytes_per_second_per_rank"] > 0


def test_bundled_moe_scenarios_run_under_fabtop_run(tmp_path: Any) -> None:
    for name in ("moe-ibgda", "moe-proxy"):
        scn = load_scenario(name)
        assert scn.raw["workload"][0]["kind"] == "moe"
    out = tmp_path / "r.json"
    assert main(["run", "moe-proxy", "--duration", "60us", "--quiet", "--json", str(out)]) == 0
    assert "moe" in out.read_text()


def test_unknown_moe_keys_are_refused() -> None:
    from fabric_core.runtime.scenario import ScenarioError

    with pytest.raises(ScenarioError, match="unknown key"):
        parse_scenario(
            {
                "topology": {"kind": "leaf-spine", "leaves": 1, "spines": 1, "gpus_per_leaf": 2},
                "workload": [{"kind": "moe", "ranks": 2, "tokens": 3}],
            }
        )


def _deepep_dispatch(control: str) -> dict[str, Any]:
    """DeepEP's low-latency setting at EP 8: 128 tokens x top-8, hidden 7168, FP8 dispatch."""
    data = {
        "name": "deepep",
        "dt": "1us",
        "topology": {"kind": "leaf-spine", "leaves": 2, "spines": 4, "gpus_per_leaf": 4},
        "workload": [{"name": "moe", "kind": "moe", "ranks": 8, "layers": 1, "control": control}],
    }
    fabric = Fabric.from_scenario(parse_scenario(data))
    kpis: dict[str, Any] = run_for(fabric, 230e-6)["workloads"]["moe"]["kpis"]
    return kpis


def test_deepep_setting_dispatch_is_faster_with_ibgda_because_of_the_proxy_queue() -> None:
    ibgda = _deepep_dispatch("ibgda")
    proxy = _deepep_dispatch("proxy")
    assert ibgda["dispatch_last_seconds"] < proxy["dispatch_last_seconds"]
    # 1,024 messages per rank through one CPU thread: the dispatch cannot end before the
    # proxy has posted them all, and that queue is what the proxy's dispatch time is made of
    posts = 128 * 8 * 0.2e-6
    assert proxy["post_queue_wait_max_seconds"] > 0.9 * posts
    assert proxy["dispatch_last_seconds"] == pytest.approx(posts, rel=0.1)
    assert ibgda["post_queue_wait_max_seconds"] < 0.2 * posts
