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
never comes; a bring-up check finds it by timeout).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from fabric_core.commands import CommandError, InjectFault, unknown
from fabric_core.faults import Fault, FaultKind, register_fault_kind
from fabric_core.snapshot import Event
from fabric_core.workloads.base import FlowRequests

if TYPE_CHECKING:
    from fabric_core.fabric import Fabric

CONTROLS = ("ibgda", "proxy")
DATA_PATHS = ("gdr", "bounce")


def _p(default: Any, source: str, unit: str = "") -> Any:
    return field(default=default, metadata={"source": source, "unit": unit})


@dataclass(frozen=True, slots=True)
class EndpointParams:
    """Costs of one GPU endpoint (GPU + PCIe + NIC + host CPU), each with its source."""

    control: str = _p(
        "ibgda", "design: 'ibgda' (GPU posts WQEs) or 'proxy' (CPU proxy thread posts); article C2"
    )
    data_path: str = _p(
        "gdr", "design: 'gdr' (NIC reads GPU memory) or 'bounce' (host staging copies); article C1"
    )
    gpu_wqe_post_s: float = _p(
        1.0e-6,
        "one GPU thread builds a 64 B WQE, updates the doorbell record and fences "
        "(__threadfence_system) before ringing: several dependent stores to GPU memory plus a "
        "system-scope fence. NVSHMEM best-practice guide ('performance'): a GPU thread fills a "
        "WQE more slowly than a CPU thread. The value is a guess of that order",
        "s",
    )
    ibgda_posters: int = _p(
        32,
        "GPU threads posting in parallel, one per QP: DeepEP low-latency mode uses "
        "num_qps_per_rank = num_experts / ep_size (DeepEP README), 256 / 8 = 32 for DeepSeek-V3 "
        "on EP8 (derived)",
    )
    gpu_request_s: float = _p(
        0.3e-6,
        "proxy path: a GPU thread writes one request (a few words) into the host ring and "
        "fences: fewer stores than a WQE; a guess",
        "s",
    )
    cpu_post_s: float = _p(
        0.2e-6,
        "proxy CPU thread, per message: read the ring entry, build the WQE, ibv_post_send "
        "with a BlueFlame write. Kalia et al. (ATC 2016, 'Design guidelines for high "
        "performance RDMA systems') reach a few million posts/s per core, i.e. a few hundred "
        "ns each; 200 ns is a guess in that range",
        "s",
    )
    proxy_poll_interval_s: float = _p(
        0.2e-6,
        "an idle proxy thread spins on the ring; one loop iteration (a host-memory read of "
        "the ring head plus the CQ check) is a guess; an arrival waits half of it on average",
        "s",
    )
    pcie_rtt_s: float = _p(
        0.6e-6,
        "PCIe round trip of a small DMA read (NIC reads a WQE or data): pcie-bench "
        "(Neugebauer et al., SIGCOMM 2018) ~0.5-0.6 µs on Xeon hosts; an FPGA ping over "
        "Gen3 850 ns (hackingnasdaq blog, 2014); 0.6 µs chosen in that range. A doorbell "
        "(posted MMIO write) costs half of it (one way, derived)",
        "s",
    )
    pcie_Bps: float = _p(
        63e9,
        "PCIe Gen5 x16: 32 GT/s/lane x 16 x 128b/130b ≈ 63 GB/s per direction (ConnectX-7 "
        "OCP manual, derived)",
        "B/s",
    )
    host_copy_Bps: float = _p(
        50e9,
        "pinned cudaMemcpy GPU<->host over PCIe Gen5 x16: below the 63 GB/s link; NVIDIA GDS "
        "blog: ~50 GB/s through system memory on DGX-2; 50 GB/s is a guess in that range",
        "B/s",
    )
    copy_launch_s: float = _p(
        2.5e-6,
        "cudaMemcpyAsync call + copy-engine start + completion wait: a few µs per copy "
        "(CUDA best-practices guide: API and launch overheads of µs); a guess",
        "s",
    )
    nic_msg_rate_per_s: float = _p(
        330e6,
        "ConnectX-7 product brief: up to ~330 million messages/s; the NIC processes WQEs "
        "one after another at this rate (a serial stage after posting)",
        "1/s",
    )
    recv_poll_s: float = _p(
        0.5e-6,
        "the receiver notices arrival: a GPU thread polling a flag in GPU memory (or the "
        "proxy polling a CQE, then writing the flag through PCIe); a guess of one GPU memory "
        "access plus a loop iteration",
        "s",
    )
    sq_depth: int = _p(
        1024,
        "send-queue depth per QP: NVSHMEM_IBGDA_QP_DEPTH / NVSHMEM_IBRC defaults are of this "
        "order (NVSHMEM environment-variable docs); reported, not enforced",
    )

    def __post_init__(self) -> None:
        if self.control not in CONTROLS:
            raise ValueError(
                f"control: expected one of {', '.join(CONTROLS)}, got {self.control!r}"
            )
        if self.data_path not in DATA_PATHS:
            raise ValueError(
                f"data_path: expected one of {', '.join(DATA_PATHS)}, got {self.data_path!r}"
            )
        if self.control == "ibgda" and self.data_path == "bounce":
            raise ValueError(
                "control 'ibgda' needs data_path 'gdr': the NIC fetches WQEs and data from GPU memory"
            )
        if self.ibgda_posters < 1:
            raise ValueError("ibgda_posters must be >= 1")
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, float) and not v >= 0:
                raise ValueError(f"{f.name} must be >= 0, got {v!r}")

    def with_overrides(self, **overrides: Any) -> EndpointParams:
        """A copy with some parameters changed (unknown names raise ``ValueError``)."""
        known = {f.name for f in fields(self)}
        bad = sorted(set(overrides) - known)
        if bad:
            raise ValueError(f"unknown endpoint parameter(s): {', '.join(bad)}")
        return dataclasses.replace(self, **overrides)

    @classmethod
    def parameter_sources(cls) -> list[tuple[str, str, str, Any]]:
        """(name, unit, source, default) for every parameter (the docs are generated from it)."""
        d = cls()
        return [
            (f.name, f.metadata.get("unit", ""), f.metadata["source"], getattr(d, f.name))
            for f in fields(cls)
        ]

    # ---------------------------------------------------------------- costs
    def bounce_copy_s(self, size: NDArray[np.float64]) -> NDArray[np.float64]:
        """One staging copy (GPU→host or host→GPU): launch + bytes over PCIe; 0 with GDR."""
        if self.data_path != "bounce":
            return np.zeros_like(size)
        return self.copy_launch_s + size / self.host_copy_Bps

    def post_service_s(self, size: NDArray[np.float64]) -> NDArray[np.float64]:
        """Busy time of the posting server per message (a GPU poster, or the proxy CPU)."""
        if self.control == "ibgda":
            return np.full(size.shape, self.gpu_wqe_post_s)
        return self.cpu_post_s + self.bounce_copy_s(size)  # the proxy waits for the copy

    def pre_post_s(self) -> float:
        """From the request to the posting server: 0 for IBGDA; request write + poll for proxy."""
        if self.control == "ibgda":
            return 0.0
        return self.gpu_request_s + self.pcie_rtt_s / 2 + self.proxy_poll_interval_s / 2

    def post_to_wire_s(self) -> float:
        """From a posted WQE to its first byte on the wire (doorbell, WQE fetch, data fetch)."""
        doorbell = self.pcie_rtt_s / 2
        wqe_fetch = self.pcie_rtt_s if self.control == "ibgda" else 0.0  # proxy: BlueFlame
        return doorbell + wqe_fetch + self.pcie_rtt_s

    def receive_s(self, size: NDArray[np.float64]) -> NDArray[np.float64]:
        """After the last byte lands: host→GPU copy (bounce) and noticing the arrival."""
        return self.bounce_copy_s(size) + self.recv_poll_s

    def isolated_latency_s(self, size: float) -> float:
        """Endpoint share of one message's latency on an idle endpoint (no fabric)."""
        s = np.array([size])
        return float(
            self.pre_post_s()
            + self.post_service_s(s)[0]
            + 1.0 / self.nic_msg_rate_per_s
            + self.post_to_wire_s()
            + self.receive_s(s)[0]
        )

    def cpu_s_per_message(self, size: float) -> float:
        """Host CPU time per message: proxy posting and the copies it waits for (both ends)."""
        s = np.array([size])
        post = self.cpu_post_s if self.control == "proxy" else 0.0
        return float(post + 2 * self.bounce_copy_s(s)[0])


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


