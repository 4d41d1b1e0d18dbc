"""``+`` and ``-``: each press multiplies the speed, in quick succession too; the main and
the compare view share the rest (flat out, read-only, a refusal) through ``SpeedSteps.press``.

Taken from the latest snapshot alone, every press started from the speed the engine had
last published, so 25 presses of ``-`` in a live console took the speed from 1e-2 to
2.5e-3 only (seen in tmux, session 37).
"""

from __future__ import annotations

import pytest
from textual.pilot import Pilot

from console.app import FabtopApp
from console.screens.compare import CompareScreen
from console.speed import FLAT_OUT, SpeedSteps
from console.stepped import SteppedSource
from fabric_core.commands import Command, CommandResult, SetSpeed
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from tests.helpers import settle

SIZE = (140, 44)


class LaggingSource(SteppedSource):
    """Applies commands at once but publishes only when stepped, as an engine in another
    process does: the snapshot says the new speed some time after the reply."""

    async def submit(self, command: Command) -> CommandResult:
        return self.engine.apply(command)


async def test_presses_before_the_snapshot_catches_up_each_count() -> None:
    src = LaggingSource(Fabric.from_scenario(load_scenario("tiny")), speed=1e-3)
    src.step(2)
    app = FabtopApp(src, render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("minus", "minus", "minus")
        await settle(pilot, lambda: src.engine.speed == 1.25e-4)
        src.step(1)  # the snapshot now says 1.25e-4
        await pilot.press("plus")
        await settle(pilot, lambda: src.engine.speed == 2.5e-4)


def test_steps_start_from_the_last_speed_asked_until_a_snapshot_after_its_reply() -> None:
    src = SteppedSource(Fabric.from_scenario(load_scenario("tiny")), speed=1e-3)
    stale = src.step(1)
    steps = SpeedSteps()
    assert steps.step(stale, 0.5) == 5e-4
    steps.sent(5e-4)
    assert steps.step(stale, 0.5) == 2.5e-4  # no reply yet: from the speed asked
    steps.replied(True, stale)
    assert steps.step(stale, 0.5) == 2.5e-4  # replied, but no snapshot since
    src.engine.speed = 4e-3  # (someone else set it meanwhile)
    fresh = src.step(1)
    assert steps.step(fresh, 0.5) == 2e-3  # a snapshot after the reply: the engine's speed


def test_a_refused_speed_is_forgotten_and_flat_out_has_nothing_faster() -> None:
    src = SteppedSource(Fabric.from_scenario(load_scenario("tiny")), speed=1e-3)
    snap = src.step(1)
    steps = SpeedSteps()
    steps.sent(5e-4)
    steps.replied(False, snap)
    assert steps.step(snap, 2.0) == 2e-3  # from the engine's 1e-3
    src.engine.speed = 0.0
    flat = src.step(1)
    assert steps.step(flat, 2.0) is None
    assert steps.step(flat, 0.5) == 0.5  # slower than flat out: from 1


class RefusingSource(SteppedSource):
    """Refuses the first ``speed`` command it is sent, as an engine that stopped does."""

    refuse = 1

    async def submit(self, command: Command) -> CommandResult:
        if isinstance(command, SetSpeed) and self.refuse > 0:
            self.refuse -= 1
            return CommandResult(id=command.id, ok=False, error="no speed today")
        return await super().submit(command)


def tiny(cls: type[SteppedSource] = SteppedSource, speed: float = 1e-3) -> SteppedSource:
    src = cls(Fabric.from_scenario(load_scenario("tiny")), speed=speed)
    src.step(2)
    return src


async def in_view(pilot: Pilot[None], app: FabtopApp, view: str) -> None:
    """Open ``view``: the main view is there from the start; c opens the compare view."""
    if view == "compare":
        await pilot.press("c")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))


def told(app: FabtopApp) -> list[str]:
    return [n.message for n in app._notifications]


# Both views' + and - go through one SpeedSteps.press: what they share, in each.
VIEWS = ["main", "compare"]


@pytest.mark.parametrize("view", VIEWS)
async def test_plus_at_flat_out_says_so_and_minus_starts_from_one(view: str) -> None:
    left, right = tiny(speed=0.0), tiny(speed=0.0)
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await in_view(pilot, app, view)
        await pilot.press("plus")
        await settle(pilot, lambda: FLAT_OUT in told(app))
        assert left.engine.speed == right.engine.speed == 0.0
        await pilot.press("minus")
        await settle(pilot, lambda: left.engine.speed == 0.5)
        assert right.engine.speed == (0.5 if view == "compare" else 0.0)


@pytest.mark.parametrize("view", VIEWS)
async def test_a_read_only_console_refuses_the_speed_keys(view: str) -> None:
    left, right = tiny(), tiny()
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=0.05, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await in_view(pilot, app, view)
        # the speed keys are not offered (the footer listed them only to say they were
        # disabled), and pressed they change nothing
        shown = {b.binding.action for b in app.active_bindings.values() if b.enabled}
        assert shown.isdisjoint({"speed(2.0)", "speed(0.5)"})
        await pilot.press("plus", "minus")
        await pilot.pause(0.2)
        assert left.engine.speed == right.engine.speed == 1e-3


@pytest.mark.parametrize("view", VIEWS)
async def test_a_refused_speed_is_told_and_the_next_press_starts_from_the_engines(
    view: str,
) -> None:
    left, right = tiny(RefusingSource), tiny(RefusingSource)
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await in_view(pilot, app, view)
        await pilot.press("plus")
        await settle(pilot, lambda: any("no speed today" in m for m in told(app)))
        await pilot.press("minus")  # from the engine's 1e-3, not the refused 2e-3
        await settle(pilot, lambda: left.engine.speed == 5e-4)
        assert right.engine.speed == (5e-4 if view == "compare" else 1e-3)
