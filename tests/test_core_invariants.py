"""Invariants of the credit fabric over random topologies and traffic (hypothesis)."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_core.net.topology import leaf_spine
from fabric_core.reports.run import run_for
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.workloads.traffic import Scripted
from tests.helpers import draw_flows, profile


@st.composite
def fabrics(draw: st.DrawFn) -> Fabric:
    leaves = draw(st.integers(1, 3))
    spines = draw(st.integers(1, 3))
    per_leaf = draw(st.integers(1, 3))
    buffer = draw(st.sampled_from([2048.0, 16384.0, 131072.0]))
    dt = draw(st.sampled_from([100e-9, 1e-6, 20e-6]))
    routing = draw(st.sampled_from(["adaptive", "ecmp", "spray"]))
    prof = profile(buffer_per_vl_bytes=buffer, routing=routing)
    topo = leaf_spine(prof, leaves=leaves, spines=spines, gpus_per_leaf=per_leaf)
    n = int(topo.gpus.size)
    if n < 2:
        topo = leaf_spine(prof, leaves=leaves, spines=spines, gpus_per_leaf=2)
        n = int(topo.gpus.size)
    flows = draw_flows(draw, topo.gpus, 12)
    classes = draw(st.lists(st.sampled_from(["a", "b"]), min_size=2, max_size=2))
    half = len(flows) // 2
    wls = [
        Scripted(name="w0", traffic_class=classes[0], flows=flows[:half]),
        Scripted(name="w1", traffic_class=classes[1], flows=flows[half:]),
    ]
    return Fabric(topo, prof, list(wls), dt_s=dt, seed=draw(st.integers(0, 2**16)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabrics(), st.integers(20, 120))
def test_bytes_conserved_credits_bounded_nothing_dropped(fabric: Fabric, ticks: int) -> None:
    for _ in range(ticks):
        fabric.step()
        in_flight = fabric.flows.in_flight_bytes()
        assert fabric.injected_bytes == np.float64(
            fabric.delivered_bytes + in_flight
        ) or np.isclose(
            fabric.injected_bytes, fabric.delivered_bytes + in_flight, rtol=1e-12, atol=1e-3
        )
        occ = fabric.occupancy
        assert occ.min() >= -1e-6
        assert (occ <= fabric.buffer_bytes + 1e-6).all(), float((occ - fabric.buffer_bytes).max())
        assert (fabric.flows.backlog >= 0).all()
    snap = fabric.snapshot()
    assert snap.totals.dropped_bytes_total == 0
    assert float(np.sum(snap.link_state.discards_bytes_total)) == 0
    credits = np.asarray(snap.link_state.credits_bytes)
    assert (credits >= 0).all() and (credits <= np.asarray(snap.links.buffer_bytes) + 1e-6).all()


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000))
def test_same_scenario_and_seed_give_the_same_report(seed: int) -> None:
    def report() -> str:
        fabric = Fabric.from_scenario(load_scenario("tiny", seed=seed))
        r = run_for(fabric, 60e-6)
        del r["run"]  # wall-clock figures
        return json.dumps(r, sort_keys=True)

    assert report() == report()
