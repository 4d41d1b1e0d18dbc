"""A sparkline on a fixed scale (0 … ``high``), several rows tall.

Textual's ``Sparkline`` scales each picture to its own min and max, so a link
that keeps all its credits looks the same as one that has none. Credit and
utilisation need an absolute scale: a full bar is a full buffer, a full link.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

BLOCKS = " ▁▂▃▄▅▆▇█"


def scaled_sparkline(
    values: Sequence[float], high: float, *, rows: int = 3, width: int = 60
) -> Text:
    """The last ``width`` values drawn as bars from 0 to ``high``, ``rows`` lines tall."""
    data = list(values)[-width:]
    eighths = [round(min(max(v / high, 0.0), 1.0) * rows * 8) if high > 0 else 0 for v in data]
    lines = []
    for row in range(rows - 1, -1, -1):  # top row first
        base = row * 8
        lines.append("".join(BLOCKS[min(max(e - base, 0), 8)] for e in eighths))
    return Text("\n".join(lines), style="cyan")
