"""Fault targets as operators type them: ``leaf01:spine00`` and ``leaf01-spine00`` mean the
link ``leaf01->spine00``.

``->`` is the link's name, but in a shell an unquoted ``>`` redirects (``fabtop inject
link_down leaf01->spine00`` runs ``fabtop inject link_down leaf01-`` and writes a file
``spine00``). The two spellings without ``>`` need no quotes.
"""

from __future__ import annotations

import re

_NAME = r"[A-Za-z][A-Za-z0-9_.]*"
_SHELL_SAFE = re.compile(rf"({_NAME})\s*(?::|-|=>)\s*({_NAME})")


def normalise_target(text: str) -> str:
    """``leaf01:spine00`` / ``leaf01-spine00`` -> ``leaf01->spine00``; other text unchanged."""
    t = text.strip()
    if "->" in t:
        return t
    m = _SHELL_SAFE.fullmatch(t)
    return f"{m.group(1)}->{m.group(2)}" if m else t


def typed_spellings(names: list[str]) -> list[str]:
    """``names`` and, for each link ``a->b``, ``a:b`` and ``a-b`` after them: what Tab may
    complete a target to as the operator is typing it (``leaf00:sp`` -> ``leaf00:spine00``,
    which ``normalise_target`` reads as the link)."""
    links = [name.split("->", 1) for name in names if "->" in name]
    return [*names, *(f"{a}:{b}" for a, b in links), *(f"{a}-{b}" for a, b in links)]
