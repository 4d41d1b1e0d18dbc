"""What the links table and the fabric map show, computed on whole arrays.

Everything here is vectorised over all links so that a refresh costs the same
few numpy passes at 50 links or at 10,000; only the top-N rows that reach the
screen become Python objects.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.runtime.snapshot import LinkState, LinkStatus, Snapshot

#: Column widths in the links table (fixed, so that columns never jitter).
WIDTHS = {
    "link": 24,
    "state": 9,
    "util": 7,
    "queue": 9,
    "credits": 9,
    "pauses": 10,  # ("pauses/s ▼": the sort's arrow was cut off at 9)
    "ecn": 9,
    "drops": 11,  # ("drops b/s ▼")
}
#: Sortable columns: key -> (header, True when bigger is hotter).
COLUMNS: dict[str, tuple[str, bool]] = {
    "link": ("link", False),
    "state": ("state", True),
    "util": ("util", True),
    "queue": ("queue", True),
    "credits": ("credits", False),  # fewer credits left = hotter
    "pauses": ("pauses/s", True),
    "ecn": ("ECN/s", True),
    "drops": ("drops b/s", True),
}
SORT_ORDER: tuple[str, ...] = (
    "util",
    "queue",
    "credits",
    "pauses",
    "ecn",
    "drops",
    "state",
    "link",
)

# Severity of a link (and of a switch: its worst port), lowest first.
OK, BUSY, HOT, STARVED, DEGRADED, DOWN = range(6)
SEVERITY_NAMES = ("ok", "busy", "hot", "starved", "degraded", "down")


def stalled_word(flow_control: str) -> str:
    """One word per concept: a credit link with no credit is "starved" (it waits for the
    receiver's buffer; no frame is sent), a PFC link told to stop is "paused" (pause frames)."""
    return "paused" if flow_control == "pfc" else "starved"


def severity_names(flow_control: str) -> tuple[str, ...]:
    """``SEVERITY_NAMES`` with the stalled level named for this fabric."""
    names = list(SEVERITY_NAMES)
    names[STARVED] = stalled_word(flow_control)
    return tuple(names)


BUSY_UTILISATION = 0.7
HOT_UTILISATION = 0.95


#: LinkRates field -> the cumulative counter it is the rate of.
RATE_COUNTERS = {
    "pauses_per_s": "pause_frames_total",
    "ecn_per_s": "ecn_marked_packets_total",
    "drops_Bps": "discards_bytes_total",
    "retrans_Bps": "retransmitted_bytes_total",
}


class LinkRates:
    """Per-link counter rates per simulated second between two snapshots.

    A rate over every link is worked out when first asked for (a sort by that column,
    the compare view's sums); the links table's rows ask ``at`` for their few links, so a
    refresh sorted by another column divides no counter of the other links. The values
    are the same either way: ``(b - a) / dt`` element by element.
    """

    __slots__ = ("_after", "_before", "_dt", "_full", "_n")

    def __init__(
        self,
        n: int,
        before: LinkState | None = None,
        after: LinkState | None = None,
        dt: float = 1.0,
    ) -> None:
        self._n = n
        # only the counters (not the whole link state of the earlier snapshot) are kept
        self._before = {f: getattr(before, c) for f, c in RATE_COUNTERS.items()} if before else {}
        self._after = {f: getattr(after, c) for f, c in RATE_COUNTERS.items()} if after else {}
        self._dt = dt
        self._full: dict[str, NDArray[np.float64]] = {}

    @staticmethod
    def zeros(n: int) -> LinkRates:
        """No activity (before two snapshots have been seen)."""
        return LinkRates(n)

    def _rate(self, field: str) -> NDArray[np.float64]:
        full = self._full.get(field)
        if full is None:
            if self._after:
                full = (self._after[field] - self._before[field]) / self._dt
            else:
                full = np.zeros(self._n)
            self._full[field] = full
        return full

    def at(self, field: str, idx: NDArray[np.intp]) -> NDArray[np.float64]:
        """The rate ``field`` (e.g. ``"pauses_per_s"``) of the links ``idx`` only."""
        full = self._full.get(field)
        if full is not None:
            return full[idx]
        if not self._after:
            return np.zeros(len(idx))
        rate: NDArray[np.float64] = (self._after[field][idx] - self._before[field][idx]) / self._dt
        return rate

    @property
    def pauses_per_s(self) -> NDArray[np.float64]:
        """PFC pause frames received per second."""
        return self._rate("pauses_per_s")

    @property
    def ecn_per_s(self) -> NDArray[np.float64]:
        """ECN-marked packets per second."""
        return self._rate("ecn_per_s")

    @property
    def drops_Bps(self) -> NDArray[np.float64]:
        """Bytes discarded per second."""
        return self._rate("drops_Bps")

    @property
    def retrans_Bps(self) -> NDArray[np.float64]:
        """Bytes retransmitted per second."""
        return self._rate("retrans_Bps")


class RateTracker:
    """Turns cumulative counters into rates; keeps the last rates while paused."""

    def __init__(self) -> None:
        self._prev: Snapshot | None = None
        self.rates: LinkRates | None = None

    def update(self, snap: Snapshot) -> LinkRates:
        """Rates between the previous snapshot seen and ``snap``."""
        prev = self._prev
        n = len(snap.links)
        # a new run (the engine behind an MQTT broker restarted, say) starts its counters
        # again: rates from the old run's counters would be negative, or never update
        if prev is None or len(prev.links) != n or snap.tick < prev.tick:
            self._prev = snap
            self.rates = LinkRates.zeros(n)
            return self.rates
        dt = snap.sim_time_s - prev.sim_time_s
        if snap.tick > prev.tick and dt > 0:
            self.rates = LinkRates(n, prev.link_state, snap.link_state, dt)
            self._prev = snap
        elif self.rates is None:
            self.rates = LinkRates.zeros(n)
        return self.rates


def link_severity(snap: Snapshot) -> NDArray[np.int8]:
    """Severity of every link (OK … DOWN) from its state, pause and utilisation.

    Each level outranks the ones below it, so a link's severity is the highest that
    applies: utilisation gives OK, BUSY or HOT, a pause raises it to STARVED, and the few
    degraded or down links are set last."""
    ls = snap.link_state
    util = ls.utilisation
    sev = (util >= BUSY_UTILISATION).view(np.int8)
    sev += (util >= HOT_UTILISATION).view(np.int8)  # OK 0, BUSY 1, HOT 2
    paused = ls.paused if ls.paused.dtype == np.bool_ else ls.paused.astype(np.bool_)
    np.maximum(sev, paused.view(np.int8) * np.int8(STARVED), out=sev)
    faulted = np.flatnonzero(ls.status != LinkStatus.UP)
    if faulted.size:
        status = ls.status[faulted]
        sev[faulted[status == LinkStatus.DEGRADED]] = DEGRADED
        sev[faulted[status == LinkStatus.DOWN]] = DOWN
    return sev


def node_severity(snap: Snapshot, link_sev: NDArray[np.int8]) -> NDArray[np.int8]:
    """Each node's worst port: the max severity over the links it sends or receives on
    (links at OK, most of them, cannot raise a node above OK and are skipped)."""
    out = np.zeros(len(snap.nodes), dtype=np.int8)
    raised = np.flatnonzero(link_sev)
    if raised.size:
        sev = link_sev[raised]
        np.maximum.at(out, snap.links.src[raised], sev)
        np.maximum.at(out, snap.links.dst[raised], sev)
    return out


class LinkFilter:
    """A filter typed by the operator: words match link names, ``is:STATE`` matches states.

    ``leaf03`` keeps the ports of leaf03; ``is:down`` the down links; ``is:starved`` the
    credit-starved ones (credit fabric), ``is:paused`` the PFC-paused ones (RoCE; on a
    credit fabric it matches nothing, as no link there is ever paused); words combine with AND.
    """

    STATES = ("up", "down", "degraded", "starved", "paused", "hot")

    def __init__(self, text: str) -> None:
        self.text = text.strip()
        self.words: list[str] = []
        self.states: list[str] = []
        for word in self.text.lower().split():
            if word.startswith("is:"):
                state = word[3:]
                if state not in self.STATES:
                    raise ValueError(
                        f"unknown state {state!r} in filter; use one of: "
                        + ", ".join(f"is:{s}" for s in self.STATES)
                    )
                self.states.append(state)
            else:
                self.words.append(word)
        self._name_cache: tuple[object, NDArray[np.bool_]] | None = None

    def mask(self, snap: Snapshot) -> NDArray[np.bool_] | None:
        """Links that pass, or None when the filter is empty (all pass)."""
        if not self.words and not self.states:
            return None
        n = len(snap.links)
        keep = self._name_mask(snap) if self.words else np.ones(n, dtype=bool)
        ls = snap.link_state
        for state in self.states:
            if state == "up":
                keep = keep & (ls.status == LinkStatus.UP)
            elif state == "down":
                keep = keep & (ls.status == LinkStatus.DOWN)
            elif state == "degraded":
                keep = keep & (ls.status == LinkStatus.DEGRADED)
            elif state in ("starved", "paused"):
                keep = keep & ls.paused & (stalled_word(snap.flow_control) == state)
            elif state == "hot":
                keep = keep & (ls.utilisation >= HOT_UTILISATION)
        return keep

    def _name_mask(self, snap: Snapshot) -> NDArray[np.bool_]:
        # Link names are static for a run: match the words once per link table.
        cached = self._name_cache
        if cached is not None and cached[0] is snap.links:
            return cached[1]
        names = [name.lower() for name in snap.links.name]
        mask = np.fromiter(
            (all(w in name for w in self.words) for name in names), dtype=bool, count=len(names)
        )
        self._name_cache = (snap.links, mask)
        return mask


_rank_cache: dict[int, tuple[object, NDArray[np.float64]]] = {}


def _name_rank(snap: Snapshot) -> NDArray[np.float64]:
    """Alphabetical rank of each link name (names are static: computed once per table)."""
    cached = _rank_cache.get(id(snap.links))
    if cached is not None and cached[0] is snap.links:
        return cached[1]
    rank = np.empty(len(snap.links))
    rank[np.argsort(np.array(snap.links.name))] = np.arange(len(snap.links))
    _rank_cache.clear()
    _rank_cache[id(snap.links)] = (snap.links, rank)
    return rank


def sort_values(snap: Snapshot, rates: LinkRates, column: str) -> NDArray[np.float64]:
    """The values the links are ordered by for ``column`` (hotter = larger)."""
    ls = snap.link_state
    if column == "util":
        return ls.utilisation
    if column == "queue":
        return ls.queue_bytes
    if column == "credits":
        return -ls.credits_bytes
    if column == "pauses":
        return rates.pauses_per_s
    if column == "ecn":
        return rates.ecn_per_s
    if column == "drops":
        return rates.drops_Bps
    if column == "state":
        return link_severity(snap).astype(np.float64)
    if column == "link":
        return -_name_rank(snap)
    raise ValueError(f"unknown column {column!r}; sortable: {', '.join(COLUMNS)}")


def coarse(values: NDArray[np.float64], column: str) -> NDArray[np.float64]:
    """Values rounded to what an operator can tell apart: 1 % of utilisation, ~10 % otherwise."""
    if column == "util":
        out = np.multiply(values, 100.0)
        return np.round(out, out=out)
    if column in ("state", "link"):
        return values
    nonzero = np.flatnonzero(values)
    if 2 * nonzero.size > values.size:
        return _coarse_log(values)
    # a zero stays zero: only the other values (few, for rates) are worked out
    out = np.zeros(values.shape)
    out[nonzero] = _coarse_log(values[nonzero])
    return out


def _coarse_log(values: NDArray[np.float64]) -> NDArray[np.float64]:
    magnitude = np.log1p(np.abs(np.nan_to_num(values)))
    return np.sign(values) * np.round(magnitude * 10.0)  # steps of e^0.1 ≈ 10.5 %


#: Below this many links the top-N partitions all of them (no sample first).
SAMPLED_ABOVE = 20_000


def _top_positions(rank: NDArray[np.float64], k: int) -> NDArray[np.intp]:
    """Positions of the ``k`` smallest of ``rank`` (``k`` < its size), ties taken in
    position order, as a stable sort of all would take them (NaN: last; in no order).

    The ``k``-th smallest ``kth`` splits them: all below it, then the first ties at it.
    On a large array a strided sample gives a bound at least ``kth`` (its own ``k``-th
    smallest), so one pass over the whole finds the few below the bound; when fewer
    than ``k`` are below it, the bound is ``kth`` itself (the common case of many ties:
    zero rates, idle links).
    """
    if rank.size > SAMPLED_ABOVE:
        sample = rank[:: max(1, rank.size // (64 * k))]
        bound = np.partition(sample, k - 1)[k - 1]
        if not np.isnan(bound):
            near = np.flatnonzero(rank < bound)
            if near.size < k:
                return np.concatenate((near, _first_equal(rank, bound, k - near.size)))
            near_rank = rank[near]
            kth = np.partition(near_rank, k - 1)[k - 1]
            below = near[near_rank < kth]
            ties = near[near_rank == kth][: k - below.size]
            return np.concatenate((below, ties))
    kth = np.partition(rank, k - 1)[k - 1]
    below = np.flatnonzero(rank < kth)
    ties = np.flatnonzero(rank == kth)[: k - below.size]
    return np.concatenate((below, ties))


def _first_equal(values: NDArray[np.float64], value: float, count: int) -> NDArray[np.intp]:
    """The first ``count`` positions where ``values`` equals ``value`` (there are as
    many), looked for in growing slices rather than over the whole array."""
    found: list[NDArray[np.intp]] = []
    start, step = 0, 4096
    while count > 0 and start < values.size:
        hits = np.flatnonzero(values[start : start + step] == value)[:count] + start
        found.append(hits)
        count -= hits.size
        start += step
        step *= 4
    return np.concatenate(found) if found else np.zeros(0, dtype=np.intp)


def top_links(
    snap: Snapshot,
    rates: LinkRates,
    *,
    column: str,
    reverse: bool = False,
    limit: int = 50,
    keep: NDArray[np.bool_] | None = None,
) -> NDArray[np.intp]:
    """Indices of the ``limit`` hottest links by ``column`` (coolest if ``reverse``).

    Links that are down or degraded come first whatever the column (a fault must
    not scroll out of sight). Values are compared coarsely (``coarse``) and ties
    are broken by link index, so rows whose values differ by noise never swap
    places between refreshes (a sort that does not jump).
    """
    values = coarse(sort_values(snap, rates, column), column)
    # ``rank``: smaller comes first
    rank = values if reverse else -values
    faulted = snap.link_state.status != LinkStatus.UP
    if faulted.any():
        finite = np.nan_to_num(-rank, nan=0.0, posinf=0.0, neginf=0.0)
        span = float(np.abs(finite).max()) + 1.0
        rank = -np.where(faulted, finite + 2 * span, finite)
    candidates = None if keep is None else np.flatnonzero(keep)
    if candidates is not None:
        rank = rank[candidates]
    if limit <= 0:
        return np.zeros(0, dtype=np.intp)
    # O(n): the top `limit` found without sorting the rest
    chosen = _top_positions(rank, limit) if rank.size > limit else np.arange(rank.size)
    order = np.lexsort((chosen, rank[chosen]))
    picked = chosen[order][:limit]
    return picked if candidates is None else candidates[picked]
