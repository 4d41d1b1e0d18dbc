"""Per-port, per-switch and per-tier families from a snapshot's link arrays.

A directed link ``a->b`` is seen as the port of node ``a`` facing ``b`` (as
node_exporter's infiniband collector sees a port): it transmits on ``a->b`` and
receives what ``b->a`` carries. Per-port series are labelled ``link="a->b"``;
``fabtop_link_info`` adds its node, peer and tier. Aggregates sum a value over
the ports of a switch (``switch="leaf00"``) or of a link tier
(``tier="leaf-spine"``), always over every link, whatever ``--link-metrics`` says.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from prometheus_client.metrics_core import Metric

from exporters.prometheus import families as fam
from fabric_core.runtime.snapshot import LinkStatus, LinkTable, NodeTable, Snapshot

F64 = NDArray[np.float64]

#: (suffix, help, LinkState field, from the reverse link?) for the port counters.
PORT_COUNTERS: tuple[tuple[str, str, str, bool], ...] = (
    (
        "data_transmitted_bytes_total",
        "Data bytes transmitted by the port.",
        "tx_bytes_total",
        False,
    ),
    ("data_received_bytes_total", "Data bytes received by the port.", "tx_bytes_total", True),
    ("packets_transmitted_total", "Packets transmitted by the port.", "tx_packets_total", False),
    ("packets_received_total", "Packets received by the port.", "tx_packets_total", True),
    (
        "transmit_wait_seconds_total",
        "Time the port had data to send but could not: starved of credit (credit fabric) or paused by PFC (RoCE).",
        "transmit_wait_seconds_total",
        False,
    ),
    (
        "discarded_bytes_total",
        "Bytes dropped on the link (buffer overflow, link down).",
        "discards_bytes_total",
        False,
    ),
    (
        "retransmitted_bytes_total",
        "Bytes sent again, counted when and where sent: the link's own retries (link-level "
        "retry), a flow's resends on its first link (go-back-N from its source).",
        "retransmitted_bytes_total",
        False,
    ),
    ("link_downed_total", "Times the link went down.", "link_downed_total", False),
    (
        "link_error_recovery_total",
        "Link error recoveries (retrains) that succeeded.",
        "link_error_recovery_total",
        False,
    ),
    ("symbol_errors_total", "Symbol errors detected on the link.", "symbol_errors_total", False),
    (
        "pfc_pause_frames_received_total",
        "PFC pause frames received by the port (its transmitter was paused).",
        "pause_frames_total",
        False,
    ),
    (
        "pfc_pause_frames_sent_total",
        "PFC pause frames sent by the port to its peer.",
        "pause_frames_total",
        True,
    ),
    (
        "pfc_pause_seconds_total",
        "Time the port's transmitter spent paused by PFC.",
        "pause_seconds_total",
        False,
    ),
    (
        "ecn_marked_packets_total",
        "Packets ECN-marked (CE) on the link.",
        "ecn_marked_packets_total",
        False,
    ),
    (
        "cnp_handled_total",
        "Congestion notification packets handled by the RoCE senders behind the port.",
        "cnp_handled_total",
        False,
    ),
)

#: Links whose error counters are not zero are always exported (see selection.py).
ERROR_FIELDS = ("link_downed_total", "link_error_recovery_total", "symbol_errors_total")

_TIER_NAMES = {0: "endpoint", 1: "leaf", 2: "spine", 3: "core"}


def tier_name(tier: int) -> str:
    """The name of a switch tier (1 leaf, 2 spine, 3 core)."""
    return _TIER_NAMES.get(tier, f"tier{tier}")


@dataclass(frozen=True, slots=True)
class Groups:
    """How links fold into aggregates: group index per link (-1 = none) and names."""

    label: str
    names: tuple[str, ...]
    of_link: NDArray[np.intp]
    #: each link's bin for ``total``: its group, or one past the last for none
    bins: NDArray[np.intp] = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.names)
        object.__setattr__(self, "bins", np.where(self.of_link >= 0, self.of_link, n))

    def labels(self) -> list[dict[str, str]]:
        """One labels dict per group."""
        return [{self.label: name} for name in self.names]

    def total(self, values: F64) -> F64:
        """Sum of ``values`` over each group's links."""
        # links of no group go to an extra bin that is dropped: no mask to apply per call
        n = len(self.names)
        sums = np.bincount(self.bins, weights=values, minlength=n + 1)[:n]
        return np.asarray(sums, dtype=np.float64)