@dataclass
class _Pending:
    """Posted messages waiting for their first byte to reach the wire (flat arrays)."""

    src: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    dst: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    size: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    tag: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    ready_s: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    request_s: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))

    def append(self, **cols: NDArray[Any]) -> None:
        for k, v in cols.items():
            setattr(self, k, np.concatenate([getattr(self, k), v]))

    def take(self, mask: NDArray[np.bool_]) -> dict[str, NDArray[Any]]:
        out = {f.name: getattr(self, f.name)[mask] for f in fields(self)}
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name)[~mask])
        return out


class EndpointModel:
    """Posting servers and data-path costs for a set of GPUs (node ids), vectorised.

    Per-GPU arrays are indexed by node id (``n_nodes`` long). A workload calls
    ``post`` with messages it wants sent (and when they were requested), then
    ``release`` each tick to get the ones whose posting finished.
    """

    def __init__(self, params: EndpointParams, n_nodes: int) -> None:
        self.params = params
        self.n_nodes = n_nodes
        self.poster_free_at_s = np.zeros(n_nodes)  # the posting server (P GPU threads or 1 CPU)
        self.nic_free_at_s = np.zeros(n_nodes)  # the NIC's WQE processing
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

        ``fail`` / ``hang`` are per-node masks (from ``version_mismatch`` faults).
        """
        p = self.params
        n = src.size
        if n == 0:
            return np.zeros(0, dtype=bool)
        err = fail[src] if fail is not None else np.zeros(n, dtype=bool)
        np.add.at(self.post_errors, src[err], 1)
        ok = ~err
        src, dst, size, tag, request_s = src[ok], dst[ok], size[ok], tag[ok], request_s[ok]
        # stage 1: the posting server (P GPU threads = a server P times faster with latency s,
        # or one CPU proxy thread)
        service = p.post_service_s(size)
        arrive = request_s + p.pre_post_s()
        if p.control == "ibgda":
            interval = service / p.ibgda_posters
            start = fifo_serve(src, arrive, interval, self.poster_free_at_s)
            posted = start + service
        else:
            start = fifo_serve(src, arrive, service, self.poster_free_at_s)
            posted = start + service
            np.add.at(self.cpu_busy_s, src, service)
        wait = start - arrive
        np.add.at(self.post_wait_s, src, wait)
        np.maximum.at(self.max_post_wait_s, src, wait)
        # stage 2: the NIC takes WQEs one after another (after the doorbell)
        doorbell = posted + p.pcie_rtt_s / 2
        nic_start = fifo_serve(
            src, doorbell, np.full(src.size, 1.0 / p.nic_msg_rate_per_s), self.nic_free_at_s
        )
        ready = nic_start + 1.0 / p.nic_msg_rate_per_s + p.post_to_wire_s() - p.pcie_rtt_s / 2
        np.add.at(self.posted, src, 1)
        np.add.at(self.outstanding, src, 1)
        np.maximum.at(self.max_outstanding, src, self.outstanding[src])
        if p.control == "proxy" and p.data_path == "bounce":
            np.add.at(self.cpu_busy_s, dst, p.bounce_copy_s(size))  # the receiver's copy
        stuck = hang[src] if hang is not None else np.zeros(src.size, dtype=bool)
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
        return ok

    def release(self, now_s: float, dt_s: float) -> tuple[FlowRequests, NDArray[np.float64]]:
        """Messages whose first byte reaches the wire in [now, now + dt) as flow requests,
        and their request times (for the workload's own accounting)."""
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
        }


