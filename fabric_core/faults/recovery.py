"""How the fabric copes with faults: detection, reroute / reconvergence, measured recovery.

``track`` runs once per tick, before the rates are solved. It

* follows each link's up/down state (``FaultBook.down_since_s``) and, after the
  profile's detection and mitigation delays, marks down links as known to routing
  and reroutes the flows that cross them (``reroute``): the bytes those flows had
  past their source are sent again, and counted as retransmitted as they are sent
  (``FlowTable.resend_bytes``);
* on PFC fabrics discards the bytes switches forward into a dead link until the
  link is known down (go-back-N resends them after the sender's local ACK timeout, and
  they are counted retransmitted then): ``discards_bytes_total``;
* drives the time-based faults: credit leak and link retrain, incast bursts (a
  PFC storm's pauses are the PFC model's: ``Fabric._stormed_queues``);
* moves each fault along its timeline and *measures* recovery: a fault is
  recovered at the first tick, after it was mitigated (or cleared, if nothing
  mitigates it), at which the fabric's delivered throughput over the last
  ``RECOVERY_WINDOW_S`` is back to ``RECOVERED_FRACTION`` of what it was over
  the same window before the fault.

Recovery modes (``Profile.recovery``):

=============  ============================  ======================================
mode           detected after                rerouted after
=============  ============================  ======================================
fast-reroute   ``fault_detect_s``            ``reroute_s`` (local adaptive reroute)
bfd-ecmp       ``bfd_interval_s × mult``     detection + ``ecmp_reconverge_s``
sm-resweep     ``fault_detect_s`` (trap)     detection + ``sm_resweep_s``
=============  ============================  ======================================

Loops here run over the handful of faults, never over flows or links.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Protocol

import numpy as np
from numpy.typing import NDArray

from fabric_core.commands import ClearFault, CommandError, InjectFault, unknown
from fabric_core.faults.admission import admit_rounds
from fabric_core.faults.book import DOWN_KINDS, FAULT_KINDS, Fault, FaultBook
from fabric_core.net import endpoint_costs
from fabric_core.net.profiles import RECOVERY_MODES, Profile
from fabric_core.net.route_rules import FLOW_KEY_STRIDE
from fabric_core.net.routing import route
from fabric_core.net.tables import LinkStatus
from fabric_core.net.topology import TIER_ENDPOINT
from fabric_core.tick.host import FlowControlHost
from fabric_core.tick.lazy import LazyModule
from fabric_core.tick.pfc import PfcQueues
from fabric_core.units import format_bytes, format_duration

if TYPE_CHECKING:
    from fabric_core.tick.kernels import blackhole as blackhole_kernels
else:  # numba is imported when a kernel is first called (fabric_core.tick.lazy)
    blackhole_kernels = LazyModule("fabric_core.tick.kernels.blackhole")


class SkipHost(Protocol):
    """What saying a refused scheduled command needs (``skipped``): a fabric or a planed
    fabric's coordinator."""

    #: the scheduled commands refused when their time came ("target: why"), in order
    schedule_skipped: list[str]

    def emit(self, severity: str, kind: str, target: str, message: str) -> None: ...


class RecoveryHost(FlowControlHost, Protocol):
    """What recovery reads and writes of the fabric (``runtime.fabric.Fabric`` is one):
    what flow control does (``tick.host``: the flow table, the link book, the dropped
    bytes, the event log), and the fault book, the PFC queues, the byte totals and routing
    (``start_flows``, ``lanes_and_costs``). The attributes without a property are the ones
    it assigns."""

    #: bytes injected, then cancelled before they were sent (a cancelled incast)
    cancelled_bytes: float
    #: the scheduled commands refused when their time came ("target: why"), in order
    schedule_skipped: list[str]

    @property
    def faults(self) -> FaultBook: ...
    @property
    def pfc(self) -> PfcQueues | None: ...
    @property
    def dt_s(self) -> float: ...
    @property
    def classes(self) -> list[str]: ...
    @property
    def delivered_bytes(self) -> float: ...
    def start_flows(
        self,
        src: NDArray[np.int64],
        dst: NDArray[np.int64],
        size: NDArray[np.float64],
        *,
        traffic_class: int,
        workload: int,
        tag: NDArray[np.int64],
        ready_s: NDArray[np.float64],
        extra_latency_s: NDArray[np.float64] | None = None,
    ) -> None: ...
    def lanes_and_costs(
        self,
        path: NDArray[np.int32],
        hops: NDArray[np.int8],
        vl0: NDArray[np.int8],
        size: NDArray[np.float64],
    ) -> tuple[NDArray[np.int8], NDArray[np.float64], NDArray[np.float64]]: ...


