"""A read-only console's refusal of an action that would change the emulation."""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.screen import Screen


def refuse_if_read_only(where: App[Any] | Screen[Any], read_only: bool, what: str) -> bool:
    """Whether to refuse ``what`` (``"fault injection"``, ...): on a read-only console,
    say so on ``where`` (the app or a screen) and refuse."""
    if read_only:
        where.notify(f"read-only console: {what} is disabled", severity="warning")
    return read_only


#: The actions that change the emulation (on the main view and the compare view alike): a
#: read-only console leaves them out of its footer (``hidden_if_read_only``)
CHANGING_ACTIONS = frozenset({"toggle_pause", "speed", "inject", "clear_all"})


def hidden_if_read_only(action: str, read_only: bool) -> bool:
    """Whether a read-only console hides ``action``'s key: its footer listed keys that only
    said they were disabled."""
    return read_only and action in CHANGING_ACTIONS
