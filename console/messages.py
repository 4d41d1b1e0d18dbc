"""Messages the console's widgets and screens send upwards."""

from __future__ import annotations

from textual.message import Message


class SwitchSelected(Message):
    """The operator picked a node on the fabric map: show its ports."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


class LinkChosen(Message):
    """The operator pressed Enter on a link: open its detail screen."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


class SortRequested(Message):
    """The operator clicked a column header of the links table."""

    def __init__(self, column: str) -> None:
        super().__init__()
        self.column = column


class InjectRequested(Message):
    """A screen asks for the fault form, with ``target`` filled in."""

    def __init__(self, target: str = "") -> None:
        super().__init__()
        self.target = target


class RedrawRequested(Message):
    """A screen changed what it shows (not the data): redraw now, even when frozen."""
