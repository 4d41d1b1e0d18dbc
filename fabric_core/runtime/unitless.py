"""The durations a scenario file writes without a unit: read as seconds, and said so.

In a scenario file a duration without a unit is seconds (docs/SCENARIOS.md, "Durations"),
as the profile's ``*_s`` parameters are, and the bundled scenarios rely on no such number.
A user who writes ``duration = 5`` meaning 5 ms has a fault of 5 s, and ``period = 100``
meaning 100 µs a period of 100 s: both load, so nothing said so. The command line refuses a
duration without a unit; a file keeps the rule it documents (refusing would break files
that follow it), and each such key is named here, with the unit to write, for the commands
to warn of before they run (``Scenario.unit_notes``). A zero needs no unit.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from fabric_core.units import format_duration, is_unitless_duration, parse_duration
from fabric_core.workloads.fields import DURATION_KEYS


def unitless_notes(data: Mapping[str, Any], *, file_dt: bool) -> list[str]:
    """A warning for each duration of the (validated) scenario table ``data`` written
    without a unit, naming its key; ``file_dt``: whether the tick is the file's (not one
    the command line gave, which has its unit)."""
    return [
        _note(where, value)
        for where, value in _durations(data)
        if (file_dt or where != "dt") and is_unitless_duration(value)
        if parse_duration(value, allow_zero=True) > 0
    ]


def _note(where: str, value: int | float | str) -> str:
    """``where = value`` read as seconds, and the unit to write (the number in another
    unit only for a second or more: a fraction of one was meant as seconds)."""
    seconds = parse_duration(value, allow_zero=True)
    text = str(value).strip()
    shown = f'"{value}"' if isinstance(value, str) else text
    fix = f'{where.rsplit(".", 1)[-1]} = "{_with_unit(seconds)}"'
    if float(text) >= 1:
        fix += f' if that is meant, or "{text}ms", "{text}us"'
    return (
        f"{where} = {shown} has no unit, so it is {format_duration(seconds)} (a duration "
        f"without a unit is seconds): write the unit, {fix}"
    )


def _with_unit(seconds: float) -> str:
    """``seconds`` in the largest unit it is at least one of, unrounded: ``"500ns"``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.12g}{unit}"
    return f"{seconds / 1e-9:.12g}ns"


def _durations(data: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """(where, value) of every duration the table gives, by its key's place in the file."""
    if "dt" in data:
        yield "dt", data["dt"]
    for i, w in enumerate(data.get("workload", [])):
        for key, value in w.items():
            if key in DURATION_KEYS:
                yield f"workload[{i}].{key}", value
    for i, f in enumerate(data.get("fault", [])):
        for key in ("at", "duration"):
            if key in f:
                yield f"fault[{i}].{key}", f[key]
    for cls, table in data.get("links", {}).items():
        named = table.items() if cls == "named" else [(None, table)]
        for name, settings in named:
            if "delay" in settings:
                at = f"links.{cls}" if name is None else f'links.named."{name}"'
                yield f"{at}.delay", settings["delay"]
