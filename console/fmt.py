"""Short, fixed-width renderings of numbers in base units for the console."""

from __future__ import annotations

import math

_TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
_BYTE_UNITS = ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"))


def fmt_seconds(value_s: float | None) -> str:
    """``1.23 ms``, ``870 ns``; an em dash for missing or NaN."""
    if value_s is None or not math.isfinite(value_s):
        return "—"
    if value_s == 0:
        return "0 s"
    for scale, unit in _TIME_UNITS:
        if abs(value_s) >= scale:
            return f"{value_s / scale:.3g} {unit}"
    return f"{value_s / 1e-9:.3g} ns"


def fmt_bytes(value: float) -> str:
    """``12.3 MB`` (decimal units, like link bandwidths)."""
    if not math.isfinite(value):
        return "—"
    for scale, unit in _BYTE_UNITS:
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def fmt_rate(per_s: float) -> str:
    """An event rate per simulated second: ``0``, ``12``, ``3.4k``, ``1.2M``."""
    if not math.isfinite(per_s):
        return "—"
    if per_s == 0:
        return "0"
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(per_s) >= scale:
            return f"{per_s / scale:.3g}{unit}"
    return f"{per_s:.3g}"


def fmt_pct(fraction: float) -> str:
    """``87.5%`` from 0.875."""
    if not math.isfinite(fraction):
        return "—"
    return f"{fraction * 100:.1f}%"


def fmt_speed(speed: float) -> str:
    """Simulated seconds per wall second: ``1e-3×``; 0 means flat out."""
    if speed <= 0 or not math.isfinite(speed):
        return "max"
    if speed >= 0.1:
        return f"{speed:.3g}×"
    exp = math.floor(math.log10(speed))
    mant = speed / 10**exp
    return f"{mant:.2g}e{exp}×"


def fmt_kpi(name: str, value: float) -> str:
    """A workload KPI by its name's unit suffix (``_seconds``, ``_bytes``, ratio)."""
    if name.endswith(("_Bps", "_bytes_per_second")):
        return fmt_bytes(value) + "/s"
    if name.endswith("_s") or "_seconds" in name:
        return fmt_seconds(value)
    if name.endswith("_bytes"):
        return fmt_bytes(value)
    if "utilisation" in name or "utilization" in name or name.endswith(("_ratio", "_fraction")):
        return fmt_pct(value)
    return f"{value:.4g}"
