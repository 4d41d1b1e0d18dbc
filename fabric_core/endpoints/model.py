"""GPU endpoints: posting work requests (IBGDA or a CPU proxy) and the data path (GDR or bounce).

The fabric carries bytes; this module carries what happens at the sender *before*
the bytes reach the wire, and at the receiver after they land:

* **ibgda** (GPUDirect Async, kernel-initiated): GPU threads build WQEs in a send
  queue in GPU memory, write the doorbell record and ring the NIC doorbell; the
  NIC fetches the WQE and then the data from GPU memory over PCIe. ``P`` threads
  (one per QP) post in parallel, each at ``gpu_wqe_post_s`` per WQE.
* **proxy** (NVSHMEM IBRC-style): a GPU thread writes a request into a ring in
  host memory; one CPU proxy thread per NIC polls the ring and posts each WQE
  (``cpu_post_s``), writing it through the doorbell (BlueFlame, no fetch). The
  proxy is a single FIFO server: under bursts of small messages its queue builds.
* **gdr**: the NIC reads / writes GPU memory directly. **bounce**: the data is
  copied GPU→host before sending and host→GPU after receiving (two extra PCIe
  crossings, each a ``cudaMemcpy``, and the CPU waits for them).

All servers are vectorised over GPUs: a batch of messages is sorted by GPU and
served in FIFO order with closed-form departure times (``fifo_serve``); backlog
carries over between ticks in ``free_at``. Messages whose posting finishes
inside the current tick are handed to the fabric (``release``) with their
``ready_s``; receive-side costs travel in ``extra_latency_s``.

Fault ``version_mismatch`` (driver / CUDA / NVSHMEM mismatch, article C3): on a
GPU under the fault, WQE posts fail (``hang = 0``: counted, the message is
never sent) or are accepted but never executed (``hang = 1``: the completion
never comes; a bring-up check finds it by timeout). It is registered by
``fabric_core.faults.ibgda``, which importing this module imports.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabric_core.endpoints.params import CONTROLS, DATA_PATHS, EndpointParams
from fabric_core.tick.flows import FlowRequests


def fifo_serve(
    server: NDArray[np.int64],
    arrival_s: NDArray[np.float64],
    service_s: NDArray[np.float64],
    free_at_s: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Start times of jobs at FIFO single servers; updates ``free_at_s`` in place.

    Job k of a server starts at ``S_k = max(A_k, S_{k-1} + s_{k-1})`` (the first at
    ``max(A_0, free_at)``). In closed form, with ``C_k`` the service of the jobs
    before k: ``S_k = C_k + max(free_at, max_{j<=k}(A_j - C_j))``: a segmented
    cumulative maximum, vectorised over all servers at once.
    """
    n = arrival_s.size
    if n == 0:
        return np.zeros(0)
    order = np.lexsort((arrival_s, server))
    g = server[order]
    a = arrival_s[order]
    s = service_s[order]
    head = np.ones(n, dtype=bool)
    head[1:] = g[1:] != g[:-1]
    idx = np.arange(n)
    first = np.maximum.accumulate(np.where(head, idx, 0))
    cs = np.cumsum(s)
    before = cs - s - (cs - s)[first]  # C_k
    origin = float(a.min())
    u = np.maximum(a - origin - before, free_at_s[g] - origin)
    span = float(u.max() - u.min()) + 1.0
    grp = np.cumsum(head) - 1  # 0.. per server, ascending
    cm = np.maximum.accumulate(u - u.min() + grp * span) - grp * span + u.min()
    start_sorted = origin + before + cm
    last = np.ones(n, dtype=bool)
    last[:-1] = head[1:]
    free_at_s[g[last]] = start_sorted[last] + s[last]
    start = np.empty(n)
    start[order] = start_sorted
    return start


class _Columns:
    """Flat arrays of one length (a dataclass's fields): append rows, take rows out."""

    def append(self, **cols: NDArray[Any]) -> None:
        """Add rows."""
        for k, v in cols.items():
            setattr(self, k, np.concatenate([getattr(self, k), v]))

    def take(self, mask: NDArray[np.bool_]) -> dict[str, NDArray[Any]]:
        """Remove the rows under ``mask`` and return them."""
        out = {f.name: getattr(self, f.name)[mask] for f in fields(self)}  # type: ignore[arg-type]
        for f in fields(self):  # type: ignore[arg-type]
            setattr(self, f.name, getattr(self, f.name)[~mask])
        return out


@dataclass
class _Pending(_Columns):
    """Posted messages waiting for their first byte to reach the wire (flat arrays)."""

    src: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    dst: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    size: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    tag: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    ready_s: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    request_s: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))


@dataclass
class _Waiting(_Columns):
    """Accepted messages waiting for a free send-queue slot (flat arrays)."""

    src: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    dst: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    size: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    tag: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    request_s: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    stuck: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))