#: Window over which delivered throughput is compared before and after a fault.
#: A design choice: long enough to cover the tiny scenario's 40 µs all-to-all period.
RECOVERY_WINDOW_S = 100e-6
#: Throughput counts as "back to the pre-fault level" at this share of it (design choice).
RECOVERED_FRACTION = 0.9
#: Tags of incast flows (the fault's own; no workload hears their completion).
INCAST_TAG_BASE = 1 << 40
INCAST_WORKLOAD = -1
#: A time is reached at a tick starting this close before it (tick starts are sums that round)
TIME_EPS_S = 1e-15
#: ``LinkStatus.DOWN`` as numpy compares it six times faster than the enum (a tick's
#: comparisons over every link while a fault is open)
_DOWN = np.int8(LinkStatus.DOWN)


def recovery_mode(p: Profile) -> str:
    """The profile's recovery mechanism (``auto`` resolved by its flow control)."""
    mode = p.recovery
    if mode == "auto":
        return "fast-reroute" if p.flow_control == "credit" else "bfd-ecmp"
    if mode not in RECOVERY_MODES:
        raise ValueError(
            f"profile {p.name}: unknown recovery {mode!r}; known: auto, {', '.join(RECOVERY_MODES)}"
        )
    return mode


def link_delays(p: Profile) -> tuple[float, float]:
    """(time to detect, time to reroute) a failed link, from the moment it fails."""
    mode = recovery_mode(p)
    if mode == "fast-reroute":
        return p.fault_detect_s, max(p.reroute_s, p.fault_detect_s)
    if mode == "bfd-ecmp":
        detect = p.bfd_interval_s * p.bfd_multiplier
        return detect, detect + p.ecmp_reconverge_s
    return p.fault_detect_s, p.fault_detect_s + p.sm_resweep_s


# ---------------------------------------------------------------------- per tick
def track(fabric: RecoveryHost, status: NDArray[np.int8], now: float) -> None:
    """One tick of fault tracking; see the module docstring."""
    book = fabric.faults
    book.flow_control = fabric.profile.flow_control
    book.delivered_history.append((now, fabric.delivered_bytes))
    fabric.flows.resend_due(now)  # senders whose ACK timeout is up send again
    if book.settled() and book.seen_status is status:
        return  # nothing open, and the last tick already saw every link up
    if status is not book.seen_status:
        # (the fabric keeps its link conditions while the faults' state does not change:
        # the same status as last tick's is the same object, and nothing went down)
        down = status == _DOWN
        went_down = down & ~book.seen_down
        if went_down.any():
            fabric.link_book.counters["link_downed_total"][went_down] += 1
            book.down_since_s[went_down] = now
        book.down_since_s[~down] = np.inf
        book.seen_status, book.seen_down = status, down
    down = book.seen_down
    detect_s, reroute_s = link_delays(fabric.profile)
    unknown_down = down & ~fabric.link_book.known_down
    if fabric.pfc is not None and unknown_down.any():
        lost = _blackhole(fabric, unknown_down, now)
        for f in book.active():
            if f.links.size and f.mitigated_at_s is None:
                f.lost_bytes += float(lost[f.links].sum())
    newly_known = unknown_down & (now >= book.down_since_s + reroute_s - TIME_EPS_S)
    moved, resent = 0, np.zeros(0)
    if newly_known.any():
        fabric.link_book.set_known_down(fabric.link_book.known_down | newly_known)
        moved, resent = reroute(fabric, np.flatnonzero(newly_known))
    # links back up: routing may use them again
    fabric.link_book.set_known_down(fabric.link_book.known_down & down)
    _leak_credits(fabric, book)
    _apply_buffer_factor(fabric, book)
    _incasts(fabric, book, now)
    _progress(fabric, book, now, detect_s, newly_known, moved, resent)


def blackholing(fabric: RecoveryHost, recovering: bool = False) -> bool:
    """Whether ``track`` does nothing, tick after tick, but lose the bytes forwarded into
    links down that routing does not know of yet, on a PFC fabric (``_blackhole``, which
    ``kernels.busy`` runs tick by tick too), until the next step of their timeline
    (``next_step_s``): the open faults are links or switches down, each seen once
    (its baseline taken) and either at rest (recovered, ``FaultBook.at_rest``) or not
    rerouted yet; no buffer scaled, no incast to cancel. With ``recovering``, also
    rerouted and not recovered yet, a baseline to recover to taken: then ``track`` also
    measures recovery tick by tick (``_check_recovered``; ``kernels.busy`` stops before
    the tick at which it would find one recovered, ``recovered_at_Bps``)."""
    book = fabric.faults
    if fabric.pfc is None or not book.downs_only():
        return False
    known = fabric.link_book.known_down
    for f in book.open.values():
        if f.baseline_Bps is None:
            return False
        if f.recovered_at_s is not None:
            continue
        measured = recovering and f.mitigated_at_s is not None and f.baseline_Bps > 0
        if not measured and (f.mitigated_at_s is not None or known[f.links].any()):
            return False  # rerouted: its recovery is measured tick by tick (or at once)
    return bool(book.open)