class LinkLabels:
    """Label dicts and groupings that depend only on the (static) link table."""

    def __init__(self, nodes: NodeTable, links: LinkTable, profile: str) -> None:
        """Precompute per-link labels and the switch and tier groupings."""
        self.links = links
        self.per_link: list[dict[str, str]] = [{"link": name} for name in links.name]
        src = links.src.astype(np.intp)
        dst = links.dst.astype(np.intp)
        self.info: list[dict[str, str]] = [
            {
                "link": name,
                "node": nodes.name[s],
                "peer": nodes.name[d],
                "tier": tier,
                "profile": profile,
            }
            for name, s, d, tier in zip(
                links.name, src.tolist(), dst.tolist(), links.tier, strict=True
            )
        ]
        is_switch = np.array([k == "switch" for k in nodes.kind], dtype=bool)
        switch_ids = np.flatnonzero(is_switch)
        node_to_switch = np.full(len(nodes), -1, dtype=np.intp)
        node_to_switch[switch_ids] = np.arange(switch_ids.size)
        self.switches = Groups(
            "switch", tuple(nodes.name[i] for i in switch_ids.tolist()), node_to_switch[src]
        )
        self.switch_info: list[dict[str, str]] = [
            {
                "switch": nodes.name[i],
                "tier": tier_name(int(nodes.tier[i])),
                "plane": str(int(nodes.plane[i])),
                "profile": profile,
            }
            for i in switch_ids.tolist()
        ]
        tiers = tuple(sorted(set(links.tier)))
        tier_index = {t: i for i, t in enumerate(tiers)}
        self.tiers = Groups(
            "tier", tiers, np.array([tier_index[t] for t in links.tier], dtype=np.intp)
        )


def port_counters(snap: Snapshot) -> dict[str, F64]:
    """Per-port counter arrays keyed by family suffix (received = the reverse link)."""
    state = snap.link_state
    rev = snap.links.reverse.astype(np.intp)
    out: dict[str, F64] = {}
    for suffix, _doc, field, from_reverse in PORT_COUNTERS:
        arr = np.asarray(getattr(state, field), dtype=np.float64)
        out[suffix] = arr[rev] if from_reverse else arr
    return out


def always_exported(snap: Snapshot) -> NDArray[np.bool_]:
    """Links exported in every mode but ``switch`` (within the cap): not up now."""
    return np.asarray(snap.link_state.status != LinkStatus.UP, dtype=np.bool_)


def error_totals(snap: Snapshot) -> NDArray[np.float64]:
    """Per link, the sum of its error counters (a link whose sum grows is "hot")."""
    state = snap.link_state
    total = np.zeros(len(snap.links))
    for field in ERROR_FIELDS:
        total += np.asarray(getattr(state, field), dtype=np.float64)
    return total


def per_link_families(
    snap: Snapshot, labels: LinkLabels, counters: dict[str, F64], idx: NDArray[np.intp]
) -> Iterator[Metric]:
    """Per-port families for the links in ``idx``."""
    lab = [labels.per_link[i] for i in idx.tolist()]
    state = snap.link_state
    yield fam.info(
        "fabtop_link_info",
        "A directed link: the port of `node` facing `peer`.",
        [labels.info[i] for i in idx.tolist()],
    )
    for suffix, doc, _field, _rev in PORT_COUNTERS:
        yield fam.counter(f"fabtop_port_{suffix}", doc, lab, counters[suffix][idx].tolist())
    gauges: tuple[tuple[str, str, F64], ...] = (
        (
            "fabtop_port_utilisation_ratio",
            "Carried rate over bandwidth in the last tick (0..1).",
            state.utilisation,
        ),
        (
            "fabtop_port_queue_bytes",
            "Bytes queued at the downstream ingress (all VLs).",
            state.queue_bytes,
        ),
        (
            "fabtop_port_credits_available_bytes",
            "Credits the sender holds: free downstream buffer less the credit loop's bytes (native), or PFC headroom left (RoCE).",
            state.credits_bytes,
        ),
        (
            "fabtop_port_paused",
            "1 if the port could not send in the last tick: starved on a credit fabric (no credit from the receiver), paused on RoCE (PFC pause frames).",
            state.paused.astype(np.float64),
        ),
        (
            "fabtop_port_state_id",
            "Link state: 0 up, 1 down, 2 degraded.",
            state.status.astype(np.float64),
        ),
        ("fabtop_port_rate_bytes_per_second", "Link bandwidth.", snap.links.bandwidth_Bps),
    )
    for name, doc, arr in gauges:
        yield fam.gauge(name, doc, lab, np.asarray(arr, dtype=np.float64)[idx].tolist())
    if snap.flow_control == "pfc":
        yield from per_priority_families(snap, labels, idx)


