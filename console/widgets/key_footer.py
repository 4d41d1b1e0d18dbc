"""The footer of keys, which gives up its command-palette key, then the keys a screen can
spare most, when the keys need the room."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

#: The class Textual's footer gives its command-palette key
PALETTE_CLASS = "-command-palette"


class KeyFooter(Footer):
    """Textual's compact footer, less its command-palette key where the screen's keys fill
    the line, and less the keys of ``drop_order`` (actions, the first to go first) where
    they still do not fit.

    Textual docks the palette's key on the right, over the others: on a terminal narrower
    than the two together it hid the last keys (Help and Quit at 100 columns) and left a
    letter of a covered key beside it. At 80 columns the main view's keys alone are 93
    columns: Textual cut the line after "c C" and Quit did not show. A key left out still
    works, and the help (?) lists every key; Ctrl+P opens the palette whether its key is
    shown or not.
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

    def __init__(self, drop_order: Sequence[str] = ()) -> None:
        super().__init__(compact=True)
        self._palette_width = 0  # as last drawn (the key's text and its border)
        self._drop_order = tuple(drop_order)
        self.dropped: frozenset[str] = frozenset()  # the actions whose keys are left out
        self._slot_widths: dict[str, int] = {}  # columns each droppable key took, drawn

    def compose(self) -> ComposeResult:
        """Textual's keys, less those left out for room."""
        for widget in super().compose():
            if isinstance(widget, FooterKey) and widget.action in self.dropped:
                continue
            yield widget

    async def recompose(self) -> None:
        """Compose the keys again (the screen's bindings changed), then fit them."""
        await super().recompose()
        self.call_after_refresh(self._fit)

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self._fit)

    def _keys(self) -> list[Widget]:
        return [child for child in self.children if not child.has_class(PALETTE_CLASS)]

    def keys_width(self) -> int:
        """Columns the screen's keys take, from the footer's left edge (0 before layout)."""
        return (
            max((key.region.right for key in self._keys()), default=self.region.x) - self.region.x
        )

    def _measure_slots(self) -> None:
        """Note the columns each droppable key takes as drawn, its margin included: from its
        left edge to the next key's."""
        keys = sorted(self._keys(), key=lambda key: key.region.x)
        for key, after in zip(keys, [*keys[1:], None], strict=True):
            if isinstance(key, FooterKey) and key.action in self._drop_order:
                end = after.region.x if after is not None else key.region.right
                self._slot_widths[key.action] = end - key.region.x

    def _to_drop(self, full_width: int) -> frozenset[str]:
        """The keys to leave out, first of ``drop_order`` first, for the rest to fit."""
        dropped: set[str] = set()
        for action in self._drop_order:
            if full_width <= self.size.width:
                break
            if action in self._slot_widths:
                dropped.add(action)
                full_width -= self._slot_widths[action]
        return frozenset(dropped)

    def _fit(self) -> None:
        for palette in self.query_children(f".{PALETTE_CLASS}"):
            self._palette_width = palette.outer_size.width
        keys_width = self.keys_width()
        if keys_width == 0:  # not laid out yet: the recompose will fit it
            return
        self._measure_slots()
        # as wide as every key would be: those drawn and those left out
        full_width = keys_width + sum(self._slot_widths.get(a, 0) for a in self.dropped)
        with_palette = full_width + self._palette_width <= self.size.width
        dropped = frozenset() if with_palette else self._to_drop(full_width)
        if with_palette != self.show_command_palette or dropped != self.dropped:
            self.dropped = dropped
            self.show_command_palette = with_palette
            self.refresh(recompose=True)


def drop_order(bindings: Iterable[BindingType], *actions: str) -> tuple[str, ...]:
    """``actions``, checked against ``bindings``: a name that binds no key would never be
    left out, so a footer that should fit would not (a typo is caught at import)."""
    bound = {binding.action for binding in bindings if isinstance(binding, Binding)}
    unknown = [action for action in actions if action not in bound]
    if unknown:
        raise ValueError(f"no key binds {', '.join(unknown)}")
    return actions


#: The speed keys, + and -, shown as one ("+ - Speed"), here and on the compare view
SPEED = Binding.Group("Speed")
