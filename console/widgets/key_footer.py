"""The footer of keys, which gives up its command-palette key when the keys need the room."""

from __future__ import annotations

from textual import events
from textual.binding import Binding
from textual.widgets import Footer

#: The class Textual's footer gives its command-palette key
PALETTE_CLASS = "-command-palette"


class KeyFooter(Footer):
    """Textual's compact footer, less its command-palette key where the screen's keys fill
    the line.

    Textual docks that key on the right, over the others: on a terminal narrower than the
    two together it hid the last keys (Help and Quit at 100 columns) and left a letter of
    a covered key beside it. Ctrl+P opens the palette whether the key is shown or not.
    """

    # a group's label ("Speed") a space from the next key, as a key's description is, and
    # the group a space from the key before (Textual's compact footer runs the label into
    # the next key and leaves two spaces before the group)
    DEFAULT_CSS = """
    KeyFooter.-compact {
        FooterLabel { margin: 0 1 0 0; }
        KeyGroup { padding-left: 0; }
        FooterKey.-grouped { margin: 0 1 0 0; }
    }
    """

    def __init__(self) -> None:
        super().__init__(compact=True)
        self._palette_width = 0  # as last drawn (the key's text and its border)

    async def recompose(self) -> None:
        """Compose the keys again (the screen's bindings changed), then fit them."""
        await super().recompose()
        self.call_after_refresh(self._fit)

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self._fit)

    def keys_width(self) -> int:
        """Columns the screen's keys take, from the footer's left edge (0 before layout)."""
        keys = [child for child in self.children if not child.has_class(PALETTE_CLASS)]
        return max((key.region.right for key in keys), default=self.region.x) - self.region.x

    def _fit(self) -> None:
        for palette in self.query_children(f".{PALETTE_CLASS}"):
            self._palette_width = palette.outer_size.width
        keys_width = self.keys_width()
        if keys_width == 0:  # not laid out yet: the recompose will fit it
            return
        fits = keys_width + self._palette_width <= self.size.width
        if fits != self.show_command_palette:
            self.show_command_palette = fits
            self.refresh(recompose=True)


#: The speed keys, + and -, shown as one ("+ - Speed"), here and on the compare view
SPEED = Binding.Group("Speed")
