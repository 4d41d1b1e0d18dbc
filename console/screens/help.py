"""The help screen: every key of the console and the filter syntax."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

FILTER_HELP = (
    "Filter (/): words match link names (leaf03 shows leaf03's ports), "
    "is:down, is:degraded, is:paused, is:hot, is:up match states; words combine with AND. "
    "An empty filter shows all links."
)


def bindings_table(bindings: list[tuple[str, str]]) -> Table:
    """Key / action pairs as a two-column table."""
    table = Table(box=None, show_header=True, header_style="bold")
    table.add_column("key", style="bold cyan")
    table.add_column("action")
    for key, description in bindings:
        table.add_row(key, description)
    return table


def describe(bindings: list[BindingType]) -> list[tuple[str, str]]:
    """(keys, description) of ``Binding`` objects, in order."""
    out = []
    for b in bindings:
        if isinstance(b, Binding) and b.description:
            out.append((b.key.replace(",", " / "), b.description))
    return out


class HelpScreen(ModalScreen[None]):
    """Lists the app's and the map/table keys; any of escape, q, ? closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss_help", "Close")
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 84; height: 80%; border: thick $primary; background: $surface; padding: 1 2;
    }
    """

    def __init__(self, app_bindings: list[tuple[str, str]]) -> None:
        super().__init__()
        self.app_bindings = app_bindings

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text("fabtop keys", style="bold"))
            yield Static(bindings_table(self.app_bindings))
            yield Static(
                bindings_table(
                    [
                        ("↑ ↓ ← →", "move in the links table / fabric map"),
                        ("enter", "links table: open the link; map: show the node's ports"),
                        ("tab", "next panel"),
                        ("ctrl+p", "command palette: inject on a link, clear, pause, sort…"),
                    ]
                )
            )
            yield Static("\n" + FILTER_HELP)
            yield Static(
                "\nRates (pauses/s, ECN/s, drops B/s) are per simulated second. "
                "Latency 'now' is measured over the last few samples; "
                "the sparkline is p99 history."
            )

    def action_dismiss_help(self) -> None:
        """Close the help screen."""
        self.dismiss(None)
