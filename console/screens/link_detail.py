"""One link up close: credit and utilisation sparklines, queue per VL, counters, events.

The main view's status header stays on top (the same widget, fed the same state by the
app): without it, watching a link gave no sign that the emulation was paused, the view
frozen or the engine stopped, nor of the simulated time.
"""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from console.eventlog import EventLog
from console.fmt import fmt_bitrate, fmt_bytes, fmt_pct, fmt_rate, fmt_seconds
from console.linkhistory import LinkHistory
from console.linkview import LinkRates
from console.messages import InjectRequested, RedrawRequested
from console.widgets.event_log_view import entry_line
from console.widgets.key_footer import KeyFooter
from console.widgets.links_table import link_state_name
from console.widgets.scaled_sparkline import scaled_sparkline
from console.widgets.status_header import StatusHeader
from fabric_core.runtime.snapshot import Snapshot

COUNTERS = (
    ("tx_bytes_total", "transmitted", fmt_bytes),
    ("tx_packets_total", "packets", fmt_rate),
    ("transmit_wait_seconds_total", "transmit wait", fmt_seconds),
    ("pause_frames_total", "pause frames", fmt_rate),
    ("pause_seconds_total", "paused for", fmt_seconds),
    ("ecn_marked_packets_total", "ECN marked", fmt_rate),
    ("cnp_handled_total", "CNPs handled", fmt_rate),
    ("discards_bytes_total", "discarded", fmt_bytes),
    ("retransmitted_bytes_total", "retransmitted", fmt_bytes),
    ("link_downed_total", "link downed", fmt_rate),
    ("link_error_recovery_total", "error recoveries", fmt_rate),
    ("symbol_errors_total", "symbol errors", fmt_rate),
)


def summary(snap: Snapshot, i: int, rates: LinkRates) -> Text:
    """State, bandwidth, utilisation, queue, credits and rates of link ``i``."""
    ls, lt = snap.link_state, snap.links
    credit_word = "credits free" if snap.flow_control == "credit" else "PFC headroom"
    state = link_state_name(int(ls.status[i]), bool(ls.paused[i]), snap.flow_control)
    text = Text()
    text.append(f"{lt.name[i]}", "bold")
    text.append(f"  ({lt.tier[i]}, {fmt_bitrate(float(lt.bandwidth_Bps[i]))}, ")
    text.append(f"prop {fmt_seconds(float(lt.prop_delay_s[i]))}, ")
    text.append(f"buffer/VL {fmt_bytes(float(lt.buffer_bytes[i]))})\n")
    text.append("state ")
    text.append(state, "bold red" if state == "down" else "bold")
    text.append(" ")
    text.append(f"   util {fmt_pct(float(ls.utilisation[i]))}")
    text.append(f"   queue {fmt_bytes(float(ls.queue_bytes[i]))}")
    text.append(f"   {credit_word} {fmt_bytes(float(ls.credits_bytes[i]))}\n")
    text.append(f"pauses/s {fmt_rate(float(rates.pauses_per_s[i]))}")
    text.append(f"   ECN/s {fmt_rate(float(rates.ecn_per_s[i]))}")
    text.append(f"   drops {fmt_bitrate(float(rates.drops_Bps[i]))}")
    text.append(f"   retrans {fmt_bitrate(float(rates.retrans_Bps[i]))}")
    return text


def vl_table(snap: Snapshot, i: int) -> Table:
    """Queue bytes per virtual lane, with a bar against the per-VL buffer."""
    table = Table(box=None, header_style="bold", title="queue per VL", title_justify="left")
    table.add_column("VL")
    table.add_column("queue", justify="right")
    table.add_column("")
    buffer = float(snap.links.buffer_bytes[i]) or 1.0
    for vl, q in enumerate(snap.link_state.queue_vl_bytes[i].tolist()):
        filled = round(min(q / buffer, 1.0) * 20)
        table.add_row(str(vl), fmt_bytes(q), "█" * filled + "·" * (20 - filled))
    return table


def counters_table(snap: Snapshot, i: int) -> Table:
    """The link's cumulative counters."""
    table = Table(box=None, header_style="bold", title="counters", title_justify="left")
    table.add_column("counter")
    table.add_column("total", justify="right")
    ls = snap.link_state
    for field, label, fmt in COUNTERS:
        if field == "pause_seconds_total" and snap.flow_control == "credit":
            # PFC's paused time, 0 on a credit fabric: there a port waits for credits,
            # which "transmit wait" counts ("starved for 0 s" sat beside a starved state)
            continue
        table.add_row(label, fmt(float(getattr(ls, field)[i])))
    return table


#: Events of the link shown at most.
MAX_EVENTS = 12


