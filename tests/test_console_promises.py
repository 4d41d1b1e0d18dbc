"""Console promises of the README, by key presses on the seeded ``tiny`` fabric (stepped by
hand, so the state is deterministic): a switch goes down only on the second press,
``--read-only`` disables ``x``, ``+``/``-`` and the palette's commands that change the
fabric, and the compare view's difference row shows the two sides' values and their
ratio, red where the right side is worse."""

from __future__ import annotations

import math

from rich.table import Table
from rich.text import Text
from textual.command import CommandInput, CommandList
from textual.widgets import Input, Select, Static

from console.app import FabtopApp
from console.fmt import fmt_bitrate, fmt_seconds
from console.screens.compare import CompareScreen
from console.screens.confirm import ConfirmScreen
from console.screens.fault_form import FaultFormScreen
from fabric_core.commands import InjectFault
from tests.helpers import settle
from tests.test_console_operator import SIZE, source


def _error(form: FaultFormScreen) -> str:
    return str(form.query_one("#error", Static).render())


async def test_switch_down_needs_a_second_press_on_the_same_switch() -> None:
    src = source()
    app = FabtopApp(src, render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("i")
        form = app.screen
        assert isinstance(form, FaultFormScreen)
        form.query_one("#kind", Select).value = "switch_down"
        form.query_one("#target", Input).value = "spine00"
        await pilot.press("enter")
        await pilot.pause()
        # the first press only warns
        assert "takes spine00 and all its links down" in _error(form)
        assert "press Inject again" in _error(form)
        still_open = app.screen is form
        assert still_open
        assert src.latest().faults == ()  # type: ignore[union-attr]
        # another switch: the confirmation was for spine00, so it warns again
        form.query_one("#target", Input).value = "spine01"
        await pilot.press("enter")
        await pilot.pause()
        assert "takes spine01 and all its links down" in _error(form)
        assert src.latest().faults == ()  # type: ignore[union-attr]
        # the second press on the same switch injects and closes the form
        await pilot.press("enter")
        await settle(pilot, lambda: bool(src.latest().active_faults))  # type: ignore[union-attr]
        snap = src.latest()
        assert snap is not None
        assert [(f.kind, f.target) for f in snap.active_faults] == [("switch_down", "spine01")]
        await settle(pilot, lambda: not isinstance(app.screen, FaultFormScreen))


async def test_a_link_fault_needs_no_confirmation() -> None:
    src = source()
    app = FabtopApp(src, render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("i", *"leaf00->spine01", "enter")
        await settle(pilot, lambda: bool(src.latest().active_faults))  # type: ignore[union-attr]


async def test_read_only_disables_clear_and_speed_keys() -> None:
    src = source()
    assert src.engine.apply(InjectFault(kind="link_down", target="leaf00->spine01")).ok
    src.step(5)
    speed = src.latest().target_speed  # type: ignore[union-attr]
    app = FabtopApp(src, render_interval_s=0.05, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("x")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)  # not even asked
        await pilot.press("plus", "minus", "minus")
        await pilot.pause()
        snap = src.latest()
        assert snap is not None
        assert [f.target for f in snap.active_faults] == ["leaf00->spine01"]
        assert snap.target_speed == speed
        # nor does the footer offer them (it listed keys that only said they were disabled)
        shown = {b.binding.action for b in app.active_bindings.values() if b.enabled}
        assert shown.isdisjoint({"clear_all", "speed(2.0)", "speed(0.5)", "speed"})


async def _palette_prompts(app: FabtopApp, query: str, last: str) -> list[str]:
    """The commands the palette offers for ``query``, once it offers ``last`` (the
    provider's last kind of hit for it: the search streams its hits)."""
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause()
        app.screen.query_one(CommandInput).value = query
        listing = app.screen.query_one(CommandList)

        def prompts() -> list[str]:
            return [str(listing.get_option_at_index(i).prompt) for i in range(listing.option_count)]

        await settle(pilot, lambda: any(last in p for p in prompts()))
        await pilot.pause()
        return prompts()


async def test_read_only_palette_offers_nothing_that_changes_the_fabric() -> None:
    writable = await _palette_prompts(
        FabtopApp(source(), render_interval_s=0.05), "spine01", "Show ports of spine01"
    )
    assert any("Inject" in p for p in writable)  # the control: the same query offers it
    src = source()
    assert src.engine.apply(InjectFault(kind="link_down", target="leaf00->spine01")).ok
    src.step(5)
    app = FabtopApp(src, render_interval_s=0.05, read_only=True)
    read_only = await _palette_prompts(app, "spine01", "Show ports of spine01")
    for word in ("Inject", "Clear", "Pause", "Resume"):
        assert not any(word in p for p in read_only), (word, read_only)
    assert any("Open link" in p for p in read_only)  # it still offers what only looks


def _column_cells(table: Table) -> list[list[object]]:
    """The table's rows, cell by cell."""
    columns = [list(c.cells) for c in table.columns]
    return [list(row) for row in zip(*columns, strict=True)]


async def test_compare_difference_row_shows_both_values_and_red_where_worse() -> None:
    left, right = source("native-400g"), source("roce-400g")
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        await settle(pilot, lambda: all(v.latency for v in screen.views))
        delta = screen.query_one("#delta", Static).content
        assert isinstance(delta, Table)
        rows = {str(r[0]): r for r in _column_cells(delta)}
        native, roce = screen.views
        assert set(native.latency) <= set(rows)
        checked = 0
        for cls, lat_a in native.latency.items():
            lat_b = roce.latency[cls]
            _, p50a, p50b, r50, p99a, p99b, r99 = rows[cls]
            shown = [str(c) for c in (p50a, p50b, p99a, p99b)]
            assert shown == [
                fmt_seconds(v) for v in (lat_a.p50_s, lat_b.p50_s, lat_a.p99_s, lat_b.p99_s)
            ]
            for cell, a, b in ((r50, lat_a.p50_s, lat_b.p50_s), (r99, lat_a.p99_s, lat_b.p99_s)):
                assert isinstance(cell, Text)
                if lat_a.stalled or lat_b.stalled:
                    assert cell.plain == "none done"
                    continue
                if not (math.isfinite(a) and math.isfinite(b)) or a <= 0:
                    assert cell.plain == "—"
                    continue
                assert cell.plain == f"×{b / a:.2f}"
                # a higher latency on the right is worse: red past 5 %, green below -5 %
                assert ("red" in str(cell.style)) == (b > 1.05 * a), (cls, a, b, cell.style)
                assert ("green" in str(cell.style)) == (b < 0.95 * a), (cls, a, b, cell.style)
                checked += 1
        # the colour rule held on real figures (which side is worse is the model's business)
        assert checked >= 2
        # throughput: more is better, so less on the right is red
        thr = rows["throughput"]
        ta, tb = (v.snapshot.totals.throughput_Bps for v in (native, roce))  # type: ignore[union-attr]
        assert (thr[4], thr[5]) == (fmt_bitrate(ta), fmt_bitrate(tb))
        assert isinstance(thr[6], Text) and thr[6].plain == f"×{tb / ta:.2f}"
        assert ("red" in str(thr[6].style)) == (tb < 0.95 * ta)
