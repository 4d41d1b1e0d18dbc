"""Generic traffic: background bulk transfers, incast bursts, all-to-all rounds, RPC messages.

Arrivals are aligned to tick boundaries (a flow that becomes ready inside a tick
starts at the next boundary and its latency is counted from there), so the
latency a flow reports does not depend on ``dt``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.lazy import LazyModule
from fabric_core.workloads.arrivals import PoissonArrivals
from fabric_core.workloads.base import (
    Completions,
    FlowRequests,
    Workload,
    WorkloadHost,
    one_a_tick_note,
    pick_endpoints,
)

if TYPE_CHECKING:
    from fabric_core.tick.kernels import traffic as traffic_kernels
else:  # numba is imported when a kernel is first called (fabric_core.tick.lazy)
    traffic_kernels = LazyModule("fabric_core.tick.kernels.traffic")


def _random_peers(
    src: NDArray[np.int64], pool: NDArray[np.int32], rng: np.random.Generator
) -> NDArray[np.int64]:
    """A random destination from ``pool`` for each source, never the source itself."""
    if pool.size < 2:
        raise ValueError("need at least two endpoints to send between")
    return traffic_kernels.random_peers(src, pool, rng.integers(0, pool.size - 1, size=src.size))


def _requests(
    src: NDArray[np.int64], dst: NDArray[np.int64], size: float, tag: NDArray[np.int64], now: float
) -> FlowRequests:
    n = src.size
    # np.asarray: no copy where the dtype is already right (the callers' arrays are new)
    return FlowRequests(
        src=np.asarray(src, np.int64),
        dst=np.asarray(dst, np.int64),
        size_bytes=_filled(n, size),
        tag=np.asarray(tag, np.int64),
        ready_s=_filled(n, now),
    )


def _filled(n: int, value: float) -> NDArray[np.float64]:
    """``np.full(n, value)`` at half its cost (0.25 µs against 0.54 for a few flows:
    ``np.full`` is Python code around the same two calls), twice a batch of requests."""
    out = np.empty(n)
    out.fill(value)
    return out


@dataclass
class Bulk(Workload):
    """Closed-loop background transfers: each sender keeps ``outstanding`` flows
    of ``size_bytes`` in flight to random destinations (a fraction
    ``hotspot_fraction`` of them to the ``hotspots`` first destinations)."""

    kind: str = "bulk"
    senders_spec: Any = "all"
    size_bytes: float = 4 * 1024**2
    outstanding: int = 1
    hotspots: int = 0
    hotspot_fraction: float = 0.0
    senders: NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    pool: NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    in_flight: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    delivered_bytes: float = 0.0
    _seq: int = 0
    #: whether a sender may have fewer than ``outstanding`` flows in flight: after a
    #: ``generate`` none has until flows complete (no pass over the senders meanwhile)
    _owed: bool = True
    retries_refused: ClassVar[bool] = True

    def bind(
        self, gpus: NDArray[np.int32], storage: NDArray[np.int32], rng: np.random.Generator
    ) -> None:
        self.senders = pick_endpoints(
            self.senders_spec, gpus, rng, f"workload {self.name!r} senders"
        )
        self.pool = gpus
        self._owed = True
        self.in_flight = np.zeros(int(gpus.max()) + 1 if gpus.size else 0, dtype=np.int64)
        if self.hotspots > gpus.size:
            raise ValueError(f"workload {self.name!r}: hotspots={self.hotspots} > {gpus.size} GPUs")
        if self.senders.size and gpus.size < 2:  # (it sends to a GPU other than its own)
            raise ValueError(
                f"workload {self.name!r}: a bulk workload needs at least 2 GPUs, the fabric has 1"
            )

    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        if not self.running or not self._owed:
            return FlowRequests.empty()
        src = traffic_kernels.top_up(self.senders, self.in_flight, self.outstanding)
        self._owed = False  # every sender is topped up below
        if src.size == 0:
            return FlowRequests.empty()
        dst = _random_peers(src, self.pool, rng)
        if self.hotspots and self.hotspot_fraction > 0:
            u = rng.random(src.size)
            hot_pick = rng.integers(0, self.hotspots, size=src.size)
            traffic_kernels.hotspot_peers(src, dst, self.pool, u, hot_pick, self.hotspot_fraction)
        traffic_kernels.count_started(self.in_flight, src)
        tag = np.arange(self._seq, self._seq + src.size)
        self._seq += src.size
        return _requests(src, dst, self.size_bytes, tag, now_s)

    def flows_at_once(self) -> tuple[int, str] | None:
        n = int(self.senders.size) * self.outstanding
        return n, (
            f"keeps {n:,} flows in flight ({self.senders.size:,} senders x "
            f"{self.outstanding:,} outstanding)"
        )

    def quiet_until(self, now_s: float, dt_s: float) -> float:
        # every sender is topped up until a completion (or ``start``) says otherwise
        return now_s if self.running and self._owed else float("inf")

    def busy_state(self) -> tuple[bool, int]:
        """(owed a top-up, next tag): what ``kernels.busy.busy_ticks`` carries on from."""
        return self._owed, self._seq

    def busy_done(self, owed: bool, seq: int, delivered_bytes: float) -> None:
        """Take back what ``busy_ticks`` left: the kernel generated and completed this
        workload's flows as ``generate`` and ``on_complete`` do."""
        self._owed, self._seq, self.delivered_bytes = owed, seq, delivered_bytes

    def on_refused(self, refused: FlowRequests) -> None:
        # the slots are free again: the senders try again the next tick (a refusal is
        # counted each time, as a new flow's)
        traffic_kernels.count_finished(self.in_flight, refused.src)
        self._owed = True

    def on_complete(self, done: Completions, now_s: float) -> None:
        traffic_kernels.count_finished(self.in_flight, done.src)
        self._owed = True
        self.delivered_bytes += float(done.size_bytes.sum())
        self.histogram("fct_seconds").observe_many(done.latency_s)

    def kpis(self, now_s: float) -> Mapping[str, float]:
        return {
            "goodput_bytes_per_second": self.delivered_bytes / now_s if now_s > 0 else 0.0,
            "flows_in_flight": float(self.in_flight.sum()),
        }


