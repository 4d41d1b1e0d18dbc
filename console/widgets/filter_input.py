"""The filter line of the links table (opened with "/")."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import Input


class FilterInput(Input):
    """An input that hides itself on Escape; the app applies it on Enter."""

    #: (Esc leaves the filter as it was: an empty line and Enter shows every link)
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close, filter unchanged")]
    DEFAULT_CSS = """
    FilterInput { display: none; }
    FilterInput.open { display: block; }
    """

    def open(self, current: str) -> None:
        """Show with the current filter text, focused."""
        self.value = current
        self.add_class("open")
        self.focus()

    def action_close(self) -> None:
        """Hide without changing the filter."""
        self.remove_class("open")
        self.screen.focus_next()
