"""Faults and their timelines: injected → detected → mitigated (rerouted) → recovered → cleared.

A fault changes the model (a link's capacity, its error rate); detection and
mitigation follow the profile's recovery mechanism (``reroute_s``: local fast
reroute on the native fabric). Timestamps are simulated seconds.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from fabric_core.commands import ClearFault, CommandError, InjectFault, unknown
from fabric_core.snapshot import FaultView, LinkStatus, LinkTable, NodeTable


@dataclass(frozen=True)
class FaultKind:
    """A kind of fault: what it targets and which parameters it takes."""

    name: str
    target: str  # "link" | "switch" | "gpu" | "storage"
    params: Mapping[str, tuple[float, float, float]]  # name -> (default, min, max)
    help: str


FAULT_KINDS: dict[str, FaultKind] = {
    k.name: k
    for k in (
        FaultKind("link_down", "link", {}, "the cable fails: both directions carry nothing"),
        FaultKind(
            "link_degraded",
            "link",
            {"ber": (1e-6, 1e-15, 1e-3)},
            "bit errors: packets are retried (link-level retry), capacity drops",
        ),
        FaultKind("switch_down", "switch", {}, "a switch fails: all its links go down"),
    )
}


def register_fault_kind(kind: FaultKind) -> None:
    """Add a fault kind (modules that model its effect register it on import)."""
    FAULT_KINDS[kind.name] = kind


@dataclass
class Fault:
    """A fault in the run; ``view()`` makes its snapshot form."""

    id: str
    kind: str
    target: str
    params: dict[str, float | str]
    injected_at_s: float
    links: np.ndarray  # directed link ids it affects
    clear_at_s: float | None = None
    detected_at_s: float | None = None
    mitigated_at_s: float | None = None
    recovered_at_s: float | None = None
    cleared_at_s: float | None = None

    @property
    def state(self) -> str:
        """Latest stage reached."""
        for stage, t in (
            ("cleared", self.cleared_at_s),
            ("recovered", self.recovered_at_s),
            ("mitigated", self.mitigated_at_s),
            ("detected", self.detected_at_s),
        ):
            if t is not None:
                return stage
        return "active"

    def view(self) -> FaultView:
        """Immutable form for a snapshot."""
        return FaultView(
            id=self.id,
            kind=self.kind,
            target=self.target,
            params=dict(self.params),
            state=self.state,
            injected_at_s=self.injected_at_s,
            detected_at_s=self.detected_at_s,
            mitigated_at_s=self.mitigated_at_s,
            recovered_at_s=self.recovered_at_s,
            cleared_at_s=self.cleared_at_s,
        )


EventSink = Callable[[str, str, str, str], None]  # severity, kind, target, message


@dataclass
class FaultBook:
    """The faults of a run and the link state they impose."""

    links: LinkTable
    nodes: NodeTable
    emit: EventSink
    faults: dict[str, Fault] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        n = len(self.links)
        self.down_count = np.zeros(n, dtype=np.int32)  # faults holding each link down
        self.ber = np.zeros(n)

    # ---------------------------------------------------------------- validation
    def check(self, cmd: InjectFault) -> tuple[FaultKind, np.ndarray, dict[str, float | str]]:
        """Validate an inject command against the fabric; returns (kind, links, params)."""
        kind = FAULT_KINDS.get(cmd.kind)
        if kind is None:
            raise CommandError(
                f"{unknown('fault kind', cmd.kind, FAULT_KINDS)}; known: {', '.join(FAULT_KINDS)}"
            )
        if kind.target == "link":
            li = self.links.index.get(cmd.target)
            if li is None:
                raise unknown("link", cmd.target, self.links.index)
            ids = np.array([li, self.links.reverse[li]])
        else:
            ni = self.nodes.index.get(cmd.target)
            if ni is None or self.nodes.kind[ni] != "switch":
                switches = [
                    n
                    for n, k in zip(self.nodes.name, self.nodes.kind, strict=True)
                    if k == "switch"
                ]
                raise unknown("switch", cmd.target, switches)
            ids = np.flatnonzero((self.links.src == ni) | (self.links.dst == ni))
        params: dict[str, float | str] = {}
        extra = sorted(set(cmd.params) - set(kind.params))
        if extra:
            accepted = ", ".join(kind.params) or "none"
            raise CommandError(
                f"{cmd.kind} takes no parameter(s) {', '.join(extra)}; accepted: {accepted}"
            )
        for name, (default, lo, hi) in kind.params.items():
            value = cmd.params.get(name, default)
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise CommandError(
                    f"{cmd.kind}: parameter {name!r} must be a number, got {value!r}"
                )
            if not lo <= float(value) <= hi:
                raise CommandError(f"{cmd.kind}: {name} must be in [{lo:g}, {hi:g}], got {value!r}")
            params[name] = float(value)
        return kind, ids, params

    # ---------------------------------------------------------------- changes
    def inject(self, cmd: InjectFault, now_s: float) -> Fault:
        """Apply a validated fault to the link state."""
        kind, ids, params = self.check(cmd)
        fid = f"f{next(self._ids)}"
        fault = Fault(
            id=fid,
            kind=kind.name,
            target=cmd.target,
            params=params,
            injected_at_s=now_s,
            links=ids,
            clear_at_s=None if cmd.duration_s is None else now_s + cmd.duration_s,
        )
        self.faults[fid] = fault
        if kind.name in ("link_down", "switch_down"):
            self.down_count[ids] += 1
        elif kind.name == "link_degraded":
            self.ber[ids] = np.maximum(self.ber[ids], float(params["ber"]))
        self.emit(
            "warning", "fault_injected", cmd.target, f"{kind.name} injected on {cmd.target} ({fid})"
        )
        return fault

    def clear(self, cmd: ClearFault, now_s: float) -> list[str]:
        """Clear faults by id, target or all; returns the ids cleared."""
        live = [f for f in self.faults.values() if f.cleared_at_s is None]
        if cmd.all:
            chosen = live
        elif cmd.fault_id is not None:
            chosen = [f for f in live if f.id == cmd.fault_id]
            if not chosen:
                raise unknown("active fault", cmd.fault_id, [f.id for f in live])
        else:
            chosen = [f for f in live if f.target == cmd.target]
            if not chosen:
                raise CommandError(f"no active fault on {cmd.target!r}")
        for f in chosen:
            self._undo(f, now_s)
        return [f.id for f in chosen]

    def _undo(self, f: Fault, now_s: float) -> None:
        f.cleared_at_s = now_s
        if f.kind in ("link_down", "switch_down"):
            self.down_count[f.links] -= 1
        elif f.kind == "link_degraded":
            others = [
                g
                for g in self.faults.values()
                if g.kind == "link_degraded" and g.cleared_at_s is None
            ]
            self.ber[f.links] = 0.0
            for g in others:
                self.ber[g.links] = np.maximum(self.ber[g.links], float(g.params["ber"]))
        self.emit("info", "fault_cleared", f.target, f"{f.kind} on {f.target} cleared ({f.id})")

    def expire(self, now_s: float) -> None:
        """Clear faults whose duration has run out."""
        for f in list(self.faults.values()):
            if (
                f.cleared_at_s is None
                and f.clear_at_s is not None
                and now_s >= f.clear_at_s - 1e-15
            ):
                self._undo(f, now_s)

    # ---------------------------------------------------------------- state
    def active(self, kind: str | None = None) -> list[Fault]:
        """Faults not cleared yet (of one kind, or all)."""
        return [
            f
            for f in self.faults.values()
            if f.cleared_at_s is None and (kind is None or f.kind == kind)
        ]

    def status(self) -> np.ndarray:
        """LinkStatus per link."""
        st = np.full(len(self.links), LinkStatus.UP, dtype=np.int8)
        st[self.ber > 0] = LinkStatus.DEGRADED
        st[self.down_count > 0] = LinkStatus.DOWN
        return st

    def views(self) -> tuple[FaultView, ...]:
        """Every fault of the run, for the snapshot (bounded to the last 200)."""
        return tuple(f.view() for f in list(self.faults.values())[-200:])
