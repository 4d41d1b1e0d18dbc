"""Finished flows retired in one compiled call (``kernels.finish.finish_flows``) against
the same flows retired step by step (``finish_times``, ``FlowTable.finish_at``,
``HistogramRows.observe``), on random fabrics and traffic.

``Fabric._complete`` takes the one-call way on the compiled tick; the reference takes the
steps. Both must leave the flow table, the latency histograms and the fabric's counts
exactly the same.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_core.net.profiles import NATIVE_400G, NATIVE_800G, ROCE_400G, Profile
from fabric_core.net.topology import leaf_spine
from fabric_core.runtime.fabric import Fabric
from fabric_core.tick.histogram import HistogramRows
from fabric_core.tick.kernels.tick import CompiledTick
from fabric_core.tick.reference import ReferenceTick
from fabric_core.workloads.traffic import Bulk, Rpc, Scripted
from tests.test_start_kernel import assert_same_table, compiled_tick_as


class _StepByStep(CompiledTick):
    """The compiled tick retiring flows as the reference does: its kernels one by one."""

    finish_flows = ReferenceTick.finish_flows


#: A small leaf-spine on one of three profiles (leaves, spines, GPUs per leaf), its traffic
#: (bulk flows' size, RPC messages a second per sender) and the ticks to run it
SMALL_FABRICS = st.tuples(
    st.sampled_from([NATIVE_400G, ROCE_400G, NATIVE_800G]),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(2, 4),
    st.floats(2e3, 2e5),
    st.floats(1e4, 1e6),
    st.integers(20, 120),
)


def bulk_and_rpc(
    prof: Profile, leaves: int, spines: int, gpus: int, size: float, rate: float
) -> Fabric:
    """A leaf-spine with closed-loop bulk flows of ``size`` and RPC probes at ``rate``."""
    topo = leaf_spine(prof, leaves=leaves, spines=spines, gpus_per_leaf=gpus)
    workloads = [
        Bulk(name="bulk", traffic_class="bulk", size_bytes=size, outstanding=2),
        Rpc(name="rpc", traffic_class="rpc", size_bytes=4096, rate_per_s=rate),
    ]
    return Fabric(topo, prof, workloads, dt_s=1e-6, seed=5)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SMALL_FABRICS)
def test_one_call_retires_flows_as_the_steps_do(
    case: tuple[Profile, int, int, int, float, float, int],
) -> None:
    *shape, ticks = case
    one, steps = bulk_and_rpc(*shape), bulk_and_rpc(*shape)
    assert isinstance(steps._tick, CompiledTick)
    steps._tick = compiled_tick_as(_StepByStep, steps._tick)
    one.run_ticks(ticks)
    steps.run_ticks(ticks)
    assert one.completed_flows == steps.completed_flows > 0
    assert_same_table(one.flows, steps.flows)
    assert one.delivered_bytes == steps.delivered_bytes
    for a, b in zip(one._class_rows.arrays(), steps._class_rows.arrays(), strict=True):
        np.testing.assert_array_equal(a, b)
    for wa, wb in zip(one.workloads, steps.workloads, strict=True):
        for name, h in wa.histograms.items():
            np.testing.assert_array_equal(h.counts, wb.histograms[name].counts, err_msg=name)


def test_a_latency_of_a_class_with_no_histogram_is_refused_and_the_flows_still_retire() -> None:
    """Rows for one class only while flows of the second finish: a clear error, nothing
    filed, and the flows are out of the table all the same (as the steps leave them)."""
    topo = leaf_spine(NATIVE_400G, leaves=1, spines=1, gpus_per_leaf=2)
    fabric = Fabric(
        topo,
        NATIVE_400G,
        [
            Scripted(name="idle", traffic_class="first"),
            Rpc(name="rpc", traffic_class="second", rate_per_s=1e6),
        ],
        dt_s=1e-6,
        seed=1,
    )
    fabric._class_rows = HistogramRows(1)
    with pytest.raises(IndexError, match=r"histogram rows 0\.\.0, got 1\.\.1"):
        fabric.run_ticks(200)
    assert fabric.flows.n_parents == int(np.count_nonzero(fabric.flows.active))
    assert fabric._class_rows.counts.sum() == 0
