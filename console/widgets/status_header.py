"""The header line: what fabric this is, how fast it runs, and in what state.

The line fits the terminal's width: what does not fit is left out, the least needed
first (``COMPACT``), so that an 80-column terminal still shows the state, the faults,
the simulated time, the speed asked, the cluster, the profile and read-only (it used to
cut the end of the line, where the cluster and profile are, and read-only came and went
with the width of the simulated time). Past the last step a long cluster name is cut
short, then what comes before read-only: never read-only itself.

A remote console whose view no longer follows its emulator (``link_loss``: the broker
is gone, the emulator is offline, not heard or silent) says so in the state itself, at
any width, and marks the figures it still shows stale: they stopped changing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rich.cells import cell_len
from rich.text import Text
from textual import events

from console.compiling import ONCE, Compiling, compiling_note
from console.fmt import fmt_seconds, fmt_speed
from console.widgets.text_view import TextView
from fabric_core.runtime.snapshot import Snapshot

FLOW_CONTROL_NAMES = {"credit": "native lossless (credit)", "pfc": "RoCE (PFC+ECN)"}

#: What each step of compaction leaves out, in order: a header too wide for the
#: terminal takes the first step, then the next, until it fits (the cluster, the
#: profile, the state, the faults, the simulated time, the speed asked and read-only are
#: never left out; past the last step the line is cut before read-only, which stays at
#: its end: it tells the operator why their keys do not change the fabric).
COMPACT = (
    "the flow control's name (the profile's name says it)",
    "the exporter's address and the source (unless its engine stopped)",
    "the tick and the fabtop badge; why a compile happens once, said shorter",
    "the measured speed",
    "why a compile happens once",
    "what the engine compiles (the state still says compiling)",
    "the speed asked's label (its × says it is a speed)",
)
# the step of ``COMPACT`` that leaves each out (a header after ``compact`` steps keeps
# what ``compact < STEP`` holds for)
_FLOW_CONTROL, _EXPORTER, _TICK, _MEASURED, _ONCE, _KERNEL, _SPEED_LABEL = range(
    1, len(COMPACT) + 1
)
#: The columns the simulated time takes at most (``88.2 ms``; below 1000 s): ``fitted``
#: makes room for them whatever it says now.
SIM_ROOM = 7
#: Past the last step of ``COMPACT``, a cluster's name is cut to no fewer columns.
MIN_CLUSTER = 8
#: The header's last field when the console is read-only.
READ_ONLY = "read-only"
#: Between the header's fields.
SEPARATOR = " │ "

#: Why a compile happens once, said shorter (``COMPACT``'s third step).
ONCE_SHORT = "(the first run after an install)"

#: (label, style) of the state for each ``link_loss`` state of a remote source
#: (``console.source.RemoteSource``); another state reads as offline.
LINK_LOSS_LABELS = {
    "no broker": ("✕ no broker", "bold white on red"),
    "offline": ("⏹ offline", "bold black on dark_orange"),
    "unheard": ("✕ not heard", "bold black on dark_orange"),
    "silent": ("✕ silent", "bold black on dark_orange"),
}
#: What the figures of a view that no longer follows its emulator are drawn in
STALE_STYLE = "dim"


def state_label(
    snap: Snapshot | None,
    *,
    frozen: bool,
    compiling: Compiling | None = None,
    link_loss: tuple[str, str] | None = None,
) -> tuple[str, str]:
    """(label, style) of the run state: a lost link wins over the rest (what the view
    shows stopped changing), frozen view over compiling, compiling over running / paused."""
    if link_loss is not None:
        return LINK_LOSS_LABELS.get(link_loss[0], LINK_LOSS_LABELS["offline"])
    if frozen:
        return "❄ frozen view", "bold black on cyan"
    if compiling is not None:
        return "⧗ compiling", "bold black on magenta"
    if snap is None:
        return "… starting", "bold"
    if snap.running:
        return "▶ running", "bold black on green"
    return "⏸ paused", "bold black on yellow"


@dataclass(frozen=True)
class HeaderState:
    """What the header says (``StatusHeader.show``'s arguments)."""

    snap: Snapshot | None
    frozen: bool
    metrics_address: str | None
    source: str
    read_only: bool
    compiling: Compiling | None = None
    #: the source stopped (its ``description`` says why): never left out
    source_stopped: bool = False
    #: a remote source's (state, note) when its view no longer follows the emulator
    link_loss: tuple[str, str] | None = None


def header_text(state: HeaderState, compact: int = 0, cluster_width: int | None = None) -> Text:
    """The header line after ``compact`` steps of ``COMPACT`` (0: all of it), the
    cluster's name cut to ``cluster_width`` columns if given."""
    snap = state.snap
    text = Text(no_wrap=True, overflow="ellipsis")
    if compact < _TICK:
        text.append(" fabtop ", "bold reverse")
    label, style = state_label(
        snap, frozen=state.frozen, compiling=state.compiling, link_loss=state.link_loss
    )
    # the state first: if even the most compact line is too wide, its end is cut
    text.append(f" {label} ", style)
    if state.link_loss is not None:
        # never left out: without a snapshot, nothing else names the cluster
        text.append(f" {state.link_loss[1]} " if snap is None else " stale:", "bold")
    if state.compiling is not None and not state.frozen and compact < _KERNEL:
        note = compiling_note(state.compiling)
        if compact >= _TICK:
            note = note.removesuffix(ONCE) + (ONCE_SHORT if compact < _ONCE else "")
        text.append(f" {note.rstrip()} ", "magenta")
    fields: list[Text] = []
    if snap is not None:
        fields += figures(snap, compact, stale=state.link_loss is not None)
        cluster = Text(snap.cluster, "bold")
        if cluster_width is not None:
            cluster.truncate(cluster_width, overflow="ellipsis")
        fields.append(cluster)
        profile = snap.profile
        if compact < _FLOW_CONTROL:
            profile += f" · {FLOW_CONTROL_NAMES.get(snap.flow_control, snap.flow_control)}"
        fields.append(Text(profile))
    if compact < _EXPORTER:
        fields.append(Text(f"metrics {state.metrics_address or 'off'}"))
    if compact < _EXPORTER or state.source_stopped:
        fields.append(Text(state.source))
    if state.read_only:
        fields.append(Text(READ_ONLY, "bold magenta"))
    text.append(" ")
    text.append(Text(SEPARATOR).join(fields))
    return text


def figures(snap: Snapshot, compact: int, *, stale: bool) -> list[Text]:
    """Faults, simulated time and speed: what changes and what an operator acts on first.
    ``stale``: they stopped changing (``STALE_STYLE``, and no measured speed, which is
    not "now" any more)."""
    n_faults = len(snap.active_faults)
    faults = Text(f"faults {n_faults}", "bold red" if n_faults else "")
    sim = f"sim {fmt_seconds(snap.sim_time_s)}"
    if compact < _TICK:
        sim += f" · tick {fmt_seconds(snap.dt_s)}"
    speed = fmt_speed(snap.target_speed)
    if compact < _SPEED_LABEL:
        speed = f"speed {speed}"
    if snap.measured_speed > 0 and compact < _MEASURED and not stale:
        speed += f" (now {fmt_speed(snap.measured_speed)})"
    shown = [faults, Text(sim), Text(speed)]
    if stale:
        for text in shown:
            text.stylize(STALE_STYLE)
    return shown


def fitted(state: HeaderState, width: int) -> Text:
    """The header line with as few steps of ``COMPACT`` as fit ``width`` columns (all of
    it when the width is not known yet: 0); past the last step, cut before read-only."""
    # measured as if the simulated time were as wide as it gets: the steps taken, and so
    # what the line shows, do not change as it ticks from "88.2 ms" to "100 ms"
    slack = 0 if state.snap is None else SIM_ROOM - cell_len(fmt_seconds(state.snap.sim_time_s))
    slack = max(slack, 0)
    for compact in range(len(COMPACT) + 1):
        text = header_text(state, compact)
        if width <= 0 or cell_len(text.plain) + slack <= width:
            return text
    last = len(COMPACT)
    if state.snap is not None:
        # a long cluster name: shortened (to MIN_CLUSTER at least) before the profile is cut
        over = cell_len(text.plain) + slack - width
        name = cell_len(state.snap.cluster)
        if name - over >= MIN_CLUSTER:
            return header_text(state, last, name - over)
    if not state.read_only:
        return text  # the terminal cuts its end
    # the end of the line is read-only, the one field a terminal's cut would hide without
    # a trace that matters (the keys that change the fabric are gone from the footer, and
    # the operator would not know why): cut what comes before it instead
    tail = Text(SEPARATOR)
    tail.append(READ_ONLY, "bold magenta")
    head = header_text(replace(state, read_only=False), last, MIN_CLUSTER)
    head.truncate(max(width - cell_len(tail.plain), 1), overflow="ellipsis")
    head.append_text(tail)
    return head


class StatusHeader(TextView):
    """State, compile, faults, simulated time, speed, cluster, profile, exporter address,
    source; what the terminal's width has room for (see the module docstring)."""

    DEFAULT_CSS = """
    StatusHeader { height: 1; background: $panel; }
    """

    _state: HeaderState | None = None

    def show(
        self,
        snap: Snapshot | None,
        *,
        frozen: bool,
        metrics_address: str | None,
        source: str,
        read_only: bool,
        compiling: Compiling | None = None,
        source_stopped: bool = False,
        link_loss: tuple[str, str] | None = None,
    ) -> None:
        """Redraw from ``snap`` (None before the first snapshot); ``compiling``: what the
        engine's numba compiles now, if anything; ``source_stopped``: the source's engine
        stopped (``source`` says why); ``link_loss``: a remote source's (state, note)
        when its view no longer follows the emulator."""
        self._state = HeaderState(
            snap,
            frozen,
            metrics_address,
            source,
            read_only,
            compiling,
            source_stopped,
            link_loss,
        )
        self.show_text(fitted(self._state, self.size.width))

    def on_resize(self, event: events.Resize) -> None:
        if self._state is not None:
            self.show_text(fitted(self._state, event.size.width))
