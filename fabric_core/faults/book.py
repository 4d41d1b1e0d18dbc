"""Faults and their timelines: injected → detected → mitigated (rerouted) → recovered → cleared.

The ``FaultBook`` holds the faults of a run and the state they impose on the
model (per-link arrays the tick reads: ``status()``, ``ber``, ``buffer_factor``;
per-node state: ``pfc_storm_nodes()``). Detection, mitigation and the measured
recovery follow the profile's recovery mechanism and live in
``fabric_core.faults.recovery``. Timestamps are simulated seconds.

Other modules add fault kinds with ``register_fault_kind`` (the slow storage target and
the IBGDA version mismatch land with their models); a kind whose
target is ``"gpu"``, ``"storage"``, ``"switch"`` or ``"node"`` is validated
against the topology here, so its module only has to read ``active(kind)``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from fabric_core.commands import ClearFault, CommandError, InjectFault, unknown
from fabric_core.faults.admission import Admission
from fabric_core.net.tables import LinkStatus, LinkTable, NodeTable

TARGET_KINDS = ("link", "switch", "gpu", "storage", "node")
#: A target sort (``TARGET_KINDS``, a node's kind) as a message says it: "a GPU"
_SORT_WORDS = {"gpu": "GPU", "storage": "storage target"}


def sort_word(sort: str) -> str:
    """``sort`` (a target sort or a node's kind) with its article: "a GPU", "a switch",
    "a storage target"."""
    return f"a {_SORT_WORDS.get(sort, sort)}"


def not_of_sort(kind: str, target: str, wanted: str, found: str, example: str = "") -> str:
    """Why ``target`` (a ``found``, a node's kind) does not fit a fault ``kind`` that
    targets a ``wanted``; with ``example``, a target that would (a link from it)."""
    text = f"{kind} targets {sort_word(wanted)}; {target!r} is {sort_word(found)}"
    return f"{text}: name a link, e.g. {example!r}" if example else text


def link_not_node(kind: str, link: str, wanted: str, example: str) -> str:
    """Why the link ``link`` does not fit a fault ``kind`` that targets a node of sort
    ``wanted``, with ``example``, one that would ("pfc_storm targets a GPU;
    'gpu0000->leaf00' is a link: name a GPU, e.g. 'gpu0000'")."""
    return (
        f"{kind} targets {sort_word(wanted)}; {link!r} is a link: name {sort_word(wanted)},"
        f" e.g. {example!r}"
    )


@dataclass(frozen=True, slots=True)
class FaultView:
    """One fault and its timeline (simulated seconds; ``None`` = not reached yet)."""

    id: str
    kind: str
    target: str
    params: Mapping[str, float | str]
    state: str  # "active" | "detected" | "mitigated" | "recovered" | "cleared"
    injected_at_s: float
    detected_at_s: float | None = None
    mitigated_at_s: float | None = None
    recovered_at_s: float | None = None
    cleared_at_s: float | None = None

    @property
    def time_to_detect_s(self) -> float | None:
        """Detection time after injection, once detected."""
        return None if self.detected_at_s is None else self.detected_at_s - self.injected_at_s

    @property
    def time_to_mitigate_s(self) -> float | None:
        """Mitigation (reroute, retry, retrain, watchdog) time after injection, once
        mitigated."""
        return None if self.mitigated_at_s is None else self.mitigated_at_s - self.injected_at_s

    @property
    def time_to_recover_s(self) -> float | None:
        """Recovery time after injection, once recovered: the fabric's delivered throughput
        back to ``recovery.RECOVERED_FRACTION`` of its level before the fault, which may
        come while the fault is still active (a degraded link whose retries absorb it)."""
        return None if self.recovered_at_s is None else self.recovered_at_s - self.injected_at_s


@dataclass(frozen=True)
class FaultKind:
    """A kind of fault: what it targets, which parameters it takes, what it does."""

    name: str
    target: str  # one of TARGET_KINDS
    params: Mapping[str, tuple[float, float, float]]  # name -> (default, min, max)
    help: str
    #: how the fabric copes: "reroute" (routing avoids the failed part), "retry"
    #: (link-level retry / go-back-N), "retrain" (the link retrains), "watchdog"
    #: (PFC watchdog), "none" (the fault lasts until cleared).
    mitigation: str = "none"
    #: flow-control families the fault exists on ("credit", "pfc")
    fabrics: tuple[str, ...] = ("credit", "pfc")
    #: the families of ``fabrics`` on which its ``mitigation`` exists (a PFC storm's
    #: watchdog is PFC's: on a credit fabric nothing mitigates it until it is cleared)
    mitigated_on: tuple[str, ...] = ("credit", "pfc")


FAULT_KINDS: dict[str, FaultKind] = {
    k.name: k
    for k in (
        FaultKind(
            "link_down",
            "link",
            {},
            "the cable fails: both directions carry nothing until rerouted",
            "reroute",
        ),
        FaultKind(
            "link_flap",
            "link",
            {"period_s": (10e-3, 1e-6, 60.0), "down_fraction": (0.5, 0.01, 0.99)},
            "the cable goes down and up again every period (down for down_fraction of it)",
            "reroute",
        ),
        FaultKind(
            "link_degraded",
            "link",
            {"ber": (1e-6, 1e-15, 1e-3)},
            "bit errors: packets are retried (link-level retry native, go-back-N RoCE)",
            "retry",
        ),
        FaultKind(
            "switch_down",
            "switch",
            {},
            "a switch fails: all its links go down and its buffered bytes are lost",
            "reroute",
        ),
        FaultKind(
            "credit_loss",
            "link",
            {"loss_fraction": (0.01, 1e-6, 1.0)},
            "a fraction of credit updates is lost: the usable downstream buffer leaks "
            "away with the bytes carried, until the credit watchdog retrains the link",
            "retrain",
            ("credit",),
        ),
        FaultKind(
            "pfc_storm",
            "gpu",
            {},
            "the GPU's NIC is stuck sending PFC pause frames (on RoCE the PFC watchdog "
            "stops honouring them; a credit fabric has no PFC, but the stuck NIC returns no "
            "credits: the flows into it wait until it is cleared)",
            "watchdog",
            mitigated_on=("pfc",),
        ),
        FaultKind(
            "incast",
            "gpu",
            {
                "senders": (7.0, 1.0, 4096.0),
                "size_bytes": (262144.0, 64.0, 1e9),
                "period_s": (20e-6, 1e-7, 1.0),
            },
            "congestion burst: `senders` GPUs each send `size_bytes` to the target every "
            "`period_s` for the fault's duration",
        ),
    )
}

#: The kinds this module models (others are registered by the modules that model them).
CORE_FAULT_KINDS: tuple[str, ...] = tuple(FAULT_KINDS)

#: Kinds whose links are held down while they are active.
DOWN_KINDS = ("link_down", "switch_down")
#: Kinds whose second fault on a link or node an active one holds is refused (a GPU runs
#: one driver and library stack: a second version mismatch on it, fail or hang, is not
#: a second fault; registered by ``faults.ibgda``)
ON_OFF_KINDS = (*DOWN_KINDS, "pfc_storm", "version_mismatch")
#: Kinds whose detection ``recovery`` models (``recovery._advance``); nothing detects the
#: others (a slow storage target, a version mismatch): their timeline has no such stage
DETECTED_KINDS = (*DOWN_KINDS, "link_flap", "link_degraded", "credit_loss", "pfc_storm", "incast")
#: The stages of a fault's timeline after its injection that it may reach, in order
#: (its clear is not one: the operator's, or its duration's, not the fabric's)
STAGES = ("detected", "mitigated", "recovered")


def fault_stages(kind: str, flow_control: str | None = None) -> tuple[str, ...]:
    """The stages (of ``STAGES``) a fault of ``kind`` reaches on a fabric of
    ``flow_control`` ("credit" | "pfc"; None: either, a stage that exists on one is
    kept) once the fabric copes with it: "detected" for ``DETECTED_KINDS``, "mitigated"
    for a kind with a ``mitigation`` on that fabric (``FaultKind.mitigated_on``: none
    for an incast, nor for a PFC storm on a credit fabric), "recovered" for every kind
    (measured: after the mitigation, or after the clear when nothing mitigates it). A
    kind this process has not registered is detected if ``DETECTED_KINDS`` says so,
    never mitigated."""
    k = FAULT_KINDS.get(kind)
    mitigated = (
        k is not None
        and k.mitigation != "none"
        and (flow_control is None or flow_control in k.mitigated_on)
    )
    applies = {"detected": kind in DETECTED_KINDS, "mitigated": mitigated, "recovered": True}
    return tuple(stage for stage in STAGES if applies[stage])


def fault_kind(name: str) -> FaultKind:
    """The fault kind called ``name`` (raises ``CommandError`` for none, with the known)."""
    kind = FAULT_KINDS.get(name)
    if kind is None:
        raise CommandError(
            f"{unknown('fault kind', name, FAULT_KINDS)}; known: {', '.join(FAULT_KINDS)}"
        )
    return kind


def checked_params(kind: FaultKind, given: Mapping[str, float | str]) -> dict[str, float | str]:
    """A fault's parameters, the kind's defaults filled in, as floats; what needs no fabric
    to check (``FaultBook.check`` checks its target first, ``fabtop inject`` before it
    sends anything). Raises ``CommandError`` for a parameter the kind does not take, or one
    that is not a number or out of its range."""
    extra = sorted(set(given) - set(kind.params))
    if extra:
        accepted = ", ".join(kind.params) or "none"
        raise CommandError(
            f"{kind.name} takes no parameter(s) {', '.join(map(repr, extra))}; accepted: {accepted}"
        )
    params: dict[str, float | str] = {}
    for name, (default, lo, hi) in kind.params.items():
        value = given.get(name, default)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise CommandError(f"{kind.name}: parameter {name!r} must be a number, got {value!r}")
        if not lo <= float(value) <= hi:
            raise CommandError(f"{kind.name}: {name} must be in [{lo:g}, {hi:g}], got {value:g}")
        params[name] = float(value)
    return params


def register_fault_kind(kind: FaultKind) -> None:
    """Add a fault kind (modules that model its effect register it on import)."""
    if kind.target not in TARGET_KINDS:
        raise ValueError(f"fault kind {kind.name}: target must be one of {TARGET_KINDS}")
    FAULT_KINDS[kind.name] = kind


@dataclass
class Fault:
    """A fault in the run; ``view()`` makes its snapshot form."""

    id: str
    kind: str
    target: str
    params: dict[str, float | str]
    injected_at_s: float
    links: NDArray[np.int64]  # directed link ids it affects (empty for endpoint faults)
    node: int = -1  # node id for switch / endpoint faults
    clear_at_s: float | None = None
    detected_at_s: float | None = None
    mitigated_at_s: float | None = None
    recovered_at_s: float | None = None
    cleared_at_s: float | None = None
    #: delivered throughput before the fault (B/s), measured by ``recovery``
    baseline_Bps: float | None = None
    #: bytes lost on the failed part and sent again (reroute), counted by ``recovery``
    lost_bytes: float = 0.0
    sent: int = 0  # incast: rounds started so far
    refused: int = 0  # incast: flows the admission limits refused

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

#: Faults open at once at most (injected and not yet both cleared and recovered). Each
#: inject and each tick go over the open ones: with 3,000 open a tick of ``tiny`` took 2.4
#: ms against 0.1 (a flood of injects left the engine behind its pace). A real fabric's
#: operators inject a few; a chaos test, tens.
MAX_OPEN_FAULTS = 1000
#: Settled faults (cleared and recovered) kept for the snapshot's history, the newest
#: (it shows the last 200): an endless inject/clear loop would otherwise grow the book.
MAX_SETTLED_FAULTS = 1000


@dataclass(frozen=True, slots=True)
class IssuedIds:
    """Every fault id a book has given (``f0`` to ``f{count - 1}``), kept or not: a clear
    of one is "already cleared" even once the book no longer keeps it."""

    count: int

    def __contains__(self, fault_id: object) -> bool:
        if not isinstance(fault_id, str) or not fault_id.startswith("f"):
            return False
        number = fault_id[1:]
        return number.isdigit() and str(int(number)) == number and int(number) < self.count


@dataclass
class FaultBook:
    """The faults of a run and the link state they impose."""

    links: LinkTable
    nodes: NodeTable
    emit: EventSink
    faults: dict[str, Fault] = field(default_factory=dict)
    #: the ids given so far (``new_id``)
    issued: int = 0
    #: the fabric's flow control ("credit" | "pfc"); kept current by ``recovery.track``
    flow_control: str = "credit"
    #: what faults (and the fabric) may add in flows (``fabric_core.faults.admission``)
    admission: Admission = field(default_factory=Admission)

    def __post_init__(self) -> None:
        n = len(self.links)
        self.down_count = np.zeros(n, dtype=np.int32)  # faults holding each link down
        self.flap_down = np.zeros(n, dtype=bool)  # links a flap holds down right now
        self.ber = np.zeros(n)
        #: usable share of each link's downstream buffer (credit loss leaks it); the tick
        #: reads ``buffer_bytes × buffer_factor`` (``recovery`` applies it to the fabric)
        self.buffer_factor = np.ones(n)
        self.credit_loss = np.zeros(n)  # fraction of credit updates lost, per link
        # recovery bookkeeping (fabric_core.faults.recovery): when each link went down (inf = up)
        self.down_since_s = np.full(n, np.inf)
        #: the link status recovery saw last tick (it counts a link's downs from the change),
        #: and which links it has down
        self.seen_status = np.zeros(n, dtype=np.int8)
        self.seen_down = np.zeros(n, dtype=bool)
        #: (simulated time, delivered bytes so far) per tick, for the recovery measurement
        self.delivered_history: deque[tuple[float, float]] = deque(maxlen=4096)
        #: incasts cleared since the last tick: ``recovery`` cancels their unsent messages
        self.cleared_incasts: list[Fault] = []
        self.buffer_base: NDArray[np.float64] | None = None  # buffers before credit loss
        self.buffer_written: NDArray[np.float64] | None = None
        #: faults still active, or cleared but not yet recovered: the ones a tick must look
        #: at (``faults`` keeps every fault of the run for the snapshot)
        self.open: dict[str, Fault] = {}

    # ---------------------------------------------------------------- validation
    def check(
        self, cmd: InjectFault
    ) -> tuple[FaultKind, NDArray[np.int64], int, dict[str, float | str]]:
        """Validate an inject command against the fabric; returns (kind, links, node, params)."""
        # commands built in code skip msgspec's checks: repeat the ones that matter here
        if cmd.duration_s is not None and not (
            math.isfinite(cmd.duration_s) and cmd.duration_s > 0
        ):
            raise CommandError(f"duration_s must be a number > 0, got {cmd.duration_s!r}")
        kind = fault_kind(cmd.kind)
        if self.flow_control not in kind.fabrics:
            raise CommandError(
                f"{kind.name} needs a {' or '.join(kind.fabrics)} fabric; this one uses "
                f"{self.flow_control} flow control"
            )
        node = -1
        if kind.target == "link":
            li = self.links.index.get(cmd.target)
            if li is None:
                ni = self.nodes.index.get(cmd.target)
                if ni is not None:  # a node where a link is needed: one of its links
                    (first, *_) = np.flatnonzero(self.links.src == ni)
                    example = self.links.name[first]
                    found = self.nodes.kind[ni]
                    raise CommandError(not_of_sort(cmd.kind, cmd.target, "link", found, example))
                raise unknown("link", cmd.target, self.links.index)
            one_way = kind.name == "credit_loss"  # credits of one direction
            ids = np.array([li] if one_way else [li, self.links.reverse[li]], dtype=np.int64)
        else:
            ni = self.nodes.index.get(cmd.target)
            wanted = kind.target
            if ni is None or (wanted != "node" and self.nodes.kind[ni] != wanted):
                names = [
                    n
                    for n, k in zip(self.nodes.name, self.nodes.kind, strict=True)
                    if wanted in ("node", k)
                ]
                err = unknown(wanted, cmd.target, names)
                if ni is not None:
                    err = CommandError(
                        not_of_sort(cmd.kind, cmd.target, wanted, self.nodes.kind[ni])
                    )
                elif cmd.target in self.links.index and names:
                    err = CommandError(self._link_for_node(cmd.kind, cmd.target, wanted, names))
                raise err
            node = ni
            if kind.target == "switch":
                ids = np.flatnonzero((self.links.src == ni) | (self.links.dst == ni)).astype(
                    np.int64
                )
            else:
                ids = np.zeros(0, dtype=np.int64)
        self._refuse_a_second(kind, ids, node, cmd.target)
        params = checked_params(kind, cmd.params)
        if kind.name == "incast":
            self._check_incast(node, params)
        return kind, ids, node, params

    def _link_for_node(self, kind: str, link: str, wanted: str, names: list[str]) -> str:
        """``link_not_node`` with an end of ``link`` of sort ``wanted`` as the example, or
        the first of ``names`` (the nodes of that sort)."""
        li = self.links.index[link]
        ends = (self.links.src[li], self.links.dst[li])
        fits = [self.nodes.name[n] for n in ends if wanted in ("node", self.nodes.kind[n])]
        return link_not_node(kind, link, wanted, fits[0] if fits else names[0])

    def _refuse_a_second(
        self, kind: FaultKind, ids: NDArray[np.int64], node: int, target: str
    ) -> None:
        """A second fault of a kind that is on or off (a link or switch down, a GPU stuck
        sending pause frames or with mismatched IBGDA versions) on a link (either
        direction) or node an active one holds changes nothing, so its timeline would say
        it recovered at once: refused, naming the first. Kinds with a degree or a rhythm (a bit error rate, a credit loss that
        retraining ends, a flap's period, a slowdown, an incast's traffic) may stack."""
        if kind.name not in ON_OFF_KINDS:
            return
        for f in self.active(kind.name):
            same = f.node == node if kind.target != "link" else bool(np.isin(ids, f.links).any())
            if same:
                raise CommandError(
                    f"{kind.name} is already active on {f.target} ({f.id}): clear it first"
                    + ("" if f.target == target else f" (it holds {target} too)")
                )

    def _check_incast(self, node: int, params: dict[str, float | str]) -> None:
        """An incast's parameters against what the fabric can carry: there must be that
        many other GPUs, and a sender cannot offer more than its NIC's line rate."""
        others = sum(1 for k in self.nodes.kind if k == "gpu") - 1
        senders = float(params["senders"])
        if not senders.is_integer():
            raise CommandError(f"incast: senders must be a whole number of GPUs, got {senders:g}")
        if senders > others:
            raise CommandError(
                f"incast: senders must be at most {others} (the GPUs other than the target),"
                f" got {senders:g}"
            )
        gpus = np.array([k == "gpu" for k in self.nodes.kind])
        uplinks = gpus[self.links.src] & (self.links.src != node)
        nic_Bps = float(self.links.bandwidth_Bps[uplinks].min()) if uplinks.any() else 0.0
        size, period = float(params["size_bytes"]), float(params["period_s"])
        if nic_Bps > 0 and size / period > nic_Bps * (1 + 1e-9):
            raise CommandError(
                f"incast: each sender would offer size_bytes/period_s = {size / period:.3g} B/s,"
                f" more than its NIC's line rate {nic_Bps:.3g} B/s: raise period_s to at least"
                f" {size / nic_Bps:.3g} s or lower size_bytes to at most {nic_Bps * period:.3g}"
            )

    # ---------------------------------------------------------------- changes
    def new_id(self) -> str:
        """The next fault's id (``f0``, ``f1``, ...).

        Raises:
            CommandError: ``MAX_OPEN_FAULTS`` are open already.
        """
        if len(self.open) >= MAX_OPEN_FAULTS:
            raise CommandError(
                f"{len(self.open):,} faults are open (at most {MAX_OPEN_FAULTS:,}): clear "
                "some first ('clear' with all=true clears every one)"
            )
        fid = f"f{self.issued}"
        self.issued += 1
        return fid

    def inject(self, cmd: InjectFault, now_s: float) -> Fault:
        """Apply a validated fault to the link state."""
        kind, ids, node, params = self.check(cmd)
        fid = self.new_id()
        fault = Fault(
            id=fid,
            kind=kind.name,
            target=cmd.target,
            params=params,
            injected_at_s=now_s,
            links=ids,
            node=node,
            clear_at_s=None if cmd.duration_s is None else now_s + cmd.duration_s,
        )
        self.faults[fid] = fault
        self.open[fid] = fault
        if kind.name in DOWN_KINDS:
            self.down_count[ids] += 1
        elif kind.name == "link_flap":
            self.flap_down[ids] = True  # a flap starts with the link going down
        self._refresh()
        self.emit(
            "warning", "fault_injected", cmd.target, f"{kind.name} injected on {cmd.target} ({fid})"
        )
        return fault

    def clear(self, cmd: ClearFault, now_s: float) -> list[str]:
        """Clear faults by id, target or all; returns the ids cleared."""
        chosen = select_cleared(cmd, self.active(), IssuedIds(self.issued))
        for f in chosen:
            self._undo(f, now_s)
        return [f.id for f in chosen]

    def settle(self, f: Fault) -> None:
        """Stop looking at ``f`` once it is both cleared and recovered."""
        if f.cleared_at_s is not None and f.recovered_at_s is not None:
            self.open.pop(f.id, None)
            self._forget_settled()

    def _forget_settled(self) -> None:
        """Drop the oldest settled faults past ``MAX_SETTLED_FAULTS`` (ids in the order given)."""
        excess = len(self.faults) - len(self.open) - MAX_SETTLED_FAULTS
        if excess <= 0:
            return
        for fid in [fid for fid in self.faults if fid not in self.open][:excess]:
            del self.faults[fid]

    def settled(self) -> bool:
        """No fault to look at and nothing left to undo: every link is up and whole."""
        return not self.open and self.buffer_base is None and not self.cleared_incasts

    def at_rest(self, known_down: NDArray[np.bool_]) -> bool:
        """``settled``, or only links or switches down whose whole timeline is behind them
        (detected, rerouted, recovered) and that routing knows of (``known_down``, by
        link): nothing to follow from tick to tick until one is cleared or ends
        (``next_end_s``)."""
        if self.settled():
            return True
        if not self.downs_only() or any(f.recovered_at_s is None for f in self.open.values()):
            return False
        return not bool((self.seen_down & ~known_down).any())

    def downs_only(self) -> bool:
        """The open faults are links or switches down, none cleared (its recovery not
        measured yet); no buffer left scaled, no incast left to cancel."""
        if self.buffer_base is not None or self.cleared_incasts:
            return False
        return all(f.kind in DOWN_KINDS and f.cleared_at_s is None for f in self.open.values())

    def _undo(self, f: Fault, now_s: float) -> None:
        f.cleared_at_s = now_s
        self.settle(f)
        if f.kind in DOWN_KINDS:
            self.down_count[f.links] -= 1
        elif f.kind == "incast":
            self.cleared_incasts.append(f)
        self._refresh()
        self.emit("info", "fault_cleared", f.target, f"{f.kind} on {f.target} cleared ({f.id})")

    def _refresh(self) -> None:
        """Recompute the per-link state the active faults impose (few faults: a short loop)."""
        self.ber[:] = 0.0
        self.credit_loss[:] = 0.0
        flapping = np.zeros(len(self.links), dtype=bool)
        for g in self.active():
            if g.kind == "link_degraded":
                self.ber[g.links] = np.maximum(self.ber[g.links], float(g.params["ber"]))
            elif g.kind == "credit_loss" and g.mitigated_at_s is None:
                self.credit_loss[g.links] = np.maximum(
                    self.credit_loss[g.links], float(g.params["loss_fraction"])
                )
            elif g.kind == "link_flap":
                flapping[g.links] = True
        self.flap_down &= flapping
        # credits come back whole once no leaking fault is left on a link (retrain or clear)
        self.buffer_factor[self.credit_loss == 0] = 1.0

    def expire(self, now_s: float) -> None:
        """Clear faults whose duration has run out; move flapping links up or down."""
        for f in list(self.open.values()):
            if (
                f.cleared_at_s is None
                and f.clear_at_s is not None
                and now_s >= f.clear_at_s - 1e-15
            ):
                self._undo(f, now_s)
        flaps = self.active("link_flap")
        if flaps:
            self.flap_down[:] = False
            for f in flaps:
                period = float(f.params["period_s"])
                phase = (now_s - f.injected_at_s) % period
                if phase < float(f.params["down_fraction"]) * period - 1e-15:
                    self.flap_down[f.links] = True

    def next_end_s(self) -> float:
        """When the first open fault with a duration ends (``expire`` ends it); inf if none."""
        ends = [
            f.clear_at_s
            for f in self.open.values()
            if f.cleared_at_s is None and f.clear_at_s is not None
        ]
        return min(ends, default=math.inf)

    def mark_retrained(self, f: Fault) -> None:
        """A credit-loss fault's link has retrained: its credits are whole again."""
        self._refresh()

    # ---------------------------------------------------------------- state
    def active(self, kind: str | None = None) -> list[Fault]:
        """Faults not cleared yet (of one kind, or all)."""
        return [
            f
            for f in self.open.values()
            if f.cleared_at_s is None and (kind is None or f.kind == kind)
        ]

    def status(self) -> NDArray[np.int8]:
        """LinkStatus per link."""
        st = np.full(len(self.links), LinkStatus.UP, dtype=np.int8)
        st[(self.ber > 0) | (self.buffer_factor < 1)] = LinkStatus.DEGRADED
        st[(self.down_count > 0) | self.flap_down] = LinkStatus.DOWN
        return st

    def pfc_storm_nodes(self) -> NDArray[np.int64]:
        """Node ids whose NIC is stuck sending PFC pause (active ``pfc_storm`` faults).

        The PFC model holds the links into these nodes (``leaf->gpu``) paused, as a
        forced XOFF; its PFC watchdog decides when the pause stops being honoured.
        A credit fabric has no PFC and ignores them.
        """
        return np.array(sorted({f.node for f in self.active("pfc_storm")}), dtype=np.int64)

    def views(self) -> tuple[FaultView, ...]:
        """Every fault of the run, for the snapshot (bounded to the last 200)."""
        return tuple(f.view() for f in list(self.faults.values())[-200:])


def goodput_fraction(
    ber: NDArray[np.float64], packet_bytes: float, resent_packets: float | NDArray[np.float64]
) -> NDArray[np.float64]:
    """Share of a link's capacity left for new data under bit errors.

    A packet of ``packet_bytes`` is hit with probability p = 1 − (1 − ber)^bits.
    Link-level retry resends that one packet (``resent_packets = 1``); go-back-N
    resends the whole window in flight (``resent_packets`` = window in packets).
    Each packet costs on average 1 + p·resent/(1 − p) transmissions.
    """
    bits = packet_bytes * 8
    p = -np.expm1(bits * np.log1p(-np.minimum(ber, 1 - 1e-12)))
    return 1.0 / (1.0 + p * resent_packets / np.maximum(1.0 - p, 1e-12))


class _Named(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def target(self) -> str: ...


_N = TypeVar("_N", bound=_Named)


def select_cleared(cmd: ClearFault, live: Sequence[_N], known: Container[str]) -> list[_N]:
    """The faults of ``live`` (not yet cleared) that ``cmd`` clears: all, the one of its
    id, or those on its target; ``known`` holds every id ever given (a fault cleared
    already is told apart from one that never was).

    Raises:
        CommandError: the id or the target names no live fault (the message says which
            are live).
    """
    if cmd.all:
        return list(live)
    if cmd.fault_id is not None:
        chosen = [f for f in live if f.id == cmd.fault_id]
        if not chosen:
            if cmd.fault_id in known:
                raise CommandError(f"fault {cmd.fault_id!r} is already cleared")
            raise unknown("active fault", cmd.fault_id, [f.id for f in live])
        return chosen
    chosen = [f for f in live if f.target == cmd.target]
    if not chosen:
        targets = sorted({f.target for f in live})
        if targets:
            raise CommandError(
                f"{unknown('fault target', str(cmd.target), targets)}; "
                f"faults are active on: {', '.join(targets)}"
            )
        raise CommandError(f"no active fault on {cmd.target!r} (no fault is active)")
    return chosen
