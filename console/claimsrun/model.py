"""What a claim's measurement produces: figures, sweeps, the parameters they came from.

Every number here is filled in from a run report or a workload's KPIs by the
``measure_*`` modules; nothing in this module holds a figure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fabric_core.units import format_bytes, format_duration, format_rate


def fmt_value(value: float, unit: str) -> str:
    """A figure for people: ``s`` durations, ``frac`` percentages, ``Bps`` rates,
    ``B`` sizes, ``x`` ratios, ``n`` counts."""
    if not math.isfinite(value):
        return "—"
    if unit == "s":
        return format_duration(value)
    if unit == "frac":
        return f"{100 * value:.1f} %"
    if unit == "Bps":
        return format_rate(value)
    if unit == "B":
        return format_bytes(value)
    if unit == "x":
        return f"{value:.2f}×"
    if unit == "n":  # a count, or a share of one (0.5 cores)
        return f"{value:,.0f}" if value == int(value) else f"{value:.3g}"
    return f"{value:.3g}"


@dataclass(frozen=True)
class Settings:
    """How to run the claims: quick or full, and physical parameters changed for every run.

    ``profile_overrides`` maps a profile name to ``Profile`` fields set on every fabric of
    that profile; ``endpoint`` and ``storage`` are ``EndpointParams`` / ``StorageParams``
    fields set in every endpoint / storage workload. The tests use them to move a physical
    parameter and see the figure move; the defaults are the bundled scenarios as shipped.
    """

    quick: bool = False
    seed: int | None = None
    profile_overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    endpoint: Mapping[str, Any] = field(default_factory=dict)
    storage: Mapping[str, Any] = field(default_factory=dict)

    def key(self) -> str:
        """A stable string for caching runs shared between claims."""
        return repr(
            (
                self.quick,
                self.seed,
                sorted((k, sorted(v.items())) for k, v in self.profile_overrides.items()),
                sorted(self.endpoint.items()),
                sorted(self.storage.items()),
            )
        )


@dataclass(frozen=True)
class Figure:
    """One emulated figure: which side, the value and its unit, and where it came from."""

    side: str  # e.g. "native-400g", "nfs-rdma"
    value: float
    unit: str
    source: str  # the report field (and run) it was read from

    @property
    def text(self) -> str:
        return fmt_value(self.value, self.unit)


@dataclass(frozen=True)
class PartResult:
    """The measured half of one table row."""

    left: Figure  # the article's side (native fabric, RDMA, GDR, IBGDA)
    right: Figure  # the baseline it is compared with
    ratio: float  # right / left, or as the part defines it (NaN: not meaningful)
    ratio_meaning: str  # e.g. "RoCE / native latency"
    metrics: dict[str, float]  # what the verdict rule reads
    conditions: str  # topology, message size, load, context, cores


@dataclass
class Sweep:
    """A figure as a function of one condition, for several series (one per side)."""

    key: str  # file name stem of its plot
    title: str
    x_label: str
    x_unit: str
    y_label: str
    y_unit: str
    x: list[float] = field(default_factory=list)
    series: dict[str, list[float]] = field(default_factory=dict)
    log_x: bool = False
    log_y: bool = False
    panel: str = ""  # sweeps that belong together (e.g. 1 and 3 switches)
    #: the article's figure as a horizontal line on the plot: (value, label)
    reference: tuple[float, str] | None = None

    def add(self, x: float, values: Mapping[str, float]) -> None:
        """One point of every series."""
        self.x.append(float(x))
        for name, v in values.items():
            self.series.setdefault(name, []).append(float(v))


@dataclass(frozen=True)
class Param:
    """A parameter a figure came from, with its value and source."""

    name: str
    value: str
    source: str


@dataclass
class Measurement:
    """Everything one claim's runs produced."""

    parts: dict[str, PartResult]
    sweeps: list[Sweep] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # measured observations (where it fails)
    runs: int = 0


#: Called after each emulator run: (what just ran).
Tick = Callable[[str], None]
