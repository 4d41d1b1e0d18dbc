"""A batch of new flows started in one compiled call: routed, given their lanes and fixed
costs, and written into the flow table.

``Fabric.start_flows`` takes this way on the compiled tick for a generated 2-tier topology
with neither spraying nor static routes (the usual case). It runs the kernels the separate
steps call (``route.route_flows_in_pods``, ``route.lanes_and_costs``, ``slots.fill_slots``) in
the same order on the same arrays, so the flows are the same bit for bit; what it saves is
the Python between them (three wrappers and their array handling: about half of what
starting a batch cost on the default scenario).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.route_rules import FLOW_KEY_STRIDE
from fabric_core.tick.kernels._jit import kernel
from fabric_core.tick.kernels.route import lanes_and_costs, route_flows_in_pods
from fabric_core.tick.kernels.slots import fill_slots

_F = NDArray[np.float64]
_I = NDArray[np.intp]
_I32 = NDArray[np.int32]
_I64 = NDArray[np.int64]
_B = NDArray[np.bool_]


@kernel
def start_routed(
    # the batch, one row a flow, and the free slots it goes into
    src: _I64,
    dst: _I64,
    size: _F,
    ready_s: _F,
    extra_latency_s: _F,
    host_s: float,
    tag: _I64,
    lane: int,
    traffic_class: int,
    workload: int,
    slots: _I,
    # routing (``route.route_flows_in_pods``)
    occupancy: _F,
    n_vls: int,
    bandwidth_Bps: _F,
    known_down: _B,
    ep_uplink: _I32,
    ep_downlink: _I32,
    ep_leaf: _I32,
    node_pod: _I32,
    switch_index: _I32,
    switch_link: _I32,
    spines_by_pod: _I32,
    cores_by_slot: _I32,
    planes: int,
    tiers: int,
    adaptive: bool,
    link_load_bytes: _F,
    complete: bool,
    down_links: _I,
    link_src: _I32,
    link_dst: _I32,
    # lanes and fixed costs (``route.lanes_and_costs``)
    node_tier: NDArray[np.int8],
    prop_delay_s: _F,
    drain_Bps: _F,
    cycle_s: _F,
    avg_Bps: _F,
    paused: _B,
    credit: bool,
    cut_through: bool,
    switch_latency_s: float,
    endpoint_fixed_s: float,
    pcie_Bps: float,
    inline_bytes: float,
    inline_saving_s: float,
    mtu_bytes: float,
    header_bytes: float,
    # the flow table (in place, ``slots.fill_slots``)
    path: _I32,
    vl: NDArray[np.int8],
    backlog: _F,
    rate: _F,
    parent: _I,
    pending: NDArray[np.int32],
    latest_finish_s: _F,
    active: _B,
    hops: NDArray[np.int8],
    cls: NDArray[np.int16],
    workload_of: NDArray[np.int16],
    size_of: _F,
    delivered: _F,
    start_s: _F,
    extra_of: _F,
    fixed_latency_s: _F,
    wait_s: _F,
    parent_size: _F,
    tag_of: _I64,
    src_of: _I64,
    dst_of: _I64,
    resend_bytes: _F,
) -> int:
    """Route the batch (adaptive routing counting what it places as it goes), give each
    flow its lanes, fixed latency and FIFO wait, and write it into its slot, its bytes
    waiting at hop 0. Returns the highest lane a route uses: at ``n_vls`` or more a route
    turns down-up more often than there are lanes, and nothing is written (the caller
    refuses the batch, as ``CompiledTick.lanes_and_costs`` does). Each flow is routed by
    its key, ``tag * FLOW_KEY_STRIDE + workload``, and costs ``extra_latency_s`` on top
    (``host_s`` each where it is empty: a CPU posts and polls the batch's messages)."""
    n = src.size
    key = np.empty(n, dtype=np.int64)
    for i in range(n):
        key[i] = tag[i] * FLOW_KEY_STRIDE + workload
    extra = np.full(n, host_s) if extra_latency_s.size == 0 else extra_latency_s
    new_path, new_hops = route_flows_in_pods(
        src, dst, key, occupancy, n_vls, bandwidth_Bps, known_down, ep_uplink, ep_downlink,
        ep_leaf, node_pod, switch_index, switch_link, spines_by_pod, cores_by_slot, planes,
        tiers, adaptive, size, link_load_bytes, complete, down_links, link_src, link_dst,
    )  # fmt: skip
    vl0 = np.full(n, lane, dtype=np.int8)
    new_vl, fixed, wait, top = lanes_and_costs(
        new_path, new_hops, vl0, size, node_tier, link_src, link_dst, prop_delay_s,
        bandwidth_Bps, occupancy, drain_Bps, cycle_s, avg_Bps, paused, n_vls, credit,
        cut_through, switch_latency_s, endpoint_fixed_s, pcie_Bps, inline_bytes,
        inline_saving_s, mtu_bytes, header_bytes,
    )  # fmt: skip
    if top >= n_vls:
        return top
    fill_slots(
        slots, np.ones(n, dtype=np.int64), path, vl, backlog, rate, parent, pending,
        latest_finish_s, active, hops, cls, workload_of, size_of, delivered, start_s,
        extra_of, fixed_latency_s, wait_s, parent_size, tag_of, src_of, dst_of, resend_bytes,
        new_path, new_vl, new_hops, traffic_class, workload, size, ready_s, extra, size,
        tag, src, dst,
    )  # fmt: skip
    for i in range(n):
        fixed_latency_s[slots[i]] = fixed[i]
        wait_s[slots[i]] = wait[i]
    return top
