"""What a new operator met in the console (issue 16), by key presses on the seeded ``tiny``
fabric: Tab completes a fault target, help shows keys as typed and per screen, the credit
fabric says "starved" where RoCE says "paused", KPI labels are words with units, the links
title reads, and the compare view's ``+``/``-`` drive both engines (issue 13)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

import pytest
from textual.containers import VerticalScroll
from textual.pilot import Pilot
from textual.widgets import Input
from textual.widgets.data_table import ColumnKey

from console.app import FabtopApp
from console.linkview import WIDTHS
from console.screens.compare import CompareScreen
from console.screens.fault_form import FaultFormScreen
from console.screens.help import HelpScreen
from console.screens.link_detail import spark_rows
from console.stepped import SteppedSource
from console.widgets.faults_panel import PANEL_WIDTH, FaultsPanel
from console.widgets.latency_panel import KPI_INDENT, kpi_lines
from console.widgets.links_table import MIN_LINK_WIDTH, LinksTable
from console.widgets.text_view import TextView
from fabric_core.commands import Command, CommandResult
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.runtime.snapshot import Snapshot, WorkloadView
from tests.test_console_screens import shown

SIZE = (140, 44)


async def settle(pilot: Pilot[None], cond: Callable[[], bool], limit: int = 400) -> None:
    """Let the app run until ``cond`` holds (commands go out in a worker); a bound
    against hangs, not a timing assertion."""
    for _ in range(limit):
        if cond():
            return
        await pilot.pause(0.05)
    raise AssertionError("the app never got there")


def source(profile: str | None = None, ticks: int = 200) -> SteppedSource:
    src = SteppedSource(Fabric.from_scenario(load_scenario("tiny", profile=profile)))
    src.step(ticks)
    return src


async def open_form(pilot: Pilot[None], app: FabtopApp, typed: str = "") -> FaultFormScreen:
    """Press ``i`` and type ``typed`` into the target: the fault form, on top."""
    await pilot.press("i", *typed)
    form = app.screen
    assert isinstance(form, FaultFormScreen)
    return form


async def test_tab_completes_the_fault_target_then_moves_on() -> None:
    src = source()
    app = FabtopApp(src, render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot, app, "leaf00->spine0")
        target = form.query_one("#target", Input)
        await pilot.pause()
        await pilot.press("tab")
        assert target.value == "leaf00->spine00"  # the suggestion, taken
        assert app.focused is target
        await pilot.press("tab")  # nothing left to complete: the next field
        assert app.focused is not target


@pytest.mark.parametrize(
    ("typed", "completed"),
    [("leaf00:spine0", "leaf00:spine00"), ("leaf00-spine0", "leaf00-spine00")],
)
async def test_tab_completes_a_target_typed_the_shell_safe_way(typed: str, completed: str) -> None:
    """The README's ``leaf00:spine01`` form: Tab completed nothing and moved on."""
    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot, app, typed)
        target = form.query_one("#target", Input)
        await pilot.pause()
        await pilot.press("tab")
        assert target.value == completed and app.focused is target


async def test_a_colon_target_injects_on_the_link_and_the_form_says_what_it_takes() -> None:
    src = source()
    app = FabtopApp(src, render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot, app)
        params = form.query_one("#params", Input)
        assert params.disabled and "no parameters" in params.placeholder  # link_down
        await pilot.press(*"leaf00:spine01")
        form.query_one("#duration", Input).value = "2ms"
        await pilot.press("enter")
        await settle(pilot, lambda: bool(src.latest().active_faults))  # type: ignore[union-attr]
        snap = src.latest()
        assert snap is not None
        assert [(f.kind, f.target) for f in snap.active_faults] == [
            ("link_down", "leaf00->spine01")
        ]


def _keys(screen: HelpScreen) -> dict[str, str]:
    return dict(screen.app_bindings)


