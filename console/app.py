"""The operator console: the Textual app that watches a fabric and sends it commands.

The app reads the source's latest snapshot on a timer (its render rate, separate
from the engine's publish rate), skips the work when nothing is new or the
view is frozen, and redraws in one batch. Widgets and screens live in
``console.widgets`` and ``console.screens``; this module wires them together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from textual import events, on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.worker import Worker, WorkerState

from console.linkview import SORT_ORDER, LinkFilter
from console.messages import (
    InjectRequested,
    LinkChosen,
    RedrawRequested,
    SortRequested,
    SwitchSelected,
)
from console.palette import FabricCommands
from console.pausing import PauseRecord
from console.readonly import hidden_if_read_only, refuse_if_read_only
from console.screens.compare import CompareScreen
from console.screens.confirm import ConfirmScreen
from console.screens.fault_form import FaultFormScreen
from console.screens.help import MAIN_NAVIGATION, MAIN_NOTES, HelpScreen, describe
from console.screens.link_detail import LinkDetailScreen
from console.source import (
    EngineSource,
    FabricSource,
    compiling_note_of,
    compiling_of,
    link_loss_of,
    served_elsewhere,
)
from console.speed import SpeedSteps
from console.viewstate import FabricView
from console.widgets.event_log_view import EventLogView
from console.widgets.fabric_map import FabricMap
from console.widgets.faults_panel import PANEL_WIDTH, FaultsPanel
from console.widgets.filter_input import FilterInput
from console.widgets.key_footer import SPEED, KeyFooter, drop_order
from console.widgets.latency_panel import LatencyPanel
from console.widgets.links_table import LinksTable, column_label
from console.widgets.status_header import StatusHeader
from fabric_core.commands import (
    ClearFault,
    Command,
    CommandResult,
    Pause,
    Resume,
)

if TYPE_CHECKING:
    from fabric_core.runtime.snapshot import Snapshot

#: Seconds between two reads of the latest snapshot while the terminal has focus.
RENDER_INTERVAL_S = 0.25
#: Terminal rows below which the panels shrink to fit (the full layout wants some 36)
SHORT_ROWS = 36
#: When the terminal loses focus, redraw only every this many timer ticks.
UNFOCUSED_EVERY = 8
#: Seconds a scenario's warning stays on screen as the console opens (long enough to read)
WARNING_S = 30.0


class FabtopApp(App[None]):
    """See the module docstring."""

    CSS_PATH = "app.tcss"
    TITLE = "fabtop"
    COMMANDS = App.COMMANDS | {FabricCommands}
    #: The footer's order: Help first, as in htop, so that it shows on any width
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("p", "toggle_pause", "Pause"),
        # the same key while the emulation is paused: the footer said "Pause" then too.
        # ``check_action`` shows one of the two (the parameter tells them apart)
        Binding("p", "toggle_pause(True)", "Resume"),
        Binding("f", "toggle_freeze", "Freeze"),
        Binding("plus,equals_sign", "speed(2.0)", "Faster", key_display="+", group=SPEED),
        Binding("minus", "speed(0.5)", "Slower", key_display="-", group=SPEED),
        Binding("s", "cycle_sort", "Sort"),
        Binding("r", "reverse_sort", "Reverse"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("i", "inject", "Inject"),
        Binding("x", "clear_all", "Clear"),
        Binding("c", "compare", "Compare"),
        # the same key, hidden: where there is no compare view (a remote console) the one
        # above is left out of the footer and the help, and this one says why (the
        # parameter tells them apart in ``check_action``)
        Binding("c", "compare(True)", "Compare", show=False),
        Binding("q", "quit", "Quit"),
        # as in any terminal program (Textual's own ctrl+c only says to press ctrl+q); in
        # a text field it copies the selection, as the field's own binding says
        Binding("ctrl+c", "quit", "Quit", show=False),
    ]
    #: The keys the footer leaves out, first to last, where the line has no room for all
    #: (93 columns): those a user reaches for least, or finds in the help
    FOOTER_DROP_ORDER = drop_order(
        BINDINGS, "reverse_sort", "toggle_freeze", "filter", "cycle_sort", "clear_all"
    )

    def __init__(
        self,
        source: FabricSource,
        *,
        read_only: bool = False,
        metrics_address: str | None = None,
        compare_sources: tuple[FabricSource, FabricSource] | None = None,
        render_interval_s: float = RENDER_INTERVAL_S,
        table_rows: int = 50,
        warnings: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.source = source
        #: the scenario's warnings, shown as the screen opens (``unit_warnings``)
        self.warnings = tuple(warnings)
        self.read_only = read_only
        self.speed_steps = SpeedSteps()  # what + and - ask for
        self.metrics_address = metrics_address
        self.compare_sources = compare_sources
        self.render_interval_s = render_interval_s
        self.table_rows = table_rows
        self.view = FabricView()
        self.frozen = False
        self.sort_column = "util"
        self.sort_reverse = False
        self.link_filter = LinkFilter("")
        self._focused = True
        self._timer_ticks = 0
        self._compare_views: tuple[FabricView, FabricView] | None = None
        self._failures_told: set[int] = set()  # sources whose stop was notified
        self._behind = False  # the main view skipped drawing under the compare view
        self._described = source.description  # as the header last showed it
        self._compile_note: str | None = None  # the header's note while the engine compiles
        #: whether each engine is paused: the one record every footer's p reads
        self.pauses = PauseRecord(self.refresh_bindings)
        self._links_title = ""  # the links box's title as last set

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        # Kept as attributes: a refresh touches them all, several times a second.
        self.header_bar = StatusHeader(id="header")
        self.fabric_map = FabricMap(id="map")
        self.latency_panel = LatencyPanel(id="latency")
        self.filter_input = FilterInput(
            placeholder="filter: leaf03  is:down  is:starved (credit)  is:paused (PFC)  is:hot …",
            id="filter",
        )
        self.links_table = LinksTable(id="links")
        self.links_box = Vertical(id="links-box")
        self.faults_panel = FaultsPanel(id="faults")
        self.event_log = EventLogView(id="events")
        yield self.header_bar
        with Horizontal(id="top"):
            with VerticalScroll(id="map-box"):  # (scrolls to the map's cursor)
                yield self.fabric_map
            yield self.latency_panel
        with self.links_box:
            yield self.filter_input
            yield self.links_table
        with Horizontal(id="bottom"):
            with Vertical(id="faults-box"):
                yield self.faults_panel
            with Vertical(id="events-box"):
                yield self.event_log
        yield KeyFooter(self.FOOTER_DROP_ORDER)

    def on_resize(self, event: events.Resize) -> None:
        """Give every panel some rows on a short terminal (``.-short`` in app.tcss)."""
        self.set_class(event.size.height < SHORT_ROWS, "-short")
        main = self.screen_stack[0]
        if main is not self.screen:  # (a class of the app's restyles only the screen shown:
            self.update_styles(main)  # the main view came back from compare in its old rows)

    def on_mount(self) -> None:
        self.set_class(self.size.height < SHORT_ROWS, "-short")
        self.query_one("#map-box").border_title = "Fabric map (worst port)"
        faults_box = self.query_one("#faults-box")
        faults_box.border_title = "Faults"
        faults_box.styles.width = PANEL_WIDTH  # (its columns', read from the panel)
        self.query_one("#events-box").border_title = "Events"
        self._start_engines()
        self.set_interval(self.render_interval_s, self._on_timer)
        self.links_table.focus()
        self.refresh_view(force=True)
        for note in self.warnings:  # (said on stderr too, before the screen hid it)
            self.notify(
                note, title="scenario warning", severity="warning", timeout=WARNING_S, markup=False
            )

    def _start_engines(self) -> None:
        """Run every embedded engine (main and compare) as a worker of this app."""
        sources = [self.source, *(self.compare_sources or ())]
        started: set[int] = set()
        for src in sources:
            if isinstance(src, EngineSource) and id(src.engine) not in started:
                started.add(id(src.engine))
                self.run_worker(src.engine.run(), group="engines", exit_on_error=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Say so when an embedded engine stops on an error (the console stays up)."""
        worker = event.worker
        if worker.group == "engines" and event.state == WorkerState.ERROR:
            self.notify(
                f"the emulator stopped: {worker.error!r}; the view shows its last snapshot",
                title="engine error",
                severity="error",
                timeout=30,
            )

    def on_unmount(self) -> None:
        for src in [self.source, *(self.compare_sources or ())]:
            if isinstance(src, EngineSource):
                src.engine.stop()

    # ---------------------------------------------------------------- refresh
    def _on_timer(self) -> None:
        if not self.screen_stack:
            return  # shutting down: the screens are gone, the timer is not yet
        self._timer_ticks += 1
        self._tell_failures()
        if not self._focused and self._timer_ticks % UNFOCUSED_EVERY:
            return  # throttled while the terminal is in the background
        self.refresh_view()

    def _tell_failures(self) -> None:
        """Say so once when an engine process stops (its source's ``failure``); the
        view keeps its last snapshot and the other fabric keeps running."""
        for src in [self.source, *(self.compare_sources or ())]:
            failure = getattr(src, "failure", None)
            if failure is None or id(src) in self._failures_told:
                continue
            self._failures_told.add(id(src))
            self.notify(
                f"{src.description}; its view shows the last snapshot, commands to it are refused",
                title="engine stopped",
                severity="error",
                timeout=30,
            )

    def on_app_blur(self) -> None:
        self._focused = False

    def on_app_focus(self) -> None:
        self._focused = True

    def refresh_view(self, force: bool = False) -> None:
        """Read the latest snapshot (unless frozen) and redraw what changed."""
        watched = self._watched_links()
        changed = False if self.frozen else self.view.ingest(self._latest(), watched)
        # (frozen too: the footer's p says what the engine does, not what the view shows)
        self.pauses.read(self.source, self.view.snapshot if not self.frozen else self._latest())
        if self.source.description != self._described:  # e.g. its engine process stopped
            self._described = self.source.description
            changed = True
        note = compiling_note_of(self.source)
        if note != self._compile_note:  # the header counts the seconds of a first compile
            self._compile_note = note
            changed = True
        if isinstance(self.screen, CompareScreen):
            # hidden: keep the history (rates, latency window, events), draw on return
            self._behind = self._behind or changed or force
            return
        if not (changed or force or self._behind):
            return
        self._behind = False
        with self.batch_update():
            self._render()

    def _latest(self) -> Snapshot | None:
        """The source's latest snapshot; under the compare view, the one it shows of this
        source: it reads both sides at once, so that both show the same moment (an engine
        process sends its next snapshot when the last is read: a second reader at another
        moment would skew the two sides, see console/process_source.py)."""
        views, sources = self._compare_views, self.compare_sources
        if (
            views is not None
            and sources is not None
            and sources[0] is self.source
            and any(isinstance(s, CompareScreen) for s in self.screen_stack)
        ):
            return views[0].snapshot
        return self.source.latest()

    def _watched_links(self) -> list[str]:
        names = self.links_table.links_shown
        detail = self._detail_screen()
        if detail is not None:
            names.append(detail.link)
        return names

    def _render(self) -> None:
        view = self.view
        snap = view.snapshot
        # a link's detail screen has the same header, kept current under a dialog too: the
        # run state while watching a link
        details = [s.header_bar for s in self.screen_stack if isinstance(s, LinkDetailScreen)]
        # (worked out once a frame, for every header alike)
        compiling = compiling_of(self.source)
        source_stopped = getattr(self.source, "failure", None) is not None
        link_loss = link_loss_of(self.source)
        for header in [self.header_bar, *details]:
            header.show(
                snap,
                frozen=self.frozen,
                metrics_address=self.metrics_address,
                source=self.source.description,
                read_only=self.read_only,
                compiling=compiling,
                source_stopped=source_stopped,
                link_loss=link_loss,
            )
        if snap is None:
            return
        self.fabric_map.show(snap, view.node_sev)
        rows, matching = view.table_rows(
            column=self.sort_column,
            reverse=self.sort_reverse,
            limit=self.table_rows,
            link_filter=self.link_filter,
        )
        self.links_table.show(rows, snap.flow_control)
        shown = "all" if len(rows) == matching else f"top {len(rows):,} of"
        if self.link_filter.text:
            title = f"Links: {shown} {matching:,} matching “{self.link_filter.text}”"
            title += f" ({len(snap.links):,} in all)"
        else:
            title = f"Links: {shown} {matching:,}"
        title += f" · by {column_label(self.sort_column, snap.flow_control)}"
        if title != self._links_title:  # setting it repaints the box, even to the same
            self._links_title = title
            self.links_box.border_title = title
        self.latency_panel.show(view.latency, dict(snap.workloads))
        self.faults_panel.show(snap)
        self.event_log.show(view.events)
        detail = self._detail_screen()
        if detail is not None:
            detail.show(snap, view.rates, view.history, view.events)

    def _detail_screen(self) -> LinkDetailScreen | None:
        """The link detail screen when it is the one on top."""
        top = self.screen_stack[-1] if self.screen_stack else None
        return top if isinstance(top, LinkDetailScreen) else None

    #: Actions about the main view: hidden from the footer (and off) on other screens.
    MAIN_VIEW_ACTIONS = frozenset(
        {"toggle_freeze", "speed", "cycle_sort", "reverse_sort", "filter", "compare"}
    )

    #: Of those, the ones that still make sense on the link detail screen.
    DETAIL_VIEW_ACTIONS = frozenset({"toggle_freeze", "speed"})

    #: The app's actions a dialog keeps: Textual's Tab and Shift+Tab between its fields.
    DIALOG_ACTIONS = frozenset({"focus_next", "focus_previous"})

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """No key of the app's works under a dialog (the fault form over the compare view
        showed them in its footer, and a key pressed on its buttons sorted the hidden main
        table); main-view keys do nothing on the compare screen (which has its own), and
        only freeze and speed work on the link detail screen (sorting or filtering the
        hidden table would surprise). A read-only console has no keys that change the
        emulation. Of ``p``'s two bindings, "Resume" is shown while the emulation is
        paused, "Pause" otherwise."""
        if hidden_if_read_only(action, self.read_only):
            return False
        if isinstance(self.screen, ModalScreen):
            # a dialog (help, the fault form, a confirmation) takes its own keys only; the
            # main view's footer under it listed Pause, Inject, Clear and Quit, which do
            # nothing there (Ctrl+C there is the screen's copy, as it was). Tab and
            # Shift+Tab are the app's too, and move between the dialog's fields: refused,
            # the fault form's kind and buttons could not be reached from the keyboard
            return action in self.DIALOG_ACTIONS
        if action == "toggle_pause":  # "Resume" while paused, else "Pause"
            return bool(parameters) == self.pauses.paused(self.source)
        if action not in self.MAIN_VIEW_ACTIONS:
            return True
        if isinstance(self.screen, CompareScreen):
            return False
        if isinstance(self.screen, LinkDetailScreen):
            return action in self.DETAIL_VIEW_ACTIONS
        if action == "compare" and served_elsewhere(self.source):
            return bool(parameters)  # only the hidden key that says why (see BINDINGS)
        return True

    # --------------------------------------------------------------- commands
    async def send(self, command: Command) -> CommandResult:
        """Send a command to the source; tell the operator when it is refused."""
        result = await self.source.submit(command)
        if not result.ok:
            self.notify(result.error or "refused", title="command refused", severity="error")
        return result

    @work(exclusive=False, group="commands")
    async def _send_in_background(self, command: Command) -> None:
        result = await self.send(command)
        self.pauses.sent(self.source, command, result)
        self.refresh_view(force=True)

    # ---------------------------------------------------------------- actions
    def action_toggle_pause(self, _resume: bool = False) -> None:
        """Pause or resume the emulation (simulated time), as the footer says (``pauses``);
        the parameter only tells the footer's Pause and Resume keys apart."""
        if refuse_if_read_only(self, self.read_only, "pause/resume"):
            return
        self._send_in_background(Resume() if self.pauses.paused(self.source) else Pause())

    def action_toggle_freeze(self) -> None:
        """Freeze the view (the emulation keeps running) or let it follow again."""
        self.frozen = not self.frozen
        self.refresh_view(force=True)

    def action_speed(self, factor: float) -> None:
        """Multiply the target speed (simulated seconds per wall second)."""
        if refuse_if_read_only(self, self.read_only, "changing the speed"):
            return
        self.speed_steps.press(
            factor,
            latest=self.source.latest,
            send=self.send,
            notify=self.notify,
            start=lambda ask: self.run_worker(ask, group="commands"),
            redraw=lambda: self.refresh_view(force=True),
        )

    def action_cycle_sort(self) -> None:
        """Order the links table by the next column."""
        i = SORT_ORDER.index(self.sort_column)
        self._set_sort(SORT_ORDER[(i + 1) % len(SORT_ORDER)], reverse=False)

    def action_reverse_sort(self) -> None:
        """Show the coolest links first instead of the hottest."""
        self._set_sort(self.sort_column, reverse=not self.sort_reverse)

    def _set_sort(self, column: str, *, reverse: bool) -> None:
        self.sort_column, self.sort_reverse = column, reverse
        self.links_table.set_sort(column, reverse)
        self.refresh_view(force=True)

    def action_filter(self) -> None:
        """Open the filter line."""
        self.filter_input.open(self.link_filter.text)

    def set_filter(self, text: str) -> bool:
        """Apply a filter; on a bad one, say why and keep the old one."""
        try:
            self.link_filter = LinkFilter(text)
        except ValueError as exc:
            self.notify(str(exc), title="filter not applied", severity="error")
            return False
        self.refresh_view(force=True)
        return True

    @on(FilterInput.Submitted, "#filter")
    def _filter_submitted(self, event: FilterInput.Submitted) -> None:
        if self.set_filter(event.value):
            event.input.remove_class("open")
            self.links_table.focus()

    def action_inject(self, target: str = "", kind: str = "link_down") -> None:
        """Open the fault form (target and kind pre-filled when given)."""
        if refuse_if_read_only(self, self.read_only, "fault injection"):
            return
        # a remote source knows every link, its snapshots only the top ones
        names = getattr(self.source, "all_link_names", None)
        form = FaultFormScreen(
            self.send, self.view.snapshot, target=target, kind=kind, link_names=names
        )
        self.push_screen(form, self._after_inject)

    def _after_inject(self, result: CommandResult | None) -> None:
        if result is not None and result.ok:
            fault = result.detail.get("fault_id") or result.detail.get("id") or ""
            self.notify(f"fault injected {fault}".strip())
            self.refresh_view(force=True)

    def action_clear_all(self) -> None:
        """Clear every active fault, after confirmation."""
        if refuse_if_read_only(self, self.read_only, "clearing faults"):
            return
        snap = self.view.snapshot
        n = len(snap.active_faults) if snap is not None else 0
        if n == 0:
            self.notify("no active faults")
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._send_in_background(ClearFault(all=True))

        self.push_screen(ConfirmScreen(f"Clear all {n} active fault(s)?"), confirmed)

    def action_compare(self, _hidden_key: bool = False) -> None:
        """Open the side-by-side view of two fabrics (``_hidden_key``: pressed where there
        is none, see BINDINGS)."""
        if served_elsewhere(self.source):
            self.notify(
                "the compare view needs a local run (`fabtop --compare PROFILE`): this "
                "console shows one emulator served over MQTT",
                severity="warning",
            )
            return
        if self.compare_sources is None:
            self.notify(
                "compare needs two fabrics: start fabtop with --compare roce-400g",
                severity="warning",
            )
            return
        if self._compare_views is None:
            self._compare_views = (FabricView(), FabricView())
        screen = CompareScreen(
            self.compare_sources,
            self.pauses,
            views=self._compare_views,
            read_only=self.read_only,
        )
        self.push_screen(screen)

    def action_help(self) -> None:
        """Show the keys of the screen on top (its own, then the app's that work there)."""
        screen = self.screen
        # the main view's screen has only Textual's defaults (Tab, copy): the navigation
        # table below says those in the console's words
        own = (
            [b for b in screen.BINDINGS if isinstance(b, Binding)]
            if isinstance(screen, CompareScreen | LinkDetailScreen)
            else []
        )
        taken = {k.strip() for b in own for k in b.key.split(",")}
        app_keys = [
            b
            for b in self.BINDINGS
            if isinstance(b, Binding)
            and not taken & {k.strip() for k in b.key.split(",")}
            and self._in_help(b.action.split("(")[0])
        ]
        if isinstance(screen, CompareScreen | LinkDetailScreen):
            title = "compare view keys" if isinstance(screen, CompareScreen) else "link detail keys"
            self.push_screen(HelpScreen(describe([*own, *app_keys]), title=title))
            return
        self.push_screen(
            HelpScreen(
                describe([*app_keys, *own]),
                title="fabtop keys (main view)",
                navigation=MAIN_NAVIGATION,
                notes=MAIN_NOTES,
            )
        )

    def _in_help(self, action: str) -> bool:
        """Whether the help lists the app's key for ``action`` on the screen on top: as
        the footer does, but both of ``p``'s whichever the footer shows (joined by
        ``describe``: "Pause / resume"), as the compare view's help lists its own two:
        the help says what a key does, not the state."""
        if action == "toggle_pause":
            return not hidden_if_read_only(action, self.read_only)
        return bool(self.check_action(action, ()))

    # --------------------------------------------------------------- messages
    def open_link(self, name: str) -> None:
        """Show the detail screen of link ``name``."""
        self.push_screen(LinkDetailScreen(name))
        self.call_after_refresh(self.refresh_view, True)

    @on(LinkChosen)
    def _open_link(self, message: LinkChosen) -> None:
        self.open_link(message.name)

    @on(SwitchSelected)
    def _show_ports(self, message: SwitchSelected) -> None:
        if self.set_filter(message.name):
            self.notify(f"links of {message.name} (/ to change the filter)")

    @on(SortRequested)
    def _sort_by_header(self, message: SortRequested) -> None:
        if message.column == self.sort_column:
            self._set_sort(message.column, reverse=not self.sort_reverse)
        else:
            self._set_sort(message.column, reverse=False)

    @on(InjectRequested)
    def _inject_requested(self, message: InjectRequested) -> None:
        self.action_inject(message.target)

    @on(RedrawRequested)
    def _redraw(self) -> None:
        self.refresh_view(force=True)
