"""PD: the KV held in the prefill instance until sent, layer-wise transfer, TCP vs RDMA,
and the model / GPU presets as scenario keys (issue 15 item 2, issue 22 item 7)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fabric_core.reports.run import run_for
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import parse_scenario
from fabric_core.storage.model import StorageParams
from fabric_core.workloads.pd import PDDisagg
from fabric_core.workloads.pd_presets import GPUS, MODELS, decode_step_s, prefill_s

CTX = 4096
LLAMA = MODELS["llama3-70b"]
KV = CTX * LLAMA.kv_bytes_per_token  # 1.34 GB
PREFILL_S = float(prefill_s(LLAMA, np.array([CTX], float), 8, 989e12, 0.4)[0])


def _fabric(**pd: Any) -> tuple[Fabric, PDDisagg]:
    wl = {"name": "pd", "kind": "pd", "prefill": 4, "context_tokens": CTX} | pd
    data = {
        "name": "pd-transport",
        "dt": "1ms",
        "seed": 3,
        "topology": {"kind": "leaf-spine", "leaves": 2, "spines": 2, "gpus_per_leaf": 4},
        "workload": [wl],
    }
    fabric = Fabric.from_scenario(parse_scenario(data))
    w = fabric.workloads[0]
    assert isinstance(w, PDDisagg)
    return fabric, w


def _tcp_transfer_alone_s(p: StorageParams, chunks: int = 8) -> float:
    """One request's KV over TCP on idle hosts: chunk by chunk through the bounce copy,
    the sender's CPU, the wire and the receiver's CPU (1 core each: the bottleneck), the
    copy to the decode GPU. The receiver's per-byte CPU dominates, so the chunks queue
    there: first chunk's sender side + every chunk's receive + the last copy in."""
    s = KV / chunks
    d2h = s / p.pcie_Bps
    send = p.tcp_io_cpu_s / 2 + p.cuda_memcpy_cpu_s + s * p.tcp_tx_cpu_s_per_byte
    wire = s / (50e9 * 4096 / 4126)
    recv = p.tcp_io_cpu_s / 2 + p.cuda_memcpy_cpu_s + s * p.tcp_rx_cpu_s_per_byte
    return d2h + send + wire + p.tcp_stack_latency_s + chunks * recv + d2h


def _until_one_completes(fabric: Fabric, w: PDDisagg) -> dict[str, float]:
    """Run (a second at a time, at most 30) until a request has completed; its KPIs."""
    while w.kpis(fabric.sim_time_s)["requests_completed"] < 1 and fabric.sim_time_s < 30:
        run_for(fabric, 1.0)
    return dict(w.kpis(fabric.sim_time_s))


def test_tcp_transfer_pays_the_storage_tcp_host_costs() -> None:
    # half a request a second: the first transfers run alone (when the first one comes
    # is the workload's draw, so the run goes on until one has completed)
    fabric, w = _fabric(transport="tcp", rate_per_s=0.5)
    k = _until_one_completes(fabric, w)
    assert k["requests_completed"] >= 1
    want = _tcp_transfer_alone_s(StorageParams())
    # within a tick or two of 1 ms, and the switch/NIC/cable latencies
    assert k["transfer_mean_seconds"] == pytest.approx(want, abs=2.5e-3)
    assert k["host_copy_cpu_seconds"] > 0
    # more receive cores: the chunks no longer queue behind one core
    fabric, w = _fabric(transport="tcp", rate_per_s=0.5, storage={"client_cores": 8})
    assert _until_one_completes(fabric, w)["transfer_mean_seconds"] < want / 3


def _waiting_over_time(transport: str, rate: float, **pd: Any) -> tuple[list[float], Any]:
    fabric, w = _fabric(transport=transport, rate_per_s=rate, **pd)
    waiting = []
    for _ in range(3):
        run_for(fabric, 2.0)
        waiting.append(w.kpis(fabric.sim_time_s)["requests_waiting"])
    return waiting, w.kpis(fabric.sim_time_s)


def test_a_slow_transfer_holds_the_prefill_slot_and_builds_the_queue_on_tcp() -> None:
    """kv_hold = slot: an instance is busy for prefill + transfer. At 15 requests/s the
    4 instances serve 4 / (prefill + transfer): ~18 /s over RDMA (27 ms transfer), ~8.6 /s
    over TCP (~275 ms): TCP's queue grows by about 15 − 8.6 requests a second, RDMA's
    does not grow (at 83 % load it comes and goes with the Poisson arrivals)."""
    t_tcp = _tcp_transfer_alone_s(StorageParams())
    tcp_rate = 4 / (PREFILL_S + t_tcp)
    waiting, tcp = _waiting_over_time("tcp", 15.0, kv_hold="slot")
    assert waiting[0] < waiting[1] < waiting[2]  # the queue builds
    assert waiting[2] == pytest.approx((15.0 - tcp_rate) * 6.0, rel=0.5)
    rdma_waiting, rdma = _waiting_over_time("rdma", 15.0, kv_hold="slot")
    # RDMA's queue never reaches what TCP's builds in its first 2 s
    assert max(rdma_waiting) < waiting[0]
    # TTFT: TCP pays its longer transfer *and* the queue it builds
    extra = tcp["transfer_mean_seconds"] - rdma["transfer_mean_seconds"]
    assert tcp["ttft_mean_seconds"] - rdma["ttft_mean_seconds"] > extra + 0.2
    assert tcp["queue_mean_seconds"] > 5 * rdma["queue_mean_seconds"]


def test_kv_memory_bounds_what_an_instance_holds_and_then_the_queue_builds() -> None:
    """kv_hold = memory: prefill goes on while earlier KV is still being sent, until the
    instance's KV memory is full. At 19 requests/s the prefill pool keeps up (~21 /s) but
    TCP's receive CPU (1 core: ~3.9 requests/s per decode node, ~15.6 /s for 4) does not.
    With room for 2 requests' KV per instance the backlog backs up into the prefill queue;
    without the hold (the old model) the queue stays short and only the transfer grows.
    RDMA's 27 ms transfers all but never fill the memory, so its queue is nearly prefill's
    alone, as TCP's is without the hold: on the same arrivals (each workload draws from its
    own stream) the two queue alike."""
    waiting, held = _waiting_over_time("tcp", 19.0, kv_memory=2 * KV)
    assert waiting[0] < waiting[2] and waiting[2] > 5  # the queue builds (by fits and starts)
    assert held["kv_held_max_bytes"] <= 2 * KV + 1
    _, free = _waiting_over_time("tcp", 19.0, kv_hold="none")
    _, rdma = _waiting_over_time("rdma", 19.0, kv_memory=2 * KV)
    assert free["queue_mean_seconds"] == pytest.approx(rdma["queue_mean_seconds"], rel=0.05)
    assert held["queue_mean_seconds"] > 2 * free["queue_mean_seconds"]
    assert free["transfer_mean_seconds"] > held["transfer_mean_seconds"]  # the backlog moved


def test_default_kv_memory_is_the_engines_share_of_hbm_minus_the_weights() -> None:
    _, w = _fabric()
    assert w.kv_memory_bytes == pytest.approx(0.9 * 8 * 80e9 - 141.2e9)
    with pytest.raises(ValueError, match="do not fit"):
        _fabric(model="deepseek-v3", gpu="h100-sxm")
    _, w = _fabric(model="deepseek-v3")  # its reference GPU, the H200
    assert w.gpu == GPUS["h200-sxm"]


def test_layerwise_transfer_hides_all_but_the_last_chunk_behind_prefill() -> None:
    """Over RDMA a chunk of 10 layers (168 MB) takes ~3.4 ms on the wire, less than the
    ~24 ms prefill computes it in: only the last chunk is left after prefill ends."""
    fabric, w = _fabric(rate_per_s=2.0, kv_transfer="layerwise")
    run_for(fabric, 2.0)
    layer = w.kpis(fabric.sim_time_s)
    fabric, w = _fabric(rate_per_s=2.0)
    run_for(fabric, 2.0)
    after = w.kpis(fabric.sim_time_s)
    assert after["transfer_mean_seconds"] == pytest.approx(KV / 49.6e9, rel=0.05)
    assert layer["transfer_mean_seconds"] == pytest.approx(KV / 8 / 49.6e9, abs=1.5e-3)
    assert layer["prefill_mean_seconds"] == after["prefill_mean_seconds"]


def test_model_and_gpu_are_scenario_keys() -> None:
    """Each key moves the part of TTFT its formula says."""
    fabric, w = _fabric(rate_per_s=2.0, gpu="h200-sxm")
    k = _until_one_completes(fabric, w)
    h200 = GPUS["h200-sxm"]
    assert k["decode_mean_seconds"] == pytest.approx(
        float(decode_step_s(LLAMA, np.array([CTX], float), 8, h200.hbm_Bps)[0]),
        rel=1e-9,
    )
    _, w = _fabric(
        gpu_flops=2e15, hbm_bandwidth="8TB/s", hbm_capacity="192GB", tp=4, mfu=0.5, layers=40
    )
    assert (w.gpu.flops, w.gpu.hbm_Bps, w.gpu.hbm_bytes, w.tp, w.mfu) == (
        2e15,
        8e12,
        192e9,
        4,
        0.5,
    )
    assert w.preset.layers == 40
    _, w = _fabric(model="llama3-8b", kv_bytes_per_token="64KiB", resident_bytes="16GB")
    assert (w.preset.kv_bytes_per_token, w.preset.resident_bytes) == (65536, 16e9)
    for bad, match in (
        ({"gpu": "tpu"}, "unknown 'tpu'"),
        ({"kv_hold": "forever"}, "kv_hold"),
        ({"transport": "udp"}, "transport"),
        ({"gpu_flops": 0}, "gpu_flops must be > 0"),
    ):
        with pytest.raises(ValueError, match=match):
            _fabric(**bad)
