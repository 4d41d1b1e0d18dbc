"""A tick's bytes moved and counted in one compiled call (``kernels.move.move_step``)
against the same tick's steps (``move``, ``LinkBook.measure_departures``,
``link_counters``), on random fabrics and traffic.

``Fabric._move`` takes the one-call way on the compiled tick; the reference takes the
steps. Both must leave the flow table, the link book (rates, buffers, departure cycles,
counters) and routing's load in flight exactly the same.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_core.net.profiles import NATIVE_400G, NATIVE_800G, ROCE_400G, Profile
from fabric_core.net.topology import leaf_spine
from fabric_core.runtime import uneventful
from fabric_core.runtime.fabric import Fabric
from fabric_core.tick.kernels.tick import CompiledTick
from fabric_core.tick.reference import ReferenceTick
from fabric_core.workloads.traffic import Bulk, Rpc
from tests.test_start_kernel import assert_same_table, compiled_tick_as


class _StepByStep(CompiledTick):
    """The compiled tick moving bytes as the reference does: its kernels one by one."""

    move_and_count = ReferenceTick.move_and_count


def _fabric(prof: Profile, leaves: int, spines: int, gpus: int, size: float) -> Fabric:
    topo = leaf_spine(prof, leaves=leaves, spines=spines, gpus_per_leaf=gpus)
    workloads = [
        Bulk(name="bulk", traffic_class="bulk", size_bytes=size, outstanding=2),
        Rpc(name="rpc", traffic_class="rpc", size_bytes=4096, rate_per_s=2e5),
    ]
    return Fabric(topo, prof, workloads, dt_s=1e-6, seed=3)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([NATIVE_400G, ROCE_400G, NATIVE_800G]),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(2, 4),
    st.floats(2e3, 2e5),
    st.integers(20, 120),
)
def test_one_call_moves_and_counts_as_the_steps_do(
    prof: Profile, leaves: int, spines: int, gpus: int, size: float, ticks: int
) -> None:
    one = _fabric(prof, leaves, spines, gpus, size)
    steps = _fabric(prof, leaves, spines, gpus, size)
    assert isinstance(steps._tick, CompiledTick)
    steps._tick = compiled_tick_as(_StepByStep, steps._tick)
    # tick by tick: the ticks at once take the one-call kernel either way
    for fabric in (one, steps):
        for _ in range(ticks):
            fabric.step()
    assert one.delivered_bytes == steps.delivered_bytes > 0
    assert_same_table(one.flows, steps.flows)
    a, b = one.link_book, steps.link_book
    for name in ("link_rate", "occupancy", "buffer_drain", "dq_bytes", "dq_s", "dq_avg_Bps"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(np.sort(a.dq_open), np.sort(b.dq_open))
    for name, counter in a.counters.items():
        np.testing.assert_array_equal(counter, b.counters[name], err_msg=name)
    assert isinstance(one._tick, CompiledTick)
    np.testing.assert_array_equal(one._tick.link_load_bytes, steps._tick.link_load_bytes)


def test_the_ticks_at_once_move_as_a_tick_does() -> None:
    """The uneventful ticks run the same one-call move: run with them and without, the
    fabric ends the same."""
    fabrics = [_fabric(NATIVE_400G, 2, 2, 3, 5e4) for _ in range(2)]
    fabrics[0].run_ticks(300)
    enabled = uneventful.ENABLED
    try:
        uneventful.ENABLED = False
        fabrics[1].run_ticks(300)
    finally:
        uneventful.ENABLED = enabled
    a, b = fabrics
    assert a.delivered_bytes == b.delivered_bytes > 0
    assert_same_table(a.flows, b.flows)
    for name, counter in a.link_book.counters.items():
        np.testing.assert_array_equal(counter, b.link_book.counters[name], err_msg=name)
