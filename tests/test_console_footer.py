"""The footer of keys at the widths terminals have: every key of the screen shows from 100
columns on, Help first, and the command palette's key only where it fits beside them
(``console.widgets.key_footer``)."""

from __future__ import annotations

from textual.widgets._footer import FooterKey

from console.app import FabtopApp
from console.screens.compare import CompareScreen
from console.widgets.key_footer import PALETTE_CLASS, KeyFooter
from tests.helpers import settle
from tests.test_console_screens import source


def footer_line(footer: KeyFooter) -> tuple[list[str], bool] | None:
    """The footer's keys as drawn, left to right, and whether the palette's key is there;
    None while it composes them or lays them out (those it leaves out for room aside)."""
    keys = [key for key in footer.query(FooterKey) if not key.has_class(PALETTE_CLASS)]
    actions = {b.binding.action for b in footer.screen.active_bindings.values() if b.binding.show}
    actions -= footer.dropped
    places = {key.region.x for key in keys if key.region.width > 0}
    if len(places) < len(actions):  # (keys not placed yet share x = 0)
        return None
    keys.sort(key=lambda key: key.region.x)
    return [key.key_display for key in keys], bool(footer.query(f".{PALETTE_CLASS}"))


def drawn(footer: KeyFooter, palette: bool) -> bool:
    line = footer_line(footer)
    return line is not None and line[1] == palette


async def test_the_palette_key_gives_way_to_the_screens_keys() -> None:
    """At 100 columns the palette's key was docked over Help and Quit, with a letter of a
    covered key showing beside it; it now goes, and comes back on a wider terminal."""
    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        footer = app.query_one(KeyFooter)
        await settle(pilot, lambda: drawn(footer, palette=False))
        keys, _ = footer_line(footer) or ([], False)
        assert keys[0] == "?" and keys[-1] == "q"  # Help first, Quit last
        assert {"+", "-", "/", "i", "c"} <= set(keys)
        assert footer.keys_width() <= 100

        await pilot.resize_terminal(140, 30)
        await settle(pilot, lambda: drawn(footer, palette=True))
        palette = footer.query_one(f".{PALETTE_CLASS}")
        assert palette.region.x >= footer.keys_width()  # beside the keys, not over them
        assert footer_line(footer) == (keys, True)


async def test_at_80_columns_the_keys_used_least_give_way_to_quit() -> None:
    """At 80 columns the main view's keys (93 columns) were cut after "c C" and Quit did not
    show. The footer now leaves out the keys of ``FOOTER_DROP_ORDER``, first to last, until
    the rest fit, and puts them back on a wider terminal."""
    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=(80, 30)) as pilot:
        footer = app.query_one(KeyFooter)
        await settle(pilot, lambda: drawn(footer, palette=False) and bool(footer.dropped))
        keys, _ = footer_line(footer) or ([], False)
        assert keys[0] == "?" and keys[-1] == "q"
        assert footer.keys_width() <= 80
        assert footer.dropped == {"reverse_sort", "toggle_freeze"}  # the first two suffice
        assert "r" not in keys and "f" not in keys and {"+", "-", "/", "i", "c"} <= set(keys)
        await pilot.press("r")  # a key left out still works
        await settle(pilot, lambda: app.links_table.sort_reverse)

        await pilot.resize_terminal(140, 30)
        await settle(pilot, lambda: drawn(footer, palette=True))
        assert not footer.dropped and {"r", "f"} <= set((footer_line(footer) or ([], 0))[0])


async def test_the_compare_views_keys_fit_in_100_columns() -> None:
    left, right = source("native-400g"), source("roce-400g")
    app = FabtopApp(left, compare_sources=(left, right), render_interval_s=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("c")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
        footer = app.screen.query_one(KeyFooter)
        await settle(pilot, lambda: drawn(footer, palette=True))  # it fits beside them
        assert footer_line(footer) == (["esc", "p", "+", "-", "i", "x", "?", "q"], True)

        await pilot.resize_terminal(80, 30)  # 84 columns of keys: Clear both gives way
        await settle(pilot, lambda: drawn(footer, palette=False) and bool(footer.dropped))
        assert footer_line(footer) == (["esc", "p", "+", "-", "i", "?", "q"], False)


async def test_a_dialog_takes_its_own_keys_only() -> None:
    """The footer under the fault form (the main view's, dimmed) listed Pause, Inject, Clear
    and Quit, which do nothing there; it now lists nothing, and they still do nothing."""
    from textual.widgets import Button

    from console.screens.fault_form import FaultFormScreen

    app = FabtopApp(source(), render_interval_s=0.05)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("i")
        await settle(pilot, lambda: isinstance(app.screen, FaultFormScreen))
        shown = {b.binding.action for b in app.screen.active_bindings.values() if b.binding.show}
        assert shown == {"cancel"}  # Esc
        # the footer seen under the dialog is the main view's, dimmed: it offers nothing
        behind = app.screen_stack[0].query_one(KeyFooter)
        await settle(pilot, lambda: not behind.query(FooterKey))
        app.screen.query(Button).first().focus()
        await pilot.press("p", "x", "q")
        await pilot.pause(0.2)
        assert app.is_running and isinstance(app.screen, FaultFormScreen)
        snap = app.source.latest()
        assert snap is not None and snap.running  # not paused
