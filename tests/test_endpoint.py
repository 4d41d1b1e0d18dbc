"""Endpoint model: FIFO servers, IBGDA vs proxy posting, GDR vs bounce (claims C1, C2)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_core.endpoints.model import EndpointModel, EndpointParams, fifo_serve
from fabric_core.net.profiles import get_profile
from fabric_core.net.topology import leaf_spine
from fabric_core.reports.bringup import ProbeAllToAll
from fabric_core.runtime.fabric import Fabric


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.floats(0, 1e-5), st.floats(0, 1e-6)),
        min_size=1,
        max_size=60,
    ),
    st.lists(st.floats(0, 2e-5), min_size=4, max_size=4),
)
def test_fifo_serve_matches_a_sequential_queue(jobs: list, free: list) -> None:
    srv = np.array([j[0] for j in jobs])
    arr = np.array([j[1] for j in jobs])
    svc = np.array([j[2] for j in jobs])
    free_at = np.array(free)
    start = fifo_serve(srv, arr, svc, free_at)
    ref = np.empty(len(jobs))
    fr = np.array(free)
    for i in np.lexsort((arr, srv)):
        ref[i] = max(arr[i], fr[srv[i]])
        fr[srv[i]] = ref[i] + svc[i]
    assert np.allclose(start, ref, rtol=0, atol=1e-15)
    assert np.allclose(free_at, fr, rtol=0, atol=1e-15)


def test_ibgda_needs_gdr_and_unknown_modes_are_refused() -> None:
    with pytest.raises(ValueError, match="gdr"):
        EndpointParams(control="ibgda", data_path="bounce")
    with pytest.raises(ValueError, match="control"):
        EndpointParams(control="magic")
    with pytest.raises(ValueError, match="unknown endpoint parameter"):
        EndpointParams().with_overrides(nope=1)


def test_every_parameter_has_a_source() -> None:
    for name, _unit, source, _default in EndpointParams.parameter_sources():
        assert len(source) > 20, name


def _probe_run(params: EndpointParams, *, burst: int, rounds: int = 1) -> ProbeAllToAll:
    """Two GPUs on one leaf exchange ``burst`` 4 KiB messages each way, through the fabric."""
    topo = leaf_spine(get_profile("native-400g"), leaves=1, spines=1, gpus_per_leaf=2)
    probe = ProbeAllToAll(
        name="p",
        traffic_class="p",
        ranks=topo.gpus.astype(np.int64),
        size_bytes=4096.0,
        rounds=rounds,
        burst=burst,
        endpoint=params,
    )
    fabric = Fabric(topo, get_profile("native-400g"), [probe], dt_s=1e-6, seed=1)
    while not probe.done and fabric.sim_time_s < 1e-3:
        fabric.step()
    assert probe.done
    return probe


def test_a_single_small_message_is_not_faster_with_ibgda() -> None:
    ibgda = _probe_run(EndpointParams(control="ibgda"), burst=1)
    proxy = _probe_run(EndpointParams(control="proxy"), burst=1)
    t_ibgda = ibgda.end_s - ibgda.start_s
    t_proxy = proxy.end_s - proxy.start_s
    assert t_ibgda >= t_proxy
    # and the difference is the endpoint model's, not the fabric's. By hand, from the
    # parameters' values (GPUDirect data path; the figures are pinned here, not read from
    # EndpointParams, so a changed default or cost helper fails this test):
    #   IBGDA: nothing before the post, the GPU posts the WQE (gpu_wqe_post_s, 1.0 µs), then
    #          the doorbell (a posted PCIe write, 0.15 µs) and the WQE fetch (a PCIe read
    #          round trip, 0.6 µs): 1.0 + 0.15 + 0.6 = 1.75 µs
    #   proxy: the GPU's request (gpu_request_s, 0.3 µs) + its posted PCIe write (0.15 µs)
    #          + half a poll (0.2 / 2 = 0.1 µs) before the post, the CPU posts (cpu_post_s,
    #          0.2 µs), then the doorbell (0.15 µs; BlueFlame: no WQE fetch):
    #          0.3 + 0.15 + 0.1 + 0.2 + 0.15 = 0.9 µs
    #   IBGDA - proxy = 1.75 - 0.9 = 0.85 µs
    #   (the NIC's 1 / 330e6 s per message, the data path the fabric charges every
    #   message - payload DMA read, NICs, DMA write - and the receive poll are common)
    assert t_ibgda - t_proxy == pytest.approx(0.85e-6, rel=1e-6)


def test_under_parallel_load_ibgda_posts_faster_and_the_proxy_queue_is_why() -> None:
    n = 512
    ibgda = _probe_run(EndpointParams(control="ibgda"), burst=n)
    proxy = _probe_run(EndpointParams(control="proxy"), burst=n)
    t_ibgda = ibgda.end_s - ibgda.start_s
    t_proxy = proxy.end_s - proxy.start_s
    assert t_ibgda < t_proxy
    assert ibgda.received / t_ibgda > proxy.received / t_proxy  # message rate
    assert ibgda.ep is not None and proxy.ep is not None
    g = ibgda.ranks
    wait_i = ibgda.ep.max_post_wait_s[g].max()
    wait_p = proxy.ep.max_post_wait_s[g].max()
    assert wait_p > 5 * wait_i
    # the last request waits behind the n - 1 before it at the single proxy thread
    assert wait_p == pytest.approx((n - 1) * proxy.endpoint.cpu_post_s, rel=0.05)
    # ... and the proxy's all-to-all lasts as long as its thread takes to post them all
    assert t_proxy == pytest.approx(n * proxy.endpoint.cpu_post_s, rel=0.1)
    # the proxy's all-to-all lasts at least as long as its CPU thread is busy posting
    assert t_proxy >= proxy.ep.cpu_busy_s[g].max()
    assert ibgda.ep.cpu_busy_s[g].sum() == 0.0


def test_gdr_beats_bounce_by_exactly_the_copy_and_pcie_cost() -> None:
    gdr = EndpointParams(control="proxy", data_path="gdr")
    bounce = EndpointParams(control="proxy", data_path="bounce")
    a = _probe_run(gdr, burst=1)
    b = _probe_run(bounce, burst=1)
    size = 4096.0
    copy = bounce.copy_launch_s + size / bounce.host_copy_Bps
    lat_gdr = a.end_s - a.start_s
    lat_bounce = b.end_s - b.start_s
    assert lat_bounce > lat_gdr
    assert lat_bounce - lat_gdr == pytest.approx(2 * copy, rel=1e-6)  # one copy at each end
    assert a.ep is not None and b.ep is not None
    cpu_gdr = a.ep.cpu_busy_s.sum()
    cpu_bounce = b.ep.cpu_busy_s.sum()
    messages = a.received
    assert cpu_bounce - cpu_gdr == pytest.approx(messages * 2 * copy, rel=1e-9)


def test_post_failures_are_counted_and_hung_posts_never_reach_the_wire() -> None:
    ep = EndpointModel(EndpointParams(), 4)
    fail = np.array([False, True, False, False])
    hang = np.array([False, False, True, False])
    src = np.array([0, 1, 2, 3])
    ok = ep.post(
        src,
        np.array([1, 2, 3, 0]),
        np.full(4, 64.0),
        np.arange(4),
        np.zeros(4),
        fail=fail,
        hang=hang,
    )
    assert ok.tolist() == [True, False, True, True]
    assert ep.post_errors.tolist() == [0, 1, 0, 0]
    assert ep.stuck.tolist() == [0, 0, 1, 0]
    req, _ = ep.release(0.0, 1.0)
    assert sorted(req.src.tolist()) == [0, 3]


def test_send_queue_depth_holds_posts_until_completions_free_slots() -> None:
    deep = _probe_run(EndpointParams(control="ibgda"), burst=64)
    shallow = _probe_run(EndpointParams(control="ibgda", sq_depth=4), burst=64)
    assert shallow.received == deep.received == 128
    assert shallow.ep is not None and deep.ep is not None
    assert shallow.ep.max_outstanding.max() == 4
    assert shallow.ep.slot_waits > 0 == deep.ep.slot_waits
    # four messages in flight per GPU cannot cover the round trip: it takes longer
    assert shallow.end_s - shallow.start_s > deep.end_s - deep.start_s


def test_hung_wqes_keep_their_slots() -> None:
    ep = EndpointModel(EndpointParams(sq_depth=2), 2)
    hang = np.array([True, False])
    ep.post(
        np.zeros(5, np.int64),
        np.ones(5, np.int64),
        np.full(5, 64.0),
        np.arange(5),
        np.zeros(5),
        hang=hang,
    )
    assert ep.stuck[0] == 2 and ep.outstanding[0] == 2
    ep.release(1.0, 1.0)
    assert ep.waiting.src.size == 3  # never admitted: the hung WQEs never complete


def test_scenario_endpoint_tables_are_checked() -> None:
    from fabric_core.runtime.scenario import ScenarioError, parse_scenario

    def scn(**wl: object) -> None:
        parse_scenario(
            {
                "topology": {"kind": "leaf-spine", "leaves": 1, "spines": 1, "gpus_per_leaf": 2},
                "workload": [{"kind": "moe", "ranks": 2, **wl}],
            }
        )

    scn(control="proxy", endpoint={"cpu_post_s": 3e-7, "sq_depth": 64})
    with pytest.raises(ScenarioError, match=r"workload\[0\].*endpoint.cpu_post_s"):
        scn(endpoint={"cpu_post_s": "fast"})
    with pytest.raises(ScenarioError, match="unknown endpoint parameter"):
        scn(endpoint={"post_cost": 1.0})
    with pytest.raises(ScenarioError, match="needs data_path 'gdr'"):
        scn(control="ibgda", data_path="bounce")