def recovered_at_Bps(book: FaultBook) -> float:
    """The delivered rate over the recovery window (``delivered_rate``) at which the first
    open fault rerouted but not recovered counts as recovered (``_check_recovered``); inf
    if there is none."""
    return min(
        (
            RECOVERED_FRACTION * (f.baseline_Bps or 0.0)
            for f in book.open.values()
            if f.recovered_at_s is None and f.mitigated_at_s is not None
        ),
        default=np.inf,
    )


def recovery_window_s(dt: float) -> float:
    """The window ``delivered_rate`` measures over: ``RECOVERY_WINDOW_S``, or four ticks
    where the tick is longer than a quarter of it (a rate over one or two ticks would
    follow each tick's completions)."""
    return max(RECOVERY_WINDOW_S, 4 * dt)


def history_tail(
    history: deque[tuple[float, float]], until: float, dt: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The entries of ``history`` that ``delivered_rate`` at ``until`` or later reads, as
    (times, bytes delivered), oldest first: back to the first at or before the window's
    start (or all, if none is)."""
    start = until - recovery_window_s(dt) + TIME_EPS_S
    times: list[float] = []
    delivered: list[float] = []
    for t, d in reversed(history):
        times.append(t)
        delivered.append(d)
        if t <= start:
            break
    return np.array(times[::-1], dtype=np.float64), np.array(delivered[::-1], dtype=np.float64)


def next_step_s(fabric: RecoveryHost) -> float:
    """The earliest time ``track`` could move an open link or switch down along its
    timeline (``_advance``, ``link_delays``): a detection, or a link known to routing
    and rerouted; inf if none is due (``Fabric._quiet_until``: ticks at once stop
    before it)."""
    book = fabric.faults
    if book.settled():
        return np.inf
    detect_s, reroute_s = link_delays(fabric.profile)
    unknown = book.seen_down & ~fabric.link_book.known_down
    first = float(book.down_since_s[unknown].min()) + reroute_s if unknown.any() else np.inf
    for f in book.open.values():
        if f.kind in DOWN_KINDS and f.cleared_at_s is None and f.detected_at_s is None:
            first = min(first, _detection_due_s(book, f, detect_s))
    return first - TIME_EPS_S


def cut_off_endpoints(fabric: RecoveryHost, f: Fault) -> list[str]:
    """The endpoints ``f``'s links leave with no uplink up (a GPU's only cable, in a fabric
    of one plane): no reroute reaches them, whatever routing does. Read from the uplinks
    routing itself takes, one a plane (``Topology.ep_uplink``)."""
    topo = fabric.topo
    src, dst = np.asarray(topo.links.src), np.asarray(topo.links.dst)
    tier = np.asarray(topo.nodes.tier)
    ends = np.unique(np.r_[src[f.links], dst[f.links]])
    ends = ends[tier[ends] == TIER_ENDPOINT]
    uplinks = topo.ep_uplink[ends]
    down = fabric.link_book.known_down[np.maximum(uplinks, 0)] | (uplinks < 0)
    return [topo.nodes.name[end] for end in ends[down.all(axis=1)]]


def isolated_switches(fabric: RecoveryHost, f: Fault) -> list[tuple[str, list[str]]]:
    """The switches at ``f``'s links that every link to a higher tier is known down for (a
    leaf whose spines are down or out of reach: with another fault, two spines of two),
    each with the endpoints that reach the fabric only through it and its like: those
    reach only the endpoints below it, whatever routing does. A top-tier switch has no
    such link and is never isolated; an endpoint with an uplink (another plane) to a
    switch still connected is not cut off."""
    topo = fabric.topo
    src, dst = np.asarray(topo.links.src), np.asarray(topo.links.dst)
    tier = np.asarray(topo.nodes.tier)
    known = fabric.link_book.known_down
    climbs = tier[dst] > tier[src]
    n = tier.size
    climbs_at_all = np.bincount(src[climbs], minlength=n) > 0
    climbs_now = np.bincount(src[climbs & ~known], minlength=n) > 0
    ends = np.unique(np.r_[src[f.links], dst[f.links]])
    isolated = ends[(tier[ends] > TIER_ENDPOINT) & climbs_at_all[ends] & ~climbs_now[ends]]
    if not isolated.size:
        return []
    cut = np.zeros(n, dtype=np.bool_)
    cut[isolated] = True
    out: list[tuple[str, list[str]]] = []
    endpoints = np.flatnonzero(tier == TIER_ENDPOINT)
    uplinks = topo.ep_uplink[endpoints]
    up = (uplinks >= 0) & ~known[np.maximum(uplinks, 0)]
    to = dst[np.maximum(uplinks, 0)]
    # every uplink that is up leads to an isolated switch (and one does)
    stuck = (up & cut[to]).any(axis=1) & ~(up & ~cut[to]).any(axis=1)
    for switch in isolated:
        below = endpoints[stuck & (up & (to == switch)).any(axis=1)]
        if below.size:
            out.append((topo.nodes.name[switch], [topo.nodes.name[e] for e in below]))
    return out


def _cut_off_words(names: list[str]) -> str:
    return f"{_some(names)} {'has' if len(names) == 1 else 'have'} no other link: cut off until it is back"


def _isolated_words(isolated: list[tuple[str, list[str]]]) -> str:
    if not isolated:
        return ""
    if len(isolated) > 1:  # (a switch down that was the only one above its neighbours)
        switches = _some([switch for switch, _ in isolated])
        return (
            f"{switches} have no link up to a higher tier: their endpoints reach only those "
            "below the same switch until one is back"
        )
    ((switch, below),) = isolated
    return (
        f"{switch} has no link up to a higher tier: {_some(below)} reach only the endpoints "
        f"below {switch} until one is back"
    )


def _some(names: list[str]) -> str:
    """Up to three names, and how many more."""
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _unreachable_words(fabric: RecoveryHost, f: Fault) -> str:
    """What no reroute reaches after ``f`` (endpoints cut off, switches isolated from above),
    in words; empty when every endpoint still reaches every other."""
    cut = cut_off_endpoints(fabric, f)
    isolated = isolated_switches(fabric, f)
    return "; ".join(
        part for part in (_cut_off_words(cut) if cut else "", _isolated_words(isolated)) if part
    )


def _detection_due_s(book: FaultBook, f: Fault, detect_s: float) -> float:
    """When a link or switch down ``f`` is detected: ``detect_s`` after the first of its
    links that is down went down (``FaultBook.seen_down``); inf while none is."""
    since = book.down_since_s[f.links][book.seen_down[f.links]]
    return float(since.min()) + detect_s if since.size else np.inf


def _progress(
    fabric: RecoveryHost,
    book: FaultBook,
    now: float,
    detect_s: float,
    newly_known: NDArray[np.bool_],
    moved: int,
    resent: NDArray[np.float64],
) -> None:
    p = fabric.profile
    for f in list(book.open.values()):
        if f.baseline_Bps is None:
            f.baseline_Bps = delivered_rate(book.delivered_history, f.injected_at_s, fabric.dt_s)
        if f.cleared_at_s is None:
            _advance(fabric, book, f, now, detect_s, p)
            if f.kind in ("link_down", "switch_down", "link_flap") and newly_known[f.links].any():
                lost = float(resent[f.links].sum()) if resent.size else 0.0
                f.lost_bytes += lost
                unreachable = _unreachable_words(fabric, f)
                fabric.emit(
                    "warning" if unreachable else "info",
                    "rerouted",
                    f.target,
                    f"{moved} flows rerouted around {f.target} ({recovery_mode(p)}, {f.id}); "
                    # (resent when their senders send them again: on RoCE a flow waiting
                    # for its ACK timeout has not yet)
                    f"{format_bytes(f.lost_bytes)} lost so far, to be resent by their senders"
                    + (f"; {unreachable}" if unreachable else ""),
                )
        if f.recovered_at_s is None:
            _check_recovered(fabric, book, f, now)


def _advance(
    fabric: RecoveryHost,
    book: FaultBook,
    f: Fault,
    now: float,
    detect_s: float,
    p: Profile,
) -> None:
    """Detection and mitigation of one active fault."""
    age = now - f.injected_at_s
    kind = f.kind
    if kind in ("link_down", "switch_down", "link_flap"):
        # (``track`` has just made ``book.seen_down`` this tick's ``status``)
        if f.detected_at_s is None and now >= _detection_due_s(book, f, detect_s) - TIME_EPS_S:
            _detected(fabric, f, now, f"by {recovery_mode(p)}")
        if f.mitigated_at_s is None and fabric.link_book.known_down[f.links].any():
            unreachable = _unreachable_words(fabric, f)
            how = f"routing knows, but {unreachable}" if unreachable else "traffic rerouted"
            _mitigated(fabric, f, now, how)
    elif kind == "link_degraded":
        if f.detected_at_s is None and age >= p.fault_detect_s - TIME_EPS_S:
            _detected(fabric, f, now, "by the port's symbol errors")
            _mitigated(fabric, f, now, "retries absorb the errors (link-level retry / go-back-N)")
    elif kind == "credit_loss":
        if f.detected_at_s is None and age >= p.credit_watchdog_s - TIME_EPS_S:
            _detected(fabric, f, now, "by the credit watchdog")
        if (
            f.detected_at_s is not None
            and f.mitigated_at_s is None
            and now >= f.detected_at_s + p.link_retrain_s - TIME_EPS_S
        ):
            _mitigated(fabric, f, now, "link retrained, credits restored")
            book.mark_retrained(f)
    elif kind == "pfc_storm" and f.detected_at_s is None:
        if fabric.pfc is None:
            # A credit fabric has no PFC, but the NIC behind a storm is stuck: it takes no
            # data and so returns no credits (``Fabric._rates``). Its port sees that; no
            # watchdog then drops the flows' bytes (InfiniBand's head-of-queue lifetime,
            # which would, is not modelled), so nothing mitigates it until it is cleared.
            if age >= p.fault_detect_s - TIME_EPS_S:
                how = (
                    "by the port: no credits come back from the stuck NIC (no PFC here, "
                    "so no watchdog): flows into it wait until it is cleared"
                )
                _detected(fabric, f, now, how)
        else:
            # measured: the PFC model's watchdog fired on a queue into the storming NIC
            v = fabric.n_vls
            into = np.flatnonzero(fabric.topo.links.dst == f.node)
            queues = (into[:, None] * v + np.arange(v)).ravel()
            until = fabric.pfc.watchdog_until_s[queues]
            fired = until >= now - TIME_EPS_S
            if fired.any():
                # dated when the watchdog fired (in the tick before this one's look)
                at = float(until[fired].min()) - p.pfc_watchdog_recovery_s
                how = "by the PFC watchdog: its pause is ignored, the queue drops"
                _detected(fabric, f, at, how)
                _mitigated(fabric, f, at, how)
    elif kind == "incast" and f.detected_at_s is None:
        link = _endpoint_ingress(fabric, f.node)
        fl = fabric.flows
        waiting = float(np.where(fl.path == link, fl.backlog, 0.0).sum())
        if waiting > fabric.profile.buffer_per_vl_bytes:
            _detected(fabric, f, now, f"by its port: {format_bytes(waiting)} queued for {f.target}")


def _after(f: Fault, now: float) -> str:
    """The simulated time since ``f`` was injected, as the console writes durations (16 µs,
    2.02 ms); each event names its fault, so two faults' events never read as one."""
    return format_duration(now - f.injected_at_s)


