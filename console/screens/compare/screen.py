"""Two fabrics side by side, live: the same workload and faults on native and RoCE.

Each side has its own ``FabricView`` fed from its own source; a fault injected
here goes to both sources, so both sides see the same fault at the same
simulated moment (each at its next tick boundary). Both sides' measured speeds are
measured here, over the same wall seconds (``console.speed.SharedWindow``), not taken
from each engine's snapshot (each engine smooths its own over its own batches).
"""

from __future__ import annotations

from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from console.pausing import PauseRecord
from console.readonly import hidden_if_read_only, refuse_if_read_only
from console.screens.compare.difference import difference_table
from console.screens.compare.sides import both_sides, side_tables
from console.screens.compare.sizing import Measured, show_at_height, show_fitted
from console.screens.compare.speed_line import speed_line
from console.screens.compare.timelines import faults_table
from console.screens.confirm import ConfirmScreen
from console.screens.fault_form import FaultFormScreen
from console.source import FabricSource, compiling_note_of, submit_together
from console.speed import SharedWindow, SpeedSteps
from console.viewstate import FabricView
from console.widgets.key_footer import KeyFooter, drop_order
from fabric_core.commands import ClearFault, Command, CommandResult, Pause, Resume

#: The fault timelines' least height, border included (one fault in the widest layout)
FAULTS_MIN_HEIGHT = 5

#: + and - in the footer, as one ("+ - Speed (both)")
BOTH = Binding.Group("Speed (both)")


