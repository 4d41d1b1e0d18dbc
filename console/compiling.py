"""What an engine compiles on its first run after an install, as the console shows it."""

from __future__ import annotations

import time
from dataclasses import dataclass

#: Why the wait happens once, after the kernel and its time (the console's header and
#: compare view, ``fabtop run``'s progress line)
ONCE = "(the first run after an install: cached after)"


@dataclass(frozen=True)
class Compiling:
    """The kernel an engine's numba compiles now, and since when it has been compiling
    (``time.monotonic()``: the first of a stretch of compiles, one kernel after another)."""

    kernel: str
    since: float


def compiling_note(compiling: Compiling, now: float | None = None) -> str:
    """What the engine compiles, for how long so far, and that it happens once."""
    now = time.monotonic() if now is None else now
    waited = max(0.0, now - compiling.since)
    return f"{compiling.kernel} · {waited:.0f} s {ONCE}"
