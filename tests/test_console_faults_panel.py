"""The faults panel at the widths terminals have: it takes the widest of its layouts that
fits, so a fault's timeline is never cut off (``console.widgets.faults_panel``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from console.app import FabtopApp
from console.fmt import fmt_seconds
from console.widgets.faults_panel import (
    COLUMNS,
    COMPACT_COLUMNS,
    NARROW_COLUMNS,
    STATE_STYLES,
    Columns,
    FaultsPanel,
    fault_cells,
    layout_for,
)
from fabric_core.runtime.snapshot import FaultView
from tests.helpers import settle
from tests.test_console_events import LINK, faulted_source


def test_each_layout_is_the_widest_that_fits() -> None:
    widths = [sum(w for _, _, w in c) for c in (COLUMNS, COMPACT_COLUMNS, NARROW_COLUMNS)]
    assert widths == sorted(widths, reverse=True)
    assert [layout_for(w) for w in widths] == [COLUMNS, COMPACT_COLUMNS, NARROW_COLUMNS]
    assert layout_for(widths[0] - 1) is COMPACT_COLUMNS
    assert layout_for(10) is NARROW_COLUMNS  # (the last, cut at the edge, if none fits)


def cells(panel: FaultsPanel) -> dict[str, str]:
    """The first row's cells by column key."""
    row = panel.get_row_at(0)
    return {str(key.value): cell.plain for key, cell in zip(panel.columns, row, strict=True)}


@pytest.mark.parametrize(
    ("width", "layout"),
    [
        (140, COLUMNS),
        (119, COLUMNS),  # (the panel's 83 columns are 70 % of 119)
        (118, COMPACT_COLUMNS),
        (100, COMPACT_COLUMNS),
        (99, NARROW_COLUMNS),
        (80, NARROW_COLUMNS),
    ],
)
async def test_the_timeline_fits_the_panel(width: int, layout: Columns) -> None:
    """At 100 columns the timeline was cut after "recov" (the panel may take 70 % of the
    width; the full columns need 80)."""
    app = FabtopApp(faulted_source(), render_interval_s=0.05)
    async with app.run_test(size=(width, 40)) as pilot:
        panel = app.query_one(FaultsPanel)
        await settle(pilot, lambda: panel.row_count == 1)  # (detected before it starts)
        assert panel.layout_columns is layout
        used = sum(col.get_render_width(panel) for col in panel.columns.values())
        assert used <= panel.size.width
        row = cells(panel)
        assert list(row) == [key for key, _, _ in layout]
        assert row["target"] == LINK
        (fault,) = app.source.latest().faults  # type: ignore[union-attr]
        assert fault.detected_at_s is not None
        after = fmt_seconds(fault.detected_at_s - fault.injected_at_s)
        if layout is NARROW_COLUMNS:  # the state, coloured, and when it was reached
            assert row["stage"] == f"detected +{after}"
            assert panel.get_row_at(0)[-1].style == STATE_STYLES["detected"]
        else:  # the times are after injection: signed where there is room for the sign
            assert row["detected"] == ("+" if layout is COLUMNS else "") + after


async def test_a_resize_lays_the_faults_out_again() -> None:
    app = FabtopApp(faulted_source(), render_interval_s=3600)  # (no refresh but the resize's)
    async with app.run_test(size=(140, 40)) as pilot:
        panel = app.query_one(FaultsPanel)
        app.refresh_view(force=True)
        await settle(pilot, lambda: panel.row_count == 1)
        assert cells(panel)["elapsed"]
        await pilot.resize_terminal(100, 40)
        await settle(pilot, lambda: panel.layout_columns is COMPACT_COLUMNS)
        await pilot.pause()
        assert panel.row_count == 1 and "elapsed" not in cells(panel)
        assert cells(panel)["target"] == LINK


def test_a_step_a_cleared_fault_never_reached_is_a_dash_not_pending() -> None:
    """A switch_down cleared before it was rerouted read "…" under rerouted, as if that
    were still to come."""
    fault = FaultView(
        id="f1", kind="switch_down", target="spine00", params={}, state="detected",
        injected_at_s=0.0, detected_at_s=16e-6, mitigated_at_s=None, recovered_at_s=None,
        cleared_at_s=None,
    )  # fmt: skip
    assert fault_cells(fault, 1e-3, COLUMNS)["rerouted"] == "…"
    cleared = replace(fault, state="cleared", cleared_at_s=2e-3)
    cells = fault_cells(cleared, 3e-3, COLUMNS)
    assert (cells["detected"], cells["rerouted"], cells["recovered"]) == ("+16 µs", "—", "—")
