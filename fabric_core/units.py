"""Parsing and printing of quantities with units (durations, sizes, rates)."""

from __future__ import annotations

import math
import re

_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
_SIZE_UNITS = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tb": 1000**4,
    "tib": 1024**4,
}
#: A number as the parsers read it: signed, so that "-5KiB" is told it must be positive
#: rather than that it lacks a unit
_NUMBER = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"


def parse_duration(text: str | float | int, *, allow_zero: bool = False) -> float:
    """Seconds from ``"5ms"``, ``"250 us"``, ``"1e-3s"`` or a plain number of seconds.

    A duration must be > 0, or >= 0 with ``allow_zero`` (a time such as "at 0s").

    Raises:
        ValueError: naming the accepted units.
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        value = float(text)
    else:  # text, or something else a scenario file gave (a bool, a list): refused here
        m = (
            re.fullmatch(_NUMBER + r"\s*(ns|us|µs|ms|s)?", text.strip())
            if isinstance(text, str)
            else None
        )
        if not m:
            raise ValueError(
                f"bad duration {text!r}: expected a number with a unit (ns, us, ms, s)"
            )
        value = float(m.group(1)) * _DURATION_UNITS[m.group(2) or "s"]
    if not math.isfinite(value):
        raise ValueError(f"duration must be a finite number, got {text!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"duration must be {'>=' if allow_zero else '>'} 0, got {text!r}")
    return value


def is_unitless_duration(value: object) -> bool:
    """Whether ``value``, a duration ``parse_duration`` reads, has no unit: a number, or
    text that is one (``parse_duration`` reads either as seconds)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    return isinstance(value, str) and re.fullmatch(_NUMBER, value.strip()) is not None


def parse_size(text: str | float | int, *, signed: bool = False) -> float:
    """Bytes from ``"4KiB"``, ``"1 MB"``, ``"7408"`` or a plain number; a negative size is
    refused unless ``signed`` (for a caller that says its own range)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        value = float(text)
    else:  # as in parse_duration: a bool or a list is refused with the text's message
        m = (
            re.fullmatch(_NUMBER + r"\s*([kKmMgGtT]?i?[bB])?", text.strip())
            if isinstance(text, str)
            else None
        )
        if not m:
            raise ValueError(
                f"bad size {text!r}: expected bytes with a unit (B, KB, KiB, MB, MiB, GB, GiB, TB, TiB)"
            )
        unit = m.group(2) or ""
        if unit.endswith("b"):  # (read as bytes, "4Mb" was 4 MB: a rate's b is bits)
            prefix = unit[:-1]  # "", "M", "Ki"
            meant = [f"{prefix}B"] + ([f"{prefix}iB"] if prefix and "i" not in prefix else [])
            raise ValueError(
                f"bad size {text!r}: {unit!r} reads as bits; a size is in bytes, a capital B "
                f"({' or '.join(meant)})"
            )
        value = float(m.group(1)) * _SIZE_UNITS[(unit or "b").lower()]
    if not math.isfinite(value):
        raise ValueError(f"size must be a finite number, got {text!r}")
    if value < 0 and not signed:
        raise ValueError(f"size must be >= 0, got {text!r}")
    return value


_RATE_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def parse_rate(text: str) -> float:
    """Bytes per second from a link rate: ``"400G"`` and ``"400Gb/s"`` (bits, as links are
    rated), ``"100 Mbps"``, ``"50GB/s"`` (bytes: capital B).

    A unit is required (a bare number could be bits or bytes) and the rate must be > 0.

    Raises:
        ValueError: naming the accepted forms.
    """
    m = (
        re.fullmatch(_NUMBER + r"\s*([kKMGT]?)(b/s|bps|bit/s|B/s|Bps)?", text.strip())
        if isinstance(text, str)
        else None
    )
    if not m or not (m.group(2) or m.group(3)):
        raise ValueError(
            f"bad rate {text!r}: expected a number with a unit (400G, 400Gb/s, 100Mbps, 50GB/s)"
        )
    unit = m.group(3) or "b/s"
    value = float(m.group(1)) * _RATE_PREFIX[m.group(2)] / (1.0 if unit[0] == "B" else 8.0)
    if not math.isfinite(value):
        raise ValueError(f"rate must be a finite number, got {text!r}")
    if value <= 0:
        raise ValueError(f"rate must be > 0, got {text!r}")
    return value


def in_unit(value: float, units: tuple[tuple[float, str], ...]) -> str | None:
    """``value`` in the largest of ``units`` (scale, name; largest first) it reaches, to 3
    significant digits, or None below the smallest. A value that rounds up to 1000 of one
    unit is given in the next (999.99 ms is ``1 s``, 1,000 KiB ``0.977 MiB``), and one of
    1000 or more of the largest in whole numbers (``2,020 Tb/s``: ``.3g`` wrote
    ``2.02e+03 Tb/s``)."""
    for i, (scale, unit) in enumerate(units):
        if abs(value) >= scale:
            text = f"{value / scale:.3g}"
            if abs(float(text)) >= 1000:
                if i > 0:
                    scale, unit = units[i - 1]
                    text = f"{value / scale:.3g}"
                else:
                    text = f"{value / scale:,.0f}"
            return f"{text} {unit}"
    return None


#: Units of time, bytes and bit rates, largest first (``in_unit``)
TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
BYTE_UNITS = ((1024.0**4, "TiB"), (1024.0**3, "GiB"), (1024.0**2, "MiB"), (1024.0, "KiB"))
BIT_RATE_UNITS = ((1e12, "Tb/s"), (1e9, "Gb/s"), (1e6, "Mb/s"), (1e3, "kb/s"))


def format_duration(seconds: float) -> str:
    """``1.25 µs``, ``3.10 ms``: three significant digits in the closest unit."""
    if not math.isfinite(seconds):
        return "—"
    return in_unit(seconds, TIME_UNITS) or f"{seconds / 1e-9:.3g} ns"


def format_rate(bytes_per_s: float) -> str:
    """A byte rate in bits per second, as network people read it (``400 Gb/s``)."""
    bits = bytes_per_s * 8
    return in_unit(bits, BIT_RATE_UNITS) or f"{bits:.3g} b/s"


def format_bytes(n: float) -> str:
    """``1.5 MiB``."""
    return in_unit(n, BYTE_UNITS) or f"{n:.0f} B"
