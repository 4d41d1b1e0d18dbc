"""New flows started in one compiled call (``kernels.start.start_routed``) against the same
batches started step by step (route, lanes and costs, ``FlowTable.add``), on random fabrics.

``Fabric.start_flows`` takes the one-call way on the compiled tick; the step-by-step way
stays for spraying, static routes, file topologies and the reference. Both must leave the
flow table, the routing load and the refusals exactly the same.
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_core.commands import CommandError
from fabric_core.net.profiles import NATIVE_400G, ROCE_400G, Profile
from fabric_core.net.topology import Topology, fat_tree, leaf_spine
from fabric_core.runtime.fabric import Fabric
from fabric_core.tick.flows import FlowTable
from fabric_core.tick.kernels.tick import CompiledTick
from fabric_core.workloads.traffic import Scripted
from tests.helpers import profile

T = TypeVar("T", bound=CompiledTick)

TABLE = (
    "path", "vl", "backlog", "rate", "parent", "pending", "latest_finish_s", "active", "hops",
    "cls", "workload", "size", "delivered", "start_s", "extra_latency_s", "fixed_latency_s",
    "wait_s", "parent_size", "tag", "src", "dst", "resend_bytes",
)  # fmt: skip


def assert_same_table(one: FlowTable, other: FlowTable) -> None:
    """The two flow tables hold the same flows, bit for bit, and count them alike."""
    for name in TABLE:
        np.testing.assert_array_equal(getattr(one, name), getattr(other, name), err_msg=name)
    assert one.live_end == other.live_end
    assert one.n_parents == other.n_parents
    assert one.version == other.version


@st.composite
def fabrics(draw: st.DrawFn) -> tuple[Topology, Profile]:
    prof = draw(
        st.sampled_from(
            [NATIVE_400G, ROCE_400G, profile(routing="ecmp"), profile(cut_through=False)]
        )
    )
    if draw(st.booleans()):
        topo = leaf_spine(
            prof,
            leaves=draw(st.integers(1, 4)),
            spines=draw(st.integers(1, 4)),
            gpus_per_leaf=draw(st.integers(1, 4)),
            planes=draw(st.sampled_from([1, 2])),
        )
    else:
        topo = fat_tree(
            prof,
            pods=draw(st.integers(1, 3)),
            leaves_per_pod=draw(st.integers(1, 2)),
            spines_per_pod=draw(st.integers(1, 3)),
            cores_per_spine=draw(st.integers(1, 2)),
            gpus_per_leaf=draw(st.integers(1, 3)),
        )
    return topo, prof


def _pair(topo: Topology, prof: Profile) -> tuple[Fabric, Fabric]:
    """Two compiled fabrics alike; the second starts its flows step by step."""
    one, steps = (
        Fabric(
            topo, prof, [Scripted(name=f"w{c}", traffic_class=c) for c in "ab"], dt_s=1e-6, seed=3
        )
        for _ in range(2)
    )
    assert isinstance(steps._tick, CompiledTick)
    steps._tick = compiled_tick_as(_StepByStep, steps._tick)
    return one, steps


def compiled_tick_as(cls: type[T], tick: CompiledTick) -> T:
    """A fabric's compiled tick as ``cls`` (a subclass that takes some step another way),
    sharing its arrays."""
    return cls(**{f.name: getattr(tick, f.name) for f in dataclasses.fields(tick)})


class _StepByStep(CompiledTick):
    """The compiled tick with the one-call start turned off."""

    def starts_at_once(self, topo: Topology) -> bool:
        return False


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabrics(), st.data())
def test_one_call_starts_flows_as_the_steps_do(
    fabric: tuple[Topology, Profile], data: st.DataObject
) -> None:
    topo, prof = fabric
    one, steps = _pair(topo, prof)
    eps = topo.gpus
    for batch in range(data.draw(st.integers(1, 4))):
        n = data.draw(st.integers(1, 30))
        pick = st.lists(st.integers(0, eps.size - 1), min_size=n, max_size=n)
        src, dst = eps[np.array(data.draw(pick))], eps[np.array(data.draw(pick))]
        size = np.array(data.draw(st.lists(st.floats(1.0, 1e6), min_size=n, max_size=n)))
        tag = np.arange(n, dtype=np.int64) + 100 * batch
        extra = None if data.draw(st.booleans()) else np.full(n, 1e-6)
        ticks = data.draw(st.integers(0, 3))  # queues for the next batch to see
        for f in (one, steps):
            f.start_flows(
                src.astype(np.int64),
                dst.astype(np.int64),
                size,
                traffic_class=batch % 2,
                workload=batch % 2,
                tag=tag,
                ready_s=np.full(n, f.sim_time_s),
                extra_latency_s=extra,
            )
            f.run_ticks(ticks)
    assert_same_table(one.flows, steps.flows)
    np.testing.assert_array_equal(one._tick.link_load_bytes, steps._tick.link_load_bytes)


def test_a_batch_past_the_lanes_is_refused_and_nothing_is_written() -> None:
    """A credit fabric with one lane cannot carry a route that turns down-up (a pinned
    route would; here the fused start is asked directly with no lane to spare)."""
    topo = leaf_spine(NATIVE_400G, leaves=2, spines=1, gpus_per_leaf=2)
    f = Fabric(topo, NATIVE_400G, [Scripted(name="w", traffic_class="a")], dt_s=1e-6, seed=0)
    tick = f._tick
    assert isinstance(tick, CompiledTick)
    before = f.flows.active.copy()
    slots = f.flows.reserve(1)
    with pytest.raises(CommandError, match="down-up more often than there are virtual lanes"):
        tick.start_routed(
            topo,
            NATIVE_400G,
            f.flows,
            slots,
            topo.gpus[:1].astype(np.int64),
            topo.gpus[3:4].astype(np.int64),
            np.array([1e6]),
            ready_s=np.zeros(1),
            extra_latency_s=None,
            host_s=0.0,
            tag=np.zeros(1, np.int64),
            lane=tick.n_vls,  # past the last lane
            traffic_class=0,
            workload=0,
            adaptive=True,
            occupancy=f.occupancy,
            known_down=f.known_down,
            departures=f.link_book.departures(),
            paused=f.pfc_paused_queues(),
        )
    np.testing.assert_array_equal(f.flows.active, before)
