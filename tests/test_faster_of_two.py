"""``FasterOfTwo``: the engine runs the faster of two solves that give the same rates
(serial, over the cores), found by running both on one tick now and then."""

from __future__ import annotations

import itertools

import pytest

import tests.test_parallel_solve as parallel_solve_tests  # a module: its tests stay there
from fabric_core.tick.faster_of_two import FIRST_PROBE_AFTER, LAST_PROBE_AFTER, FasterOfTwo
from fabric_core.tick.kernels import tick
from fabric_core.tick.kernels._jit import MOST_THREADS


def _run(choice: FasterOfTwo, cost_s: tuple[float, float], runs: int) -> list[tuple[int, bool]]:
    """``runs`` runs of 1,000 units each at ``cost_s`` a unit; the plans made."""
    plans = []
    for _ in range(runs):
        best, probe = choice.plan()
        if probe:
            choice.probed((cost_s[0] * 1000, cost_s[1] * 1000), 1000)
        else:
            choice.ran(cost_s[best] * 1000, 1000)
        plans.append((best, probe))
    return plans


def test_the_first_run_probes_and_the_faster_runs_then() -> None:
    choice = FasterOfTwo()
    assert choice.plan() == (0, True)
    choice.probed((3e-6, 1e-6), 1000)  # 1 is faster
    assert choice.best == 1
    assert [b for b, _ in _run(choice, (3e-9, 1e-9), 20)] == [1] * 20


def test_probes_come_twice_as_late_while_the_choice_holds() -> None:
    plans = _run(FasterOfTwo(), (3e-9, 1e-9), 400)
    probes = [i for i, (_, probe) in enumerate(plans) if probe]
    gaps = [b - a for a, b in itertools.pairwise(probes)]
    assert gaps[0] == FIRST_PROBE_AFTER + 1
    assert gaps[:4] == [(min(FIRST_PROBE_AFTER * 2**k, LAST_PROBE_AFTER) + 1) for k in range(4)]
    assert max(gaps) == LAST_PROBE_AFTER + 1  # never further apart


def test_a_slowdown_of_the_one_run_probes_at_once_and_the_choice_follows() -> None:
    choice = FasterOfTwo()
    _run(choice, (3e-9, 1e-9), 40)  # 1 runs, probes grow apart
    assert choice.best == 1 and choice.until_probe > 1
    choice.ran(1.5e-6, 1000)  # 1.5e-9 a unit: not twice 1e-9, no probe yet
    assert choice.until_probe > 0
    choice.ran(5e-6, 1000)  # 5e-9 a unit: more than twice 1e-9 (the second core got busy)
    assert choice.plan() == (1, True)  # probed on the very next run ...
    choice.probed((3e-6, 5e-6), 1000)
    assert choice.best == 0  # ... which finds 0 faster now
    assert [b for b, _ in _run(choice, (3e-9, 5e-9), 10)] == [0] * 10
    choice.ran(1e-3, 1000)  # the serial one slowed down: no probe (its core is its own)
    assert choice.until_probe > 0


@pytest.mark.skipif(MOST_THREADS < 2, reason="one core: the engine runs the serial solve only")
def test_an_engine_that_probes_both_solves_runs_as_the_serial_one() -> None:
    """Through ``Fabric``: the solve chosen, probes (both solves on one tick) included, and
    the index built the way the solve runs, give every tick the state the serial ones
    alone give, bit for bit."""
    saved = tick.PARALLEL_FROM_ENTRIES
    tick.PARALLEL_FROM_ENTRIES = 0  # every tick may share: small fabrics probe too
    try:
        chosen, serial = parallel_solve_tests._all_to_all(), parallel_solve_tests._all_to_all()
        probes = 0
        for _ in range(150):
            probes += chosen._tick.solve_choice.until_probe <= 0
            chosen.step()
            tick.ONLY_WAY = 0
            try:
                serial.step()
            finally:
                tick.ONLY_WAY = None
            parallel_solve_tests._assert_same(serial, chosen)
        assert probes >= 4  # both ran on one tick, several times
    finally:
        tick.PARALLEL_FROM_ENTRIES = saved