def _detected(fabric: RecoveryHost, f: Fault, now: float, how: str) -> None:
    """``how``: "by" what detected it, then after ": " what it saw or does, if anything
    ("by the PFC watchdog: its pause is ignored, the queue drops"), which the message puts
    after the time (it read "... until it is cleared after 10 µs")."""
    f.detected_at_s = now
    by, _, seen = how.partition(": ")
    fabric.emit(
        "warning",
        "fault_detected",
        f.target,
        f"{f.kind} on {f.target} detected {by} after {_after(f, now)} ({f.id})"
        + (f": {seen}" if seen else ""),
    )


def _mitigated(fabric: RecoveryHost, f: Fault, now: float, how: str) -> None:
    f.mitigated_at_s = now
    fabric.emit(
        "info",
        "fault_mitigated",
        f.target,
        f"{f.kind} on {f.target} mitigated after {_after(f, now)} ({f.id}): {how}",
    )


def _check_recovered(fabric: RecoveryHost, book: FaultBook, f: Fault, now: float) -> None:
    gates = [t for t in (f.mitigated_at_s, f.cleared_at_s) if t is not None]
    if not gates or now < min(gates) - TIME_EPS_S:
        return
    if f.kind == "incast":
        if f.cleared_at_s is None:
            return
        fl = fabric.flows
        if (fl.active & (fl.workload == INCAST_WORKLOAD) & (fl.tag >= INCAST_TAG_BASE)).any():
            return
    baseline = f.baseline_Bps or 0.0
    if baseline > 0 and delivered_rate(book.delivered_history, now, fabric.dt_s) < (
        RECOVERED_FRACTION * baseline
    ):
        return
    f.recovered_at_s = now
    book.settle(f)
    fabric.emit(
        "info",
        "fault_recovered",
        f.target,
        f"{f.kind} on {f.target}: traffic back to {RECOVERED_FRACTION:.0%} of its pre-fault "
        f"level {_after(f, now)} after injection ({f.id})",
    )


