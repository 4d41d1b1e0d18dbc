"""The compare view's difference: per class p50 and p99 of both fabrics with their ratios,
then throughput, in the wider of two layouts that fits."""

from __future__ import annotations

import math

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from console.fmt import fmt_bitrate, fmt_seconds
from console.latency import ClassLatency
from console.screens.compare.grid import cells_width, filled_grid
from console.viewstate import FabricView


def ratio(a: float, b: float, *, larger_is_worse: bool = True) -> Text:
    """``b / a`` as ``×1.63`` (``×119,355`` from 100 on: the decimals of a probe that
    waited a second for its ACK timeout say nothing), red when b is worse than a by
    over 5 %, green when better."""
    if not (math.isfinite(a) and math.isfinite(b)) or a <= 0:
        return Text("—", style="dim")
    r = b / a
    worse, better = (r > 1.05, r < 0.95) if larger_is_worse else (r < 0.95, r > 1.05)
    style = "bold red" if worse else "bold green" if better else ""
    # (two significant digits below 0.1: a probe 227 times faster read ×0.00)
    text = f"×{r:,.0f}" if r >= 100 else f"×{r:.2f}" if r >= 0.1 else f"×{r:.2g}"
    return Text(text, style=style)


def _latency_cell(value: float, lat: ClassLatency | None) -> Text:
    """A quantile, dimmed where its class completed nothing lately (its last figure)."""
    return Text(fmt_seconds(value), style="dim" if lat is not None and lat.stalled else "")


def _difference_rows(
    left: FabricView, right: FabricView
) -> list[tuple[str, tuple[RenderableType, ...], tuple[RenderableType, ...]]]:
    """Per class, then throughput: (name, its p50 cells, its p99 cells), each cells the
    left value, the right value and their ratio (throughput: no p50, its figure as p99)."""
    out: list[tuple[str, tuple[RenderableType, ...], tuple[RenderableType, ...]]] = []
    for cls in sorted(set(left.latency) | set(right.latency)):
        la, lb = left.latency.get(cls), right.latency.get(cls)
        # a side that completed nothing lately (a stall, or a sparse workload) shows its last
        # figures dimmed, and no ratio: they are not what its messages wait now
        stalled = (la is not None and la.stalled) or (lb is not None and lb.stalled)
        quantiles: list[tuple[RenderableType, ...]] = []
        for q in ("p50_s", "p99_s"):
            va = getattr(la, q) if la else math.nan
            vb = getattr(lb, q) if lb else math.nan
            why = Text("none done", style="bold yellow") if stalled else ratio(va, vb)
            quantiles.append((_latency_cell(va, la), _latency_cell(vb, lb), why))
        out.append((cls, quantiles[0], quantiles[1]))
    a, b = left.snapshot, right.snapshot
    if a is not None and b is not None:
        rate = (
            fmt_bitrate(a.totals.throughput_Bps),
            fmt_bitrate(b.totals.throughput_Bps),
            ratio(a.totals.throughput_Bps, b.totals.throughput_Bps, larger_is_worse=False),
        )
        out.append(("throughput", ("", "", ""), rate))
    return out


def difference_table(left: FabricView, right: FabricView, width: int = 0) -> Table:
    """Per class p50 and p99 of both sides with right/left ratios, then throughput, in
    the wider of two layouts that fits ``width`` (0: the wider): a row per class, a
    column per quantile and side ("p50 native-400g"); a row per quantile under its class,
    a column per side. At 80 columns the first cut its headings ("native-40…") and
    wrapped "none done" onto two lines.

    The layout is chosen from the cells' widths, and only its table is filled: the
    narrow one was filled after a wide one made only to be measured, every refresh."""
    a, b = left.snapshot, right.snapshot
    name_a = a.profile if a is not None else "left"
    name_b = b.profile if b is not None else "right"
    rows = _difference_rows(left, right)
    headings = ["now"]
    for q in ("p50", "p99"):
        headings += [f"{q} {name_a}", f"{q} {name_b}", "ratio"]
    wide_rows = [(name, *p50, *p99) for name, p50, p99 in rows]
    if width <= 0 or cells_width(headings, wide_rows) <= width:
        return filled_grid(headings, wide_rows, left={0}, expand=True)
    narrow_rows: list[tuple[RenderableType, ...]] = []
    for name, p50, p99 in rows:
        if name != "throughput":
            narrow_rows += [(name, "p50", *p50), ("", "p99", *p99)]
        else:
            narrow_rows.append((name, "", *p99))
    return filled_grid(["now", "", name_a, name_b, "ratio"], narrow_rows, left={0, 1})