# -------------------------------------------------------------------- the fault
VERSION_MISMATCH = FaultKind(
    "version_mismatch",
    "gpu",
    {"hang": (0.0, 0.0, 1.0)},
    "IBGDA driver / CUDA / NVSHMEM versions do not match on a GPU: WQE posts fail "
    "(hang=0, counted) or are accepted and never complete (hang=1, found by timeout)",
)
register_fault_kind(VERSION_MISMATCH)


def fault_masks(fabric: Fabric) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Per-node masks (post fails, post hangs) from the active ``version_mismatch`` faults."""
    n = len(fabric.topo.nodes)
    fail = np.zeros(n, dtype=bool)
    hang = np.zeros(n, dtype=bool)
    for f in fabric.faults.active("version_mismatch"):
        ni = fabric.topo.nodes.index.get(f.target)
        if ni is None:
            continue
        if float(f.params.get("hang", 0.0)) >= 0.5:
            hang[ni] = True
        else:
            fail[ni] = True
    return fail, hang


def inject_gpu_fault(fabric: Fabric, cmd: InjectFault) -> Fault:
    """Inject a GPU-targeted fault (e.g. ``version_mismatch``).

    Uses ``fabric.faults.inject`` when it accepts GPU targets; until then
    (``FaultBook.check`` knows links and switches only) it validates the command
    here and records the fault in the same book, so snapshots and ``clear`` see it.
    """
    from fabric_core.faults import FAULT_KINDS

    kind = FAULT_KINDS.get(cmd.kind)
    if kind is None or kind.target != "gpu":
        return fabric.faults.inject(cmd, fabric.sim_time_s)
    nodes = fabric.topo.nodes
    ni = nodes.index.get(cmd.target)
    if ni is None or nodes.kind[ni] != "gpu":
        gpus = [n for n, k in zip(nodes.name, nodes.kind, strict=True) if k == "gpu"]
        raise unknown("GPU", cmd.target, gpus)
    try:
        return fabric.faults.inject(cmd, fabric.sim_time_s)
    except CommandError:
        pass  # FaultBook.check does not know GPU targets yet: record the fault here
    params: dict[str, float | str] = {}
    extra = sorted(set(cmd.params) - set(kind.params))
    if extra:
        raise CommandError(f"{cmd.kind} takes no parameter(s) {', '.join(extra)}")
    for name, (default, lo, hi) in kind.params.items():
        value = cmd.params.get(name, default)
        if not isinstance(value, int | float) or isinstance(value, bool) or not lo <= value <= hi:
            raise CommandError(f"{cmd.kind}: {name} must be a number in [{lo:g}, {hi:g}]")
        params[name] = float(value)
    now = fabric.sim_time_s
    book = fabric.faults
    fid = f"f{next(book._ids)}"
    fault = Fault(
        id=fid,
        kind=kind.name,
        target=cmd.target,
        params=params,
        injected_at_s=now,
        links=np.zeros(0, dtype=np.int64),
        clear_at_s=None if cmd.duration_s is None else now + cmd.duration_s,
    )
    book.faults[fid] = fault
    fabric.events.append(
        Event(
            now,
            "warning",
            "fault_injected",
            cmd.target,
            f"{kind.name} injected on {cmd.target} ({fid})",
        )
    )
    return fault
