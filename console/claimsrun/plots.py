"""SVG plots of the sweeps (matplotlib, the optional ``[plots]`` extra).

matplotlib is imported only here and only when plots are asked for, so ``fabtop``
starts without it and runs without it (the tables are printed either way).
Output is deterministic (fixed SVG id salt, no date) so regenerated plots diff cleanly.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from console.claimsrun.model import Sweep, fmt_value

INSTALL_HINT = "pip install -e '.[plots]'"


def available() -> bool:
    """Whether matplotlib can be imported."""
    try:
        importlib.import_module("matplotlib")
    except ImportError:
        return False
    return True


def _pyplot() -> Any:
    mpl = importlib.import_module("matplotlib")
    mpl.use("Agg")
    mpl.rcParams["svg.hashsalt"] = "fabtop-claims"
    mpl.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable
    return importlib.import_module("matplotlib.pyplot")


def _scale(unit: str) -> tuple[float, str]:
    """Axis scaling for a unit: (factor, suffix)."""
    return {"s": (1e6, "µs"), "frac": (100.0, "%"), "Bps": (8e-9, "Gb/s"), "B": (1.0, "B")}.get(
        unit, (1.0, "")
    )


def plot(sw: Sweep, path: Path) -> Path:
    """One sweep, one line per series, to ``path`` (SVG)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    fy, uy = _scale(sw.y_unit)
    for name, ys in sw.series.items():
        pts = [(x, y * fy) for x, y in zip(sw.x, ys, strict=True) if math.isfinite(y)]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    if sw.reference is not None:
        ax.axhline(
            sw.reference[0] * fy, color="grey", linestyle="--", linewidth=1, label=sw.reference[1]
        )
    if sw.log_x:
        ax.set_xscale("log", base=2 if sw.x_unit == "B" else 10)
    if sw.log_y:
        ax.set_yscale("log")
    if sw.x_unit == "B":
        ax.set_xticks(sw.x)
        ax.set_xticklabels([fmt_value(x, "B").replace(" ", "") for x in sw.x], fontsize=8)
    ax.set_xlabel(sw.x_label)
    ax.set_ylabel(f"{sw.y_label} ({uy})" if uy else sw.y_label)
    ax.set_title(sw.title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)
    return path


def plot_all(sweeps: Iterable[Sweep], out_dir: Path) -> dict[str, Path]:
    """Every sweep to ``out_dir/<key>.svg``; returns key → path."""
    return {sw.key: plot(sw, out_dir / f"{sw.key}.svg") for sw in sweeps}