async def test_help_shows_keys_as_typed_and_esc() -> None:
    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        keys = _keys(help_screen)
        assert keys["+"] == "Faster" and keys["-"] == "Slower"
        assert keys["/"] == "Filter" and keys["?"] == "Help"
        listed = " ".join([*keys, *dict(help_screen.navigation)])
        for internal in ("plus", "equals_sign", "slash", "question_mark", "escape"):
            assert internal not in listed
        assert "Esc" in dict(help_screen.navigation)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_help_in_the_compare_view_lists_only_its_keys() -> None:
    left, right = source("native-400g", 50), source("roce-400g", 50)
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c")
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        keys = _keys(help_screen)
        assert keys["Esc / c"] == "Back" and keys["i"] == "Inject on both"
        assert keys["+"] == "Faster (both)" and keys["-"] == "Slower (both)"
        for main_only in ("Sort", "Reverse", "Filter", "Freeze", "Compare"):
            assert main_only not in keys.values()


async def test_compare_plus_and_minus_change_both_engines_and_show_the_speed() -> None:
    left, right = source("native-400g", 50), source("roce-400g", 50)
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        footer_keys = {k for k, b in screen.active_bindings.items() if b.binding.show and b.enabled}
        assert {"plus", "minus"} <= footer_keys  # the footer shows + and -
        assert "speed 1e-3× on both" in shown(screen.query_one("#speed-line"))
        await pilot.press("plus")
        await settle(pilot, lambda: right.engine.speed != 1e-3)
        assert left.engine.speed == right.engine.speed == 2e-3
        await pilot.press("minus")
        await settle(pilot, lambda: right.engine.speed != 2e-3)
        await pilot.press("minus")
        await settle(pilot, lambda: right.engine.speed != 1e-3)
        assert left.engine.speed == right.engine.speed == 5e-4
        screen.refresh_sides(force=True)
        await pilot.pause()
        assert "speed 5e-4× on both" in shown(screen.query_one("#speed-line"))
        for side in ("#left", "#right"):
            assert "5e-4×" in shown(screen.query_one(side))


async def test_credit_links_are_starved_and_pfc_links_paused() -> None:
    left, right = source("native-400g", 400), source("roce-400g", 400)
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        states = {
            row[1]
            for row in app.view.table_rows(
                column="util", reverse=False, limit=50, link_filter=app.link_filter
            )[0]
        }
        assert "paused" not in states
        await pilot.press("c")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        native, roce = shown(screen.query_one("#left")), shown(screen.query_one("#right"))
        assert "starved" in native and "paused" not in native.split("links", 1)[1].split("\n")[0]
        assert " paused " in roce and "starved" not in roce


async def test_the_filter_knows_starved_links_on_the_credit_fabric() -> None:
    src = source("native-400g", 400)
    # the tiny fabric's bulk flows leave a link without credit now and then: run to one
    for _ in range(100):
        snap = src.latest()
        assert snap is not None
        if snap.link_state.paused.any():
            break
        src.step(10)
    app = FabtopApp(src, render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        snap = src.latest()
        assert snap is not None and snap.link_state.paused.any()
        await pilot.press("slash", *"is:starved", "enter")
        await pilot.pause()
        names = app.query_one(LinksTable).links_shown
        assert sorted(names) == sorted(
            n for n, p in zip(snap.links.name, snap.link_state.paused, strict=True) if p
        )
        await pilot.press("slash", *"is:paused", "enter")  # PFC only: none on credit links
        await pilot.pause()
        assert app.query_one(LinksTable).links_shown == []


async def test_kpis_are_words_with_units_and_the_links_title_reads() -> None:
    app = FabtopApp(source(), render_interval_s=0.05, metrics_address="on the server")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        kpis = app.latency_panel.query_one("#kpis").render()
        text = str(kpis)
        assert "goodput" in text and "_" not in text.replace("moe_", "")
        assert "e+0" not in text
        assert app.links_box.border_title == "Links: all 24 · by util"
        assert "metrics on the server" in str(app.header_bar.render())


@pytest.mark.parametrize("size", [(120, 40), (200, 60), (240, 70)])
async def test_the_layout_uses_the_terminal(size: tuple[int, int]) -> None:
    """Issue 16 item 13: panels take the room they need at 120x40, 200x60 and 240x70."""
    left, right = source("native-400g"), source("roce-400g")
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=0.05)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        width, height = size
        assert "running" in str(app.header_bar.render())[:40]  # the state is never cut off
        table = app.query_one(LinksTable)
        used = sum(col.get_render_width(table) for col in table.columns.values())
        assert used >= min(0.85 * width, 2 * sum(WIDTHS.values()))
        faults = app.query_one("#faults-box")
        events = app.query_one("#events-box")
        # the faults' whole timeline from 120 columns on; the events take the rest
        assert faults.outer_size.width == PANEL_WIDTH
        assert events.outer_size.width == width - PANEL_WIDTH
        panel = app.query_one(FaultsPanel)
        used = sum(col.get_render_width(panel) for col in panel.columns.values())
        assert used <= panel.size.width
        app.open_link("leaf00->spine01")
        await pilot.pause()
        app.refresh_view(force=True)  # draw the detail now (not on the timer's schedule)
        await pilot.pause()
        spark = app.screen.query_one("#credit-spark")
        # the sparklines share the height left over (3 rows at least)
        assert spark.size.height >= 3
        if height >= 60:  # a tall terminal gets taller sparklines (it had 3 rows and blank)
            assert spark.size.height >= spark_rows(height, 12, 4) > 3
        await pilot.press("escape", "c")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        timelines = screen.query_one("#faults-both")
        assert timelines.size.height >= 5 and timelines.region.bottom >= height - 3


