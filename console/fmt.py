"""Short, fixed-width renderings of numbers in base units for the console and the CLI.

One unit convention everywhere (console, ``fabtop run``, ``compare``, ``storage-report``;
stated in the README), the one ``fabric_core.units`` prints: sizes in bytes with binary
prefixes (B, KiB, MiB, GiB), as messages, buffers and scenario files give them; data rates
in bits per second with decimal prefixes (kb/s, Mb/s, Gb/s, Tb/s), as links are rated (a
400G link carries 400 Gb/s); times in s / ms / µs / ns; counts as grouped integers (15,040);
event rates (pauses, ECN marks) as plain numbers per second (3.4k).
"""

from __future__ import annotations

import math

from fabric_core.units import BIT_RATE_UNITS, BYTE_UNITS, TIME_UNITS, in_unit


def fmt_seconds(value_s: float | None) -> str:
    """``1.23 ms``, ``870 ns``; an em dash for missing or NaN."""
    if value_s is None or not math.isfinite(value_s):
        return "—"
    if value_s == 0:
        return "0 s"
    return in_unit(value_s, TIME_UNITS) or f"{value_s / 1e-9:.3g} ns"


def fmt_bytes(value: float) -> str:
    """``12.3 MiB``, ``512 B`` (binary prefixes, as buffers and messages are sized)."""
    if not math.isfinite(value):
        return "—"
    return in_unit(value, BYTE_UNITS) or f"{value:.0f} B"


def fmt_bitrate(bytes_per_s: float) -> str:
    """A data rate given in bytes/s, shown in bits/s: ``400 Gb/s`` (as links are rated)."""
    if not math.isfinite(bytes_per_s):
        return "—"
    bits = bytes_per_s * 8
    if bits == 0:
        return "0 b/s"
    return in_unit(bits, BIT_RATE_UNITS) or f"{bits:.3g} b/s"


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
    """Simulated seconds per wall second: ``1e-3×``, ``9.8e-4×``; 0 means flat out."""
    if speed <= 0 or not math.isfinite(speed):
        return "max"
    if speed >= 0.1:
        return f"{speed:.3g}×"
    mant, _, exp = f"{speed:.1e}".partition("e")  # rounds first: 9.96e-4 -> 1.0e-03
    mant = mant.removesuffix(".0")
    return f"{mant}e{int(exp)}×"


def fmt_count(value: float) -> str:
    """A count as a grouped integer (``15,040``); non-integers keep 3 significant digits."""
    if not math.isfinite(value):
        return "—"
    if float(value).is_integer():
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


#: Words in KPI names read better spelled out.
_KPI_WORDS = {
    # (the workloads' goodput is what they delivered over the whole run: beside the header's
    # throughput, a window, it read as a contradiction after a fault)
    "goodput": "goodput since start",
    "alltoall": "all-to-all",
    "ttft": "TTFT",
    "kv": "KV",
    "gpu": "GPU",
    "cpu": "CPU",
    "io": "I/O",
    "rdma": "RDMA",
    "fct": "flow completion",
    "p50": "p50",
    "p99": "p99",
}
#: Unit suffixes, longest first: (suffix, unit tag); the tag chooses the formatting.
_KPI_UNITS = (
    ("_bytes_per_second_per_rank", "Bps", " per rank"),
    ("_bytes_per_second_last", "Bps", " (last)"),
    ("_bytes_per_second", "Bps", ""),
    ("_bytes_per_byte", "ratio", " per byte"),
    ("_bytes_per_request", "bytes", " per request"),
    ("_bytes_per_token", "bytes", " per token"),
    ("_per_second_per_rank", "rate", " per rank"),
    ("_tokens_per_s", "rate", " tokens"),
    ("_seconds_last", "s", " (last)"),
    ("_seconds_mean", "s", " (mean)"),
    ("_last_seconds", "s", " (last)"),
    ("_seconds", "s", ""),
    ("_bytes", "bytes", ""),
    ("_Bps", "Bps", ""),
    ("_fraction", "pct", ""),
    ("_share_of_ttft", "pct", " share of TTFT"),
    ("_utilisation", "pct", " utilisation"),
    ("_per_s", "rate", ""),
)


def _kpi_parts(name: str) -> tuple[str, str]:
    """(human label, unit tag) of a KPI name."""
    unit, tail = "count", ""
    for suffix, tag, extra in _KPI_UNITS:
        if name.endswith(suffix):
            name, unit, tail = name[: -len(suffix)], tag, extra
            break
    if name == "utilisation" or name.endswith("_utilisation"):
        unit = "pct"
    words = [_KPI_WORDS.get(w, w) for w in name.split("_") if w]
    return " ".join(words) + tail, unit


def kpi_label(name: str) -> str:
    """``goodput_bytes_per_second`` -> ``goodput since start``; ``incast_seconds_last`` ->
    ``incast (last)``; ``messages_sent`` -> ``messages sent``: the value carries the unit."""
    return _kpi_parts(name)[0]


def fmt_kpi(name: str, value: float) -> str:
    """A workload KPI's value in the unit its name says (``_seconds``, ``_bytes``, …)."""
    unit = _kpi_parts(name)[1]
    if unit == "Bps":
        return fmt_bitrate(value)
    if unit == "s":
        return fmt_seconds(value)
    if unit == "bytes":
        return fmt_bytes(value)
    if unit == "pct":
        return fmt_pct(value)
    if unit == "rate":
        return fmt_rate(value) + "/s"
    return fmt_count(value)


def kpi_text(name: str, value: float) -> str:
    """``goodput 5.35 Tb/s``."""
    return f"{kpi_label(name)} {fmt_kpi(name, value)}"
