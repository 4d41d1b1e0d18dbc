"""The compiled tick against the numpy reference (``fabric_core.tick.step``), on random fabrics.

The two solvers are run in lockstep on the same fabric, traffic and seed, credit and
PFC alike, also with a pinned route that breaks up*/down* (Jacobi sweeps instead of
one pass by rank). Every tick the index must be the same, and rates, backlogs,
buffers, deliveries and completions must agree within 1e-9 relative.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_core.net.profiles import NATIVE_400G, ROCE_400G
from fabric_core.net.topology import Topology, fat_tree, leaf_spine
from fabric_core.runtime.fabric import Fabric, Solver
from fabric_core.tick.kernels.solve import fill_link
from fabric_core.tick.step import waterfill
from fabric_core.workloads.traffic import Scripted
from tests.helpers import draw_flows

RTOL = 1e-9

FabricFactory = Callable[[Solver], Fabric]
INDEX_FIELDS = (
    "pos", "hop", "flow", "link", "queue", "prev_pad", "nxt_pad", "buf_pad", "drains_pad",
    "first", "heads", "last", "last_flow",
)  # fmt: skip


@st.composite
def fabric_factories(draw: st.DrawFn) -> FabricFactory:
    roce = draw(st.booleans())
    leaves = draw(st.integers(2, 3))
    spines = draw(st.integers(1, 3))
    per_leaf = draw(st.integers(1, 3))
    buffer = draw(st.sampled_from([2048.0, 16384.0, 131072.0]))
    dt = draw(st.sampled_from([100e-9, 1e-6, 20e-6]))
    if roce:
        # a headroom smaller than what is in flight at XOFF makes the queue overflow: drops
        headroom = draw(st.sampled_from([0.0, 200.0]))  # 0: the mlx5 formula
        # the paper-replica ECN thresholds mark these small queues: CNPs and DCQCN act
        kmin, kmax, pmax = draw(
            st.sampled_from(
                [
                    (ROCE_400G.ecn_kmin_s, ROCE_400G.ecn_kmax_s, ROCE_400G.ecn_pmax),
                    (0.1e-6, 2e-6, 0.01),  # 5 KB and 100 KB at 400G
                ]
            )
        )
        # a fixed buffer per queue, or a small shared one whose thresholds move every tick
        mode = draw(st.sampled_from(["static", "shared"]))
        cc = draw(st.sampled_from(["dcqcn", "swift", "none"]))
        prof = dataclasses.replace(
            ROCE_400G,
            pfc_buffer_mode=mode,
            congestion_control=cc,
            swift_target_delay_s=1e-6,  # these small queues pass it: Swift cuts
            pfc_buffer_bytes=buffer * 8,
            switch_buffer_bytes=buffer * 64,
            pfc_headroom_bytes=headroom,
            ecn_kmin_s=kmin,
            ecn_kmax_s=kmax,
            ecn_pmax=pmax,
        )
    else:
        routing = draw(st.sampled_from(["adaptive", "ecmp", "spray"]))
        prof = dataclasses.replace(NATIVE_400G, buffer_per_vl_bytes=buffer, routing=routing)
    topo = leaf_spine(prof, leaves=leaves, spines=spines, gpus_per_leaf=per_leaf)
    flows = draw_flows(draw, topo.gpus, 16)
    # a pinned route gpu0 -> leaf00 -> spine00 -> leaf01 -> spine00 -> leaf00 -> gpu1 turns
    # down then up: the buffer graph is no longer acyclic, so the solver sweeps
    pinned = per_leaf >= 2 and draw(st.booleans())
    if pinned:
        flows.insert(0, (int(topo.gpus[0]), int(topo.gpus[1]), draw(st.floats(1, 4e6)), 0.0))
    seed = draw(st.integers(0, 2**16))

    def build(solver: Solver) -> Fabric:
        half = len(flows) // 2
        wls = [
            Scripted(name="w0", traffic_class="a", flows=flows[:half]),
            Scripted(name="w1", traffic_class="b", flows=flows[half:]),
        ]
        fabric = Fabric(topo, prof, list(wls), dt_s=dt, seed=seed, solver=solver)
        if pinned:
            names = topo.nodes.name
            fabric.add_static_route(
                names[topo.gpus[0]],
                names[topo.gpus[1]],
                ["leaf00", "spine00", "leaf01", "spine00", "leaf00"],
            )
        return fabric

    return build


def _close(name: str, a: np.ndarray, b: np.ndarray) -> None:
    scale = float(np.abs(a).max(initial=0.0))
    np.testing.assert_allclose(b, a, rtol=RTOL, atol=RTOL * scale + 1e-9, err_msg=name)


def _lockstep(ref: Fabric, comp: Fabric, ticks: int) -> None:
    """Step both fabrics and compare them after every tick."""
    for _ in range(ticks):
        ref.step()
        comp.step()
        ri, ci = ref._index, comp._index
        assert ri is not None and ci is not None
        for field in INDEX_FIELDS:
            np.testing.assert_array_equal(getattr(ci, field), getattr(ri, field), err_msg=field)
        assert ci.feedforward == ri.feedforward
        _close("rates", ref.flows.rate, comp.flows.rate)
        _close("backlog", ref.flows.backlog, comp.flows.backlog)
        _close("occupancy", ref.occupancy, comp.occupancy)
        _close("drain", ref.buffer_drain, comp.buffer_drain)
        _close("link rate", ref.link_rate, comp.link_rate)
        _close("delivered", ref.flows.delivered, comp.flows.delivered)
        _close("resend owed", ref.flows.resend_bytes, comp.flows.resend_bytes)
        for name, counter in ref.counters.items():
            _close(name, counter, comp.counters[name])
        assert comp.completed_flows == ref.completed_flows
        assert comp.dropped_bytes == np.float64(ref.dropped_bytes) or np.isclose(
            comp.dropped_bytes, ref.dropped_bytes, rtol=RTOL
        )
        np.testing.assert_array_equal(comp.paused, ref.paused)
        if ref.roce is not None and comp.roce is not None:
            np.testing.assert_array_equal(comp.roce.pfc.paused, ref.roce.pfc.paused)
            _close("DCQCN rate", ref.roce.dcqcn.rc, comp.roce.dcqcn.rc)
            _close("DCQCN alpha", ref.roce.dcqcn.alpha, comp.roce.dcqcn.alpha)
    for cls, hist in ref.class_hist.items():
        np.testing.assert_array_equal(comp.class_hist[cls].counts, hist.counts, err_msg=cls)
    assert comp.sim_time_s == ref.sim_time_s


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric_factories(), st.integers(20, 150))
def test_compiled_tick_matches_the_reference(build: FabricFactory, ticks: int) -> None:
    _lockstep(build("reference"), build("compiled"), ticks)


@pytest.mark.parametrize("dt", [250e-9, 2e-6])
def test_compiled_roce_matches_the_reference_under_pfc_and_dcqcn(dt: float) -> None:
    """An incast into small PFC buffers with the paper's ECN thresholds: pauses, XON
    resumes, overflow drops with go-back-N, and many CNPs cutting DCQCN rates."""
    prof = dataclasses.replace(
        ROCE_400G,
        pfc_buffer_mode="static",
        pfc_buffer_bytes=128e3,
        pfc_headroom_bytes=200.0,
        ecn_kmin_s=0.1e-6,  # 5 KB at 400G
        ecn_kmax_s=2e-6,  # 100 KB
        ecn_pmax=0.2,
        dcqcn_timer_s=5e-6,
    )
    topo = leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=4)
    g = topo.gpus
    flows = [(int(g[i]), int(g[7]), 3e6, i * 1e-6) for i in range(6)]
    flows += [(int(g[0]), int(g[6]), 3e6, 0.0)]  # a victim sharing the first sender's queue

    def build(solver: Solver) -> Fabric:
        wl = Scripted(name="w", traffic_class="a", flows=flows)
        return Fabric(topo, prof, [wl], dt_s=dt, seed=3, solver=solver)

    ref, comp = build("reference"), build("compiled")
    _lockstep(ref, comp, int(400e-6 / dt))
    assert ref.dropped_bytes > 0 and ref.counters["pause_frames_total"].sum() > 0
    assert ref.roce is not None and ref.roce.dcqcn.cnps_total > 20


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(0, 1e11), min_size=1, max_size=40),
    st.floats(0, 1e11),
)
def test_fill_link_is_the_reference_waterfill(demands: list[float], capacity: float) -> None:
    demand = np.array(demands)
    n = demand.size
    ents = np.arange(n, dtype=np.intp)
    out = np.empty(n)
    level, share = fill_link(ents, 0, n, demand, capacity, out, np.empty(n), np.empty(n, bool))
    rate, ref_level, ref_share = waterfill(demand, np.zeros(n, dtype=np.intp), np.array([capacity]))
    np.testing.assert_allclose(out, rate, rtol=1e-12, atol=1e-6)
    assert np.isclose(level, ref_level[0], rtol=1e-12, atol=1e-6)
    assert share == ref_share[0] or np.isclose(share, ref_share[0], rtol=1e-12, atol=1e-6)


@st.composite
def routing_cases(
    draw: st.DrawFn,
) -> tuple[Topology, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A topology (2- or 3-tier, 1 or 2 planes), flows between random endpoints, queued
    bytes per buffer (adaptive routing's costs) and some links known to be down."""
    prof = NATIVE_400G
    if draw(st.booleans()):
        topo = fat_tree(
            prof,
            pods=draw(st.integers(1, 3)),
            leaves_per_pod=draw(st.integers(1, 3)),
            spines_per_pod=draw(st.integers(1, 3)),
            cores_per_spine=draw(st.integers(1, 3)),
            gpus_per_leaf=2,
        )
    else:
        topo = leaf_spine(
            prof,
            leaves=draw(st.integers(1, 4)),
            spines=draw(st.integers(1, 4)),
            gpus_per_leaf=2,
            planes=draw(st.integers(1, 2)),
        )
    eps = topo.endpoints
    n = draw(st.integers(1, 40))
    src = eps[draw(st.lists(st.integers(0, eps.size - 1), min_size=n, max_size=n))]
    dst = eps[draw(st.lists(st.integers(0, eps.size - 1), min_size=n, max_size=n))]
    n_bufs = len(topo.links) * int(prof.virtual_lanes)
    queued = st.sampled_from([0.0, 2048.0, 4096.0, 10_000.0, 50_000.0])
    occupancy = np.array(draw(st.lists(queued, min_size=n_bufs, max_size=n_bufs)))
    down = np.array(
        draw(st.lists(st.booleans(), min_size=len(topo.links), max_size=len(topo.links)))
    )
    return topo, src.astype(np.int64), dst.astype(np.int64), occupancy, down


