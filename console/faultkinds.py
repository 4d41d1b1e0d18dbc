"""Fault kinds the console offers, and what each one targets.

The core owns the list (``fabric_core.faults.book.FAULT_KINDS``, the kinds its modules
registered); the console offers those, with their targets and parameters. The core checks
every injection anyway, so a bad one gets the core's own error message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabric_core.faults.book import FAULT_KINDS


@dataclass(frozen=True, slots=True)
class FaultKind:
    """A fault kind: what it targets and the parameters it takes (name -> hint)."""

    name: str
    target: str  # "link" | "switch" | "node" | "gpu" | "storage"
    params: tuple[tuple[str, str], ...] = ()
    destructive: bool = False  # takes a whole switch or more down: ask before injecting
    help: str = ""


def fault_kinds() -> tuple[FaultKind, ...]:
    """The core's fault kinds (``fabric_core.faults.book.FAULT_KINDS``), in its order."""
    return tuple(_from_core(name, kind) for name, kind in FAULT_KINDS.items())


def _from_core(name: str, kind: Any) -> FaultKind:
    """The console's view of a core fault kind (target, parameter hints with their ranges)."""
    target = str(getattr(kind, "target", "node"))
    params: list[tuple[str, str]] = []
    for pname, spec in dict(getattr(kind, "params", {})).items():
        try:
            default, low, high = spec
            params.append((pname, f"default {default:g}, {low:g}..{high:g}"))
        except (TypeError, ValueError):
            params.append((pname, str(spec)))
    return FaultKind(
        name,
        target,
        tuple(params),
        destructive=target == "switch",
        help=str(getattr(kind, "help", "")),
    )


def kind_named(name: str) -> FaultKind | None:
    """The kind called ``name``, if offered."""
    return next((k for k in fault_kinds() if k.name == name), None)