@dataclass
class Incast(Workload):
    """Every ``period_s`` from ``start_s``, ``senders`` endpoints each send
    ``size_bytes`` to one ``target`` (an index into the GPUs)."""

    kind: str = "incast"
    senders_spec: Any = 8
    target_index: int = 0
    size_bytes: float = 256 * 1024
    period_s: float = 100e-6
    start_s: float = 0.0
    count: int = 0  # bursts to run; 0 = forever
    senders: NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    target: int = 0
    _next_s: float = 0.0
    _burst: int = 0
    _pending: dict[int, tuple[float, int]] = field(default_factory=dict)
    last_burst_s: float = float("nan")

    def bind(
        self, gpus: NDArray[np.int32], storage: NDArray[np.int32], rng: np.random.Generator
    ) -> None:
        if not 0 <= self.target_index < gpus.size:
            raise ValueError(
                f"workload {self.name!r}: target {self.target_index} out of range 0..{gpus.size - 1}"
            )
        self.target = int(gpus[self.target_index])
        others = gpus[gpus != self.target]
        self.senders = pick_endpoints(
            self.senders_spec, others, rng, f"workload {self.name!r} senders"
        )
        self._next_s = self.start_s

    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        if (
            not self.running
            or now_s + 1e-15 < self._next_s
            or (self.count and self._burst >= self.count)
        ):
            return FlowRequests.empty()
        self._next_s = max(self._next_s + self.period_s, now_s)
        burst = self._burst
        self._burst += 1
        self._pending[burst] = (now_s, int(self.senders.size))
        src = self.senders.astype(np.int64)
        dst = np.full(src.size, self.target, dtype=np.int64)
        return _requests(src, dst, self.size_bytes, np.full(src.size, burst), now_s)

    def quiet_until(self, now_s: float, dt_s: float) -> float:
        if not self.running or (self.count and self._burst >= self.count):
            return float("inf")
        return self._next_s  # the next burst

    def tick_note(self, dt_s: float) -> str | None:
        return one_a_tick_note(self, "burst", self.period_s, dt_s)

    def flows_at_once(self) -> tuple[int, str] | None:
        n = int(self.senders.size)
        return n, f"starts {n:,} flows a burst ({n:,} senders into one GPU)"

    def on_complete(self, done: Completions, now_s: float) -> None:
        self.histogram("fct_seconds").observe_many(done.latency_s)
        for burst in np.unique(done.tag):
            start, left = self._pending[int(burst)]
            mask = done.tag == burst
            left -= int(mask.sum())
            if left == 0:
                del self._pending[int(burst)]
                self.last_burst_s = float(done.finish_s[mask].max()) - start
                self.histogram("incast_seconds").observe_many(np.array([self.last_burst_s]))
            else:
                self._pending[int(burst)] = (start, left)

    def kpis(self, now_s: float) -> Mapping[str, float]:
        return {"incast_seconds_last": self.last_burst_s, "bursts_started": float(self._burst)}


