"""The links table as an operator uses it: sort, filter, and a cursor that stays on its link.

The snapshots here are hand-built (``tests.console_synthetic``) so that the test
chooses which link is hottest; the keys are pressed through Pilot.
"""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from console.app import FabtopApp
from console.linkview import COLUMNS
from console.widgets.links_table import LinksTable
from tests.console_synthetic import StubSource, snapshot, tables
from tests.helpers import settle

SIZE = (130, 42)
BASE = tables()


def app_for(source: StubSource, **kw: object) -> FabtopApp:
    return FabtopApp(source, render_interval_s=0.05, **kw)  # type: ignore[arg-type]


def evenly_loaded_app() -> FabtopApp:
    """Every link at half its rate: the order is the links' own, the filter's to cut."""
    return app_for(StubSource(snapshot(utilisation=[0.5] * 8, base=BASE)))


async def type_filter(pilot: Pilot[Any], text: str) -> None:
    """Open the filter line, type ``text`` and apply it."""
    await pilot.press("slash", *text, "enter")
    await pilot.pause()


def util(app: FabtopApp, link: str) -> float:
    snap = app.view.snapshot
    assert snap is not None
    return float(snap.link_state.utilisation[snap.links.index[link]])


async def test_sort_keys_change_the_order() -> None:
    src = StubSource(snapshot(utilisation=[0.1, 0.9, 0.5, 0.3], base=BASE))
    app = app_for(src)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.query_one(LinksTable)
        shown = table.links_shown
        assert shown[:3] == [BASE[1].name[i] for i in (1, 2, 3)]  # hottest first
        await pilot.press("r")  # coolest first
        await pilot.pause()
        assert util(app, table.links_shown[0]) == 0.0
        while app.sort_column != "link":
            await pilot.press("s")
        await pilot.pause()
        assert table.links_shown == sorted(table.links_shown)
        assert table.links_shown != shown


async def test_filter_keeps_matching_links_and_refuses_bad_ones() -> None:
    app = evenly_loaded_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.query_one(LinksTable)
        await type_filter(pilot, "leaf01")
        assert table.links_shown, "the filter should keep leaf01's ports"
        assert all("leaf01" in name for name in table.links_shown)
        assert len(table.links_shown) == 12  # 4 GPUs + 2 spines, both directions
        await type_filter(pilot, "is:bogus")
        assert app.link_filter.text == "leaf01"  # the bad filter was not applied
        assert any("unknown state 'bogus'" in n.message for n in app._notifications)
        # Esc closes the line and leaves the filter as it was (README); an empty line and
        # Enter shows every link again
        await pilot.press("escape")
        await pilot.press("slash", "backspace", "backspace", "escape")
        await pilot.pause()
        assert app.link_filter.text == "leaf01" and len(table.links_shown) == 12
        await pilot.press("slash", *["backspace"] * 8, "enter")
        await pilot.pause()
        assert app.link_filter.text == "" and len(table.links_shown) > 12


async def test_cursor_stays_on_its_link_when_rows_move() -> None:
    src = StubSource(snapshot(utilisation=[0.9, 0.8, 0.7, 0.6], base=BASE))
    app = app_for(src)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.query_one(LinksTable)
        await pilot.press("down", "down")
        link = table.cursor_link
        assert link == BASE[1].name[2]
        # The link under the cursor becomes the hottest: its row moves to the top.
        src.set(snapshot(tick=2, utilisation=[0.9, 0.8, 0.99, 0.6], base=BASE))
        await settle(pilot, lambda: table.links_shown[0] == link)  # the next refresh
        assert table.cursor_link == link
        assert table.cursor_row == 0


async def test_rows_update_in_place_without_rebuilding() -> None:
    src = StubSource(snapshot(utilisation=[0.9, 0.8], base=BASE))
    app = app_for(src)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.query_one(LinksTable)
        name = BASE[1].name[0]
        row_key_before = table.rows.get(name)  # type: ignore[call-overload]
        src.set(snapshot(tick=2, utilisation=[0.95, 0.8], base=BASE))
        await settle(pilot, lambda: table.get_row(name)[2].plain == "95.0%")
        assert table.rows.get(name) is row_key_before  # type: ignore[call-overload]


async def test_cursor_on_the_top_row_watches_the_hottest_link() -> None:
    src = StubSource(snapshot(utilisation=[0.9, 0.8], base=BASE))
    app = app_for(src)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.query_one(LinksTable)
        assert table.cursor_link == BASE[1].name[0]
        src.set(snapshot(tick=2, utilisation=[0.1, 0.8], base=BASE))
        await settle(pilot, lambda: table.links_shown[0] == BASE[1].name[1])  # re-sorted
        assert table.cursor_row == 0
        assert table.cursor_link == BASE[1].name[1]  # the new hottest, not the old one


async def test_the_sort_arrow_moves_on_an_empty_table_too() -> None:
    """A filter that matched nothing kept the header's arrow on the column sorted by
    before (its drawn line was cached until a row changed), under a title saying another."""
    app = evenly_loaded_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.query_one(LinksTable)
        await type_filter(pilot, "is:down")
        assert table.row_count == 0
        for _ in range(3):
            await pilot.press("s")
            await pilot.pause()
        drawn = "".join(segment.text for segment in table.render_line(0))
        sorted_by = COLUMNS[table.sort_column][0]
        assert f"{sorted_by} ▼" in drawn or f"{sorted_by} ▲" in drawn, drawn
        assert drawn.count("▼") + drawn.count("▲") == 1, drawn


def test_every_columns_header_has_room_for_the_sort_arrow() -> None:
    """Sorted by pauses/s or drops b/s, the header's arrow was cut off: "pauses/s ▼" is 10
    characters, and the column was 9."""
    from console.linkview import WIDTHS

    for key, (label, _) in COLUMNS.items():
        assert len(f"{label} ▼") <= WIDTHS[key], key