def spark_rows(height: int, n_events: int, n_vls: int) -> int:
    """How tall each sparkline can be so the screen is filled without scrolling: what is
    left of ``height`` after the status header, the summary, the labels, the VL/counter
    tables, the events and the footer, split between the two sparklines (3 to 16 rows
    each)."""
    tables = max(len(COUNTERS), n_vls) + 2  # rows + title + header
    fixed = 1 + 5 + 2 + tables + (max(n_events, 1) + 3) + 1
    return min(max((height - fixed) // 2, 3), 16)


class LinkDetailScreen(Screen[None]):
    """See the module docstring; the app calls ``show`` on each refresh while it is open."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("i", "inject_here", "Inject on this link"),
        Binding("r", "reverse", "Other direction"),
    ]
    DEFAULT_CSS = """
    LinkDetailScreen #summary { height: auto; padding: 0 1; border: round $secondary; }
    LinkDetailScreen .spark-label { height: 1; padding: 0 1; }
    LinkDetailScreen .spark { height: auto; margin: 0 1; }
    LinkDetailScreen Horizontal { height: auto; }
    LinkDetailScreen #vls, LinkDetailScreen #counters { width: 1fr; height: auto; padding: 0 1; }
    LinkDetailScreen #events { height: auto; padding: 0 1; border: round $secondary; }
    """

    def __init__(self, link: str) -> None:
        super().__init__()
        self.link = link
        self._reverse_name: str | None = None
        #: the main view's header, shown here too (the app feeds it, see the module docstring)
        self.header_bar = StatusHeader(id="detail-header")

    def compose(self) -> ComposeResult:
        # outside the scrolling part: the run state stays in sight however far it scrolls
        yield self.header_bar
        with VerticalScroll():
            yield Static(id="summary")
            yield Static(id="credit-label", classes="spark-label")
            yield Static(id="credit-spark", classes="spark")
            yield Static(id="util-label", classes="spark-label")
            yield Static(id="util-spark", classes="spark")
            with Horizontal():
                yield Static(id="vls")
                yield Static(id="counters")
            with Vertical(id="events"):
                yield Static(id="event-lines")
        yield KeyFooter()

    def show(self, snap: Snapshot, rates: LinkRates, history: LinkHistory, log: EventLog) -> None:
        """Redraw for this link from the app's current view."""
        i = snap.links.index.get(self.link)
        if i is None:
            self.query_one("#summary", Static).update(f"{self.link}: not in this fabric")
            return
        self.query_one("#summary", Static).update(summary(snap, i, rates))
        credit_word = "credits free" if snap.flow_control == "credit" else "PFC headroom"
        credits = list(history.credits.get(self.link, ()))
        util = list(history.util.get(self.link, ()))
        self.query_one("#credit-label", Static).update(
            f"{credit_word} (last {len(credits)} samples; full height = "
            f"{fmt_bytes(float(snap.links.buffer_bytes[i]))}, the buffer)"
        )
        self.query_one("#util-label", Static).update(
            f"utilisation (last {len(util)} samples; full height = line rate)"
        )
        # Fixed scales: a full bar is a full buffer of credit (as an idle link has), or line rate.
        full = max(float(snap.links.buffer_bytes[i]), max(credits, default=0.0))
        width = max(self.size.width - 4, 10)
        src = snap.nodes.name[int(snap.links.src[i])]
        dst = snap.nodes.name[int(snap.links.dst[i])]
        reverse = snap.links.name[int(snap.links.reverse[i])]
        entries = log.for_target(self.link, reverse, src, dst)[-MAX_EVENTS:]
        rows = spark_rows(self.size.height, len(entries), len(snap.link_state.queue_vl_bytes[i]))
        self.query_one("#credit-spark", Static).update(
            scaled_sparkline(credits, full, rows=rows, width=width)
        )
        self.query_one("#util-spark", Static).update(
            scaled_sparkline(util, 1.0, rows=rows, width=width)
        )
        self.query_one("#vls", Static).update(vl_table(snap, i))
        self.query_one("#counters", Static).update(counters_table(snap, i))
        self._reverse_name = reverse
        lines = Text("events on this link, its other direction and its ends\n", style="bold")
        if entries:
            lines.append_text(Text("\n").join(entry_line(e) for e in entries))
        else:
            lines.append("none", style="dim")
        self.query_one("#event-lines", Static).update(lines)

    def action_inject_here(self) -> None:
        """Open the fault form with this link as the target."""
        self.post_message(InjectRequested(self.link))

    def action_reverse(self) -> None:
        """Look at the other direction of the same cable."""
        if self._reverse_name is not None:
            self.link = self._reverse_name
            self.post_message(RedrawRequested())