async def test_a_quick_double_enter_injects_one_fault_and_closes_the_form_once() -> None:
    """The second Enter came while the first command was on its way: it injected a second
    fault, and the form was dismissed twice, which ended the console with a
    ScreenStackError."""
    src = source()
    applied = src.submit

    async def on_its_way(command: Command) -> CommandResult:  # as an engine process answers
        await asyncio.sleep(0.3)
        return await applied(command)

    src.submit = on_its_way  # type: ignore[method-assign]
    app = FabtopApp(src, render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot, app, "leaf00->spine01")
        target = form.query_one("#target", Input)
        # two Enters before the first is handled (the pilot waits between key presses)
        await target.action_submit()
        await target.action_submit()
        await settle(pilot, lambda: not isinstance(app.screen, FaultFormScreen))
        await pilot.pause(0.2)
        snap = src.latest()
        assert snap is not None
        assert [(f.kind, f.target) for f in snap.active_faults] == [
            ("link_down", "leaf00->spine01")
        ]
        assert app.is_running


async def test_ctrl_c_quits_as_in_any_terminal_program_but_copies_in_a_field() -> None:
    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await open_form(pilot, app, "leaf00")  # a field has the focus: ctrl+c is its copy
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.is_running
        await pilot.press("escape", "ctrl+c")  # the main view
        await pilot.pause()
        assert not app.is_running


async def test_tab_completes_a_gpu_kinds_target_to_a_gpu_not_a_link() -> None:
    from textual.widgets import Select

    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot, app)
        form.query_one("#kind", Select).value = "pfc_storm"  # targets a GPU
        await pilot.pause()
        target = form.query_one("#target", Input)
        target.focus()
        await pilot.press(*"gpu0001")
        await pilot.pause()
        await pilot.press("tab")  # nothing of the GPU's sort to complete: the next field
        assert target.value == "gpu0001"
        assert app.focused is not target


async def test_the_links_table_fits_a_100_column_terminal() -> None:
    """At 100 columns the table was wider than its box: the last column's header showed and
    its right-aligned figures were past the edge. The link names give up room first."""
    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.3)
        table = app.query_one(LinksTable)
        used = sum(col.get_render_width(table) for col in table.columns.values())
        assert used <= table.size.width
        assert table.columns[ColumnKey("link")].width >= MIN_LINK_WIDTH


@pytest.mark.parametrize("size", [(80, 24), (140, 44)])
async def test_every_panel_keeps_rows_on_the_terminal(size: tuple[int, int]) -> None:
    """At 80x24 the faults and events fell off the bottom of the screen."""
    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.3)
        rows = size[1]
        for box in ("#faults-box", "#events-box", "#links-box", "#map-box"):
            region = app.query_one(box).region
            assert region.height >= 3 and region.bottom <= rows - 1, (box, region)


