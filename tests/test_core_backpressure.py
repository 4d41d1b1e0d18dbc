"""Back-pressure: a congested downlink fills buffers upstream; victims on its VL slow down."""

from __future__ import annotations

import numpy as np

from fabric_core.net.topology import leaf_spine
from tests.helpers import profile, scripted_fabric

BIG = 1e12  # bytes: flows that outlast the test


def _run(hot: bool) -> dict[str, float]:
    """3 leaves of 8 GPUs, 1 spine. gpu0000 and gpu0001 (leaf00) send across the spine to
    leaf02; with ``hot`` both go to gpu0016, which 7 leaf-mates also send to (a hot spot),
    otherwise to two idle GPUs. Victims from gpu0002/gpu0003 (leaf00) to gpu0017/gpu0018
    (leaf02) cross the same leaf00->spine00->leaf02 links: 'same' on the VL of the hot
    flows, 'other' on another VL."""
    prof = profile(buffer_per_vl_bytes=64 * 1024)
    topo = leaf_spine(prof, leaves=3, spines=1, gpus_per_leaf=8)
    if hot:
        cross = [("gpu0000", "gpu0016", BIG, 0.0), ("gpu0001", "gpu0016", BIG, 0.0)]
        local = [(f"gpu{i:04d}", "gpu0016", BIG, 0.0) for i in range(17, 24)]
    else:
        cross = [("gpu0000", "gpu0019", BIG, 0.0), ("gpu0001", "gpu0020", BIG, 0.0)]
        local = []
    fabric, _ = scripted_fabric(
        topo,
        prof,
        cross + local,
        dt_s=1e-6,
        extra=[
            ("victim-same", "bulk", [("gpu0002", "gpu0017", BIG, 0.0)]),
            ("victim-other", "other", [("gpu0003", "gpu0018", BIG, 0.0)]),
        ],
        class_vl={"bulk": 0, "other": 1},
    )
    fabric.run_ticks(300)
    delivered0 = fabric.flows.delivered.copy()
    tx0 = fabric.counters["transmit_wait_seconds_total"].copy()
    fabric.run_ticks(200)
    rate = (fabric.flows.delivered - delivered0) / (200 * fabric.dt_s)
    workload = fabric.flows.workload
    links = topo.links.index
    up = links["leaf00->spine00"]
    down = links["spine00->leaf02"]
    vl = fabric.n_vls
    snap = fabric.snapshot()
    return {
        "same": float(rate[workload == 1].sum()),
        "other": float(rate[workload == 2].sum()),
        "queue_at_leaf02_from_spine_vl0": float(fabric.occupancy[down * vl + 0]),
        "queue_at_spine_from_leaf00_vl0": float(fabric.occupancy[up * vl + 0]),
        "credits_down": float(snap.link_state.credits_bytes[down]),
        "credit_wait_down": float(fabric.counters["transmit_wait_seconds_total"][down] - tx0[down]),
        "paused_up": bool(snap.link_state.paused[up]),
    }


def test_congestion_spreads_upstream_and_slows_only_the_victim_on_its_lane() -> None:
    calm = _run(hot=False)
    hot = _run(hot=True)
    buffer = 64 * 1024
    # the hot spot's bytes fill the buffers upstream of it, one hop and two hops back
    # (the first but for its credit loop's bytes: some 9 KB on the 30 m cable both ways
    # and in the leaf's forwarding)
    assert hot["queue_at_leaf02_from_spine_vl0"] > 0.8 * buffer
    assert hot["queue_at_spine_from_leaf00_vl0"] > 0.5 * buffer
    assert calm["queue_at_leaf02_from_spine_vl0"] < 0.01 * buffer
    # ... so the links into them wait for credits
    assert hot["credits_down"] < 0.1 * buffer
    assert hot["credit_wait_down"] > 0
    # the victim sharing the hot flows' virtual lane is slowed far below its calm rate
    assert hot["same"] < 0.5 * calm["same"]
    # the one on another lane, over the very same links, is not
    assert hot["other"] >= 0.95 * calm["other"]
    assert np.isfinite(hot["same"]) and hot["same"] > 0
