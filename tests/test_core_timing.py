"""Completion times and throughput come out of bandwidth and fixed costs, whatever dt is."""

from __future__ import annotations

import numpy as np
import pytest

from fabric_core.runtime.fabric import Solver
from tests.helpers import (
    SOLVERS,
    credit_loop_rate,
    profile,
    scripted_fabric,
    small_leaf_spine,
    with_probe,
)

DTS = [100e-9, 1e-6, 10e-6, 100e-6, 1e-3]


def payload_rate(prof) -> float:  # type: ignore[no-untyped-def]
    return prof.link_bandwidth_Bps * prof.mtu_bytes / (prof.mtu_bytes + prof.header_bytes)


def fixed_latency(fabric, hops: list[str]) -> float:  # type: ignore[no-untyped-def]
    """Propagation + switches + the endpoints along ``hops`` (link names), from the profile:
    NIC pipelines, the payload's DMA read and write, the CPU's post, doorbell and poll
    (docs/MODEL.md "Latency"; PCIe Gen5 x16 is faster than the wire: no rate bound)."""
    p = fabric.profile
    links = fabric.topo.links
    prop = sum(links.prop_delay_s[links.index[h]] for h in hops)
    endpoints = (
        2 * p.nic_latency_s
        + p.pcie_read_latency_s
        + 2 * p.pcie_write_latency_s
        + p.host_post_s
        + p.host_poll_s
    )
    return prop + (len(hops) - 1) * p.switch_latency_s + endpoints


@pytest.mark.parametrize("dt", DTS)
def test_one_mebibyte_over_one_hop_takes_size_over_bandwidth_plus_fixed(dt: float) -> None:
    prof = profile()
    topo = small_leaf_spine(prof, leaves=1, gpus_per_leaf=2)
    size = 1024**2
    fabric, (wl,) = scripted_fabric(topo, prof, [("gpu0000", "gpu0001", size, 0.0)], dt_s=dt)
    while not wl.finished:
        fabric.step()
    _, start, finish = wl.finished[0]
    expected = size / payload_rate(prof) + fixed_latency(
        fabric, ["gpu0000->leaf00", "leaf00->gpu0001"]
    )
    assert finish - start == pytest.approx(expected, rel=0.02)


@pytest.mark.parametrize("dt", [100e-9, 1e-6, 100e-6])
@pytest.mark.parametrize("senders", [2, 7])
def test_incast_finishes_in_n_s_over_b_with_no_drops_and_bounded_credits(
    dt: float, senders: int
) -> None:
    prof = profile(buffer_per_vl_bytes=64 * 1024)
    topo = small_leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=4)
    size = 2 * 1024**2
    names = [f"gpu{i:04d}" for i in range(1, 8)][:senders]
    flows = [(s, "gpu0000", size, 0.0) for s in names]
    fabric, (wl,) = scripted_fabric(topo, prof, flows, dt_s=dt)
    buffers = fabric.buffer_bytes
    while len(wl.finished) < senders:
        fabric.step()
        assert fabric.occupancy.min() >= -1e-6
        assert (fabric.occupancy <= buffers + 1e-6).all()
    snap = fabric.snapshot()
    assert snap.totals.dropped_bytes_total == 0
    assert float(np.sum(snap.link_state.discards_bytes_total)) == 0
    last = max(f for _, _, f in wl.finished)
    expected = senders * size / payload_rate(prof)
    assert last == pytest.approx(expected, rel=0.03)


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("buffer", [8 * 1024, 64 * 1024])
def test_long_flow_through_tiny_buffers_runs_at_its_credit_loops_rate(
    dt: float, buffer: int
) -> None:
    """Buffers of 8 and 64 KiB, far below bandwidth x dt (5 KB at 100 ns ... 50 MB at
    1 ms): the flow runs at line rate or at its buffers' bytes per round trip of their
    credits, over the 30 m leaf-spine cables and through a switch (8 KiB / 575 ns:
    14.2 GB/s), whichever is lower, whatever the tick, not at buffer / dt."""
    prof = profile(buffer_per_vl_bytes=buffer)
    topo = small_leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=1)  # 4 hops, 3 switches
    size = 64 * 1024**2
    fabric, (wl,) = scripted_fabric(topo, prof, [("gpu0000", "gpu0001", size, 0.0)], dt_s=dt)
    while not wl.finished:
        fabric.step()
        assert (fabric.occupancy <= fabric.buffer_bytes + 1e-6).all()
    _, start, finish = wl.finished[0]
    achieved = size / (finish - start)
    hops = ["gpu0000->leaf00", "leaf00->spine00", "spine00->leaf01", "leaf01->gpu0001"]
    loops = credit_loop_rate(fabric, hops)
    assert achieved == pytest.approx(min(payload_rate(prof), loops), rel=0.01)


def _message_latency(dt: float, loaded: bool, solver: Solver = "compiled") -> float:
    prof = profile()
    topo = small_leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=2)
    background = [("gpu0001", "gpu0003", 256 * 1024**2, 0.0)] if loaded else []
    # long after the background flow reached its steady state (its first microseconds),
    # and at least two ticks in
    t_msg = max(200e-6, 2 * dt)
    fabric, (_, probe) = scripted_fabric(
        topo,
        prof,
        background,
        dt_s=dt,
        extra=[("probe", "rpc", [("gpu0000", "gpu0002", 4096, t_msg)])],
        solver=solver,
    )
    while not probe.finished:
        fabric.step()
    _, start, finish = probe.finished[0]
    return finish - start


