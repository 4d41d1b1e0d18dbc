"""The flow table: every message, transfer and I/O in flight, as flat arrays.

Per-(hop, flow) state is hop-major (``backlog[hop, flow]``); per-flow state is
one array per field. Slots are reused: a finished flow's slot is marked free and
taken by a later flow, so no array is rebuilt on the tick path. The table grows
(by doubling) when it runs out of slots.

A sprayed flow is several sub-flows, one slot each, that share a *parent*: the slot
of the first sub-flow (its head). The head counts the sub-flows still running and
the latest finish time so far; when it finishes before its siblings its slot is
*held* (out of the solve, not reusable) until the last one is done. A flow that is
not sprayed is its own head with one sub-flow.

A flow whose bytes a dead link swallowed waits for its RC local ACK timeout before it
sends again (``held_for_resend``): it is held too, with the time it resends in
``resend_s``, and carries no entries until then (``resend_due``).

Go-back-N puts a flow's lost bytes, and those it sent after them, back at its source
(``restart_from_source``, and the kernels that drop bytes: ``kernels.blackhole``,
``kernels.pfc.pfc_after_tick``) and notes them in ``resend_bytes``: they are the first the
source sends again, and each tick's move counts what it sends of them as retransmitted on
the flow's first link (``kernels.move.count_resends``), when they are sent, not when they
were lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.routing import MAX_HOPS
from fabric_core.tick.lazy import LazyModule

if TYPE_CHECKING:
    from fabric_core.tick.kernels import blackhole as blackhole_kernels
    from fabric_core.tick.kernels import slots as slots_kernels
else:  # numba is imported when a kernel is first called (fabric_core.tick.lazy)
    blackhole_kernels = LazyModule("fabric_core.tick.kernels.blackhole")
    slots_kernels = LazyModule("fabric_core.tick.kernels.slots")

#: A flow is done when what is left is at most this fraction of it plus this many
#: bytes: the rounding of rate × dt, not bytes still in the network.
DONE_FRACTION = 1e-9
DONE_BYTES = 1e-6
#: A backlog below this after a tick is the rounding of rates × dt, not bytes: it is
#: taken as empty (else a PFC queue with XOFF at 0 would pause on 1e-11 B, and whether
#: it does would depend on the order of a sum).
RESIDUE_BYTES = 1e-9
#: A resend is due at a tick starting this close before its time (the ticks' start
#: times are sums that round)
RESEND_EPS_S = 1e-15


@dataclass
class FlowRequests:
    """Flows a workload wants started in this tick (arrays of one length)."""

    src: NDArray[np.int64]  # endpoint node ids
    dst: NDArray[np.int64]
    size_bytes: NDArray[np.float64]
    # the workload's own id, handed back on completion; make it unique per flow: routing
    # hashes it, so flows that share a tag also share a path
    tag: NDArray[np.int64]
    ready_s: NDArray[np.float64]  # simulated time the data was ready to send
    extra_latency_s: NDArray[np.float64] | None = None  # endpoint costs (posting, copies)

    @staticmethod
    def empty() -> FlowRequests:
        """No flows: one instance for all (most workloads start nothing most ticks), to
        read, not to change."""
        return _NO_REQUESTS

    def __len__(self) -> int:
        return int(self.size_bytes.size)


def _no_requests() -> FlowRequests:
    z = np.zeros(0)
    zi = np.zeros(0, dtype=np.int64)
    for a in (z, zi):
        a.setflags(write=False)
    return FlowRequests(zi, zi, z, zi, z)


_NO_REQUESTS = _no_requests()


@dataclass
class Completions:
    """Flows of one workload that finished in the last tick."""

    tag: NDArray[np.int64]
    src: NDArray[np.int64]
    dst: NDArray[np.int64]
    size_bytes: NDArray[np.float64]
    start_s: NDArray[np.float64]
    finish_s: NDArray[np.float64]  # delivered at the destination, fixed costs included

    @property
    def latency_s(self) -> NDArray[np.float64]:
        """Finish minus start, per flow."""
        return self.finish_s - self.start_s


@dataclass
class NewFlows:
    """A batch of flows to start (all arrays of one length)."""

    path: NDArray[np.int32]  # [MAX_HOPS, n]
    hops: NDArray[np.int8]
    size_bytes: NDArray[np.float64]
    vl: NDArray[np.int8]  # [MAX_HOPS, n]: virtual lane on each hop (a reroute may change it)
    traffic_class: int  # one class and one workload per batch
    workload: int
    tag: NDArray[np.int64]  # the workload's own id (message group, request, ...)
    start_s: NDArray[np.float64]  # when the flow became ready (<= the tick it is injected in)
    extra_latency_s: NDArray[np.float64]  # endpoint costs the fabric does not carry
    src: NDArray[np.int64]  # endpoint node ids (kept for the completion report)
    dst: NDArray[np.int64]
    #: sprayed flows: sub-flows per flow, the rows of one flow consecutive (sum = rows);
    #: None: every row is a flow of its own
    n_sub: NDArray[np.int64] | None = None
    total_bytes: NDArray[np.float64] | None = None  # per row: its flow's size (None: its own)

    def __len__(self) -> int:
        return int(self.size_bytes.size)


class FlowTable:
    """Fixed-capacity arrays of flows; see the module docstring."""

    active: NDArray[np.bool_]
    path: NDArray[np.int32]
    backlog: NDArray[np.float64]
    rate: NDArray[np.float64]
    hops: NDArray[np.int8]
    size: NDArray[np.float64]
    delivered: NDArray[np.float64]
    vl: NDArray[np.int8]  # [hop, flow]
    cls: NDArray[np.int16]
    workload: NDArray[np.int16]
    tag: NDArray[np.int64]
    start_s: NDArray[np.float64]
    extra_latency_s: NDArray[np.float64]
    fixed_latency_s: NDArray[np.float64]
    wait_s: NDArray[np.float64]
    src: NDArray[np.int64]
    dst: NDArray[np.int64]
    parent: NDArray[np.intp]  # head slot of the flow this slot belongs to (-1 never used)
    parent_size: NDArray[np.float64]  # the whole flow's bytes
    pending: NDArray[np.int32]  # on a head: sub-flows of its flow not finished yet
    latest_finish_s: NDArray[np.float64]  # on a head: latest sub-flow finish so far
    held: NDArray[np.bool_]  # a finished head waiting for its siblings, or a resend
    resend_s: NDArray[np.float64]  # when a held flow waiting for its ACK timeout resends
    # bytes at the source that go-back-N sends again before new ones (lost, not resent yet)
    resend_bytes: NDArray[np.float64]

    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = 0
        self._alloc(max(capacity, 16))
        self.version = 0  # bumped whenever the set of active (hop, flow) entries changes
        self._n_flows = 0  # flows in flight (heads started, not yet whole)
        #: one past the highest active slot: the slots are taken lowest first, so after a
        #: burst the kernels that pass over the table's active slots stop here instead of
        #: at the capacity, which stays at the burst's size (held slots are out of the
        #: solve, and ``lowest_free`` passes over them on its own)
        self.live_end = 0
        #: flows waiting for their ACK timeout, and the earliest time one of them resends
        self.n_waiting = 0
        self.next_resend_s = np.inf

    def _alloc(self, capacity: int) -> None:
        old = self.capacity

        def grow(a: Any, fill: float, dtype: type, hop: bool = False) -> Any:
            shape: tuple[int, ...] = (MAX_HOPS, capacity) if hop else (capacity,)
            new: NDArray[Any] = np.full(shape, fill, dtype=dtype)
            if a is not None and old:
                new[..., :old] = a
            return new

        first = old == 0
        self.active = grow(None if first else self.active, False, bool)
        self.path = grow(None if first else self.path, -1, np.int32, hop=True)
        self.backlog = grow(None if first else self.backlog, 0.0, np.float64, hop=True)
        self.rate = grow(None if first else self.rate, 0.0, np.float64, hop=True)
        self.hops = grow(None if first else self.hops, 0, np.int8)
        self.size = grow(None if first else self.size, 0.0, np.float64)
        self.delivered = grow(None if first else self.delivered, 0.0, np.float64)
        self.vl = grow(None if first else self.vl, 0, np.int8, hop=True)
        self.cls = grow(None if first else self.cls, 0, np.int16)
        self.workload = grow(None if first else self.workload, -1, np.int16)
        self.tag = grow(None if first else self.tag, -1, np.int64)
        self.start_s = grow(None if first else self.start_s, 0.0, np.float64)
        self.extra_latency_s = grow(None if first else self.extra_latency_s, 0.0, np.float64)
        self.fixed_latency_s = grow(None if first else self.fixed_latency_s, 0.0, np.float64)
        self.wait_s = grow(None if first else self.wait_s, 0.0, np.float64)
        self.src = grow(None if first else self.src, -1, np.int64)
        self.dst = grow(None if first else self.dst, -1, np.int64)
        self.parent = grow(None if first else self.parent, -1, np.intp)
        self.parent_size = grow(None if first else self.parent_size, 0.0, np.float64)
        self.pending = grow(None if first else self.pending, 0, np.int32)
        self.latest_finish_s = grow(None if first else self.latest_finish_s, 0.0, np.float64)
        self.held = grow(None if first else self.held, False, bool)
        self.resend_s = grow(None if first else self.resend_s, np.inf, np.float64)
        self.resend_bytes = grow(None if first else self.resend_bytes, 0.0, np.float64)
        self.capacity = capacity

    @property
    def n_active(self) -> int:
        """Number of (sub-)flows in flight: entries the solver carries."""
        return int(np.count_nonzero(self.active))

    @property
    def n_parents(self) -> int:
        """Number of flows in flight, a sprayed flow counting once (kept as flows start
        and finish: no pass over the table)."""
        return self._n_flows

    def add(self, new: NewFlows) -> NDArray[np.intp]:
        """Start flows (or sprayed flows' sub-flows, see ``NewFlows.n_sub``); their bytes
        wait at the source NIC. Returns their slots, in row order."""
        n = len(new)
        if n == 0:
            return np.zeros(0, dtype=np.intp)
        slots = self.reserve(n)
        # np.asarray: no copy where the dtype is already right (astype would copy)
        slots_kernels.fill_slots(
            slots,
            np.ones(n, dtype=np.int64) if new.n_sub is None else np.asarray(new.n_sub, np.int64),
            self.path, self.vl, self.backlog, self.rate, self.parent, self.pending,
            self.latest_finish_s, self.active, self.hops, self.cls, self.workload, self.size,
            self.delivered, self.start_s, self.extra_latency_s, self.fixed_latency_s,
            self.wait_s, self.parent_size, self.tag, self.src, self.dst, self.resend_bytes,
            np.asarray(new.path, np.int32), np.asarray(new.vl, np.int8), np.asarray(new.hops, np.int8),
            new.traffic_class, new.workload,
            np.asarray(new.size_bytes, np.float64), np.asarray(new.start_s, np.float64),
            np.asarray(new.extra_latency_s, np.float64),
            np.asarray(new.size_bytes if new.total_bytes is None else new.total_bytes, np.float64),
            np.asarray(new.tag, np.int64), np.asarray(new.src, np.int64), np.asarray(new.dst, np.int64),
        )  # fmt: skip
        self.added(slots, n if new.n_sub is None else int(new.n_sub.size))
        return slots

    def reserve(self, n: int) -> NDArray[np.intp]:
        """The ``n`` lowest free slots, the table grown first if it has fewer: where a
        batch of ``n`` rows is written (``add``, or ``kernels.start.start_routed``, which
        then calls ``added``)."""
        slots = self._free_slots(n)
        if slots.size < n:
            self._alloc(max(self.capacity * 2, self.capacity + n - slots.size + 16))
            slots = self._free_slots(n)
        return slots

    def added(self, slots: NDArray[np.intp], flows: int) -> None:
        """Count rows just written into ``slots`` (ascending), ``flows`` flows among them
        (a sprayed flow's sub-flows count once)."""
        self.version += 1
        self._n_flows += flows
        self.live_end = max(self.live_end, int(slots[-1]) + 1)  # (slots ascend)

    def _free_slots(self, n: int) -> NDArray[np.intp]:
        """The ``n`` lowest free slots (fewer when the table is full)."""
        return slots_kernels.lowest_free(self.active, self.held, n)

    def finish_at(
        self,
        slots: NDArray[np.intp],
        t_fluid: NDArray[np.float64],
        now: float,
        dt: float,
        bandwidth_Bps: NDArray[np.float64],
    ) -> tuple[NDArray[np.intp], NDArray[np.float64], float]:
        """Finish the sub-flows in ``slots``, whose last fluid bytes left ``t_fluid`` into
        the tick that starts at ``now`` (``kernels.slots.complete_flows``: the later of
        that and the whole flow's time through its source NIC, plus the fixed costs).

        Returns the heads of the flows now whole, their finish times, and the bytes
        that rounding left in the network (counted delivered now).
        """
        whole, finish, rounding = slots_kernels.complete_flows(
            slots, t_fluid, now, dt, self.path, self.backlog, self.rate, self.active,
            self.size, self.delivered, self.start_s, self.wait_s, self.parent_size,
            self.fixed_latency_s, self.extra_latency_s, self.parent, self.pending,
            self.latest_finish_s, self.held, bandwidth_Bps,
        )  # fmt: skip
        end = slots_kernels.live_end(self.active, self.live_end) if slots.size else self.live_end
        self.retired(slots.size, whole.size, end)
        return whole, finish, rounding

    def busy_done(self, n_flows: int, live_end: int, version: int) -> None:
        """Take back the counts a compiled run of ticks kept while it started and retired
        flows as ``added`` and ``retired`` count them (``kernels.busy``): the flows in
        flight, one past the last and the version."""
        self._n_flows, self.live_end, self.version = n_flows, live_end, version

    def retired(self, sub_flows: int, flows: int, live_end: int) -> None:
        """Count out ``sub_flows`` rows just freed, ``flows`` flows now whole among them
        (``finish_at``, or ``kernels.finish.finish_flows``, which frees them), and the
        table's new ``live_end``."""
        if sub_flows:
            self.version += 1
            self.live_end = live_end
        self._n_flows -= flows

    def in_flight_bytes(self) -> float:
        """Bytes injected (or waiting at the source) and not yet delivered."""
        return float(self.backlog[:, self.active | self.held].sum())

    def restart_from_source(self, slots: NDArray[np.intp]) -> NDArray[np.float64]:
        """Go-back-N: what the flows in ``slots`` had past their source goes back to it, to
        be sent again (``resend_bytes``), and their rates start from 0. Returns the bytes
        each put back."""
        in_network = np.asarray(self.backlog[1:, slots].sum(axis=0), dtype=np.float64)
        self.backlog[0, slots] += in_network
        self.resend_bytes[slots] += in_network
        self.backlog[1:, slots] = 0.0
        self.rate[:, slots] = 0.0
        return in_network

    def held_for_resend(self, slots: NDArray[np.intp], resend_s: float) -> None:
        """Count the flows in ``slots`` as waiting until ``resend_s``: restarted from their
        source and held by ``kernels.blackhole.lose_at_dead_links``, they carry nothing
        until then (``resend_due``)."""
        self.n_waiting += int(slots.size)
        self.next_resend_s = min(self.next_resend_s, resend_s)
        self.version += 1
        self.live_end = slots_kernels.live_end(self.active, self.live_end)

    def waiting(self) -> NDArray[np.bool_]:
        """Per slot: a flow waiting for its ACK timeout to resend (only those have a
        finite ``resend_s``)."""
        return np.asarray(self.resend_s < np.inf, dtype=np.bool_)

    def resend_due(self, now: float) -> int:
        """Put back in flight the waiting flows whose ACK timeout is up at ``now``
        (``kernels.blackhole.resend_due``); returns how many."""
        if self.n_waiting == 0 or now < self.next_resend_s - RESEND_EPS_S:
            return 0
        n_due, last_due, self.next_resend_s = blackhole_kernels.resend_due(
            self.resend_s, self.active, self.held, now + RESEND_EPS_S, self.next_resend_s
        )
        if n_due:
            self.n_waiting -= n_due
            self.version += 1
            self.live_end = max(self.live_end, last_due + 1)
        return int(n_due)