class CompareScreen(Screen[None]):
    """See the module docstring."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,c", "app.pop_screen", "Back"),
        Binding("p", "toggle_pause", "Pause both"),
        # while paused, in its place (``check_action``; the parameter tells them apart)
        Binding("p", "toggle_pause(True)", "Resume both"),
        Binding("plus,equals_sign", "speed(2.0)", "Faster (both)", key_display="+", group=BOTH),
        Binding("minus", "speed(0.5)", "Slower (both)", key_display="-", group=BOTH),
        Binding("i", "inject", "Inject on both"),
        Binding("x", "clear_all", "Clear both"),
    ]
    #: The keys the footer leaves out, first to last, where the line has no room for all
    FOOTER_DROP_ORDER = drop_order(BINDINGS, "clear_all", "toggle_pause", "toggle_pause(True)")
    DEFAULT_CSS = """
    CompareScreen Horizontal { height: auto; }
    CompareScreen #delta { height: auto; border: round $primary; padding: 0 1; }
    CompareScreen #faults-both { height: 1fr; border: round $error; padding: 0 1; }
    CompareScreen .side { width: 1fr; height: auto; border: round $secondary; padding: 0 1; }
    """

    def __init__(
        self,
        sources: tuple[FabricSource, FabricSource],
        pauses: PauseRecord,
        *,
        views: tuple[FabricView, FabricView] | None = None,
        read_only: bool = False,
        render_interval_s: float = 0.25,
    ) -> None:
        """``pauses`` is the app's record of which engines are paused (the one every
        footer's p reads); ``views`` lets the app keep each side's history (latency
        window) between visits."""
        super().__init__()
        self.sources = sources
        self.pauses = pauses
        self.views = views or (FabricView(), FabricView())
        self.speed_steps = SpeedSteps()  # what + and - ask for, on both
        self.measured = SharedWindow()  # both sides' speeds over one window
        self.read_only = read_only
        self.render_interval_s = render_interval_s
        self._described = ["", ""]  # each source's description as last shown
        self._compile_notes: list[str | None] = [None, None]  # what each side compiled
        self._heights: dict[str, Measured] = {}  # by panel id: what it was sized for
        self._speed_lines = 1  # the speed line's lines as last shown

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A read-only console has no keys that change the emulation; ``p`` reads "Resume
        both" while either fabric is paused, "Pause both" otherwise."""
        if hidden_if_read_only(action, self.read_only):
            return False
        if action == "toggle_pause":
            return bool(parameters) == self.pauses.paused(*self.sources)
        return True

    def compose(self) -> ComposeResult:
        # scrolled by the keys where the terminal is shorter than the panels (100x30: the
        # difference and the timelines were below the last row, and no key reached them)
        with VerticalScroll(id="compare-body"):
            with Horizontal():
                yield Static(id="left", classes="side")
                yield Static(id="right", classes="side")
            yield Static(id="delta")
            yield Static(id="faults-both")
        yield Static(id="speed-line")
        yield KeyFooter(self.FOOTER_DROP_ORDER)

    def on_mount(self) -> None:
        self.query_one("#compare-body").focus()  # (so that PageDown, End and the arrows scroll)
        self.query_one("#delta", Static).border_title = "difference (right / left; red = worse)"
        self.query_one(
            "#faults-both", Static
        ).border_title = "faults on both fabrics (times from the injection)"
        self.set_interval(self.render_interval_s, self.refresh_sides)
        self.refresh_sides(force=True)

    def on_resize(self) -> None:
        # the sides are wrapped to their widths: wrap again once the new layout is in
        self.call_after_refresh(self.refresh_sides, True)

    def refresh_sides(self, force: bool = False) -> None:
        """Read both sources' latest snapshots and redraw the sides that changed.

        The panels are sized to their tables here, so a redraw lays the screen out again
        only when a height changes: a layout of this screen costs tens of ms of the
        console's CPU, which the engines share on a 2-core machine.
        """
        changed = force
        for k, (view, source) in enumerate(zip(self.views, self.sources, strict=True)):
            # a source that stops says so in its description, with no new snapshot
            said = source.description != self._described[k]
            note = compiling_note_of(source)
            if view.ingest(source.latest()) or said or note != self._compile_notes[k]:
                self._described[k] = source.description
                self._compile_notes[k] = note
                changed = True
        self.measured.read([view.snapshot for view in self.views])
        for view, source in zip(self.views, self.sources, strict=True):
            self.pauses.read(source, view.snapshot)  # (the footer's p follows)
        if changed:
            # both sides at once: a row's height depends on the other side's value too
            panels = (self.query_one("#left", Static), self.query_one("#right", Static))
            speeds = self.measured.speeds()
            measured = speeds or (0.0, 0.0)
            widths = (panels[0].content_size.width, panels[1].content_size.width)
            rows = both_sides(self.views, self.sources, measured, widths)
            tables = side_tables(rows, widths, self.app.console)
            for panel, view, source, (table, lines) in zip(
                panels, self.views, self.sources, tables, strict=True
            ):
                snap = view.snapshot
                panel.border_title = snap.profile if snap is not None else source.description
                if panel.content_size.width > 0:  # wrapped at its width: no need to measure
                    show_at_height(panel, table, lines + panel.styles.gutter.height)
                else:  # not laid out yet
                    panel.update(table)
            delta = self.query_one("#delta", Static)
            table = difference_table(*self.views, width=delta.content_size.width)
            show_fitted(delta, table, self._heights)
            self._show_faults()
            bottom = self.query_one("#speed-line", Static)
            width = bottom.content_size.width
            line = speed_line(self.views, speeds, self.measured.span_s, width)
            # a line that wraps where the last did not (or no longer does) needs a layout:
            # without one its second line was cut ("…both over" at 80 columns)
            lines = len(line.wrap(self.app.console, width)) if width > 0 else 1
            bottom.update(line, layout=lines != self._speed_lines)
            self._speed_lines = lines

    def _show_faults(self) -> None:
        """The timelines in the layout that fits the panel, which is made at least as tall
        as they are (it fills the rest of the screen otherwise)."""
        panel = self.query_one("#faults-both", Static)
        table, lines = faults_table(*self.views, width=panel.content_size.width)
        least = max(FAULTS_MIN_HEIGHT, lines + panel.styles.gutter.height)
        if panel.styles.min_height is None or panel.styles.min_height.value != least:
            panel.styles.min_height = least
        panel.update(table, layout=False)

    async def send_both(self, command: Command) -> CommandResult:
        """Send ``command`` to both sources; the result is the first refusal, if any.

        Two embedded engines, or two engine processes of one group, apply it at the same
        simulated time (``console.source.submit_together``); other sources each at their
        next boundary."""
        results = await submit_together(self.sources, command)
        for src, result in zip(self.sources, results, strict=True):
            self.pauses.sent(src, command, result)
        for src, result in zip(self.sources, results, strict=True):
            if not result.ok:
                return CommandResult(
                    id=result.id, ok=False, error=f"{src.description}: {result.error}"
                )
        return results[0]

    async def _send_both_told(self, command: Command) -> CommandResult:
        """``send_both``, telling the operator when either source refuses."""
        result = await self.send_both(command)
        if not result.ok:
            self.notify(result.error or "refused", severity="error")
        return result

    @work(group="compare-commands")
    async def _send(self, command: Command) -> None:
        await self._send_both_told(command)
        self.refresh_sides(force=True)

    def action_inject(self) -> None:
        """The fault form; the fault goes to both fabrics."""
        if refuse_if_read_only(self, self.read_only, "fault injection"):
            return
        form = FaultFormScreen(
            self.send_both, self.views[0].snapshot, title="Inject a fault on both fabrics"
        )
        self.app.push_screen(form)

    def action_clear_all(self) -> None:
        """Clear every fault on both fabrics, after confirmation."""
        if refuse_if_read_only(self, self.read_only, "clearing faults"):
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._send(ClearFault(all=True))

        self.app.push_screen(ConfirmScreen("Clear all faults on both fabrics?"), confirmed)

    def action_speed(self, factor: float) -> None:
        """Multiply both engines' target speed (they run in lockstep: the slower sets the pace)."""
        if refuse_if_read_only(self, self.read_only, "changing the speed"):
            return
        self.speed_steps.press(
            factor,
            latest=self.sources[0].latest,
            send=self._send_both_told,
            notify=self.notify,
            start=lambda ask: self.run_worker(ask, group="compare-commands"),
            redraw=lambda: self.refresh_sides(force=True),
        )

    def action_toggle_pause(self, _resume: bool = False) -> None:
        """Pause or resume both fabrics together, as the footer says: resume both while
        either is paused (``pauses``); the parameter only tells the footer's two keys
        apart."""
        if refuse_if_read_only(self, self.read_only, "pause/resume"):
            return
        self._send(Resume() if self.pauses.paused(*self.sources) else Pause())
