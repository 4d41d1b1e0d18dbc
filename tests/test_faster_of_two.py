"""``FasterOfTwo``: the engine runs the faster lately of two solves that give the same
rates (serial, over the cores), and still times the other now and then."""

from __future__ import annotations

from fabric_core.tick.faster_of_two import PROBE_EVERY, FasterOfTwo


def _run(choice: FasterOfTwo, cost_s: tuple[float, float], runs: int) -> list[int]:
    picked = []
    for _ in range(runs):
        which = choice.pick()
        choice.record(which, cost_s[which] * 1000, 1000)  # 1,000 units of work each
        picked.append(which)
    return picked


def test_each_is_timed_once_then_the_faster_runs_and_the_other_is_tried_again() -> None:
    picked = _run(FasterOfTwo(), (3e-9, 1e-9), 4 * PROBE_EVERY)
    assert picked[:2] == [0, 1]
    probes = [i for i, w in enumerate(picked[2:], start=3) if w == 0]
    assert probes == [PROBE_EVERY * k for k in range(1, 5)]  # every PROBE_EVERY-th run


def test_when_the_other_becomes_faster_the_choice_follows_at_the_next_probe() -> None:
    choice = FasterOfTwo()
    assert _run(choice, (3e-9, 2e-9), PROBE_EVERY - 1)[2:] == [1] * (PROBE_EVERY - 3)
    assert choice.pick() == 0  # the probe of 0 ...
    choice.record(0, 1e-6, 1000)  # ... finds it faster now: 1e-9 s a unit against 2e-9
    assert _run(choice, (1e-9, 5e-9), 10) == [0] * 10  # 0 stays until 1 is timed again