@pytest.mark.parametrize("loaded", [False, True])
def test_small_message_latency_does_not_depend_on_dt(loaded: bool) -> None:
    lat = {dt: _message_latency(dt, loaded) for dt in DTS}
    ref = lat[100e-9]
    for dt, value in lat.items():
        assert value == pytest.approx(ref, rel=0.05), (dt, lat)
    if loaded:  # sharing the spine links with a line-rate flow costs the message time
        assert ref > _message_latency(100e-9, loaded=False)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("dt", DTS)
def test_contention_costs_the_message_its_extra_serialisation_at_every_dt(
    dt: float, solver: Solver
) -> None:
    """A 4 KiB message crossing the spine links of a line-rate flow shares them as in
    processor sharing: it gets half the link while it lasts, so it ends one more
    serialisation later (4096 B at the payload rate, 84 ns at 400G) than on an idle
    fabric. The message lasts at most about one tick (164 ns against 100 ns to 1 ms), so
    this is the sub-tick finish (``finish_within_tick``); at 1 % it fails if the elastic flow's share is left out (the
    effect is the whole 84 ns of a 1.5 µs latency, 5.6 %)."""
    extra = 4096 / payload_rate(profile())
    idle = _message_latency(dt, loaded=False, solver=solver)
    loaded = _message_latency(dt, loaded=True, solver=solver)
    assert loaded - idle == pytest.approx(extra, rel=0.01)


def _latency_beside_a_held_flow(dt: float, loaded: bool, solver: Solver) -> float:
    """A 4 KiB message gpu0000 -> gpu0007 across the spine; loaded: a long flow
    gpu0001 -> gpu0004 shares the spine links with it, held to a third of a link at
    gpu0004's downlink by two more senders there (gpu0005, gpu0006, local on leaf01)."""
    prof = profile()
    topo = small_leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=4)
    size = 256 * 1024**2
    background = (
        [(s, "gpu0004", size, 0.0) for s in ("gpu0001", "gpu0005", "gpu0006")] if loaded else []
    )
    # the held flow is steady within microseconds (its buffers fill at 800 Gb/s of excess);
    # 200 µs, or two ticks where that is longer, leaves the reference's 100 ns case 2,000
    # ticks to run before the message, not 20,000 (the same figure to the picosecond)
    start = max(200e-6, 2 * dt)
    fabric, (_, probe) = scripted_fabric(
        topo,
        prof,
        background,
        dt_s=dt,
        extra=[("probe", "rpc", [("gpu0000", "gpu0007", 4096, start)])],
        solver=solver,
    )
    while not probe.finished:
        fabric.step()
    _, start, finish = probe.finished[0]
    return finish - start


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("dt", DTS)
def test_a_flow_held_down_elsewhere_keeps_its_rate_and_the_message_gets_the_rest(
    dt: float, solver: Solver
) -> None:
    """The neighbour on the spine links runs at a third of a link (its bottleneck is
    elsewhere) and does not yield: the message gets the other two thirds, so it takes
    1.5 serialisations there instead of 1, half a serialisation (42 ns) more than on an
    idle fabric, at every dt."""
    extra = 4096 / payload_rate(profile()) / 2
    idle = _latency_beside_a_held_flow(dt, loaded=False, solver=solver)
    loaded = _latency_beside_a_held_flow(dt, loaded=True, solver=solver)
    assert loaded - idle == pytest.approx(extra, rel=0.01)


def _message_behind_a_starved_buffer(dt: float, solver: Solver, loaded: bool = True) -> float:
    """A 4 KiB message from gpu0000 to an idle gpu0002, while (``loaded``) gpu0000 and
    gpu0001 send a long incast to gpu0003: the message shares gpu0000's NIC and its
    ingress buffer at the leaf (same lane), which the incast keeps full (64 KiB, starved
    of credit)."""
    prof = profile(buffer_per_vl_bytes=64 * 1024)
    topo = small_leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=4)
    incast = [("gpu0000", "gpu0003", 1e12, 0.0), ("gpu0001", "gpu0003", 1e12, 0.0)]
    fabric, probe = with_probe(
        topo,
        prof,
        incast if loaded else [],
        ("gpu0000", "gpu0002", 4096.0, 200e-6),
        dt_s=dt,
        solver=solver,
    )
    while not probe.finished:
        fabric.step()
    _, start, finish = probe.finished[0]
    return finish - start


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_message_behind_a_starved_buffer_waits_for_the_bytes_ahead_whatever_dt(
    solver: Solver,
) -> None:
    """The leaf's buffer holds 64 KiB of the incast, less its credit loop's bytes, which
    leaves it at half a link (the incast's share of gpu0003's downlink). The message waits for those bytes and no
    longer: its own bytes get the buffer's credits at the level the incast gets them
    (the NIC hands credits out flow by flow), so they do not trickle in at a fraction of
    what is left each tick (docs/MODEL.md, "Credits"; before: about 29 ticks whatever dt,
    2.7 µs at 100 ns, 29 µs at 1 µs, 290 µs at 10 µs)."""
    prof = profile()
    # the buffer's 64 KiB less its credit loop's bytes (R/2 each way over the 3 m cable,
    # and R/2 through the switch's forwarding time)
    topo = small_leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=4)
    cable = float(topo.links.prop_delay_s[topo.links.index["gpu0000->leaf00"]])
    half = payload_rate(prof) / 2
    ahead = (64 * 1024 - half * (2 * cable + prof.switch_latency_s)) / half
    for dt in (100e-9, 1e-6, 10e-6):
        idle = _message_behind_a_starved_buffer(dt, solver, loaded=False)
        loaded = _message_behind_a_starved_buffer(dt, solver)
        assert loaded - idle == pytest.approx(ahead, rel=0.01), dt