Case = tuple[Topology, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@settings(max_examples=200, deadline=None)
@given(
    routing_cases(),
    st.booleans(),
    st.integers(0, 2**40),
    st.sampled_from([None, 64.0, 7408.0, "mixed"]),
)
def test_compiled_routing_is_the_reference(
    case: Case, adaptive: bool, salt: int, sizes: float | str | None
) -> None:
    topo, src, dst, occupancy, down = case
    key = np.arange(src.size, dtype=np.int64) * 1_000_003 + salt
    ref = Fabric(topo, NATIVE_400G, [], dt_s=1e-6, seed=1, solver="reference")._tick
    comp = Fabric(topo, NATIVE_400G, [], dt_s=1e-6, seed=1, solver="compiled")._tick
    v = int(NATIVE_400G.virtual_lanes)
    # the batch's own load (adaptive routing counts the bytes placed before each flow)
    size = (
        None
        if sizes is None
        else np.random.default_rng(salt).uniform(1, 1e6, src.size)
        if sizes == "mixed"
        else np.full(src.size, float(sizes))
    )
    # and the load in flight, which the batch's placements are added to in place
    load = np.random.default_rng(salt + 1).choice([0.0, 7408.0, 1e5, 3e6], len(topo.links))
    ref.link_load_bytes[:] = load
    comp.link_load_bytes[:] = load
    path, hops = ref.route(topo, src, dst, key, adaptive, occupancy, v, down, size)
    c_path, c_hops = comp.route(topo, src, dst, key, adaptive, occupancy, v, down, size)
    np.testing.assert_array_equal(comp.link_load_bytes, ref.link_load_bytes)
    np.testing.assert_array_equal(c_path, path)
    np.testing.assert_array_equal(c_hops, hops)
    np.testing.assert_array_equal(
        comp.link_cost(topo, occupancy, v, down), ref.link_cost(topo, occupancy, v, down)
    )


@settings(max_examples=150, deadline=None)
@given(
    routing_cases(),
    st.sampled_from(["credit", "pfc", "store-and-forward"]),
    st.integers(0, 2**16),
)
def test_compiled_lanes_and_costs_are_the_reference(case: Case, kind: str, seed: int) -> None:
    topo, src, dst, _, down = case
    prof = {
        "credit": NATIVE_400G,
        "pfc": ROCE_400G,
        "store-and-forward": dataclasses.replace(NATIVE_400G, cut_through=False),
    }[kind]
    rng = np.random.default_rng(seed)
    fabric = Fabric(topo, prof, [], dt_s=1e-6, seed=1, solver="reference")
    n_bufs = len(topo.links) * fabric.n_vls
    idle = np.zeros(n_bufs)
    path, hops = fabric._tick.route(
        topo, src, dst, np.arange(src.size), True, idle, fabric.n_vls, down
    )
    occupancy = np.where(rng.random(n_bufs) < 0.5, 0.0, rng.uniform(0, 1e6, n_bufs))
    drain = np.where(rng.random(n_bufs) < 0.3, 0.0, rng.uniform(0, 5e10, n_bufs))
    # departure cycles under way (a cap of 16 KiB over their time) and averages measured
    cycle_s = np.where(rng.random(n_bufs) < 0.5, 0.0, rng.uniform(1e-7, 1e-3, n_bufs))
    avg = np.where(rng.random(n_bufs) < 0.5, 0.0, rng.uniform(0, 5e10, n_bufs))
    paused = rng.random(n_bufs) < 0.3
    vl0 = rng.integers(0, fabric.n_vls - 1, src.size).astype(np.int8)
    size = rng.uniform(1, 1e7, src.size)
    args = (topo, prof, path, hops, vl0, size, occupancy, (drain, cycle_s, avg), paused)
    vl, fixed, wait = fabric._tick.lanes_and_costs(*args)
    comp = Fabric(topo, prof, [], dt_s=1e-6, seed=1, solver="compiled")._tick
    c_vl, c_fixed, c_wait = comp.lanes_and_costs(*args)
    np.testing.assert_array_equal(c_vl, vl)
    np.testing.assert_allclose(c_fixed, fixed, rtol=1e-12)
    np.testing.assert_allclose(c_wait, wait, rtol=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6), st.integers(0, 40), st.integers(0, 2**16))
