"""A tick's bytes moved and counted in one compiled call (``kernels.move.move_step``)
against the same tick's steps (``move``, ``LinkBook.measure_departures``,
``link_counters``), on random fabrics and traffic.

``Fabric._move`` takes the one-call way on the compiled tick; the reference takes the
steps. Both must leave the flow table, the link book (rates, buffers, departure cycles,
counters) and routing's load in flight exactly the same.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from fabric_core.net.profiles import NATIVE_400G, Profile
from fabric_core.runtime import busy, uneventful
from fabric_core.tick.kernels.tick import CompiledTick
from fabric_core.tick.reference import ReferenceTick
from tests.test_finish_kernel import SMALL_FABRICS, bulk_and_rpc
from tests.test_start_kernel import assert_same_table, compiled_tick_as


class _StepByStep(CompiledTick):
    """The compiled tick moving bytes as the reference does: its kernels one by one."""

    move_and_count = ReferenceTick.move_and_count


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SMALL_FABRICS)
def test_one_call_moves_and_counts_as_the_steps_do(
    case: tuple[Profile, int, int, int, float, float, int],
) -> None:
    *shape, ticks = case
    one, steps = bulk_and_rpc(*shape), bulk_and_rpc(*shape)
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


def test_the_ticks_at_once_move_as_a_tick_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """The uneventful ticks run the same one-call move: run with them and without, the
    fabric ends the same. (Long flows and rare messages: most of the 300 ticks run at once,
    217 when this was written.)"""
    fabrics = [bulk_and_rpc(NATIVE_400G, 2, 2, 3, 5e5, 1e3) for _ in range(2)]
    monkeypatch.setattr(busy, "ENABLED", False)  # (busy ticks at once: tests/test_busy.py)
    at_once = 0
    run_uneventful = fabrics[0]._run_uneventful

    def counted(most: int) -> int:
        nonlocal at_once
        ran = run_uneventful(most)
        at_once += ran
        return ran

    fabrics[0]._run_uneventful = counted  # type: ignore[method-assign]
    fabrics[0].run_ticks(300)
    assert at_once > 100
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


def test_a_source_sends_what_it_owes_a_resend_first_and_counts_it_on_its_link() -> None:
    """``count_resends`` (compiled) and the reference's: of what each hop-0 entry sent in
    the tick, up to what its flow owes a resend is retransmitted on its link; what is
    owed goes down by as much, and never stays above what is left at the source."""
    from types import SimpleNamespace

    from fabric_core.tick import reference
    from fabric_core.tick.kernels.move import count_resends

    # entries 0, 2 and 3 are hop 0 of slots 4, 1 and 0 (on links 5, 6, 5); entry 1 is
    # slot 4's hop 1 (link 7): a hop past the source resends nothing
    heads = np.array([0, 2, 3], dtype=np.intp)
    link = np.array([5, 7, 6, 5], dtype=np.intp)
    flow = np.array([4, 4, 1, 0], dtype=np.intp)
    rate = np.array([100.0, 50.0, 100.0, 100.0])
    new_backlog = np.array([500.0, 0.0, 0.0, 20.0])
    owed = np.array([300.0, 80.0, 0.0, 0.0, 250.0])
    want_owed = [20.0, 0.0, 0.0, 0.0, 150.0]  # slot 0: 200 owed, 20 left at its source
    want_resent = [0, 0, 0, 0, 0, 200.0, 80.0, 0, 0]
    compiled = np.zeros(9)
    owed_c = owed.copy()
    count_resends(heads, link, flow, np.append(rate, 0.0), new_backlog, 1.0, owed_c, compiled)
    assert owed_c.tolist() == want_owed and compiled.tolist() == want_resent
    ref = np.zeros(9)
    idx = SimpleNamespace(heads=heads, link=link, flow=flow)
    table = SimpleNamespace(resend_bytes=owed.copy())
    reference.count_resends(idx, rate, new_backlog, table, 1.0, ref)  # type: ignore[arg-type]
    assert table.resend_bytes.tolist() == want_owed and ref.tolist() == want_resent
