"""The parallel solve (``solve_tick_parallel``, numba ``prange`` over the cores) against
the serial one, on random fabrics: the same rates, buffers and completions, bit for bit;
with it, the kernels that follow the solve over the cores (the move, the credits and the
waits for them: ``move_step_parallel``, ``credit_room_parallel``, ``credit_wait_parallel``).

Every ``prange`` loop of the solve touches disjoint entries, links or buffers per
iteration, and its one reduction (the first entry credits cut) is a minimum, so the
number of threads must not change a single bit. The engine takes the parallel solve
from ``PARALLEL_FROM_ENTRIES`` entries on; here it is forced on small fabrics.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tests.test_kernels as random_fabrics  # a module, so its tests are not collected here
from fabric_core.net.profiles import NATIVE_400G
from fabric_core.net.topology import fat_tree
from fabric_core.runtime.fabric import Fabric
from fabric_core.tick.kernels import tick
from fabric_core.tick.kernels._jit import MOST_THREADS, share_cores, use_threads
from fabric_core.workloads.traffic import Bulk


@contextmanager
def parallel_solve(threads: int) -> Iterator[None]:
    """Solve every tick with the parallel kernel on ``threads`` threads."""
    saved = tick.PARALLEL_FROM_ENTRIES
    tick.PARALLEL_FROM_ENTRIES = 0
    tick.ONLY_WAY = 1  # not the faster lately: this one
    use_threads(threads)
    try:
        yield
    finally:
        tick.PARALLEL_FROM_ENTRIES = saved
        tick.ONLY_WAY = None
        use_threads()


def _state(fabric: Fabric) -> dict[str, np.ndarray]:
    state = {
        "rate": fabric.flows.rate.copy(),
        "backlog": fabric.flows.backlog.copy(),
        "delivered": fabric.flows.delivered.copy(),
        "occupancy": fabric.occupancy.copy(),
        "link rate": fabric.link_rate.copy(),
        "paused": fabric.paused.copy(),
    }
    state.update({name: c.copy() for name, c in fabric.counters.items()})
    # the move's departure cycles and adaptive routing's load, which the move over the
    # cores (``kernels.move.move_step_parallel``) writes beside each other
    book = fabric.link_book
    state.update({name: getattr(book, name).copy() for name in ("dq_bytes", "dq_s", "dq_avg_Bps")})
    state["cycles under way"] = np.sort(book.dq_open)
    if isinstance(fabric._tick, tick.CompiledTick):
        state["load in flight"] = fabric._tick.link_load_bytes.copy()
    return state


def _assert_same(serial: Fabric, parallel: Fabric) -> None:
    a, b = _state(serial), _state(parallel)
    for name in a:
        np.testing.assert_array_equal(b[name], a[name], err_msg=name)
    assert parallel.completed_flows == serial.completed_flows


def _lockstep(serial: Fabric, parallel: Fabric, ticks: int, threads: int) -> None:
    for _ in range(ticks):
        serial.step()
        with parallel_solve(threads):
            parallel.step()
        _assert_same(serial, parallel)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_fabrics.fabric_factories(), st.integers(20, 120))
def test_the_parallel_solve_is_the_serial_one(
    build: random_fabrics.FabricFactory, ticks: int
) -> None:
    """Credits, PFC, DCQCN, spraying, and a pinned route that breaks up*/down* (whose
    Jacobi sweeps stay serial inside the parallel kernel)."""
    _lockstep(build("compiled"), build("compiled"), ticks, MOST_THREADS)


def _all_to_all() -> Fabric:
    topo = fat_tree(
        NATIVE_400G, pods=2, leaves_per_pod=2, spines_per_pod=2, cores_per_spine=1, gpus_per_leaf=4
    )
    wl = Bulk(name="a2a", traffic_class="bulk", size_bytes=256e3, outstanding=4)
    return Fabric(topo, NATIVE_400G, [wl], dt_s=1e-6, seed=5)


@pytest.mark.parametrize("threads", sorted({1, MOST_THREADS}))
def test_a_fat_tree_all_to_all_does_not_depend_on_the_threads(threads: int) -> None:
    """Many flows finishing and starting through three tiers, on one thread and on all."""
    serial, parallel = _all_to_all(), _all_to_all()
    _lockstep(serial, parallel, 200, threads)
    assert serial.completed_flows > 20  # the index was rebuilt as flows came and went


def test_the_kernels_after_a_solve_over_the_cores_run_over_them_too() -> None:
    """Through ``Fabric``: ticks whose solve runs over the cores move their bytes, count
    their waits for credit, and gather the next backlogs and credits over the cores; the
    others serially. (The lockstep tests above hold the two ways to the same results.)"""
    names = ("move_step", "credit_wait", "credit_room")
    calls = {f"{name}{way}": 0 for name in names for way in ("", "_parallel")}
    calls["flow_values_parallel"] = 0  # (the serial way is numpy's)
    real = {name: getattr(tick, name) for name in calls}

    def counting(name: str) -> object:
        def kernel(*args: object) -> object:
            calls[name] += 1
            return real[name](*args)  # type: ignore[operator]

        return kernel

    fabric = _all_to_all()
    try:
        for name in calls:
            setattr(tick, name, counting(name))
        for _ in range(10):
            fabric.step()
        assert calls["move_step"] == calls["credit_wait"] == 10
        assert calls["move_step_parallel"] == calls["credit_wait_parallel"] == 0
        calls.update(dict.fromkeys(calls, 0))
        with parallel_solve(MOST_THREADS):
            for _ in range(10):
                fabric.step()
        assert calls["move_step_parallel"] == calls["credit_wait_parallel"] == 10
        # the backlogs gathered and the credits come before the solve: from the second
        # tick on
        assert calls["credit_room_parallel"] == 9 and calls["credit_room"] == 1
        assert calls["flow_values_parallel"] == 9
        assert calls["move_step"] == calls["credit_wait"] == 0
    finally:
        for name, kernel in real.items():
            setattr(tick, name, kernel)


def test_threads_out_of_range_are_refused() -> None:
    for n in (0, MOST_THREADS + 1):
        with pytest.raises(ValueError, match=f"between 1 and {MOST_THREADS}"):
            use_threads(n)


def test_engines_side_by_side_share_the_cores() -> None:
    try:
        assert share_cores(1) == MOST_THREADS
        assert share_cores(2) == max(1, MOST_THREADS // 2)
        assert share_cores(MOST_THREADS + 5) == 1  # at least one each
    finally:
        use_threads()


@pytest.mark.parametrize("longest", [0, 1, 12, 63, 64, 65, 1000])
def test_threads_scratch_rows_never_share_a_cache_line(longest: int) -> None:
    # rows side by side made both cores write one line: the parallel fills were no
    # faster than the serial ones (false sharing)
    from fabric_core.tick.kernels.solve import _row_stride

    stride = _row_stride(longest)
    line = 64  # bytes; a row of booleans is the tightest, one byte an element
    assert stride % line == 0
    assert stride - longest >= line  # the row's last byte and the next row's first: a line apart