def test_compiled_link_loads_are_the_reference(n_links: int, n_slots: int, seed: int) -> None:
    """The load in flight adaptive routing reads: per link, what each active flow has
    not yet sent over it (its backlog at that hop and every hop before)."""
    from fabric_core.net.routing import MAX_HOPS, link_loads
    from fabric_core.tick.kernels.route import link_loads as compiled_loads

    rng = np.random.default_rng(seed)
    hops = rng.integers(1, MAX_HOPS + 1, n_slots).astype(np.int8)
    path = np.full((MAX_HOPS, n_slots), -1, dtype=np.int32)
    backlog = np.zeros((MAX_HOPS, n_slots))
    for f in range(n_slots):
        path[: hops[f], f] = rng.integers(0, n_links, hops[f])
        backlog[: hops[f], f] = rng.choice([0.0, 1.0, 4096.0, rng.uniform(0, 1e6)], hops[f])
    active = rng.random(n_slots) < 0.7
    out = np.full(n_links, np.nan)
    compiled_loads(active, path, backlog, hops, out)
    want = link_loads(active, path, backlog, hops, n_links)
    np.testing.assert_array_equal(out, want)
    # bytes at hop h are still to cross every hop from h on: a flow's hop-0 backlog
    # counts once per hop of its path
    assert out.sum() == pytest.approx(
        sum(
            backlog[h, f] * (hops[f] - h)
            for f in range(n_slots)
            if active[f]
            for h in range(hops[f])
        ),
        rel=1e-12,
        abs=1e-9,
    )