def delivered_rate(history: deque[tuple[float, float]], until: float, dt: float) -> float:
    """Delivered bytes per second over the window that ends at ``until``
    (``recovery_window_s``), from ``history``'s (time, bytes delivered by then): from its
    last entry at ``until`` to the first at or before the window's start (``kernels.busy``
    measures it so too)."""
    window = recovery_window_s(dt)
    end: tuple[float, float] | None = None
    start: tuple[float, float] | None = None
    for t, d in reversed(history):
        if end is None:
            if t <= until + TIME_EPS_S:
                end = (t, d)
            continue
        start = (t, d)
        if t <= end[0] - window + TIME_EPS_S:
            break
    if end is None or start is None or end[0] <= start[0]:
        return 0.0
    return (end[1] - start[1]) / (end[0] - start[0])


def _blackhole(fabric: RecoveryHost, dead: NDArray[np.bool_], now: float) -> NDArray[np.float64]:
    """Lossy Ethernet until routing knows: a switch forwards into a dead port and the
    bytes are lost; go-back-N sends them again from the source once the sender's local
    ACK timeout is up. Returns bytes lost per link.

    The bytes queued in a switch for a dead link (hop ≥ 1) are discarded and put back at
    their flow's source, as the PFC model does with overflow drops (a NIC knows its own
    link is down: hop 0 keeps its bytes). A sender hears neither ACK nor NAK for what it
    lost (nothing reaches the receiver): the flows that lost bytes wait until ``now``
    plus the profile's ``local_ack_timeout_s``, with the rest of what they had in the
    network put back at their source too, then resend from the first packet lost
    (``kernels.blackhole.lose_at_dead_links``, which ``kernels.busy`` runs tick by tick
    too): those bytes are counted retransmitted as they are resent, after the timeout
    (``FlowTable.resend_bytes``), not now. ``dead``: per link, down and not yet known so.
    """
    fl = fabric.flows
    counters = fabric.link_book.counters
    resend_at = now + fabric.profile.local_ack_timeout_s
    dropped, lost_by_link, slots = blackhole_kernels.lose_at_dead_links(
        fl.path,
        fl.active[: fl.live_end],
        fl.backlog,
        fl.rate,
        fl.held,
        fl.resend_s,
        dead,
        resend_at,
        counters["discards_bytes_total"],
        fl.resend_bytes,
    )  # fmt: skip  (no flow is in flight past live_end)
    fabric.dropped_bytes += dropped
    if slots.size:
        fl.held_for_resend(slots, resend_at)
    return lost_by_link


