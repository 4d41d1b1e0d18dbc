"""The console's whole-array work on a fabric large enough for its sampled paths (tens of
thousands of links), against plain references: the same top-N rows in the same order,
the same severities and rates; and the links table's kept cell drawings against
``DataTable``'s own, as rows move, enter, leave and change."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from textual.widgets import DataTable

from console.app import FabtopApp
from console.linkview import (
    BUSY_UTILISATION,
    COLUMNS,
    DEGRADED,
    DOWN,
    HOT_UTILISATION,
    SAMPLED_ABOVE,
    STARVED,
    LinkRates,
    RateTracker,
    link_severity,
    node_severity,
    sort_values,
    top_links,
)
from console.widgets.links_table import LinksTable
from fabric_core.runtime.snapshot import LinkStatus, Snapshot
from tests.console_synthetic import StubSource, snapshot, tables

# 2 x (64 x 160 + 64 x 16) = 22,528 directed links: above SAMPLED_ABOVE
BIG = tables(leaves=64, spines=16, gpus_per_leaf=160)


def fabric(seed: int, tick: int) -> Snapshot:
    """A large snapshot with ties (utilisation on a coarse grid, most links idle), a few
    faults, paused links, NaN and counters that grow between ticks."""
    rng = np.random.default_rng(seed)
    n = len(BIG[1])
    util = np.where(rng.random(n) < 0.7, 0.0, rng.choice([0.5, 0.72, 0.96, 0.99], n))
    util[rng.integers(0, n, 5)] = np.nan
    snap = snapshot(tick=tick, utilisation=util.tolist(), base=BIG)
    ls = snap.link_state
    status = ls.status.copy()
    status[rng.integers(0, n, 7)] = LinkStatus.DOWN
    status[rng.integers(0, n, 5)] = LinkStatus.DEGRADED
    paused = rng.random(n) < 0.01
    grow = np.random.default_rng(seed).random(n) < 0.05  # the same links every tick
    counters = {
        name: np.where(grow, np.floor(rng.random(n) * 1e3) * tick, 0.0)
        for name in (
            "pause_frames_total",
            "ecn_marked_packets_total",
            "discards_bytes_total",
            "retransmitted_bytes_total",
        )
    }
    return replace(snap, link_state=replace(ls, status=status, paused=paused, **counters))


def reference_top(
    snap: Snapshot, rates: LinkRates, column: str, reverse: bool, limit: int, keep: object
) -> list[int]:
    """The top-N as a stable sort of every candidate link would give it."""
    values = sort_values(snap, rates, column)
    if column == "util":
        values = np.round(values * 100.0)
    elif column not in ("state", "link"):
        magnitude = np.log1p(np.abs(np.nan_to_num(values)))
        values = np.sign(values) * np.round(magnitude * 10.0)
    if reverse:
        values = -values
    faulted = snap.link_state.status != LinkStatus.UP
    if faulted.any():
        finite = np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)
        values = np.where(faulted, finite + 2 * (np.abs(finite).max() + 1.0), finite)
    candidates = np.arange(len(values)) if keep is None else np.flatnonzero(keep)
    order = np.lexsort((candidates, -values[candidates]))
    return candidates[order][:limit].tolist()


@pytest.fixture(scope="module")
def pair() -> tuple[Snapshot, LinkRates]:
    tracker = RateTracker()
    tracker.update(fabric(1, tick=1))
    snap = fabric(1, tick=2)
    return snap, tracker.update(snap)


def test_the_fabric_is_large_enough_for_the_sampled_path(pair: tuple[Snapshot, LinkRates]) -> None:
    assert len(pair[0].links) > SAMPLED_ABOVE


@pytest.mark.parametrize("column", list(COLUMNS))
@pytest.mark.parametrize("reverse", [False, True])
def test_top_links_are_a_stable_sort_of_all(
    pair: tuple[Snapshot, LinkRates], column: str, reverse: bool
) -> None:
    snap, rates = pair
    n = len(snap.links)
    rng = np.random.default_rng(7)
    for keep in (None, rng.random(n) < 0.95, rng.random(n) < 0.2, np.zeros(n, dtype=bool)):
        for limit in (1, 50, 300):
            got = top_links(snap, rates, column=column, reverse=reverse, limit=limit, keep=keep)
            want = reference_top(snap, rates, column, reverse, limit, keep)
            assert got.tolist() == want, (column, reverse, limit)


def test_ties_fill_the_top_in_link_order(pair: tuple[Snapshot, LinkRates]) -> None:
    snap, rates = pair
    idle = replace(
        snap,
        link_state=replace(
            snap.link_state,
            status=np.zeros(len(snap.links), dtype=np.int8),
            utilisation=np.zeros(len(snap.links)),
        ),
    )
    assert top_links(idle, rates, column="util", limit=5).tolist() == [0, 1, 2, 3, 4]
    assert top_links(idle, LinkRates.zeros(len(idle.links)), column="ecn", limit=3).tolist() == [
        0,
        1,
        2,
    ]


def test_severities_follow_the_rules(pair: tuple[Snapshot, LinkRates]) -> None:
    snap, _ = pair
    ls = snap.link_state
    want = np.zeros(len(snap.links), dtype=np.int8)
    want[ls.utilisation >= BUSY_UTILISATION] = 1
    want[ls.utilisation >= HOT_UTILISATION] = 2
    want[ls.paused] = STARVED
    want[ls.status == LinkStatus.DEGRADED] = DEGRADED
    want[ls.status == LinkStatus.DOWN] = DOWN
    got = link_severity(snap)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, want)
    nodes = np.zeros(len(snap.nodes), dtype=np.int8)
    np.maximum.at(nodes, snap.links.src, want)
    np.maximum.at(nodes, snap.links.dst, want)
    np.testing.assert_array_equal(node_severity(snap, got), nodes)


def test_rates_of_a_few_rows_equal_the_whole_arrays(pair: tuple[Snapshot, LinkRates]) -> None:
    snap, rates = pair
    before = fabric(1, tick=1).link_state
    dt = snap.sim_time_s - 1e-6
    idx = np.array([0, 5, 17, len(snap.links) - 1])
    fresh = RateTracker()
    fresh.update(fabric(1, tick=1))
    lazy = fresh.update(snap)
    for field, counter in (
        ("pauses_per_s", "pause_frames_total"),
        ("ecn_per_s", "ecn_marked_packets_total"),
        ("drops_Bps", "discards_bytes_total"),
        ("retrans_Bps", "retransmitted_bytes_total"),
    ):
        whole = (getattr(snap.link_state, counter) - getattr(before, counter)) / dt
        np.testing.assert_array_equal(lazy.at(field, idx), whole[idx])  # before the whole
        np.testing.assert_array_equal(getattr(rates, field), whole)
        np.testing.assert_array_equal(rates.at(field, idx), whole[idx])  # after it
    assert LinkRates.zeros(4).at("ecn_per_s", idx[:2]).tolist() == [0.0, 0.0]


async def test_kept_cell_drawings_are_the_tables_own() -> None:
    """Every cell the links table draws from what it kept equals DataTable's drawing:
    text, style and mouse metadata, while rows move, enter, leave, change and the
    cursor moves."""
    base = tables(leaves=4, spines=4, gpus_per_leaf=8)
    n = len(base[1])
    rng = np.random.default_rng(3)
    src = StubSource(snapshot(utilisation=rng.random(n).tolist(), base=base))
    app = FabtopApp(src, render_interval_s=0.05, table_rows=20)  # type: ignore[arg-type]
    checked = {"cells": 0, "kept": 0}
    own = LinksTable._render_cell

    def compare(self, r, c, style, width, cursor=False, hover=False):  # type: ignore[no-untyped-def]
        slot = (self._row_locations.get_key(r), self._column_locations.get_key(c))
        kept = (
            r >= 0 and slot in self._drawn and self._drawn[slot][0] is self._data[slot[0]][slot[1]]
        )
        got = own(self, r, c, style, width, cursor, hover)
        want = DataTable._render_cell(self, r, c, style, width, cursor, hover)
        assert [[(s.text, s.style, s.control) for s in line] for line in got] == [
            [(s.text, s.style, s.control) for s in line] for line in want
        ]
        assert [[s.style and s.style.meta for s in line] for line in got] == [
            [s.style and s.style.meta for s in line] for line in want
        ]
        checked["cells"] += 1
        checked["kept"] += kept
        return got

    LinksTable._render_cell = compare  # type: ignore[method-assign]
    try:
        async with app.run_test(size=(130, 42)) as pilot:
            await pilot.pause()
            for step in range(12):
                # small moves keep most rows, some swap places, a few enter and leave
                util = np.clip(src.snap.link_state.utilisation + rng.normal(0, 0.03, n), 0, 1)
                src.set(snapshot(tick=step + 2, utilisation=util.tolist(), base=base))
                if step % 3 == 1:
                    await pilot.press("down", "down", "down")
                app.refresh_view()
                await pilot.pause()
    finally:
        LinksTable._render_cell = own  # type: ignore[method-assign]
    assert checked["cells"] > 500
    assert checked["kept"] > 100  # the kept drawings were used, and checked


async def test_kept_lines_are_the_tables_own() -> None:
    """Every line of the links table, as kept from paint to paint, equals the line drawn
    afresh and ``DataTable``'s own line of that row (segments, styles, mouse metadata),
    while rows move, enter, leave, change and the cursor moves."""
    base = tables(leaves=4, spines=4, gpus_per_leaf=8)
    n = len(base[1])
    rng = np.random.default_rng(5)
    src = StubSource(snapshot(utilisation=rng.random(n).tolist(), base=base))
    app = FabtopApp(src, render_interval_s=0.05, table_rows=20)  # type: ignore[arg-type]

    def segments(lines: object) -> list[object]:
        return [(s.text, s.style, s.control, s.style and s.style.meta) for s in lines]  # type: ignore[attr-defined]

    checked = 0
    async with app.run_test(size=(130, 42)) as pilot:
        await pilot.pause()
        table = app.query_one(LinksTable)
        for step in range(12):
            util = np.clip(src.snap.link_state.utilisation + rng.normal(0, 0.03, n), 0, 1)
            src.set(snapshot(tick=step + 2, utilisation=util.tolist(), base=base))
            if step % 3 == 1:
                await pilot.press("down", "down", "down")
            if step == 7:
                await pilot.press("s")  # another sort column: the header changes
            if step == 4:
                await pilot.hover(LinksTable, offset=(5, 4))  # a hovered row
            if step == 9:  # fewer rows, then all again: rows removed and added
                app.set_filter("gpu0010")
            if step == 10:
                app.set_filter("")
            app.refresh_view()
            await pilot.pause()
            height = table.size.height
            kept = [segments(table.render_line(y)) for y in range(height)]
            keys = [
                table._header_row_key,
                *(table._row_locations.get_key(i) for i in range(table.row_count)),
            ]
            style = table.rich_style
            cursor, hover = table.cursor_coordinate, table.hover_coordinate
            ours = [table._render_line_in_row(k, 0, style, cursor, hover) for k in keys]
            theirs = [
                DataTable._render_line_in_row(table, k, 0, style, cursor, hover) for k in keys
            ]
            for (a_fixed, a_cells), (b_fixed, b_cells) in zip(ours, theirs, strict=True):
                assert a_fixed == b_fixed == []
                assert [segments(c) for c in a_cells] == [segments(c) for c in b_cells]
            table._clear_caches()
            assert kept == [segments(table.render_line(y)) for y in range(height)]
            assert table.row_count == (2 if step == 9 else 20)
            checked += height
    assert checked > 200