@dataclass
class AllToAll(Workload):
    """Rounds of all-to-all among ``ranks`` GPUs: every rank sends ``size_bytes``
    to every other rank; a round starts every ``period_s`` (or when the previous
    one finishes, whichever is later)."""

    kind: str = "alltoall"
    ranks_spec: Any = 8
    size_bytes: float = 64 * 1024
    period_s: float = 50e-6
    ranks: NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    _round: int = 0
    _busy: bool = False
    _round_start: float = 0.0
    _left: int = 0
    _next_s: float = 0.0
    last_round_s: float = float("nan")

    def bind(
        self, gpus: NDArray[np.int32], storage: NDArray[np.int32], rng: np.random.Generator
    ) -> None:
        self.ranks = pick_endpoints(self.ranks_spec, gpus, rng, f"workload {self.name!r} ranks")
        if self.ranks.size < 2:
            raise ValueError(f"workload {self.name!r}: all-to-all needs at least 2 ranks")

    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        if not self.running or self._busy or now_s + 1e-15 < self._next_s:
            return FlowRequests.empty()
        n = self.ranks.size
        src = np.repeat(self.ranks, n - 1).astype(np.int64)
        dst_idx = (np.repeat(np.arange(n), n - 1) + np.tile(np.arange(1, n), n)) % n
        dst = self.ranks[dst_idx].astype(np.int64)
        self._busy = True
        self._round_start = now_s
        self._left = src.size
        self._next_s = now_s + self.period_s
        self._round += 1
        return _requests(src, dst, self.size_bytes, np.full(src.size, self._round), now_s)

    def quiet_until(self, now_s: float, dt_s: float) -> float:
        # a round in flight ends with a completion
        return float("inf") if not self.running or self._busy else self._next_s

    def tick_note(self, dt_s: float) -> str | None:
        # (a round also waits for the one before: it may start the tick after that ends)
        return one_a_tick_note(self, "round", self.period_s, dt_s)

    def flows_at_once(self) -> tuple[int, str] | None:
        n = int(self.ranks.size)
        return n * (n - 1), (
            f"starts {n * (n - 1):,} flows a round ({n:,} ranks, each to the {n - 1:,} others)"
        )

    def busy_state(self) -> tuple[bool, int, float, float, int]:
        """(a round in flight, its messages left, its start, the next round's start, the
        rounds started): what ``kernels.busy.busy_ticks`` carries on from."""
        return self._busy, self._left, self._round_start, self._next_s, self._round

    def busy_done(
        self, busy: bool, left: int, round_start: float, next_s: float, last_round_s: float,
        rounds: int,
    ) -> None:  # fmt: skip
        """Take back what ``busy_ticks`` left: it started this workload's rounds and filed
        their completions as ``generate`` and ``on_complete`` do."""
        self._busy, self._left, self._round_start, self._next_s = busy, left, round_start, next_s
        self.last_round_s, self._round = last_round_s, rounds

    def on_complete(self, done: Completions, now_s: float) -> None:
        self._left -= done.tag.size
        self.histogram("message_seconds").observe_many(done.latency_s)
        if self._left == 0 and self._busy:
            self._busy = False
            self.last_round_s = float(done.finish_s.max()) - self._round_start
            self.histogram("alltoall_seconds").observe_many(np.array([self.last_round_s]))

    def kpis(self, now_s: float) -> Mapping[str, float]:
        return {"alltoall_seconds_last": self.last_round_s, "rounds_started": float(self._round)}