# ---------------------------------------------------------------------- reroute
def reroute(fabric: RecoveryHost, links: NDArray[np.int64]) -> tuple[int, NDArray[np.float64]]:
    """Give flows crossing ``links`` new paths avoiding known-down links.

    The bytes those flows had past their source are sent again (counted as
    retransmitted on their first link as the source sends them, ``FlowTable.resend_bytes``).
    A sprayed flow's sub-flows that cross ``links`` each get an adaptive path. Returns
    (flows moved, a sprayed flow counting once; bytes to resend per link of ``links``'
    fabric, indexed like the link table)."""
    fl = fabric.flows
    n_links = len(fabric.topo.links)
    resent_by_link = np.zeros(n_links)
    # flows waiting for their ACK timeout move too: they resend on the new path
    hit = np.isin(fl.path, links).any(axis=0) & (fl.active | fl.waiting())
    slots = np.flatnonzero(hit)
    if slots.size == 0:
        return 0, resent_by_link
    src = fl.src[slots]
    dst = fl.dst[slots]
    cost = np.where(fabric.link_book.known_down, np.inf, 0.0)
    mode = "ecmp" if fabric.profile.routing == "ecmp" else "adaptive"
    key = fl.tag[slots] * FLOW_KEY_STRIDE + fl.workload[slots]
    if fabric.profile.routing == "spray":
        # a sprayed flow's sub-flows each get an adaptive path of their own (the slot
        # tells them apart), not one path for all: the spray over the links left is
        # only approximately even until the flow ends
        key = key + slots.astype(np.int64) * 7_919
    path, hops = route(fabric.topo, src, dst, key, mode=mode, link_cost=cost)
    in_network = fl.restart_from_source(slots)
    # attribute the resent bytes to the failed link(s) each flow crossed
    crossing = np.isin(fl.path[:, slots], links)
    first_failed = np.where(crossing.any(axis=0), fl.path[crossing.argmax(axis=0), slots], -1)
    ok = first_failed >= 0
    np.add.at(resent_by_link, first_failed[ok], in_network[ok])
    fl.path[:, slots] = path
    fl.hops[slots] = hops
    vl, fixed, wait = fabric.lanes_and_costs(path, hops, fl.vl[0, slots], fl.size[slots])
    # a sprayed message's sub-flows are inlined or not as the whole message is
    fixed += endpoint_costs.sprayed_read_s(fabric.profile, fl.size[slots], fl.parent_size[slots])
    fl.vl[:, slots] = vl
    fl.fixed_latency_s[slots] = fixed
    fl.wait_s[slots] = wait
    fl.version += 1
    return int(np.unique(fl.parent[slots]).size), resent_by_link


# ---------------------------------------------------------------------- effects
def _leak_credits(fabric: RecoveryHost, book: FaultBook) -> None:
    """Lost credit updates: each byte forwarded returns no credit with prob. loss_fraction."""
    if not book.credit_loss.any():
        return
    port_buffer = fabric.topo.links.buffer_bytes * fabric.n_vls
    leaked = (
        book.credit_loss * fabric.link_book.link_rate * fabric.dt_s / np.maximum(port_buffer, 1.0)
    )
    book.buffer_factor = np.maximum(book.buffer_factor - leaked, MIN_BUFFER_FACTOR)


