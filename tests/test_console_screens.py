"""Screens and navigation on the seeded ``tiny`` fabric (stepped by hand), by key presses:
the fabric map's ports, link detail, the command palette and the compare view."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text
from textual import events
from textual.command import CommandInput, CommandList
from textual.css.query import NoMatches
from textual.geometry import Region
from textual.widgets import Static

from console.app import UNFOCUSED_EVERY, FabtopApp
from console.palette import FabricCommands
from console.screens.compare import CompareScreen
from console.screens.confirm import ConfirmScreen
from console.screens.fault_form import FaultFormScreen
from console.screens.help import HelpScreen
from console.screens.link_detail import LinkDetailScreen
from console.stepped import SteppedSource
from console.widgets.faults_panel import since
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
        # (a key's two descriptions on one line: "Pause / resume")
        listed = {part.lower() for _, said in app.screen.app_bindings for part in said.split(" / ")}
        for binding in app.BINDINGS:
            assert binding.description.lower() in listed  # type: ignore[union-attr]
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_the_help_says_what_p_does_one_way_on_every_screen_paused_or_not() -> None:
    """The main view's help listed the one of Pause and Resume its footer showed, the
    compare view's both joined ("Pause both / resume both"): p read two ways. Every help
    now says what the key does, whether paused or not."""
    src = source()
    app = FabtopApp(src, render_interval_s=0.05, compare_sources=(src, source("roce-400g")))

    async def help_says() -> str:
        await pilot.press("question_mark")
        await settle(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert isinstance(app.screen, HelpScreen)
        said = dict(app.screen.app_bindings)["p"]
        await pilot.press("escape")
        await settle(pilot, lambda: not isinstance(app.screen, HelpScreen))
        return said

    async with app.run_test(size=SIZE) as pilot:
        assert await help_says() == "Pause / resume"
        await pilot.press("p")
        await settle(pilot, lambda: "p Resume" in footer_text(app))
        assert await help_says() == "Pause / resume"
        await pilot.press("c")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
        assert await help_says() == "Pause both / resume both"


async def test_help_says_what_the_links_tables_queue_and_credits_hold() -> None:
    """A hot RoCE port read "queue 0 B": nothing on screen said that the queue is the one
    at the link's far end."""
    app = FabtopApp(source("roce-400g"), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await settle(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = " ".join(shown(static) for static in app.screen.query(Static))
        text = " ".join(text.split())
        assert "queue is the bytes that crossed the link and wait in the ingress buffer" in text
        assert "headroom (RoCE) the PFC headroom left" in text


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


def drawn(widget: Any) -> list[str]:
    """The lines ``widget`` draws on the screen (its border included), as plain text."""
    size = widget.outer_size
    strips = widget.render_lines(Region(0, 0, size.width, size.height))
    return [strip.text for strip in strips]


async def _open_compare(app: FabtopApp, pilot: Any) -> CompareScreen:
    """The compare view, opened with ``c``."""
    await pilot.press("c")
    await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
    screen = app.screen
    assert isinstance(screen, CompareScreen)
    return screen


async def _compare_with_a_fault(
    app: FabtopApp, pilot: Any, left: SteppedSource, right: SteppedSource
) -> CompareScreen:
    """The compare view, a link fault injected on both fabrics from its form and 100
    ticks run since."""
    screen = await _open_compare(app, pilot)
    await pilot.press("i", *"leaf00:spine01", "enter")
    await settle(pilot, lambda: bool(right.latest().active_faults))  # type: ignore[union-attr]
    for src in (left, right):
        src.step(100)
    return screen


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_compare_timelines_and_latency_read_whole_at_80_and_100_columns(
    size: tuple[int, int],
) -> None:
    """At 80 and 100 columns the sides' eight timeline cells did not fit one row: the
    times read "+…", the target "leaf00->…"; and at 80 each latency row's p99.9 went to a
    line of its own under a heading that named three quantiles on one."""
    left, right = source("native-400g"), source("roce-400g")
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=0.05)
    async with app.run_test(size=size) as pilot:
        screen = await _compare_with_a_fault(app, pilot, left, right)
        screen.refresh_sides(force=True)
        await pilot.pause()
        panel = screen.query_one("#faults-both")
        lines = drawn(panel)
        text = "\n".join(lines)
        assert "…" not in lines[1] and "f0 link_down leaf00->spine01" in text
        for heading in ("state", "detected", "rerouted", "recovered"):
            assert heading in text, heading
        for src in (left, right):
            snap = src.latest()
            assert snap is not None
            fault = snap.faults[0]
            row = next(line for line in lines if snap.profile in line)
            words = [fault.state]
            words += [since(fault, at) for at in (fault.detected_at_s, fault.mitigated_at_s)]
            for word in words:
                assert f" {word} " in row, (word, row)
        assert lines[-1].startswith("╰")  # the panel holds every line of the timelines
        for side in ("#left", "#right"):
            rows = shown(screen.query_one(side)).splitlines()
            heading = next(line for line in rows if line.startswith("latency now"))
            quantiles = heading.split("latency now")[1].strip().split(" · ")
            for cls in ("alltoall", "bulk", "rpc"):
                row = next(line for line in rows if line.startswith(cls))
                values = row.removeprefix(cls).strip().split(" · ")
                assert len(values) == len(quantiles), (heading, row)
        speed = screen.query_one("#speed-line", Static)
        line = speed.content
        assert isinstance(line, Text) and "now" in line.plain  # (measured: the longest line)
        # every word of the line is on the screen ("…both over" was its end at 80 columns)
        assert " ".join(drawn(speed)).split() == line.plain.split()


@pytest.mark.parametrize(
    ("profile", "heading"), [("roce-400g", "headroom"), ("native-400g", "credits")]
)
async def test_the_links_tables_credits_column_is_headed_headroom_on_roce(
    profile: str, heading: str
) -> None:
    """On RoCE the column holds PFC headroom (the link detail said so; the table's
    heading said "credits"); its heading and the sort's arrow show whole at 100 columns."""
    app = FabtopApp(source(profile), render_interval_s=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.query_one(LinksTable)
        await settle(pilot, lambda: table.row_count > 0)
        await pilot.press("s", "s")  # utilisation -> queue -> this column
        await settle(pilot, lambda: app.sort_column == "credits")
        await pilot.pause()
        header = drawn(table)[0]
        assert f" {heading} ▲ " in header or f" {heading} ▼ " in header, header
        other = "credits" if heading == "headroom" else "headroom"
        assert other not in header and "drops b/s" in header
        # the panel's title and the palette's sort command name it the same way
        assert str(app.links_box.border_title).endswith(f"· by {heading}")
        assert f"Sort links by {heading}" in [
            name for name, _, _ in FabricCommands(app.screen)._general()
        ]


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


def footer_text(app: FabtopApp) -> str:
    """The keys the footer of the screen on top draws, left to right ("? Help p Pause")."""
    from textual.widgets._footer import FooterKey

    keys = [key for key in app.screen.query(FooterKey) if key.region.width > 0]
    keys.sort(key=lambda key: key.region.x)
    return " ".join(f"{key.key_display} {key.description}".strip() for key in keys)


async def test_the_footer_says_resume_while_paused_on_the_main_view_and_link_detail() -> None:
    """The footer said "p Pause" while the emulation was paused, on the main view and on
    the link detail screen; the compare view's "Pause both" likewise."""
    src = source()
    app = FabtopApp(src, render_interval_s=0.05, compare_sources=(src, source("roce-400g")))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, lambda: "p Pause" in footer_text(app))
        assert "Resume" not in footer_text(app)
        await pilot.press("p")
        await settle(pilot, lambda: "p Resume" in footer_text(app))
        assert "Pause" not in footer_text(app)
        await pilot.press("enter")
        await settle(pilot, lambda: isinstance(app.screen, LinkDetailScreen))
        await settle(pilot, lambda: "p Resume" in footer_text(app))
        await pilot.press("p")
        await settle(pilot, lambda: "p Pause" in footer_text(app))
        await pilot.press("escape")
        await settle(pilot, lambda: not isinstance(app.screen, LinkDetailScreen))
        await settle(pilot, lambda: "p Pause" in footer_text(app))
        await pilot.press("c")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
        await settle(pilot, lambda: "p Pause both" in footer_text(app))
        await pilot.press("p")
        await settle(pilot, lambda: "p Resume both" in footer_text(app))


async def test_the_footers_p_follows_the_engines_whichever_view_paused_them() -> None:
    """The main view and the compare view each kept whether the emulation was paused: a
    frozen main view reads no snapshot, so after "Pause both" on the compare view the
    main view's footer still said "p Pause" with both engines paused; and the compare
    view's p followed the left engine alone. One record now feeds every footer: the
    compare view's p resumes both while either engine is paused."""
    left, right = source(), source("roce-400g")
    app = FabtopApp(left, render_interval_s=0.05, compare_sources=(left, right))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, lambda: "p Pause" in footer_text(app))
        await pilot.press("f")  # the main view frozen: it reads no snapshot
        await pilot.press("c")
        await settle(pilot, lambda: "p Pause both" in footer_text(app))
        await pilot.press("p")
        await settle(pilot, lambda: "p Resume both" in footer_text(app))
        assert not any(src.latest().running for src in (left, right))  # type: ignore[union-attr]
        await pilot.press("escape")
        await settle(pilot, lambda: not isinstance(app.screen, CompareScreen))
        await settle(pilot, lambda: "p Resume" in footer_text(app))
        await pilot.press("p")  # the main engine resumed from the (still frozen) main view
        await settle(pilot, lambda: "p Pause" in footer_text(app))
        assert left.latest().running and not right.latest().running  # type: ignore[union-attr]
        await pilot.press("c")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
        await settle(pilot, lambda: "p Resume both" in footer_text(app))  # (the right paused)
        await pilot.press("p")
        await settle(pilot, lambda: "p Pause both" in footer_text(app))
        assert all(src.latest().running for src in (left, right))  # type: ignore[union-attr]