@dataclass
class Rpc(Workload):
    """Open-loop small messages: each sender starts messages as a Poisson process
    of ``rate_per_s`` to random destinations (the latency probe of a class).

    The senders' processes are drawn as one (``workloads.arrivals.PoissonArrivals``: the
    merged process, each arrival at a sender picked uniformly), arrival by arrival, so the
    same seed gives the same messages (senders, peers, the tick they arrive in) on any
    tick length. A message starts at the start of the tick it arrives in."""

    kind: str = "rpc"
    senders_spec: Any = "all"
    size_bytes: float = 4096
    rate_per_s: float = 1e5
    senders: NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    pool: NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    _seq: int = 0
    sent: int = 0
    #: the arrivals (drawn from the first tick the workload runs in; dropped when it stops,
    #: so that a restart does not send what it would have sent while stopped)
    _arrivals: PoissonArrivals | None = None

    def bind(
        self, gpus: NDArray[np.int32], storage: NDArray[np.int32], rng: np.random.Generator
    ) -> None:
        self.senders = pick_endpoints(
            self.senders_spec, gpus, rng, f"workload {self.name!r} senders"
        )
        self.pool = gpus
        if self.senders.size and self.rate_per_s > 0 and self.pool.size < 2:
            raise ValueError(
                f"workload {self.name!r}: an rpc workload needs at least 2 GPUs, the fabric has 1"
            )

    def stop(self) -> None:
        super().stop()
        self._arrivals = None  # (the process starts afresh with the workload)

    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        if not self.running or self.senders.size == 0:
            return FlowRequests.empty()
        if self._arrivals is None:
            rate = self.rate_per_s * self.senders.size
            self._arrivals = PoissonArrivals(rate, self.senders.size, now_s)
        t, sender, u = self._arrivals.take(now_s + dt_s, rng)
        if t.size == 0:
            return FlowRequests.empty()
        # a peer uniform over the others: u on 0 .. pool - 2, past the sender's own place
        src, dst = traffic_kernels.uniform_peers(self.senders, sender, u, self.pool)
        tag = np.arange(self._seq, self._seq + src.size)
        self._seq += src.size
        self.sent += src.size
        # each message starts with its tick, as a count drawn for the tick would: started
        # at its own time inside the tick, its latency came out the lower the longer the
        # tick (the default scenario's probes' p99: 8.5 µs at a 0.5 µs tick, 6.2 µs at 8 µs;
        # docs/MODEL.md, Limits, "Arrivals at tick boundaries")
        return _requests(src, dst, self.size_bytes, tag, now_s)

    def busy_state(self) -> tuple[PoissonArrivals, int] | None:
        """(its arrivals, next tag) for ``kernels.busy.busy_ticks``; None before the first
        arrivals are drawn (the first tick draws them, in Python)."""
        if self._arrivals is None:
            return None
        return self._arrivals, self._seq

    def busy_done(self, seq: int, sent: int) -> None:
        """Take back what ``busy_ticks`` left: the next tag and the count of messages sent
        (it generated and completed them as ``generate`` and ``on_complete`` do; the
        arrivals it took and drew are the process's own, ``PoissonArrivals.resume``)."""
        self._seq, self.sent = seq, sent

    def quiet_until(self, now_s: float, dt_s: float) -> float:
        if not self.running or self.senders.size == 0:
            return float("inf")
        if self._arrivals is None:
            return now_s  # the first tick draws the first arrivals
        # a tick takes the arrivals before its end: those that start a tick before the next
        # arrival's take none
        return self._arrivals.next_s - dt_s

    def on_complete(self, done: Completions, now_s: float) -> None:
        self.histogram("message_seconds").observe_many(done.latency_s)

    def kpis(self, now_s: float) -> Mapping[str, float]:
        h = self.histograms.get("message_seconds")
        view = h.freeze() if h is not None else None
        return {
            "messages_sent": float(self.sent),
            "latency_p50_seconds": view.quantile(0.5) if view else float("nan"),
            "latency_p99_seconds": view.quantile(0.99) if view else float("nan"),
        }


