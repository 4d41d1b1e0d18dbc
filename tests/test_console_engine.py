"""The console on the real emulator (the seeded ``tiny`` scenario), driven by key presses.

Freeze and pause run the embedded engine as the app's worker, as ``fabtop``
does. The fault tests type into the form, and Pilot waits after each key until
the process is idle, which never happens while an engine computes flat out in
the same process: there the fabric is stepped by hand (``SteppedSource``, the
same fabric and the same command path as the engine), which also makes the
fault timeline deterministic. Tests wait (bounded) for the simulated state they
need, never for wall-clock durations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from console.app import UNFOCUSED_EVERY, FabtopApp
from console.screens.fault_form import FaultFormScreen
from console.source import EngineSource
from console.stepped import SteppedSource
from console.widgets.fabric_map import FabricMap
from console.widgets.faults_panel import FaultsPanel
from console.widgets.links_table import LinksTable
from console.widgets.status_header import StatusHeader
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.runtime.snapshot import LinkStatus
from tests.helpers import until

SIZE = (140, 44)
LINK = "leaf00->spine01"


def stepped_app(**kw: object) -> tuple[FabtopApp, SteppedSource]:
    src = SteppedSource(Fabric.from_scenario(load_scenario("tiny")), description="seeded tiny")
    src.step(200)
    app = FabtopApp(src, render_interval_s=0.05, **kw)  # type: ignore[arg-type]
    return app, src


async def step_until(src: SteppedSource, cond: Callable[[], bool], what: str) -> None:
    """Run the stepped fabric 250 ticks at a time until ``cond`` holds (bounded)."""
    for _ in range(80):
        if cond():
            return
        src.step(250)
        await asyncio.sleep(0.06)  # one render interval: the app samples the new snapshot
    pytest.fail(f"{what} did not happen within 20,000 ticks")


def tiny_app(**kw: object) -> tuple[FabtopApp, Engine]:
    fabric = Fabric.from_scenario(load_scenario("tiny"))
    # 2 ms of simulated time per wall second: a reroute (~2 ms on native-400g) takes ~1 s,
    # and the engine leaves the event loop time to render (flat out it would hog the GIL).
    engine = Engine(fabric, speed=2e-3, publish_interval_s=0.05)
    app = FabtopApp(EngineSource(engine), render_interval_s=0.05, **kw)  # type: ignore[arg-type]
    return app, engine


def header_text(app: FabtopApp) -> str:
    return str(app.query_one(StatusHeader).render())


def link_status(app: FabtopApp, link: str) -> int:
    snap = app.view.snapshot
    assert snap is not None
    return int(snap.link_state.status[snap.links.index[link]])


def state_cell(app: FabtopApp, link: str) -> str:
    return app.query_one(LinksTable).get_row(link)[1].plain


async def test_inject_link_down_from_the_form_then_clear_it() -> None:
    app, src = stepped_app()
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.view.snapshot is not None, "the first snapshot")
        await pilot.press("i")
        assert isinstance(app.screen, FaultFormScreen)
        await pilot.press(*LINK, "enter")
        await until(lambda: not isinstance(app.screen, FaultFormScreen), "the form to close")

        faults = app.query_one(FaultsPanel)
        await until(lambda: faults.row_count == 1, "the fault in the faults panel")
        fault_id = next(iter(faults.rows)).value
        assert faults.get_row(fault_id)[2].plain == LINK
        # The link shows down in the table (pinned at the top) and on the map.
        await step_until(src, lambda: link_status(app, LINK) == LinkStatus.DOWN, "link down")
        table = app.query_one(LinksTable)
        await until(
            lambda: LINK in table.links_shown and state_cell(app, LINK) == "down",
            "the table to show the link down",
        )
        assert table.links_shown[0] in (LINK, "spine01->leaf00")
        fabric_map = app.query_one(FabricMap)
        await until(
            lambda: "bold white on red" in str([s.style for s in fabric_map.render().spans]),
            "the map to show the link down",
        )
        # The timeline fills in: detected, then rerouted.
        await step_until(
            src,
            lambda: (
                faults.get_row(fault_id)[4].plain.startswith("+")
                and faults.get_row(fault_id)[5].plain.startswith("+")
            ),
            "detected and rerouted times",
        )
        assert "faults 1" in header_text(app)

        await pilot.press("x")  # clear all, asks first
        await pilot.press("y")
        await step_until(src, lambda: link_status(app, LINK) == LinkStatus.UP, "link up")
        await until(
            lambda: LINK in table.links_shown and state_cell(app, LINK) == "up",
            "the table to show the link up",
        )
        await step_until(src, lambda: faults.get_row(fault_id)[3].plain == "cleared", "cleared")
        assert "faults 0" in header_text(app)
        assert any(e.event.kind.startswith("fault_") for e in app.view.events.entries)


@pytest.mark.parametrize(
    ("target", "duration", "message"),
    [
        ("leaf00->spine09", "", "unknown link 'leaf00->spine09'"),
        (LINK, "-5ms", "duration must be positive"),
        (LINK, "5", "needs a unit"),
    ],
)
async def test_a_bad_form_entry_says_why_and_injects_nothing(
    target: str, duration: str, message: str
) -> None:
    app, src = stepped_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("i", *target)
        form = app.screen
        assert isinstance(form, FaultFormScreen)
        form.query_one("#duration").value = duration  # type: ignore[attr-defined]
        await pilot.press("enter")
        await pilot.pause()
        assert message in str(form.query_one("#error").render())
        assert app.screen is form  # still open, for the operator to fix
        await pilot.press("escape")
        # the form sends before it closes (and the stepped source applies and publishes a
        # command at once), so once it is closed anything it sent shows in the snapshot
        await until(lambda: app.screen is not form, "the form to close")
        latest = src.latest()
        assert latest is not None and latest.faults == ()


async def test_freeze_stops_the_view_while_simulated_time_goes_on() -> None:
    app, engine = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.view.snapshot is not None, "the first snapshot")
        await pilot.press("f")
        frozen = app.view.snapshot
        assert frozen is not None
        shown = header_text(app)
        assert "frozen view" in shown
        await until(
            lambda: (
                (engine.bus.latest is not None)
                and engine.bus.latest.sim_time_s > frozen.sim_time_s + 50e-6
            ),
            "simulated time to advance",
        )
        # the view's timer has run since a newer snapshot was out: it would have taken it
        # (even throttled, as when the terminal is not focused: once every UNFOCUSED_EVERY)
        ticks = app._timer_ticks
        await until(lambda: app._timer_ticks > ticks + UNFOCUSED_EVERY, "the view's timer to run")
        assert app.view.snapshot is frozen
        assert header_text(app) == shown
        await pilot.press("f")
        await until(lambda: app.view.snapshot is not frozen, "the view to follow again")
        assert "frozen view" not in header_text(app)


async def test_pause_stops_simulated_time_and_resume_restarts_it() -> None:
    app, engine = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.view.snapshot is not None, "the first snapshot")
        await pilot.press("p")
        await until(
            lambda: app.view.snapshot is not None and not app.view.snapshot.running, "pause"
        )
        assert "paused" in header_text(app)
        paused_at = engine.fabric.sim_time_s
        # the engine shares the app's event loop: while the view's timer runs six times
        # (0.3 s unloaded), a running engine at 2 ms a second would step ~0.6 ms
        ticks = app._timer_ticks
        await until(lambda: app._timer_ticks >= ticks + 6, "the view's timer to run")
        assert engine.fabric.sim_time_s == paused_at
        await pilot.press("p")
        await until(lambda: engine.fabric.sim_time_s > paused_at, "simulated time to move again")
        await until(lambda: "running" in header_text(app), "the header to say running")


async def test_read_only_refuses_injection_and_pause() -> None:
    app, src = stepped_app(read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("i", "p")
        await pilot.pause()
        assert not isinstance(app.screen, FaultFormScreen)
        assert src.engine.running
        # the keys that would change the emulation are not offered at all
        shown = {b.binding.action for b in app.active_bindings.values() if b.enabled}
        assert {"inject", "toggle_pause", "clear_all"}.isdisjoint(shown)
        assert {"toggle_freeze", "help", "quit"} <= shown


async def test_an_engine_error_is_reported_and_the_console_stays_up() -> None:
    app, engine = tiny_app()

    def broken(n: int) -> None:
        raise RuntimeError("tick exploded")

    engine.fabric.run_ticks = broken  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await until(
            lambda: any("tick exploded" in n.message for n in app._notifications),
            "the engine error to be reported",
        )
        await pilot.press("f")  # the console still answers keys
        assert app.frozen


async def test_the_core_refusal_shows_in_the_form() -> None:
    app, src = stepped_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("i", *LINK)
        form = app.screen
        assert isinstance(form, FaultFormScreen)
        form.query_one("#kind").value = "link_degraded"  # type: ignore[attr-defined]
        form.query_one("#params").value = "ber=5"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await pilot.pause()
        assert "ber must be in" in str(form.query_one("#error").render())
        assert app.screen is form
        latest = src.latest()
        assert latest is not None and latest.faults == ()
