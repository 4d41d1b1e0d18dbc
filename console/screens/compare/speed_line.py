"""The compare view's bottom line: the speed asked of both engines and each one's measured
over the same wall seconds, shortened to fit."""

from __future__ import annotations

from rich.text import Text

from console.fmt import fmt_speed
from console.viewstate import FabricView


def speed_line(
    views: tuple[FabricView, FabricView],
    measured: tuple[float, ...] | None,
    span_s: float,
    width: int = 0,
) -> Text:
    """``speed 1e-3× on both  (now 9.8e-4× native-400g · 9.8e-4× roce-400g, both over
    the last 2.0 s)   + faster ×2 · - slower ÷2 (both engines)``: ``measured``, each
    side's speed over the same ``span_s`` wall seconds (``SharedWindow``), None before it
    has one. Narrower than ``width`` (0: any width) it leaves out the keys' hint (the
    footer has them), then says "last 2.0 s" only; past that it wraps."""
    snaps = [v.snapshot for v in views]
    if any(s is None for s in snaps):
        return Text(" ")
    a, b = snaps[0], snaps[1]
    assert a is not None and b is not None
    asked = Text(" ")
    if a.target_speed == b.target_speed:
        asked.append(f"speed {fmt_speed(a.target_speed)} on both", "bold")
    else:
        asked.append(
            f"speed {fmt_speed(a.target_speed)} {a.profile} · {fmt_speed(b.target_speed)} "
            f"{b.profile}",
            "bold",
        )
    keys = Text("   + faster ×2 · - slower ÷2 (both engines)", "dim")
    if measured is None or not any(m > 0 for m in measured):
        return asked + keys
    now = " · ".join(
        # (a side that did not move, an engine that stopped, read 0×, not flat out's max)
        f"{fmt_speed(m) if m > 0 else '0×'} {s.profile}"
        for s, m in zip((a, b), measured, strict=True)
    )
    full = asked + Text(f"  (now {now}, both over the last {span_s:.1f} s)")
    variants = (full + keys, full, asked + Text(f"  (now {now}, last {span_s:.1f} s)"))
    return next((v for v in variants if width <= 0 or v.cell_len <= width), variants[-1])