@dataclass
class Scripted(Workload):
    """Flows given one by one: ``(src, dst, size_bytes, at_s)`` with endpoint node ids."""

    kind: str = "scripted"
    flows: list[tuple[int, int, float, float]] = field(default_factory=list)
    _next: int = 0
    finished: list[tuple[int, float, float]] = field(default_factory=list)  # (tag, start, finish)

    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        if not self.running:
            return FlowRequests.empty()
        due = []
        while self._next < len(self.flows) and self.flows[self._next][3] < now_s + dt_s - 1e-15:
            due.append(self._next)
            self._next += 1
        if not due:
            return FlowRequests.empty()
        rows = [self.flows[i] for i in due]
        return FlowRequests(
            src=np.array([r[0] for r in rows], dtype=np.int64),
            dst=np.array([r[1] for r in rows], dtype=np.int64),
            size_bytes=np.array([r[2] for r in rows], dtype=np.float64),
            tag=np.array(due, dtype=np.int64),
            ready_s=np.full(len(rows), now_s),
        )

    def quiet_until(self, now_s: float, dt_s: float) -> float:
        if not self.running or self._next >= len(self.flows):
            return float("inf")
        # a flow is due in the tick it falls in (``generate``): a tick before that
        return self.flows[self._next][3] - dt_s

    def on_complete(self, done: Completions, now_s: float) -> None:
        self.histogram("fct_seconds").observe_many(done.latency_s)
        self.finished.extend(
            zip(done.tag.tolist(), done.start_s.tolist(), done.finish_s.tolist(), strict=True)
        )

    def kpis(self, now_s: float) -> Mapping[str, float]:
        return {"flows_finished": float(len(self.finished))}


#: A pairs workload's tag: the flow's number above these bits, its pair's index in them
_PAIR_BITS = 20
_PAIR_MASK = (1 << _PAIR_BITS) - 1


@dataclass
class Pairs(Workload):
    """Closed-loop flows between named endpoint pairs: each pair keeps ``outstanding``
    flows of ``size_bytes`` in flight from ``start_s`` until ``until_s``."""

    kind: str = "pairs"
    pair_names: list[tuple[str, str]] = field(default_factory=list)
    size_bytes: float = 1024**2
    outstanding: int = 1
    start_s: float = 0.0
    until_s: float = float("inf")
    src: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    dst: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    in_flight: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    delivered_bytes: float = 0.0
    _seq: int = 0
    retries_refused: ClassVar[bool] = True

    def attach(self, fabric: WorkloadHost) -> None:
        super().attach(fabric)
        index = fabric.topo.nodes.index
        for a, b in self.pair_names:
            for n in (a, b):
                if n not in index or fabric.topo.nodes.kind[index[n]] == "switch":
                    raise ValueError(f"workload {self.name!r}: no endpoint {n!r}")
            if a == b:
                raise ValueError(f"workload {self.name!r}: pair {a!r} -> {b!r} sends to itself")
        self.src = np.array([index[a] for a, _ in self.pair_names], dtype=np.int64)
        self.dst = np.array([index[b] for _, b in self.pair_names], dtype=np.int64)
        self.in_flight = np.zeros(len(self.pair_names), dtype=np.int64)

    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        if not self.running or now_s + 1e-15 < self.start_s or now_s >= self.until_s:
            return FlowRequests.empty()
        deficit = np.maximum(self.outstanding - self.in_flight, 0)
        pair = np.repeat(np.arange(self.src.size), deficit)
        if pair.size == 0:
            return FlowRequests.empty()
        self.in_flight += deficit
        # the tag carries the pair so completions (and refusals) find their pair
        tag = (np.arange(self._seq, self._seq + pair.size) << _PAIR_BITS) | pair
        self._seq += pair.size
        return _requests(self.src[pair], self.dst[pair], self.size_bytes, tag, now_s)

    def flows_at_once(self) -> tuple[int, str] | None:
        n = int(self.src.size) * self.outstanding
        return n, (
            f"keeps {n:,} flows in flight ({self.src.size:,} pairs x {self.outstanding:,} "
            "outstanding)"
        )

    def quiet_until(self, now_s: float, dt_s: float) -> float:
        if not self.running or now_s >= self.until_s:
            return float("inf")
        if now_s + 1e-15 < self.start_s:
            return self.start_s
        # every pair topped up: nothing starts until a completion
        return now_s if (self.in_flight < self.outstanding).any() else float("inf")

    def on_refused(self, refused: FlowRequests) -> None:
        # the slots are free again: the pairs try again the next tick (``quiet_until``)
        np.subtract.at(self.in_flight, refused.tag & _PAIR_MASK, 1)

    def on_complete(self, done: Completions, now_s: float) -> None:
        np.subtract.at(self.in_flight, done.tag & _PAIR_MASK, 1)
        self.delivered_bytes += float(done.size_bytes.sum())
        self.histogram("fct_seconds").observe_many(done.latency_s)

    def kpis(self, now_s: float) -> Mapping[str, float]:
        return {
            "goodput_bytes_per_second": self.delivered_bytes / now_s if now_s > 0 else 0.0,
            "flows_in_flight": float(self.in_flight.sum()),
        }
