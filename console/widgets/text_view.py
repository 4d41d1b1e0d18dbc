"""A widget that shows one rich ``Text`` and repaints only when it changed.

``Static.update`` asks for a layout pass of the whole screen on every call; a
live console that updates a dozen texts four times a second then spends most
of its time in layout. ``TextView`` repaints in place, and asks for layout
only when its height depends on the text (``height: auto``) and the number of
lines changed.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget


class TextView(Widget):
    """See the module docstring."""

    DEFAULT_CSS = """
    TextView { height: auto; }
    """

    def __init__(
        self, text: Text | str = "", *, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(id=id, classes=classes)
        self._text = Text(text) if isinstance(text, str) else text
        self._key: tuple[object, ...] = ()

    @property
    def text(self) -> Text:
        """What is shown."""
        return self._text

    def show_text(self, text: Text | str) -> None:
        """Show ``text``; nothing happens if it is the same as what is shown."""
        new = Text(text) if isinstance(text, str) else text
        key = (new.plain, tuple(new.spans), new.style)
        if key == self._key:
            return
        lines_before = self._text.plain.count("\n")
        self._text, self._key = new, key
        auto_height = self.styles.height is not None and self.styles.height.is_auto
        self.refresh(layout=auto_height and new.plain.count("\n") != lines_before)

    def render(self) -> Text:
        return self._text
