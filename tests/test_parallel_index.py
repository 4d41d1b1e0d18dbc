"""The index over the cores (``kernels.index.entry_index_parallel``) against the serial one.

The parallel kernel splits the flows in flight into blocks for the passes that find and
place the entries; each block counts its entries per hop and key and places them after
the blocks before it, so the index, every part of it, must come out the same bit for bit
whatever the number of blocks, on one thread or on all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numba
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tests.test_kernels as random_fabrics  # a module, so its tests are not collected here
from fabric_core.runtime.fabric import Fabric
from fabric_core.tick.kernels import tick
from fabric_core.tick.kernels.index import PARTS, entry_index, entry_index_parallel
from tests.test_parallel_solve import _all_to_all


def _index_args(fabric: Fabric) -> tuple[object, ...]:
    layout = fabric._tick
    assert isinstance(layout, tick.CompiledTick)
    fl = fabric.flows
    return (
        fl.path, fl.vl, fl.active[: fl.live_end], layout.link_rank, layout.n_ranks,
        layout.n_vls, layout.link_slot, layout.buf_slot,
    )  # fmt: skip


def _parts(buf: np.ndarray, bounds: np.ndarray) -> dict[str, np.ndarray]:
    return {name: buf[bounds[2 * i] : bounds[2 * i + 1]] for i, name in enumerate(PARTS)}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_fabrics.fabric_factories(), st.integers(1, 60), st.integers(1, 7))
def test_the_index_over_blocks_is_the_serial_index(
    build: random_fabrics.FabricFactory, ticks: int, blocks: int
) -> None:
    """Credits, PFC, spraying and a route that breaks up*/down* (``feedforward`` 0), with
    more blocks than flows at times: every part equal, and the scratch left at -1."""
    fabric = build("compiled")
    fabric.run_ticks(ticks)
    args = _index_args(fabric)
    serial = _parts(*entry_index(*args))
    assert serial["pos"].size > 0 or not fabric.flows.active.any()
    parallel = _parts(*entry_index_parallel(*args, blocks))
    for name in PARTS:
        np.testing.assert_array_equal(parallel[name], serial[name], err_msg=name)
    layout = fabric._tick
    assert isinstance(layout, tick.CompiledTick)
    assert (layout.link_slot == -1).all() and (layout.buf_slot == -1).all()


@contextmanager
def counted_index_kernels() -> Iterator[dict[str, int]]:
    """The engine's two index kernels, each counting its calls (``serial``, ``parallel``)."""
    calls = {"serial": 0, "parallel": 0}
    real = {"serial": tick.entry_index, "parallel": tick.entry_index_parallel}

    def counting(way: str) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
        def kernel(*args: object) -> tuple[np.ndarray, np.ndarray]:
            calls[way] += 1
            return real[way](*args)  # type: ignore[operator, no-any-return]

        return kernel

    tick.entry_index, tick.entry_index_parallel = counting("serial"), counting("parallel")
    try:
        yield calls
    finally:
        tick.entry_index, tick.entry_index_parallel = real["serial"], real["parallel"]


def test_an_engine_builds_the_index_over_the_cores_from_the_threshold() -> None:
    """Through ``Fabric``: with the threshold at 0 and one way forced, the engine builds
    every index that way only, and what it builds is the serial index."""
    saved = tick.PARALLEL_FROM_ENTRIES
    tick.PARALLEL_FROM_ENTRIES = 0
    try:
        with counted_index_kernels() as calls:
            for way, name in ((1, "parallel"), (0, "serial")):
                tick.ONLY_WAY = way
                calls.update(serial=0, parallel=0)
                fabric = _all_to_all()
                for _ in range(40):
                    fabric.step()
                    idx = fabric._current_index()
                    again = _parts(*entry_index(*_index_args(fabric)))
                    for part in ("pos", "prev_pad", "nxt_pad", "first"):
                        np.testing.assert_array_equal(getattr(idx, part), again[part])
                    np.testing.assert_array_equal(idx.csr.link_ent, again["link_ent"])
                assert calls[name] >= 5  # flows came and went: the index was built again
                assert calls["serial" if way == 1 else "parallel"] == 0
    finally:
        tick.PARALLEL_FROM_ENTRIES, tick.ONLY_WAY = saved, None


def test_the_index_shares_the_cores_when_the_solve_does() -> None:
    """From the threshold on, with no way forced, the index is built the way the solve runs
    lately (its probes time the two on the machine's load), never from a small index."""
    fabric = _all_to_all()
    fabric.run_ticks(20)
    layout = fabric._tick
    assert isinstance(layout, tick.CompiledTick)
    try:
        with counted_index_kernels() as calls:
            size = tick.build_index(fabric.flows, layout).size
            for last, solve_best, way in (
                (tick.PARALLEL_FROM_ENTRIES, 1, "parallel"),
                (tick.PARALLEL_FROM_ENTRIES, 0, "serial"),
                (tick.PARALLEL_FROM_ENTRIES - 1, 1, "serial"),
            ):
                calls.update(serial=0, parallel=0)
                layout._index_entries[0], layout.solve_choice.best = last, solve_best
                idx = tick.build_index(fabric.flows, layout)
                expected = way if numba.get_num_threads() > 1 else "serial"
                assert calls == {"serial": 0, "parallel": 0, expected: 1}
                assert idx.size == size == layout._index_entries[0]
    finally:
        layout.solve_choice.best = 0