#: Credit loss never takes a port below this share of its buffer (keeps the fluid solve
#: away from a zero buffer; the link is then all but stalled, as with all credits lost).
MIN_BUFFER_FACTOR = 1e-3


def _apply_buffer_factor(fabric: RecoveryHost, book: FaultBook) -> None:
    """Scale the fabric's per-VL buffers by ``FaultBook.buffer_factor``.

    Keeps the unscaled buffers aside; if someone else rewrote the buffers since the
    last tick (``set buffer_per_vl_bytes``) their values become the new base.
    """
    factor = book.buffer_factor
    if book.buffer_base is None:
        if (factor == 1.0).all():
            return
        book.buffer_base = fabric.link_book.buffer_bytes.copy()
    elif book.buffer_written is not None and not np.array_equal(
        fabric.link_book.buffer_bytes, book.buffer_written
    ):
        book.buffer_base = fabric.link_book.buffer_bytes.copy()
    fabric.link_book.buffer_bytes = book.buffer_base * np.repeat(factor, fabric.n_vls)
    if (factor == 1.0).all():
        book.buffer_base = None
        book.buffer_written = None
    else:
        book.buffer_written = fabric.link_book.buffer_bytes.copy()


def _endpoint_ingress(fabric: RecoveryHost, node: int) -> int:
    links = fabric.topo.links
    return int(np.flatnonzero(links.dst == node)[0])


def incast_tag_base(f: Fault) -> int:
    """The first tag of an incast fault's flows: each fault has its own tag range,
    ``INCAST_TAG_BASE + (fault number mod 64) × 2**36``, and round × 4096 + sender
    within it (tags stay below 2**43, so that routing's key, ``tag × FLOW_KEY_STRIDE``,
    fits int64)."""
    return INCAST_TAG_BASE + (int(f.id.removeprefix("f")) % 64) * _INCAST_TAG_SPAN


_INCAST_TAG_SPAN = 1 << 36


def _incast_slots(fabric: RecoveryHost, f: Fault) -> NDArray[np.bool_]:
    """Slots (in flight, or a sprayed head waiting for its siblings) of ``f``'s flows."""
    fl = fabric.flows
    base = incast_tag_base(f)
    return np.asarray(
        (fl.active | fl.held)
        & (fl.workload == INCAST_WORKLOAD)
        & (fl.tag >= base)
        & (fl.tag < base + _INCAST_TAG_SPAN),
        dtype=np.bool_,
    )


def _incasts(fabric: RecoveryHost, book: FaultBook, now: float) -> None:
    """Start the messages of active incast faults due in [now, now + dt), within the
    admission limits (``fabric_core.faults.admission``); cancel a cleared one's unsent ones."""
    while book.cleared_incasts:
        _cancel_incast(fabric, book.cleared_incasts.pop())
    dt = fabric.dt_s
    for f in book.active("incast"):
        period = float(f.params["period_s"])
        due = int(np.floor((now + dt - f.injected_at_s) / period - 1e-9)) + 1
        rounds = due - f.sent
        if rounds <= 0:
            continue
        gpus = fabric.topo.gpus.astype(np.int64)
        pool = np.roll(gpus, -int(np.searchsorted(gpus, f.node)))
        pool = pool[pool != f.node][: int(f.params["senders"])]
        if pool.size == 0:
            continue
        size = float(f.params["size_bytes"])
        first_round = f.sent
        f.sent = due
        ok, considered = _admit_incast(fabric, book, f, pool, rounds, size)
        refused = rounds * pool.size - int(ok.sum())
        if refused:
            _refused(fabric, book, f, refused, size)
        if not ok.any():
            continue
        r = np.repeat(np.arange(first_round, first_round + considered), pool.size)[ok]
        sender = np.tile(np.arange(pool.size), considered)[ok]
        n = r.size
        cls = fabric.classes.index("bulk") if "bulk" in fabric.classes else 0
        fabric.start_flows(
            pool[sender],
            np.full(n, f.node, dtype=np.int64),
            np.full(n, size),
            traffic_class=cls,
            workload=INCAST_WORKLOAD,
            tag=incast_tag_base(f) + (r % (1 << 24)) * 4096 + sender,
            ready_s=np.maximum(f.injected_at_s + r * period, now),
        )


def _admit_incast(
    fabric: RecoveryHost,
    book: FaultBook,
    f: Fault,
    pool: NDArray[np.int64],
    rounds: int,
    size: float,
) -> tuple[NDArray[np.bool_], int]:
    """Which of the due rounds' flows the limits admit; (mask, rounds it covers).

    Only the first rounds up to the largest per-sender room can hold an admitted flow,
    so a long backlog of due rounds (a long tick, a tiny period) is never materialised."""
    fl = fabric.flows
    lim = book.admission.limits
    mine = _incast_slots(fabric, f)
    heads = np.flatnonzero(mine & (fl.parent == np.arange(fl.capacity)))
    live = fl.active & mine
    outstanding = float((fl.size[live] - fl.delivered[live]).sum())
    in_flight = np.zeros(len(fabric.topo.nodes), dtype=np.int64)
    np.add.at(in_flight, fl.src[heads], 1)
    sender_room = lim.per_sender_flows - in_flight[pool]
    considered = int(min(rounds, max(int(sender_room.max()), 0)))
    flow_room = min(lim.fault_flows - heads.size, book.admission.room(fl.n_parents))
    ok = admit_rounds(sender_room, considered, size, flow_room, lim.fault_bytes - outstanding)
    return ok, considered


