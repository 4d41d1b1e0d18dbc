"""Numbers read from a workload's scenario table, checked where they are read.

``int(t.get(...))`` took ``true`` for 1 and ``"8"`` for 8, and let a negative rate
through to the random generator, which failed mid-run with numpy's traceback. These
readers say which key is wrong and what it must be; ``build_workload`` adds where the
table is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def whole(t: Mapping[str, Any], key: str, default: int, *, minimum: int = 0) -> int:
    """``t[key]`` (or ``default``) as a whole number of at least ``minimum``.

    Raises:
        ValueError: not a whole number (a bool is not one), or below ``minimum``.
    """
    value = t.get(key, default)
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not float(value).is_integer() or value < minimum:
        raise ValueError(f"{key}: expected a whole number >= {minimum}, got {value!r}")
    return int(value)


def number(
    t: Mapping[str, Any],
    key: str,
    default: float,
    *,
    minimum: float = 0.0,
    maximum: float = math.inf,
    positive: bool = False,
) -> float:
    """``t[key]`` (or ``default``) as a finite number in [``minimum``, ``maximum``]
    (and above 0 if ``positive``).

    Raises:
        ValueError: not a number (a bool is not one), or out of range.
    """
    value = t.get(key, default)
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok and minimum <= value <= maximum and not (positive and value <= 0):
        return float(value)
    if positive:
        bound = "> 0" if maximum == math.inf else f"in (0, {maximum:g}]"
    else:
        bound = f">= {minimum:g}" if maximum == math.inf else f"in [{minimum:g}, {maximum:g}]"
    raise ValueError(f"{key}: expected a number {bound}, got {value!r}")
