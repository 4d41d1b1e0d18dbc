"""Fault kinds the console offers, and what each one targets.

The core owns the list (``fabric_core.faults.book``); until it publishes one the
console offers the kinds every scenario supports. The core checks every
injection anyway, so an unsupported kind gets the core's own error message.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class FaultKind:
    """A fault kind: what it targets and the parameters it takes (name -> hint)."""

    name: str
    target: str  # "link" | "switch" | "node" | "gpu" | "storage"
    params: tuple[tuple[str, str], ...] = ()
    destructive: bool = False  # takes a whole switch or more down: ask before injecting
    help: str = ""


#: What the console knows about kinds (target, parameters), whether or not the core has them yet.
KNOWN_KINDS: dict[str, FaultKind] = {
    k.name: k
    for k in (
        FaultKind("link_down", "link"),
        FaultKind("link_degraded", "link", (("ber", "bit error rate, e.g. 1e-6"),)),
        FaultKind("link_flap", "link", (("period_s", "seconds between flaps"),)),
        FaultKind("credit_loss", "link", (("rate", "fraction of credit updates lost"),)),
        FaultKind("switch_down", "switch", destructive=True),
        FaultKind("pfc_storm", "gpu"),
        FaultKind("gpu_straggler", "gpu", (("slowdown", "compute time factor, e.g. 2"),)),
        FaultKind("slow_storage", "storage", (("factor", "latency factor, e.g. 10"),)),
    )
}
#: Kinds every scenario supports (offered until the core publishes its list).
BUILTIN_KINDS: tuple[str, ...] = ("link_down", "link_degraded", "switch_down")


def fault_kinds() -> tuple[FaultKind, ...]:
    """The core's ``fabric_core.faults.book.FAULT_KINDS`` when it exists, else the built-ins."""
    try:
        faults = importlib.import_module("fabric_core.faults.book")  # the core's registry
        core: dict[str, Any] = dict(getattr(faults, "FAULT_KINDS", {}))
    except ImportError:
        core = {}
    if not core:
        return tuple(KNOWN_KINDS[n] for n in BUILTIN_KINDS)
    return tuple(_from_core(name, kind) for name, kind in core.items())


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