def _refused(fabric: RecoveryHost, book: FaultBook, f: Fault, refused: int, size: float) -> None:
    first = f.refused == 0
    f.refused += refused
    book.admission.refuse(refused, refused * size)
    if first:
        lim = book.admission.limits
        fabric.emit(
            "warning",
            "flows_refused",
            f.target,
            f"{f.kind} {f.id}: admission limits reached ({lim.per_sender_flows} flows per "
            f"sender, {lim.fault_flows} flows or {lim.fault_bytes:.3g} bytes outstanding per "
            f"fault, {lim.fabric_flows} flows fabric-wide): further messages are refused "
            f"and counted (fabtop_flows_refused_total)",
        )


def _cancel_incast(fabric: RecoveryHost, f: Fault) -> None:
    """A cleared incast's messages not sent yet are cancelled (their bytes are counted
    cancelled); what is already in the network drains and is delivered."""
    fl = fabric.flows
    slots = np.flatnonzero(_incast_slots(fabric, f) & fl.active)
    if slots.size == 0:
        return
    unsent = fl.backlog[0, slots].copy()
    fl.backlog[0, slots] = 0.0
    fl.resend_bytes[slots] = 0.0  # (a resend owed is unsent too: cancelled with the rest)
    fl.size[slots] -= unsent
    per_flow = np.zeros(fl.capacity)
    np.add.at(per_flow, fl.parent[slots], unsent)
    fl.parent_size[slots] -= per_flow[fl.parent[slots]]
    fabric.cancelled_bytes += float(unsent.sum())
    cancelled = int(np.count_nonzero(fl.size[slots] <= fl.delivered[slots] + 1e-6))
    fabric.emit(
        "info",
        "flows_cancelled",
        f.target,
        f"{f.kind} {f.id} cleared: {cancelled} of its {slots.size} messages in flight cancelled "
        f"({float(unsent.sum()):.3g} bytes not sent yet); the rest drain",
    )


# ---------------------------------------------------------------------- schedules
def scheduled_command(
    kind: str, target: str, params: dict[str, float | str], duration_s: float | None
) -> InjectFault | ClearFault:
    """The command a scenario's ``[[fault]]`` entry stands for (``kind = "clear"`` clears)."""
    if kind == "clear":
        if params or duration_s is not None:
            raise CommandError("a clear takes no params and no duration")
        if target == "all":
            return ClearFault(all=True)
        return ClearFault(target=target)
    return InjectFault(kind=kind, target=target, params=params, duration_s=duration_s)


def check_scheduled(fabric: RecoveryHost, cmd: InjectFault | ClearFault) -> None:
    """Validate a scheduled command against the fabric (raises ``CommandError``)."""
    fabric.faults.flow_control = fabric.profile.flow_control
    if isinstance(cmd, InjectFault):
        fabric.faults.check(cmd)
        return
    if (
        cmd.target is not None
        and cmd.target not in fabric.topo.links.index
        and (cmd.target not in fabric.topo.nodes.index)
    ):
        names = list(fabric.topo.links.index) + list(fabric.topo.nodes.index)
        raise unknown("clear target", cmd.target, names)


def apply_scheduled(fabric: RecoveryHost, cmd: InjectFault | ClearFault, now: float) -> None:
    """Apply a scheduled fault or clear; a clear with nothing to clear is logged, not fatal."""
    try:
        if isinstance(cmd, InjectFault):
            fabric.faults.inject(cmd, now)
        else:
            fabric.faults.clear(cmd, now)
    except CommandError as exc:
        skipped(fabric, cmd, exc)


def skipped(fabric: SkipHost, cmd: InjectFault | ClearFault, exc: Exception) -> None:
    """Say that a scheduled command was refused when its time came: an event, and a line
    in ``fabric.schedule_skipped``, which a run's report lists whole (the event log keeps
    only the latest events)."""
    target = cmd.target or "all"
    fabric.emit("warning", "schedule_skipped", target, str(exc))
    fabric.schedule_skipped.append(f"{target}: {exc}")


__all__ = [
    "FAULT_KINDS",
    "RECOVERY_MODES",
    "apply_scheduled",
    "check_scheduled",
    "link_delays",
    "recovery_mode",
    "reroute",
    "scheduled_command",
    "skipped",
    "track",
]
