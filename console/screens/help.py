"""The help screen: the keys of the screen it was opened from, as typed, and the filter syntax."""

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
    "is:down, is:degraded, is:hot, is:up match states, is:starved the credit links waiting "
    "for credit (native fabric), is:paused the links stopped by PFC pause frames (RoCE); "
    "words combine with AND. An empty filter shows all links; Esc closes the filter line "
    "and leaves the filter as it was."
)

#: Textual's key names -> what the operator types.
TYPED = {
    "plus": "+",
    "minus": "-",
    "equals_sign": "=",
    "slash": "/",
    "question_mark": "?",
    "escape": "Esc",
    "enter": "Enter",
    "tab": "Tab",
    "shift+tab": "Shift+Tab",
    "space": "Space",
    "ctrl+p": "Ctrl+P",
}


def typed(key: str) -> str:
    """``question_mark`` -> ``?``, ``escape`` -> ``Esc``, ``p`` -> ``p``."""
    return TYPED.get(key, key)


def bindings_table(bindings: list[tuple[str, str]]) -> Table:
    """Key / action pairs as a two-column table."""
    table = Table(box=None, show_header=True, header_style="bold")
    table.add_column("key", style="bold cyan")
    table.add_column("action")
    for key, description in bindings:
        table.add_row(key, description)
    return table


def describe(bindings: list[BindingType]) -> list[tuple[str, str]]:
    """(keys as typed, description) of ``Binding`` objects, in order.

    ``plus,equals_sign`` with ``key_display="+"`` reads ``+``: the display wins when
    given (an alias such as ``=`` for an unshifted ``+`` is not worth a line). A key bound
    twice with one description (a hidden second binding, such as the main view's ``c``)
    is listed once; bound twice with two (``p``'s Pause, and Resume in its place while
    paused) once too, the two joined: ``Pause / resume``.
    """
    out: dict[str, str] = {}
    for b in bindings:
        if isinstance(b, Binding) and b.description:
            keys = b.key_display or " / ".join(typed(k.strip()) for k in b.key.split(","))
            if keys not in out:
                out[keys] = b.description
            elif b.description not in out[keys].split(" / "):
                out[keys] += " / " + b.description[:1].lower() + b.description[1:]
    return list(out.items())


class HelpScreen(ModalScreen[None]):
    """Lists the keys of one screen (and the navigation keys); Esc, q or ? closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss_help", "Close")
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90; max-width: 100%; height: 80%; border: thick $primary; background: $surface;
        padding: 1 2;
    }
    """

    def __init__(
        self,
        app_bindings: list[tuple[str, str]],
        *,
        title: str = "fabtop keys",
        navigation: list[tuple[str, str]] | None = None,
        notes: str = "",
    ) -> None:
        super().__init__()
        self.app_bindings = app_bindings
        self.heading = title
        self.navigation = navigation or []
        self.notes = notes

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text(self.heading, style="bold"))
            yield Static(bindings_table(self.app_bindings))
            if self.navigation:
                yield Static(Text("\nmoving around", style="bold"))
                yield Static(bindings_table(self.navigation))
            if self.notes:
                yield Static("\n" + self.notes)
            yield Static(Text("\nEsc, q or ? closes this help.", style="dim"))

    def action_dismiss_help(self) -> None:
        """Close the help screen."""
        self.dismiss(None)


MAIN_NAVIGATION = [
    ("↑ ↓ ← →", "move in the links table / fabric map"),
    ("Enter", "links table: open the link; map: the node's ports, or into a pod"),
    ("Tab / Shift+Tab", "next / previous panel (Shift+Tab from the table goes to the map)"),
    ("Esc", "close the filter line or a form, back from a screen or a pod of the map"),
    ("Ctrl+P", "command palette: inject on a link, clear, pause, sort…"),
]

#: What the links table's less obvious columns hold (a hot RoCE port read "queue 0 B")
LINKS_HELP = (
    "Links table: queue is the bytes that crossed the link and wait in the ingress buffer at "
    "its far end, so the backlog behind a congested port shows on the links into its switch, "
    "not on the port itself; credits (native fabric) are what the sender may still send into "
    "that buffer, headroom (RoCE) the PFC headroom left in it."
)

MAIN_NOTES = (
    FILTER_HELP + "\n\n" + LINKS_HELP + " Rates (pauses/s, ECN/s, drops) are per simulated "
    "second. Latency 'now' is measured over the last few samples; the sparkline is p99 history."
)