async def test_a_dialog_takes_the_main_views_keys_out_of_play() -> None:
    """The fault form over the compare view listed f, s, r and / in its footer, and s
    pressed on its buttons sorted the main table hidden behind both."""
    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        assert app.check_action("cycle_sort", ())
        await open_form(pilot, app)
        for action in app.MAIN_VIEW_ACTIONS:
            assert not app.check_action(action, ()), action
        # (session 42: the others too, which its footer listed and which did nothing there)
        for action in ("help", "toggle_pause", "inject", "clear_all", "quit"):
            assert not app.check_action(action, ()), action
        await pilot.press("escape")
        await pilot.pause()
        assert app.check_action("cycle_sort", ())


class MeasuredSource(SteppedSource):
    """A stepped fabric whose snapshots say a measured speed, as a running engine's do."""

    measured = 1.2e-3

    def publish(self) -> Snapshot:
        self._latest = replace(super().publish(), measured_speed=self.measured)
        return self._latest


def header_line(app: FabtopApp) -> str:
    """The header as the terminal shows it (its one line, cut at the terminal's width)."""
    return app.header_bar.render_line(0).text


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
async def test_the_header_shows_the_cluster_and_profile_at_80_columns(
    size: tuple[int, int],
) -> None:
    """At 80 columns the header cut its end, where the cluster and profile names are: it
    now leaves out what an operator needs least to keep them; at 200 it leaves out nothing."""
    src = MeasuredSource(
        Fabric.from_scenario(load_scenario("tiny")), description="engine process default"
    )
    src.step(200)
    app = FabtopApp(src, render_interval_s=0.05, metrics_address="127.0.0.1:9464", read_only=True)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        shown_now = header_line(app)
        # (at 80 columns read-only leaves no room for the speed's label whatever the time)
        needed = ["▶ running", "faults 0", "sim 200 µs", "1e-3×", "tiny", "native-400g"]
        for part in [*needed, "read-only"]:
            assert part in shown_now, (part, shown_now)
        assert "…" not in shown_now  # nothing cut
        rest = [
            "fabtop",
            "tick 1 µs",
            "(now 1.2e-3×)",
            "native lossless (credit)",
            "metrics 127.0.0.1:9464",
            "engine process default",
        ]
        for part in rest:
            assert (part in shown_now) == (size[0] == 200), (part, shown_now)
        await pilot.resize_terminal(200 + 80 - size[0], size[1])  # the other width
        await pilot.pause()
        resized = header_line(app)
        for part in needed:
            assert part in resized, (part, resized)
        for part in rest:
            assert (part in resized) == (size[0] == 80), (part, resized)


class ClockSource(SteppedSource):
    """A stepped fabric whose snapshots say the cluster and simulated time it is told."""

    cluster = "demo"
    sim_time_s = 0.0

    def publish(self) -> Snapshot:
        snap = super().publish()
        self._latest = replace(snap, cluster=self.cluster, sim_time_s=self.sim_time_s)
        return self._latest