async def test_the_compare_differences_narrow_layout_fills_one_table_a_refresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 80 columns each refresh filled the wide difference table, only to measure it,
    then the narrow one: its rows were built twice. Now only the table shown is filled."""
    from rich.table import Table

    left, right = source("native-400g"), source("roce-400g")
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=60)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open_compare(app, pilot)
        await pilot.pause()
        filled: list[int] = []  # the row count of each table filled with "now" rows
        add_row = Table.add_row

        def counted(table: Table, *cells: Any, **kw: Any) -> None:
            if table.columns and str(table.columns[0].header) == "now":
                filled.append(id(table))
            add_row(table, *cells, **kw)

        monkeypatch.setattr(Table, "add_row", counted)
        screen.refresh_sides(force=True)
        monkeypatch.undo()
        delta = drawn(screen.query_one("#delta"))
        assert any(" p99 " in line for line in delta)  # the narrow layout, a row a quantile
        assert len(set(filled)) == 1  # one table filled (before: the wide one too)
        assert len(filled) == sum(1 for line in delta if " p50 " in line or " p99 " in line) + (
            1 if any("throughput" in line for line in delta) else 0
        )


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_the_compare_timelines_fill_only_the_tables_they_show(
    size: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 80 and 100 columns each refresh filled the timelines' wide table (and at 80 the
    row-per-side one too) only to measure it, then the layout that fits: every fault's
    rows were built two or three times. Now only the tables shown are filled."""
    from rich.console import Group
    from rich.table import Table

    left, right = source("native-400g"), source("roce-400g")
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=60)
    async with app.run_test(size=size) as pilot:
        screen = await _compare_with_a_fault(app, pilot, left, right)
        filled: list[int] = []  # each table filled with a fault's or a fabric's row
        add_row = Table.add_row

        def counted(table: Table, *cells: Any, **kw: Any) -> None:
            if table.columns and str(table.columns[0].header) in ("fault", "fabric"):
                filled.append(id(table))
            add_row(table, *cells, **kw)

        monkeypatch.setattr(Table, "add_row", counted)
        screen.refresh_sides(force=True)
        monkeypatch.undo()
        content = screen.query_one("#faults-both", Static).content
        parts = content.renderables if isinstance(content, Group) else [content]
        tables = {id(part) for part in parts if isinstance(part, Table)}
        assert not (isinstance(parts[0], Table) and parts[0].expand)  # not the wide layout
        assert filled and set(filled) <= tables  # (before: the wide one, measured, too)
        assert len(filled) == 2  # one row per side of the one fault


async def test_the_compare_difference_reads_whole_at_80_columns() -> None:
    """At 80 columns the difference cut its headings ("native-40…") and wrapped a stalled
    class's "none done" onto two lines: there it gives a row per quantile instead."""
    from console.latency import ClassLatency

    left, right = source("native-400g"), source("roce-400g")
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open_compare(app, pilot)
        for src in (left, right):
            src.step(100)
        screen.refresh_sides(force=True)
        await pilot.pause()
        screen.views[1].latency["bulk"] = ClassLatency("bulk", 80e-6, 1.35e-3, 2e-3, 0, ())
        screen.refresh_sides(force=True)
        await pilot.pause()
        lines = drawn(screen.query_one("#delta"))
        text = "\n".join(lines)
        assert "…" not in text
        assert "native-400g" in lines[1] and "roce-400g" in lines[1], lines[1]
        bulk = [line for line in lines if "none done" in line]
        assert len(bulk) == 2 and "bulk" in bulk[0] and " p99 " in bulk[1], bulk
        assert "throughput" in text and lines[-1].startswith("╰")
