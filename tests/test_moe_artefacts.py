"""MoE all-to-all without the model's artefacts (issue 15): adaptive routing spreads a
dispatch, a small send queue does not stall combine, and the NIC sends its messages one
after another, so they complete in order."""

from __future__ import annotations

import numpy as np
import pytest

from fabric_core.endpoints.model import EndpointModel, EndpointParams
from fabric_core.reports.endpoints_doc import moe_run


def test_an_ep64_dispatch_on_adaptive_routing_ends_near_the_busiest_nic_bound() -> None:
    # before: every message of a tick saw the same queues and took the spine that looked
    # idle, and the bytes still at the NICs were no load at all: 209.6 µs against a
    # 161.0 µs bound (+30 %), ECMP 166.0 µs
    k = moe_run("ibgda", 7168, 128, "1us", ranks=64)
    assert k["dispatch_last_seconds"] <= 1.10 * k["dispatch_bound_seconds"]
    ecmp = moe_run("ibgda", 7168, 128, "1us", ranks=64, routing="ecmp")
    assert k["dispatch_last_seconds"] <= 1.02 * ecmp["dispatch_last_seconds"]


def test_combine_with_a_small_send_queue_reaches_the_bound() -> None:
    # 64 WQE slots per GPU for ~1,000 messages: the queue refills as messages complete,
    # in order (before: 1,024 slots already held combine at 295 µs against 278 µs, and
    # 64 slots took it to 835 µs)
    k = moe_run("ibgda", 7168, 128, "1us", endpoint={"sq_depth": 64}, duration_s=600e-6)
    assert k["send_queue_full_waits_total"] > 1000  # the queue does bind
    assert k["send_queue_max_outstanding"] == 64
    assert k["combine_last_seconds"] <= 1.10 * k["combine_bound_seconds"]
    assert k["dispatch_last_seconds"] <= 1.10 * k["dispatch_bound_seconds"]


def test_an_ep256_dispatch_does_not_depend_on_the_tick() -> None:
    # 256 GPUs, 256 messages each (32 tokens x top-8): before, a tick's messages herded
    # together, the more of them the longer the tick: 72.0 µs at 1 µs, 65.1 µs at 2 µs
    # (at 128 tokens: 217 / 232 µs); now 49.4 / 49.7 µs (172.1 / 172.0 µs)
    one, two = (
        moe_run("ibgda", 7168, 32, dt, ranks=256, duration_s=120e-6)["dispatch_last_seconds"]
        for dt in ("1us", "2us")
    )
    assert two == pytest.approx(one, rel=0.03)


def test_the_nic_sends_a_gpus_messages_one_after_another_at_line_rate() -> None:
    p = EndpointParams()
    ep = EndpointModel(p, 3, wire_Bps=np.full(3, 50e9))
    n = 10
    src = np.zeros(n, dtype=np.int64)
    dst = np.ones(n, dtype=np.int64)
    dst[-1] = 0  # a message to itself uses no wire (NVLink / P2P copy)
    size = np.full(n, 50e3)  # 1 µs each at line rate: far above the WQE rate
    ep.post(src, dst, size, np.arange(n), np.zeros(n))
    req, _ = ep.release(0.0, 1.0)
    ready = np.sort(req.ready_s[req.dst == 1])
    # after the first, one message's wire time apart: the next WQE's fetches overlap
    np.testing.assert_allclose(np.diff(ready), 1e-6, rtol=1e-9)
    # without a line rate (no fabric known) only posting and the WQE rate pace the NIC:
    # 32 posting threads at 1 µs a WQE, 31 ns apart
    free = EndpointModel(p, 3)
    free.post(src, dst, size, np.arange(n), np.zeros(n))
    r2, _ = free.release(0.0, 1.0)
    gaps = np.diff(np.sort(r2.ready_s[r2.dst == 1]))
    assert gaps.max() == pytest.approx(p.gpu_wqe_post_s / p.ibgda_posters, rel=1e-9)


@pytest.mark.parametrize("control", ["ibgda", "proxy"])
def test_moe_layer_completes_and_counts_every_message(control: str) -> None:
    k = moe_run(control, 2048, 32, "1us", duration_s=300e-6)
    assert k["layers_completed"] == 1
    assert k["messages_outstanding"] == 0
    assert k["wqe_posted_total"] == 2 * 8 * 32 * 8