class EndpointModel:
    """Posting servers and data-path costs for a set of GPUs (node ids), vectorised.

    Per-GPU arrays are indexed by node id (``n_nodes`` long). A workload calls
    ``post`` with messages it wants sent (and when they were requested), then
    ``release`` each tick to get the ones whose posting finished.
    """

    def __init__(
        self,
        params: EndpointParams,
        n_nodes: int,
        wire_Bps: NDArray[np.float64] | None = None,
    ) -> None:
        self.params = params
        self.n_nodes = n_nodes
        self.poster_free_at_s = np.zeros(n_nodes)  # the posting server (P GPU threads or 1 CPU)
        self.nic_free_at_s = np.zeros(n_nodes)  # the NIC's send engine
        # payload line rate of each node's NIC (all its ports); infinite = WQE processing
        # alone paces the NIC (``nic_serve``)
        self.wire_Bps = np.full(n_nodes, np.inf) if wire_Bps is None else wire_Bps
        self.posted = np.zeros(n_nodes, dtype=np.int64)
        self.completed = np.zeros(n_nodes, dtype=np.int64)
        self.post_errors = np.zeros(n_nodes, dtype=np.int64)
        self.stuck = np.zeros(n_nodes, dtype=np.int64)  # accepted, never executed (hang)
        self.cpu_busy_s = np.zeros(n_nodes)
        self.post_wait_s = np.zeros(n_nodes)  # queueing before the posting server
        self.max_post_wait_s = np.zeros(n_nodes)
        self.outstanding = np.zeros(n_nodes, dtype=np.int64)
        self.max_outstanding = np.zeros(n_nodes, dtype=np.int64)
        self.pending = _Pending()
        self.waiting = _Waiting()  # accepted, waiting for a send-queue slot
        self.slot_waits = 0
        self.stuck_since_s = np.full(n_nodes, np.inf)

    # ---------------------------------------------------------------- in
    def post(
        self,
        src: NDArray[np.int64],
        dst: NDArray[np.int64],
        size: NDArray[np.float64],
        tag: NDArray[np.int64],
        request_s: NDArray[np.float64],
        *,
        fail: NDArray[np.bool_] | None = None,
        hang: NDArray[np.bool_] | None = None,
    ) -> NDArray[np.bool_]:
        """Queue messages for posting; returns which were accepted (not a post error).

        ``fail`` / ``hang`` are per-node masks (from ``version_mismatch`` faults). A
        message is posted once its GPU has a free send-queue slot (``sq_depth``
        WQEs outstanding at most: a slot frees when the completion is seen); the
        others wait for a slot (``release`` admits them as completions come).
        """
        n = src.size
        if n == 0:
            return np.zeros(0, dtype=bool)
        err = fail[src] if fail is not None else np.zeros(n, dtype=bool)
        np.add.at(self.post_errors, src[err], 1)
        ok = ~err
        stuck = hang[src[ok]] if hang is not None else np.zeros(int(ok.sum()), dtype=bool)
        self.waiting.append(
            src=src[ok],
            dst=dst[ok],
            size=size[ok],
            tag=tag[ok],
            request_s=request_s[ok],
            stuck=stuck,
        )
        self._admit(-np.inf)
        return ok

    def _admit(self, floor_s: float) -> None:
        """Post waiting messages, in FIFO order per GPU, while send-queue slots are free."""
        w = self.waiting
        if w.src.size == 0:
            return
        order = np.lexsort((np.arange(w.src.size), w.request_s, w.src))
        g = w.src[order]
        head = np.ones(g.size, dtype=bool)
        head[1:] = g[1:] != g[:-1]
        idx = np.arange(g.size)
        rank = idx - np.maximum.accumulate(np.where(head, idx, 0))
        free = np.maximum(self.params.sq_depth - self.outstanding, 0)
        admit = np.zeros(g.size, dtype=bool)
        admit[order] = rank < free[g]
        if not admit.any():
            return
        c = w.take(admit)
        if np.isfinite(floor_s):
            self.slot_waits += int((c["request_s"] < floor_s).sum())
        self._serve(
            c["src"],
            c["dst"],
            c["size"],
            c["tag"],
            np.maximum(c["request_s"], floor_s),
            c["stuck"],
        )

    def _serve(
        self,
        src: NDArray[np.int64],
        dst: NDArray[np.int64],
        size: NDArray[np.float64],
        tag: NDArray[np.int64],
        request_s: NDArray[np.float64],
        stuck: NDArray[np.bool_],
    ) -> None:
        """The posting server, the doorbell and the NIC, for admitted messages."""
        p = self.params
        # stage 1: the posting server (P GPU threads = a server P times faster with latency s,
        # or one CPU proxy thread)
        service = p.post_service_s(size)
        arrive = request_s + p.pre_post_s()
        if p.control == "ibgda":
            start = fifo_serve(src, arrive, service / p.ibgda_posters, self.poster_free_at_s)
        else:
            start = fifo_serve(src, arrive, service, self.poster_free_at_s)
            np.add.at(self.cpu_busy_s, src, service)
        posted = start + service
        wait = start - arrive
        np.add.at(self.post_wait_s, src, wait)
        np.maximum.at(self.max_post_wait_s, src, wait)
        # stage 2: the NIC's send engine (after the doorbell)
        doorbell = posted + p.pcie_rtt_s / 2
        nic_start = fifo_serve(
            src, doorbell, self.nic_service_s(src, dst, size), self.nic_free_at_s
        )
        ready = nic_start + 1.0 / p.nic_msg_rate_per_s + p.post_to_wire_s() - p.pcie_rtt_s / 2
        np.add.at(self.posted, src, 1)
        np.add.at(self.outstanding, src, 1)
        np.maximum.at(self.max_outstanding, src, self.outstanding[src])
        if p.control == "proxy" and p.data_path == "bounce":
            np.add.at(self.cpu_busy_s, dst, p.bounce_copy_s(size))  # the receiver's copy
        if stuck.any():
            np.add.at(self.stuck, src[stuck], 1)
            np.minimum.at(self.stuck_since_s, src[stuck], request_s[stuck])
        live = ~stuck
        self.pending.append(
            src=src[live],
            dst=dst[live],
            size=size[live],
            tag=tag[live],
            ready_s=ready[live],
            request_s=request_s[live],
        )

    def nic_service_s(
        self, src: NDArray[np.int64], dst: NDArray[np.int64], size: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """The NIC's time per message: its WQE processing (``nic_msg_rate_per_s``) or, when
        longer, the message's wire time at the NIC's line rate.

        A NIC executes the WQEs it is given in order (an RC QP's requests are executed in
        order: IBTA Vol. 1, ch. 9, transaction ordering; the send engine takes the next WQE once the current
        message is on the wire), so its messages leave one after another, each at line
        rate, and complete in that order. Handing them all to the fabric at once would
        share the NIC among all of them: under fair sharing none would complete before
        the last, and a full send queue would refill only then (issue 15: combine 408 µs
        against a 315 µs bound). The fetches of the next WQE and its data overlap the
        current message's transmission (a pipeline): only the first pays them. A message
        to the GPU itself does not use the wire (DeepEP copies it over NVLink / P2P).
        """
        wqe = 1.0 / self.params.nic_msg_rate_per_s
        wire = np.where(src != dst, size / self.wire_Bps[src], 0.0)
        return np.maximum(wqe, wire)

    def quiet_until(self, now_s: float, dt_s: float) -> float:
        """A time before which ``release`` releases nothing and changes nothing: none
        while a message waits for a send-queue slot (it is admitted as slots free), else a
        tick before the next message's first byte is due (``release``'s test)."""
        if self.waiting.src.size:
            return now_s
        if self.pending.ready_s.size == 0:
            return float("inf")
        return float(self.pending.ready_s.min()) - dt_s

    def release(self, now_s: float, dt_s: float) -> tuple[FlowRequests, NDArray[np.float64]]:
        """Messages whose first byte reaches the wire in [now, now + dt) as flow requests,
        and their request times (for the workload's own accounting)."""
        self._admit(now_s)
        due = self.pending.ready_s < now_s + dt_s - 1e-15
        if not due.any():
            return FlowRequests.empty(), np.zeros(0)
        c = self.pending.take(due)
        req = FlowRequests(
            src=c["src"],
            dst=c["dst"],
            size_bytes=c["size"],
            tag=c["tag"],
            ready_s=np.maximum(c["ready_s"], now_s),
            extra_latency_s=self.params.receive_s(c["size"]),
        )
        return req, c["request_s"]

    def complete(self, src: NDArray[np.int64]) -> None:
        """Completions seen (frees send-queue slots)."""
        np.subtract.at(self.outstanding, src, 1)
        np.add.at(self.completed, src, 1)

    # ---------------------------------------------------------------- out
    def kpis(self, gpus: NDArray[np.int32], elapsed_s: float) -> dict[str, float]:
        """Endpoint figures over ``gpus`` (base units)."""
        posted = float(self.posted[gpus].sum())
        return {
            "wqe_posted_total": posted,
            "wqe_post_errors_total": float(self.post_errors[gpus].sum()),
            "wqe_stuck_total": float(self.stuck[gpus].sum()),
            "post_queue_wait_mean_seconds": float(self.post_wait_s[gpus].sum()) / posted
            if posted
            else 0.0,
            "post_queue_wait_max_seconds": float(self.max_post_wait_s[gpus].max(initial=0.0)),
            "host_cpu_busy_seconds": float(self.cpu_busy_s[gpus].sum()),
            "host_cpu_utilisation": float(self.cpu_busy_s[gpus].max(initial=0.0)) / elapsed_s
            if elapsed_s > 0
            else 0.0,
            "send_queue_max_outstanding": float(self.max_outstanding[gpus].max(initial=0)),
            "send_queue_full_waits_total": float(self.slot_waits),
            "send_queue_waiting": float(np.isin(self.waiting.src, gpus).sum()),
        }


# the version_mismatch fault lives in its own module; importing the model registers it
from fabric_core.faults.ibgda import VERSION_MISMATCH, fault_masks  # noqa: E402

__all__ = [
    "CONTROLS",
    "DATA_PATHS",
    "VERSION_MISMATCH",
    "EndpointModel",
    "EndpointParams",
    "fault_masks",
    "fifo_serve",
]
