"""Every message carries its endpoints' costs (issue 15 item 1, issue 22 item 5).

The expected latencies are computed here from the profile's raw parameters, not from
``fabric_core.net.endpoint_costs``: NIC pipelines, the payload's PCIe DMA read (a round trip,
then streaming pipelined with the wire, so PCIe slower than the wire bounds the rate; none
for a payload of at most ``inline_bytes``, sent inline), the
receiver's DMA write (one posted write), and the CPU's post, doorbell and completion poll.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fabric_core.endpoints.model import EndpointParams
from fabric_core.net.profiles import NATIVE_400G, PROFILES, Profile
from fabric_core.net.topology import Topology, leaf_spine
from fabric_core.reports.bringup import ProbeAllToAll
from fabric_core.runtime.fabric import Fabric
from fabric_core.storage.model import StorageParams
from tests.helpers import profile, scripted_fabric, small_leaf_spine

SIZES = [64, 512, 4096, 32 * 1024, 256 * 1024, 1024**2]
GT_PER_LANE = {3: 8e9, 4: 16e9, 5: 32e9, 6: 64e9}


def _pcie_goodput(p: Profile) -> float:
    """Lanes x GT/s x line code, less 24 B of TLP overhead per 256 B payload."""
    code = 236 / 256 if p.pcie_gen == 6 else 128 / 130
    return GT_PER_LANE[p.pcie_gen] * p.pcie_lanes * code / 8 * 256 / 280


def _topology(prof: Profile, switches: int) -> tuple[Topology, list[str]]:
    if switches == 1:
        return small_leaf_spine(prof, leaves=1, gpus_per_leaf=2), [
            "gpu0000->leaf00",
            "leaf00->gpu0001",
        ]
    topo = small_leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=1)
    return topo, ["gpu0000->leaf00", "leaf00->spine00", "spine00->leaf01", "leaf01->gpu0001"]


def _measured(prof: Profile, size: float, switches: int) -> tuple[float, float]:
    """(measured latency, propagation along the path) of one message on an idle fabric."""
    topo, hops = _topology(prof, switches)
    fabric, (wl,) = scripted_fabric(topo, prof, [("gpu0000", "gpu0001", size, 0.0)], dt_s=1e-6)
    while not wl.finished:
        fabric.step()
    _, start, finish = wl.finished[0]
    links = fabric.topo.links
    prop = float(sum(links.prop_delay_s[links.index[h]] for h in hops))
    return finish - start, prop


def _expected(p: Profile, size: float, switches: int, prop: float) -> float:
    payload_rate = p.link_bandwidth_Bps * p.mtu_bytes / (p.mtu_bytes + p.header_bytes)
    wire = size / payload_rate
    pcie = max(0.0, size / _pcie_goodput(p) - wire)  # pipelined: the slower of the two
    nic = 2 * p.nic_latency_s
    # a payload of at most inline_bytes rides in the doorbell's work request: no DMA read
    read = 0.0 if size <= p.inline_bytes else p.pcie_read_latency_s
    dma = read + p.pcie_write_latency_s
    host = p.host_post_s + p.pcie_write_latency_s + p.host_poll_s
    return prop + switches * p.switch_latency_s + wire + pcie + nic + dma + host


@pytest.mark.parametrize("switches", [1, 3])
def test_latency_vs_size_carries_the_endpoint_costs(switches: int) -> None:
    prof = profile()
    lat = {}
    for size in SIZES:
        lat[size], prop = _measured(prof, size, switches)
        assert lat[size] == pytest.approx(_expected(prof, size, switches, prop), rel=2e-3), size
    # the endpoints, not the wire, dominate a small message: about a microsecond beyond the
    # switches and cables even sent inline
    assert lat[64] - switches * prof.switch_latency_s - prop > 0.9e-6
    assert all(a < b for a, b in zip(list(lat.values()), list(lat.values())[1:], strict=False))


def test_the_pcie_bandwidth_moves_the_32k_latency_as_the_formula_says() -> None:
    fast = profile()  # Gen5 x16: 57.6 GB/s, above the 400G wire: no rate bound
    slow = profile(pcie_lanes=4)  # Gen5 x4: 14.4 GB/s, below the wire
    assert _pcie_goodput(fast) > fast.link_bandwidth_Bps > _pcie_goodput(slow)
    payload_rate = fast.link_bandwidth_Bps * fast.mtu_bytes / (fast.mtu_bytes + fast.header_bytes)
    moved = {}
    for size in (64.0, 32 * 1024.0):
        a, prop = _measured(fast, size, 1)
        b, _ = _measured(slow, size, 1)
        assert a == pytest.approx(_expected(fast, size, 1, prop), rel=2e-3)
        assert b == pytest.approx(_expected(slow, size, 1, prop), rel=2e-3)
        moved[size] = b - a
        bound = size / _pcie_goodput(slow) - size / payload_rate
        assert moved[size] == pytest.approx(bound, rel=1e-3, abs=1e-12)
    # 32 KiB: 1.6 µs more; 64 B: a few ns, what the formula gives and no more
    assert moved[32 * 1024.0] > 1.5e-6
    assert moved[64.0] < 5e-9


def test_a_gen6_800g_nic_is_not_pcie_bound_and_a_gen5_one_would_be() -> None:
    p = PROFILES["native-800g"]
    assert _pcie_goodput(p) > p.link_bandwidth_Bps
    assert _pcie_goodput(dataclasses.replace(p, pcie_gen=5)) < p.link_bandwidth_Bps
    with pytest.raises(ValueError, match="pcie_gen"):
        profile(pcie_gen=7)


def test_one_pcie_figure_serves_nic_copies_and_storage() -> None:
    p, e, s = NATIVE_400G, EndpointParams(), StorageParams()
    assert e.host_copy_Bps == pytest.approx(_pcie_goodput(p))
    assert s.pcie_Bps == pytest.approx(_pcie_goodput(p))
    assert not hasattr(e, "pcie_Bps")  # the unread 63 GB/s figure is gone
    # the endpoint model's PCIe, post and poll figures are the fabric's
    assert e.pcie_rtt_s == p.pcie_read_latency_s
    assert e.pcie_write_s == p.pcie_write_latency_s
    assert e.cpu_post_s == p.host_post_s
    assert e.recv_poll_s == p.host_poll_s


def test_the_nic_figure_no_longer_holds_pcie() -> None:
    """The vendor's ~600 ns end-to-end small message is split once: two NIC pipelines,
    the two posted PCIe writes it holds (doorbell with the payload inline, the DMA write at
    the receiver) and 3 m of cable."""
    p = NATIVE_400G
    total = 2 * p.nic_latency_s + 2 * p.pcie_write_latency_s + 3 * p.propagation_s_per_m
    assert total == pytest.approx(600e-9)
    assert 0 < p.nic_latency_s < 300e-9


@pytest.mark.parametrize("control", ["ibgda", "proxy"])
def test_endpoint_modelled_messages_are_charged_once(control: str) -> None:
    """MoE and PD post through ``EndpointModel``: the fabric adds the data path (NICs,
    DMA read, DMA write) and none of the CPU-posted message's host costs; the endpoint
    model adds its own posting and poll, and no data fetch. The sum of the parts is the
    latency, so nothing is counted twice."""
    prof = NATIVE_400G
    e = EndpointParams(control=control)
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=2)
    size = 4096.0
    probe = ProbeAllToAll(
        name="p",
        traffic_class="p",
        ranks=topo.gpus.astype(np.int64),
        size_bytes=size,
        rounds=1,
        burst=1,
        endpoint=e,
    )
    fabric = Fabric(topo, prof, [probe], dt_s=1e-6, seed=1)
    while not probe.done and fabric.sim_time_s < 1e-3:
        fabric.step()
    assert probe.done
    if control == "ibgda":
        post = e.gpu_wqe_post_s + e.pcie_write_s + e.pcie_rtt_s  # doorbell, WQE fetch
    else:
        before = e.gpu_request_s + e.pcie_write_s + e.proxy_poll_interval_s / 2
        post = before + e.cpu_post_s + e.pcie_write_s  # BlueFlame: no WQE fetch
    nic_server = 1 / e.nic_msg_rate_per_s
    links = fabric.topo.links
    prop = float(links.prop_delay_s[links.index["gpu0000->leaf00"]]) * 2
    payload_rate = prof.link_bandwidth_Bps * prof.mtu_bytes / (prof.mtu_bytes + prof.header_bytes)
    fabric_part = (
        prop
        + prof.switch_latency_s
        + size / payload_rate
        + 2 * prof.nic_latency_s
        + prof.pcie_read_latency_s
        + prof.pcie_write_latency_s
    )
    expected = post + nic_server + fabric_part + e.recv_poll_s
    assert probe.end_s - probe.start_s == pytest.approx(expected, rel=2e-3)
    # charging the CPU-posted host costs on top would be visible at this tolerance
    host = prof.host_post_s + prof.pcie_write_latency_s + prof.host_poll_s
    assert host > 0.01 * expected


def test_a_sprayed_message_is_inlined_as_a_whole_not_by_its_sub_flows() -> None:
    """Spraying splits a message into sub-flows; a 300 B message in two 150 B sub-flows
    was charged as if sent inline (review of session 38): inlining is the message's."""
    prof = dataclasses.replace(PROFILES["native-800g"], mtu_bytes=256.0)  # sprays small ones
    assert prof.routing == "spray"
    topo = small_leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=1)
    lat = {}
    for size in (prof.inline_bytes, prof.inline_bytes + 1, 300.0):
        fabric, (wl,) = scripted_fabric(topo, prof, [("gpu0000", "gpu0001", size, 0.0)], dt_s=1e-6)
        while not wl.finished:
            fabric.step()
        _, start, finish = wl.finished[0]
        lat[size] = finish - start
    inline, one_more, sprayed = lat.values()
    assert one_more - inline == pytest.approx(prof.pcie_read_latency_s, rel=0.02)
    assert sprayed >= one_more