@pytest.mark.parametrize("frozen", [False, True])
async def test_read_only_stays_in_the_header_at_80_columns_whatever_the_time(
    frozen: bool,
) -> None:
    """At 80 columns the header's end, read-only, was cut at ``sim 88.2 ms`` and shown at
    ``sim 233 ms``: the width of the simulated time decided whether the operator was told
    their keys do not change the fabric. It now leaves other things out first, the same
    ones whatever the time says."""
    src = ClockSource(Fabric.from_scenario(load_scenario("tiny")), speed=1e-2)
    app = FabtopApp(src, render_interval_s=0.05, metrics_address="127.0.0.1:9464", read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        if frozen:
            await pilot.press("f")
        labelled: set[bool] = set()
        for sim_time in (0.0, 15e-6, 88.2e-3, 233e-3, 1.23, 123.0):
            src.sim_time_s = sim_time
            src.step(1)
            if frozen:  # (a frozen view redraws the snapshot it holds)
                app.view.ingest(src.latest(), [])
            app.refresh_view(force=True)
            await pilot.pause()
            line = header_line(app).rstrip()
            assert line.endswith("│ read-only"), line
            for part in ("frozen view" if frozen else "running", "demo", "native-400g"):
                assert part in line, (part, line)
            assert "…" not in line, line
            labelled.add("speed" in line)
        assert len(labelled) == 1  # the speed's label neither comes nor goes


async def test_a_long_cluster_name_is_cut_before_read_only() -> None:
    """Past the last step of compaction the header kept its start and the terminal cut its
    end, read-only first; now a long cluster name is cut short, then what comes before
    read-only."""
    src = ClockSource(Fabric.from_scenario(load_scenario("tiny")))
    src.cluster = "training-cluster-eu-west-rack-17"
    src.sim_time_s = 88.2e-3
    app = FabtopApp(src, render_interval_s=0.05, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        src.step(1)
        app.refresh_view(force=True)
        await pilot.pause()
        line = header_line(app).rstrip()
        assert line.endswith("│ read-only"), line
        assert "training…" in line and "sim 88.2 ms" in line, line


def speed_row(screen: CompareScreen, side: str) -> str:
    """The ``speed`` row of a side of the compare view, as shown."""
    return next(line for line in shown(screen.query_one(side)).splitlines() if "speed" in line)


async def test_compare_measures_both_sides_speeds_over_the_same_window() -> None:
    """Each side showed its engine's own measured speed, smoothed over its own batches
    ("now 1.2e-2×" native beside "now 8.1e-3×" RoCE while the two ran in lockstep): the
    compare view now measures both over the same wall seconds."""
    left, right = (
        MeasuredSource(Fabric.from_scenario(load_scenario("tiny", profile=p)))
        for p in ("native-400g", "roce-400g")
    )
    left.measured, right.measured = 1.2e-2, 8.1e-3  # what each engine would say
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        wall = [1000.0]
        screen.measured.clock = lambda: wall[0]  # the wall clock, by hand
        for _ in range(5):  # 20 µs of simulated time a wall second, on both: 2e-5×
            left.step(10)
            right.step(10)
            wall[0] += 0.5
            screen.refresh_sides()
        await pilot.pause()
        for side in ("#left", "#right"):
            assert speed_row(screen, side).split()[1:] == ["1e-3×", "·", "now", "2e-5×"], side
        line = shown(screen.query_one("#speed-line"))
        assert "now 2e-5× native-400g · 2e-5× roce-400g, both over the last 2.0 s" in line
        everything = "".join(shown(screen.query_one(s)) for s in ("#left", "#right"))
        assert "1.2e-2" not in everything + line and "8.1e-3" not in everything + line
        # the RoCE engine falls behind: its side says so, over the same window
        for _ in range(5):
            left.step(10)
            right.step(5)
            wall[0] += 0.5
            screen.refresh_sides()
        await pilot.pause()
        assert "· now 2e-5×" in speed_row(screen, "#left")
        assert "· now 1e-5×" in speed_row(screen, "#right")
        await pilot.press("p")  # paused: nothing is measured
        await settle(pilot, lambda: not right.engine.running)
        screen.refresh_sides(force=True)
        await pilot.pause()
        assert "now" not in speed_row(screen, "#left") + shown(screen.query_one("#speed-line"))


async def test_the_form_suggests_a_target_of_the_kinds_sort_and_forgets_the_last_kinds_error() -> (
    None
):
    """A GPU fault's unknown target was offered 'spine00'; the error of the kind before a
    change of kind stayed on the form."""
    from textual.widgets import Select, Static

    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot, app)
        form.query_one("#kind", Select).value = "pfc_storm"
        await pilot.pause()
        form.query_one("#target", Input).value = "spine0"
        await pilot.press("enter")
        await pilot.pause()
        error = form.query_one("#error", Static)
        said = str(error.render())
        assert "unknown gpu 'spine0'" in said and "spine00" not in said
        form.query_one("#kind", Select).value = "link_down"
        await pilot.pause()
        assert str(error.render()) == ""


def test_a_workloads_kpis_go_on_under_its_name_where_the_panel_is_narrow() -> None:
    """At 120 columns every KPI line ended in "…": the goodput, the last incast and the
    messages sent were cut off."""
    kpis = {"latency_p50_seconds": 3.1e-6, "latency_p99_seconds": 8.7e-6, "messages_sent": 9e4}
    workloads = {"probe": WorkloadView("probe", "rpc", "rpc", kpis, {})}
    assert kpi_lines(workloads).plain.count("\n") == 0  # no width: one line
    lines = kpi_lines(workloads, 56).plain.rstrip().splitlines()
    assert [line.strip().split("  ")[0] for line in lines] == [
        "probe (rpc) latency p50 3.1 µs",
        "messages sent 90,000",
    ]
    assert all(len(line.rstrip()) <= 56 for line in lines)
    assert lines[1].startswith(" " * KPI_INDENT + "messages sent")
    assert len(kpi_lines(workloads, 56, rows=2).plain.splitlines()) == 2
    # no room for a second line: it goes on, to be cut at the panel's edge
    assert kpi_lines(workloads, 56, rows=1).plain == kpi_lines(workloads).plain
    assert not kpi_lines(workloads).plain.endswith(" ")  # (a space past the edge cut it too)


async def test_no_kpi_is_cut_off_at_120_columns() -> None:
    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        kpis = app.latency_panel.query_one("#kpis", TextView)
        await settle(pilot, lambda: "\n  messages sent" in kpis.text.plain)
        lines = kpis.text.plain.splitlines()
        assert all(len(line.rstrip()) <= kpis.size.width for line in lines), lines
        await pilot.resize_terminal(240, 40)  # room again: one line a workload
        await settle(pilot, lambda: "\n  " not in kpis.text.plain)


async def test_at_80_columns_every_class_shows_its_three_latencies() -> None:
    """At 80x24 the latency panel holds 38 characters a class, and the line with labels
    (47) was cut in p99.9's label. Narrower than a line and a sparkline, the panel drops
    the labels and its title names the figures; wider, the labels come back."""
    from console.widgets.latency_panel import COMPACT_TITLE, COMPACT_WIDTH, TITLE, ClassRow

    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.latency_panel

        def lines() -> list[str]:
            return [row.query_one("#figures", TextView).text.plain for row in panel.query(ClassRow)]

        await settle(pilot, lambda: len(lines()) >= 3 and all("µs" in line for line in lines()))
        assert panel.border_title == COMPACT_TITLE
        for row, line in zip(panel.query(ClassRow), lines(), strict=True):
            assert len(line) <= COMPACT_WIDTH <= row.query_one(TextView).size.width, line
            assert "p99" not in line and sum(line.count(u) for u in ("µs", "ms", " s")) == 3
        await pilot.resize_terminal(140, 40)
        await settle(pilot, lambda: all("p99.9" in line for line in lines()))
        assert panel.border_title == TITLE


async def test_tab_and_shift_tab_reach_every_field_of_the_fault_form() -> None:
    """Tab stopped at the duration and Shift+Tab at the target: under a dialog the app
    refused its own actions, Textual's focus_next among them, so the kind and the buttons
    could not be reached, nor a GPU or storage fault injected, from the keyboard."""
    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await open_form(pilot, app)
        reached: list[str | None] = []
        for key in ["tab"] * 5 + ["shift+tab"] * 5:
            await pilot.press(key)
            await pilot.pause()
            assert app.focused is not None
            reached.append(app.focused.id)
        forward = ["duration", "inject", "cancel", None, "kind"]  # (None: the form's scroll)
        assert reached == [*forward, None, "cancel", "inject", "duration", "target"]


async def test_the_help_fits_an_80_column_terminal() -> None:
    """Its box kept the 90 columns it has on a wider terminal: at 80 its right border was
    off screen and every long line ended mid-word."""
    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        box = app.screen.query_one(VerticalScroll)
        assert box.region.right <= 80 and box.region.x >= 0


async def test_the_compare_view_scrolls_to_its_difference_and_timelines_on_a_short_terminal() -> (
    None
):
    """At 100x30 the difference and both fault timelines were below the last row, and no
    key brought them up."""
    left, right = source("native-400g"), source("roce-400g")
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        timelines = app.screen.query_one("#faults-both")
        await settle(pilot, lambda: timelines.region.bottom > 30)  # (the case: below the fold)
        await pilot.press("end")
        await settle(pilot, lambda: timelines.region.bottom <= 29)
        assert app.screen.query_one("#delta").region.y >= 0
