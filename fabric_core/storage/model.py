"""Storage passthrough: NVMe targets, client CPUs and the access paths between them.

An I/O is a sequence of costs a real stack pays (docs/STORAGE.md has the
equations). The fabric carries the data transfer as a flow (storage target →
GPU for a read, GPU → target for a write); everything else — the client's
per-I/O stack and per-byte copy CPU, the target's CPU, the NVMe drives, the
host→GPU copy of a bounce buffer — is a vectorised FIFO queue of this module,
paid *before* the flow is released (``ready_s``) or *after* it completes.

Queues are "busy-until" server pools, one per node (``ServerPool``): a pool
with ``k`` servers serves ``k`` units of work per second, an item starts when
the pool has room (FIFO) and takes its own work time plus a fixed latency.
A batch of items is placed with one grouped cumulative max, no Python loop.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from fabric_core.commands import Command
from fabric_core.faults.book import FaultBook, FaultKind, register_fault_kind
from fabric_core.net import endpoint_costs as ec
from fabric_core.net.profiles import Profile
from fabric_core.net.topology import Topology
from fabric_core.sourced import param, with_checked_overrides

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


class StorageHost(Protocol):
    """What the storage model reads of the fabric it runs on (``runtime.fabric.Fabric``
    is one): its topology, profile, fault book and clock, and ``apply`` for the faults it
    injects."""

    @property
    def topo(self) -> Topology: ...
    @property
    def profile(self) -> Profile: ...
    @property
    def faults(self) -> FaultBook: ...
    @property
    def sim_time_s(self) -> float: ...
    def apply(self, cmd: Command) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class StorageParams:
    """Every storage cost, with its source (``metadata["source"]``)."""

    drive_read_latency_s: float = param(
        80e-6,
        "Micron 7450 typical read latency 80 µs (Micron's figures, quoted by "
        "computerbase.de 2023-10 on the 7500's launch: 'die 7450 ist mit 80/15 µs "
        "lesend/schreibend'); NVMe SSDs 20-100 µs in all (purestorage.com 'what is NVMe'; "
        "fabtop claims sweeps it for C4)",
        "s",
    )
    drive_write_latency_s: float = param(
        15e-6,
        "Micron 7450 typical write latency 15 µs (same source, no I/O size given): the write is "
        "acknowledged from the drive's power-loss-protected DRAM, far below a NAND program. "
        "Until session 39 20 µs, a guess (Intel's P4500 lists 20 µs random write)",
        "s",
    )
    drive_read_Bps: float = param(
        6.8e9,
        "Micron 7450 (PCIe Gen4) sequential read ~6.8 GB/s (servethehome.com; "
        "computerbase.de 2023-10: 'maximal 6,8 GB/s')",
        "B/s",
    )
    drive_write_Bps: float = param(
        5.6e9, "Micron 7450 sequential write up to 5.6 GB/s (servethehome.com)", "B/s"
    )
    drive_read_iops: float = param(
        1.0e6,
        "Micron 7450 random 4K read up to 1M IOPS (techunwrapped.com on the 7450's launch; "
        "the 7400 U.3's figure too, hardwaretimes.com)",
        "1/s",
    )
    drive_write_iops: float = param(
        190e3,
        "Micron 7400 U.3 random 4K write 190K IOPS (hardwaretimes.com): the only drive "
        "figure here not of the 7450, whose own was not found (Boston Labs puts the 7450 "
        "37K IOPS above 'the 7400', not saying which model)",
        "1/s",
    )
    drives_per_target: float = param(
        8.0, "NVMe drives in one storage server: a guess (1U/2U servers hold 8–24)", ""
    )
    local_drives_per_gpu: float = param(
        1.0,
        "DGX H100: 8 × 3.84 TB U.2 NVMe data drives for 8 GPUs (NVIDIA DGX H100 user guide) "
        "→ 1 per GPU (derived)",
        "",
    )
    target_cores: float = param(
        32.0,
        "storage-server cores serving I/O, sized to serve its drives' 4 KiB read rate "
        "through the kernel RDMA target: drives_per_target 8 × drive_read_iops 1M × "
        "rdma_target_io_cpu_s 3.7 µs ≈ 30 cores → 32 (a sizing assumption, derived; no "
        "vendor figure found)",
        "",
    )
    client_cores: float = param(
        1.0,
        "host cores that run one GPU's I/O stack (a scenario setting; a guess by default)",
        "",
    )
    local_io_cpu_s: float = param(
        2e-6,
        "Linux block layer + NVMe driver per I/O (~500K IOPS per core with io_uring): a guess",
        "s",
    )
    rdma_io_cpu_s: float = param(
        3.7e-6,
        "SPDK 24.05 NVMe-oF RDMA initiator 5.46M IOPS on 4 cores (0.73 µs/I/O) and the kernel "
        "up to 5.09× less IOPS per core (SPDK performance report via techbytes.app) → "
        "0.73 × 5.09 ≈ 3.7 µs (derived)",
        "s",
    )
    rdma_target_io_cpu_s: float = param(
        3.7e-6,
        "SPDK 24.05 RDMA target 10.94M IOPS on 8 cores (0.73 µs/I/O) × 5.09 for the kernel "
        "target (same report; derived)",
        "s",
    )
    tcp_io_cpu_s: float = param(
        10e-6,
        "kernel TCP storage initiator per I/O (syscalls, softirq, interrupts; ~100K IOPS "
        "per core): a guess; native NVMe/TCP needs about twice the cores of an optimised "
        "one to saturate an SSD (SENS, synapsesocial.com)",
        "s",
    )
    tcp_target_io_cpu_s: float = param(10e-6, "kernel TCP storage target per I/O: a guess", "s")
    nfs_rpc_cpu_s: float = param(
        5e-6,
        "NFS client RPC/XDR/VFS work per READ or WRITE RPC: a guess (no per-RPC figure "
        "found; chimeraproject.io finds the kernel client over RDMA bound by 'per-RPC kernel "
        "overhead' at ~1M 4 KiB IOPS, without its core count); C5 sweeps the client cores",
        "s",
    )
    nfsd_rpc_cpu_s: float = param(5e-6, "nfsd work per RPC on the server: a guess", "s")
    tcp_rx_cpu_s_per_byte: float = param(
        8 / 42e9,
        "one Linux core cannot receive 100 Gb/s and the kernel→application copy is the main "
        "cost (Cai et al., 'Understanding Host Network Stack Overheads', SIGCOMM 2021); "
        "'Modern Linux network stack can achieve ~42Gbps throughput-per-core' for one "
        "long flow, the receiver the bottleneck (§1, §3.1) → 0.19 ns/B (derived)",
        "s/B",
    )
    tcp_tx_cpu_s_per_byte: float = param(
        8 / 160e9,
        "TCP send with TSO and zero-copy sendfile is several times cheaper per byte than "
        "receive: 'receiver-side CPU is the bottleneck' (Cai et al. 2021, §3.1), which "
        "gives no sender figure; 160 Gb/s per core, a guess",
        "s/B",
    )
    cuda_memcpy_cpu_s: float = param(
        ec.CUDA_COPY_S,
        ec.CUDA_COPY_SOURCE + "; the endpoint model's copy_launch_s is the same figure",
        "s",
    )
    pcie_Bps: float = param(
        ec.PCIE_DMA_BPS,
        "host↔GPU DMA (bounce-buffer copies): the host's one PCIe figure, " + ec.PCIE_BPS_SOURCE,
        "B/s",
    )
    rdma_stack_latency_s: float = param(
        5e-6,
        "completion polling and doorbells of NVMe-oF over RDMA, beyond the modelled CPU and "
        "fabric costs: an assumption, 5 µs (range 2-20 µs: NVMe-oF over RDMA is quoted at "
        "~10-30 µs over local NVMe, datacore.com)",
        "s",
    )
    tcp_stack_latency_s: float = param(
        80e-6,
        "interrupt moderation, softirq and thread wake-ups of kernel NVMe/TCP, beyond the "
        "modelled per-I/O CPU: derived, 80 µs (range 71-91 µs). NVMe/TCP is quoted at "
        "+80-100 µs over NVMe/RoCE (blocksandfiles.com 2022-05-03); without either stack "
        "term the model puts a 4 KiB read over TCP 13.6 µs above one over RDMA (the per-I/O "
        "CPU), and RDMA's own stack adds rdma_stack_latency_s (5 µs), so the quote leaves "
        "71-91 µs for this one (until session 38 it was 60 µs, below the quote; fabtop "
        "claims sweeps it for C4)",
        "s",
    )
    nfs_max_io_bytes: float = param(
        1048576.0, "Linux NFS rsize/wsize maximum 1 MiB (nfs(5) man page)", "B"
    )

    def with_overrides(self, **changes: Any) -> StorageParams:
        """A copy with fields changed (an unknown name, or a value that is not a number
        >= 0, raises ``ValueError``)."""
        return with_checked_overrides(self, changes, label="storage", key="storage", minimum=0.0)


@dataclass(frozen=True)
class AccessPath:
    """How an I/O gets from the drive to GPU memory (or back)."""

    name: str
    transport: str  # "local" | "rdma" | "tcp"
    file: bool  # NFS: RPC costs on client and server, I/O size ≤ rsize
    gpu_direct: bool  # lands in GPU memory (no bounce buffer, no host copy)
    help: str

    @property
    def remote(self) -> bool:
        """Does the data cross the fabric?"""
        return self.transport != "local"

    def host_passes(self) -> float:
        """Bytes moved through host memory per byte of I/O (DMA writes, copies, DMA reads)."""
        if self.gpu_direct:
            return 0.0
        # lands in host memory (1 write) and is DMA-read by the GPU copy engine (1 read);
        # kernel TCP also copies socket buffers → the application buffer (1 read + 1 write)
        return 2.0 + (2.0 if self.transport == "tcp" else 0.0)


PATHS: dict[str, AccessPath] = {
    p.name: p
    for p in (
        AccessPath("local-nvme", "local", False, False, "local NVMe → host buffer → GPU"),
        AccessPath(
            "nvmeof",
            "rdma",
            False,
            False,
            "NVMe over RDMA: block I/O, target-side RDMA into a host buffer, then DMA to "
            "the GPU (the bounce variant of xds)",
        ),
        AccessPath(
            "xds", "rdma", False, True, "XPU direct storage: target → RDMA NIC → GPU memory"
        ),
        AccessPath(
            "nfs-rdma",
            "rdma",
            True,
            False,
            "NFS over RDMA (RFC 8166): RPC over RDMA, data placed directly in a host buffer",
        ),
        AccessPath(
            "nfs-tcp",
            "tcp",
            True,
            False,
            "NFS over kernel TCP: per-RPC stack cost, per-byte receive copy on the client",
        ),
        AccessPath(
            "nvme-tcp",
            "tcp",
            False,
            False,
            "block I/O over kernel TCP (nvme-tcp / iSCSI-like): the TCP baseline",
        ),
    )
}


def get_path(name: str) -> AccessPath:
    """An access path by name (``ValueError`` names the known ones)."""
    try:
        return PATHS[name]
    except KeyError:
        raise ValueError(f"unknown storage path {name!r}; known: {', '.join(PATHS)}") from None


register_fault_kind(
    FaultKind(
        "slow_target",
        "storage",
        {"latency_factor": (10.0, 1.0, 1e4), "bandwidth_factor": (0.25, 1e-4, 1.0)},
        "a storage target's drives slow down: latency × latency_factor, "
        "bandwidth and IOPS × bandwidth_factor",
    )
)


class ServerPool:
    """Per-node FIFO pools of ``servers`` identical servers (busy-until form)."""

    def __init__(self, n_nodes: int, servers: F64) -> None:
        self.servers = np.maximum(np.asarray(servers, dtype=np.float64), 1e-9)
        self.busy_until = np.zeros(n_nodes)
        self.work_s = np.zeros(n_nodes)  # server-seconds spent per node

    def reserve(self, node: I64, arrival: F64, work: F64, extra: F64 | float = 0.0) -> F64:
        """Queue items (node, arrival, work seconds); returns their finish times.

        An item starts when its node's pool has room (FIFO in arrival order) and
        finishes ``work + extra`` later; the pool is then busy for ``work / servers``.
        """
        n = node.size
        finish = np.zeros(n)
        if n == 0:
            return finish
        extra_arr = np.broadcast_to(np.asarray(extra, dtype=np.float64), (n,))
        order = np.lexsort((arrival, node))
        nd, a = node[order], arrival[order]
        occ = work[order] / self.servers[nd]
        new_grp = np.r_[True, nd[1:] != nd[:-1]]
        gid = np.cumsum(new_grp) - 1
        starts = np.flatnonzero(new_grp)
        cum = np.cumsum(occ) - occ
        cum -= cum[starts][gid]  # work queued ahead of each item within its node
        v = a - cum
        span = float(v.max() - v.min()) + 1.0
        shift = gid * span
        cm = np.maximum.accumulate(v + shift) - shift
        start = cum + np.maximum(self.busy_until[nd], cm)
        ends = np.r_[starts[1:] - 1, n - 1]
        self.busy_until[nd[ends]] = start[ends] + occ[ends]
        np.add.at(self.work_s, nd, work[order])
        finish[order] = start + work[order] + extra_arr[order]
        return finish

    def utilisation(self, nodes: I64, elapsed_s: float) -> float:
        """Mean busy fraction of the pools of ``nodes`` over ``elapsed_s``."""
        if elapsed_s <= 0 or nodes.size == 0:
            return 0.0
        # work reserved for after ``elapsed_s`` (queued) is not done yet
        ahead = np.maximum(self.busy_until[nodes] - elapsed_s, 0.0) * self.servers[nodes]
        done = np.maximum(self.work_s[nodes] - ahead, 0.0)
        return float(done.sum() / (self.servers[nodes].sum() * elapsed_s))


class StorageSystem:
    """The shared queues of one fabric: drives and CPUs of targets, client CPUs, PCIe."""

    def __init__(self, fabric: StorageHost, params: StorageParams) -> None:
        self.fabric = fabric
        self.params = params
        n = len(fabric.topo.nodes)
        p = params
        is_target = np.zeros(n, dtype=bool)
        is_target[fabric.topo.storage] = True
        drives = np.where(is_target, p.drives_per_target, p.local_drives_per_gpu)
        self.drives = ServerPool(n, drives)
        self.target_cpu = ServerPool(n, np.full(n, p.target_cores))
        self.client_cpu = ServerPool(n, np.full(n, p.client_cores))
        self.h2d = ServerPool(n, np.ones(n))  # host→GPU DMA, one engine per GPU
        self.d2h = ServerPool(n, np.ones(n))
        prof = fabric.profile
        # one-way small-message latency (command capsule / completion) across a leaf-spine:
        # the data path every message pays (NIC pipelines, the DMA read of the capsule and
        # the write at the far end: endpoint_costs), switches and cables
        self.capsule_s = (
            ec.data_path_fixed_s(prof)
            + 3 * prof.switch_latency_s
            + prof.propagation_s_per_m * 2 * (prof.cable_m_endpoint + prof.cable_m_leaf_spine)
        )

    def slow_factors(self, nodes: I64) -> tuple[F64, F64]:
        """(latency ×, bandwidth ×) per node from active ``slow_target`` faults."""
        lat = np.ones(nodes.size)
        bw = np.ones(nodes.size)
        index = self.fabric.topo.nodes.index
        for f in self.fabric.faults.active("slow_target"):
            m = nodes == index.get(f.target, -1)
            lat[m] *= float(f.params["latency_factor"])
            bw[m] *= float(f.params["bandwidth_factor"])
        return lat, bw

    def drive_io(self, node: I64, t: F64, size: F64, write: bool) -> F64:
        """Queue I/Os on the drives of ``node``; returns when each finished."""
        p = self.params
        lat_f, bw_f = self.slow_factors(node)
        bw = (p.drive_write_Bps if write else p.drive_read_Bps) * bw_f
        iops = (p.drive_write_iops if write else p.drive_read_iops) * bw_f
        lat = (p.drive_write_latency_s if write else p.drive_read_latency_s) * lat_f
        xfer = size / bw
        occ = np.maximum(xfer, 1.0 / iops)
        # the pool's work is the occupancy; the rest of the latency does not hold a drive
        return self.drives.reserve(node, t, occ, lat + xfer - occ)


_SYSTEMS: weakref.WeakKeyDictionary[StorageHost, StorageSystem] = weakref.WeakKeyDictionary()


def storage_system(fabric: StorageHost, params: StorageParams) -> StorageSystem:
    """The fabric's storage queues (made by the first storage workload; others must agree)."""
    sys_ = _SYSTEMS.get(fabric)
    if sys_ is None:
        sys_ = _SYSTEMS[fabric] = StorageSystem(fabric, params)
    elif sys_.params != params:
        differ = [
            f"{f.name} {getattr(params, f.name):g} here, {getattr(sys_.params, f.name):g} before"
            for f in dataclasses.fields(params)
            if getattr(params, f.name) != getattr(sys_.params, f.name)
        ]
        raise ValueError(
            "storage workloads of one fabric must share the same storage parameters "
            f"(their `storage` tables): {', '.join(differ)}"
        )
    return sys_


def parse_params(table: Mapping[str, Any] | None) -> StorageParams:
    """StorageParams from a scenario's ``storage = {...}`` table."""
    if table is None:
        return StorageParams()
    if not isinstance(table, Mapping):
        raise ValueError("storage: must be a table of parameter overrides")
    return StorageParams().with_overrides(**dict(table))


def inject_slow_target(
    fabric: StorageHost,
    target: str,
    *,
    latency_factor: float = 10.0,
    bandwidth_factor: float = 0.25,
    duration_s: float | None = None,
) -> str:
    """Inject ``slow_target`` on a storage node now, through ``Fabric.apply`` (so the
    fault book's checks and limits hold as for an operator's inject); returns the fault id.

    Raises:
        CommandError: ``target`` is not a storage node, or a factor is out of its range.
    """
    from fabric_core.commands import InjectFault

    params: dict[str, float | str] = {
        "latency_factor": latency_factor,
        "bandwidth_factor": bandwidth_factor,
    }
    cmd = InjectFault(kind="slow_target", target=target, params=params, duration_s=duration_s)
    return str(fabric.apply(cmd)["fault_id"])
