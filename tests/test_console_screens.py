"""Screens and navigation on the seeded ``tiny`` fabric (stepped by hand), by key presses:
the fabric map's ports, link detail, the command palette and the compare view."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from textual import events
from textual.command import CommandInput, CommandList
from textual.css.query import NoMatches

from console.app import UNFOCUSED_EVERY, FabtopApp
from console.screens.compare import CompareScreen
from console.screens.confirm import ConfirmScreen
from console.screens.fault_form import FaultFormScreen
from console.screens.help import HelpScreen
from console.screens.link_detail import LinkDetailScreen
from console.stepped import SteppedSource
from console.widgets.links_table import LinksTable
from fabric_core.net.profiles import PROFILES
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from tests.helpers import settle

SIZE = (140, 44)


def shown(widget: Any) -> str:
    """The plain text a ``Static`` shows (its content may be a rich table)."""
    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(widget.content)
    return console.export_text()


def highlighted(app: FabtopApp) -> str:
    """The command the palette would run on Enter ("" while it has none)."""
    try:
        listing = app.screen.query_one(CommandList)
    except NoMatches:
        return ""
    i = listing.highlighted
    return "" if i is None else str(listing.get_option_at_index(i).prompt)


def source(profile: str | None = None) -> SteppedSource:
    src = SteppedSource(Fabric.from_scenario(load_scenario("tiny", profile=profile)))
    src.step(50)
    return src


async def test_selecting_a_switch_on_the_map_shows_its_ports() -> None:
    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("shift+tab")  # from the links table to the map
        assert app.focused is app.fabric_map
        await pilot.press("right", "enter")  # spine00 -> spine01
        await pilot.pause()
        shown = app.query_one(LinksTable).links_shown
        assert app.link_filter.text == "spine01"
        assert shown and all("spine01" in name for name in shown)
        assert len(shown) == 4  # two leaves, both directions


async def test_link_detail_opens_on_enter_and_injects_on_its_link() -> None:
    src = source()
    app = FabtopApp(src, render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        link = app.query_one(LinksTable).cursor_link
        assert link is not None
        await pilot.press("enter")
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, LinkDetailScreen) and detail.link == link
        assert link in shown(detail.query_one("#summary"))
        assert "transmitted" in shown(detail.query_one("#counters"))
        await pilot.press("i")
        await pilot.pause()
        form = app.screen
        assert isinstance(form, FaultFormScreen)
        assert form.query_one("#target").value == link  # type: ignore[attr-defined]
        await pilot.press("enter")
        await pilot.pause()
        snap = src.latest()
        assert snap is not None
        assert [(f.kind, f.target) for f in snap.faults] == [("link_down", link)]
        assert app.screen is detail


async def test_link_detail_says_the_run_state_and_simulated_time() -> None:
    """Watching a link, the screen showed no simulated time and no running, paused or
    frozen state: a paused emulation looked like a quiet link. It now has the main view's
    header, at 80 columns too."""
    src = source()
    app = FabtopApp(src, render_interval_s=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, LinkDetailScreen)

        def header() -> str:
            return detail.query_one("#detail-header").render_line(0).text

        await settle(pilot, lambda: "▶ running" in header())
        assert "sim 50 µs" in header() and "tiny" in header() and "native-400g" in header()
        assert detail.query_one("#detail-header").region.y == 0  # the screen's first line
        await pilot.press("p")
        await settle(pilot, lambda: "⏸ paused" in header())
        src.step(10)  # (none while paused: the time stays)
        app.refresh_view(force=True)
        await pilot.pause()
        assert "sim 50 µs" in header()
        await pilot.press("p", "f")
        await settle(pilot, lambda: "❄ frozen view" in header())
        await pilot.press("f")
        await settle(pilot, lambda: "▶ running" in header())


async def test_palette_injects_a_link_down_and_clears_all() -> None:
    src = source()
    app = FabtopApp(src, render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+p")
        # Typing char by char costs Pilot an idle wait per key; the palette searches on change.
        app.screen.query_one(CommandInput).value = "down leaf01->spine00"
        await settle(pilot, lambda: highlighted(app).startswith("Inject link down on leaf01"))
        await pilot.press("enter")
        await settle(pilot, lambda: bool(src.latest().active_faults))  # type: ignore[union-attr]
        snap = src.latest()
        assert snap is not None
        assert [(f.kind, f.target) for f in snap.active_faults] == [
            ("link_down", "leaf01->spine00")
        ]
        await pilot.press("ctrl+p", *"clear all")
        await settle(pilot, lambda: highlighted(app).startswith("Clear all faults"))
        await pilot.press("enter")  # asks first
        await settle(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await settle(pilot, lambda: src.latest().active_faults == ())  # type: ignore[union-attr]


async def test_help_lists_every_key_of_the_footer() -> None:
    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        listed = dict(app.screen.app_bindings)
        for binding in app.BINDINGS:
            assert binding.description in listed.values()  # type: ignore[union-attr]
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_compare_shows_both_fabrics_and_injects_on_both() -> None:
    other = "roce-400g" if "roce-400g" in PROFILES else "native-800g"
    left, right = source("native-400g"), source(other)
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        assert "native-400g" in shown(screen.query_one("#left"))
        assert other in shown(screen.query_one("#right"))
        delta = shown(screen.query_one("#delta"))
        assert f"p99 {other}" in delta and "rpc" in delta and "×" in delta
        await pilot.press("i", *"leaf00->spine01", "enter")
        await pilot.pause()
        for src in (left, right):
            snap = src.latest()
            assert snap is not None
            assert [(f.kind, f.target) for f in snap.active_faults] == [
                ("link_down", "leaf00->spine01")
            ]
        left.step(20)
        right.step(20)
        screen.refresh_sides()
        await pilot.pause()
        for side in ("#left", "#right"):
            assert "1 active" in shown(screen.query_one(side))
        timelines = shown(screen.query_one("#faults-both"))
        assert "link_down leaf00->spine01" in timelines
        assert "native-400g: state" in timelines and f"{other}: state" in timelines
        await pilot.press("p")  # sent in a worker, to both
        await settle(pilot, lambda: not left.engine.running and not right.engine.running)


async def test_compare_sides_keep_their_rows_level_when_a_value_wraps_on_one_side() -> None:
    left, right = source("native-400g"), source("roce-400g")
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=0.05)
    async with app.run_test(size=(100, 44)) as pilot:
        await pilot.press("c")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        sides = [shown(screen.query_one(side)).splitlines() for side in ("#left", "#right")]

        def line_of(lines: list[str], label: str) -> int:
            return next(i for i, line in enumerate(lines) if line.startswith(label))

        # "native-400g · native lossless (credit)" wraps at this width, the RoCE one does not
        native_profile = line_of(sides[0], "profile")
        assert sides[0][native_profile + 1].startswith(" ")
        assert line_of(sides[1], "source") == native_profile + 2
        for label in ("source", "state", "links", "latency now", "workloads", "faults"):
            assert line_of(sides[0], label) == line_of(sides[1], label), label


async def test_compare_without_a_second_fabric_says_how_to_get_one() -> None:
    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c")
        await pilot.pause()
        assert not isinstance(app.screen, CompareScreen)
        assert any("--compare" in n.message for n in app._notifications)


async def test_a_bad_filter_leaves_the_table_alone() -> None:
    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        before = app.query_one(LinksTable).links_shown
        await pilot.press("slash", *"is:nope", "enter")
        await pilot.pause()
        assert app.link_filter.text == ""
        assert app.query_one(LinksTable).links_shown == before


async def test_plus_and_minus_change_the_speed() -> None:
    src = source()
    app = FabtopApp(src, render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("plus")
        await pilot.pause()
        assert src.engine.speed == 2e-3
        await pilot.press("minus", "minus")
        await pilot.pause()
        assert src.engine.speed == 5e-4


async def test_rendering_is_throttled_while_the_terminal_is_unfocused() -> None:
    src = source()
    app = FabtopApp(src, render_interval_s=3600)  # the test drives the timer by hand
    async with app.run_test(size=SIZE) as pilot:
        app.post_message(events.AppBlur())
        await pilot.pause()
        before = app.view.snapshot
        src.step(5)
        for _ in range(UNFOCUSED_EVERY - 1 - app._timer_ticks % UNFOCUSED_EVERY):
            app._on_timer()
        assert app.view.snapshot is before
        app._on_timer()
        assert app.view.snapshot is src.latest()
        app.post_message(events.AppFocus())
        await pilot.pause()
        src.step(5)
        app._on_timer()
        assert app.view.snapshot is src.latest()


async def test_a_resize_under_the_compare_view_reaches_the_main_view() -> None:
    """Resized to 80x24 while the compare view was up, the main view came back in its tall
    layout: its faults and events panels below the terminal's last row."""
    left, right = source("native-400g"), source("roce-400g")
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("c")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.press("escape")
        faults = app.query_one("#faults-box")
        await settle(pilot, lambda: not isinstance(app.screen, CompareScreen))
        await settle(pilot, lambda: faults.region.bottom <= 24 - 1)  # above the footer
        assert app.query_one("#links-box").region.height > 0