#: (suffix, help, LinkState field of shape (links, priorities)) for PFC per priority.
PRIORITY_COUNTERS: tuple[tuple[str, str, str], ...] = (
    (
        "pfc_priority_pause_frames_received_total",
        "PFC pause frames received by the port for one priority (virtual lane).",
        "pause_frames_vl_total",
    ),
    (
        "pfc_priority_pause_seconds_total",
        "Time the port's transmitter was paused by PFC on one priority.",
        "pause_seconds_vl_total",
    ),
)


def per_priority_families(
    snap: Snapshot, labels: LinkLabels, idx: NDArray[np.intp]
) -> Iterator[Metric]:
    """PFC counters per port and priority, for the exported links of a PFC fabric."""
    state = snap.link_state
    n_prio = int(np.asarray(state.pause_frames_vl_total).shape[1])
    lab = [{**labels.per_link[i], "priority": str(p)} for i in idx.tolist() for p in range(n_prio)]
    for suffix, doc, field in PRIORITY_COUNTERS:
        values = np.asarray(getattr(state, field), dtype=np.float64)[idx].ravel()
        yield fam.counter(f"fabtop_port_{suffix}", doc, lab, values.tolist())


def aggregate_families(
    snap: Snapshot, groups: Groups, counters: dict[str, F64], prefix: str, what: str
) -> Iterator[Metric]:
    """The port counters and gauges summed over each group (every link counts)."""
    lab = groups.labels()
    for suffix, doc, _field, _rev in PORT_COUNTERS:
        yield fam.counter(
            f"{prefix}_{suffix}",
            f"{doc[:-1]}, summed over the {what}.",
            lab,
            groups.total(counters[suffix]).tolist(),
        )
    state = snap.link_state
    bw = np.asarray(snap.links.bandwidth_Bps, dtype=np.float64)
    carried = groups.total(state.utilisation * bw)
    capacity = groups.total(bw)
    util = np.divide(carried, capacity, out=np.zeros_like(carried), where=capacity > 0)
    gauges: tuple[tuple[str, str, F64], ...] = (
        (
            f"{prefix}_utilisation_ratio",
            f"Carried rate over capacity of the {what} in the last tick (0..1).",
            util,
        ),
        (
            f"{prefix}_queue_bytes",
            f"Bytes queued behind the {what}.",
            groups.total(state.queue_bytes),
        ),
        (
            f"{prefix}_credits_available_bytes",
            f"Free downstream buffer (credits or PFC headroom) of the {what}.",
            groups.total(state.credits_bytes),
        ),
        (
            f"{prefix}_paused_ports",
            f"How many of the {what} could not send in the last tick: starved (credit "
            "fabric) or paused (RoCE PFC).",
            groups.total(state.paused.astype(np.float64)),
        ),
        (
            f"{prefix}_down_ports",
            f"How many of the {what} have their link down.",
            groups.total((state.status == LinkStatus.DOWN).astype(np.float64)),
        ),
        (f"{prefix}_ports", f"How many {what} there are.", groups.total(np.ones_like(bw))),
    )
    for name, doc, arr in gauges:
        yield fam.gauge(name, doc, lab, arr.tolist())
