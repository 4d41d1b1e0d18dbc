"""Storage I/O over the fabric: the client pipeline every storage workload uses, and a probe.

``StorageClient`` turns I/Os into the costs of their access path
(``fabric_core.storage.model``): CPU and drive queues before the transfer, a fabric
flow for the transfer itself, CPU and PCIe queues after it. Workloads hand it
I/Os with an issue time and read back when each one *landed* (in GPU memory
for a read, durable on the drive for a write). Times are continuous: an I/O
issued inside a tick starts at its own time, not at the tick boundary; only
the fabric transfer waits for the tick its bytes are released in.

``StorageProbe`` is the random-read (or write) latency probe: each client
keeps ``depth`` I/Os of ``size`` outstanding to random targets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabric_core.storage.model import (
    AccessPath,
    StorageParams,
    StorageSystem,
    get_path,
    storage_system,
)
from fabric_core.workloads.base import Completions, FlowRequests, Workload, pick_endpoints

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

_IO_FIELDS = ("client", "target", "user_tag", "write", "size", "issue")


class StorageClient:
    """I/Os of one workload on one access path; see the module docstring."""

    def __init__(self, system: StorageSystem, path: AccessPath) -> None:
        self.system = system
        self.path = path
        p = system.params
        io = {"local": p.local_io_cpu_s, "rdma": p.rdma_io_cpu_s, "tcp": p.tcp_io_cpu_s}
        self.io_cpu_s = io[path.transport] + (p.nfs_rpc_cpu_s if path.file else 0.0)
        tgt = {"local": 0.0, "rdma": p.rdma_target_io_cpu_s, "tcp": p.tcp_target_io_cpu_s}
        self.target_io_cpu_s = tgt[path.transport] + (p.nfsd_rpc_cpu_s if path.file else 0.0)
        tcp = path.transport == "tcp"
        self.rx_per_byte = p.tcp_rx_cpu_s_per_byte if tcp else 0.0
        self.tx_per_byte = p.tcp_tx_cpu_s_per_byte if tcp else 0.0
        self.stack_s = {"local": 0.0, "rdma": p.rdma_stack_latency_s, "tcp": p.tcp_stack_latency_s}[
            path.transport
        ]
        self._n = 0
        self._cap = 0
        self.io: dict[str, NDArray[Any]] = {}
        self._grow(1024)
        self._flows: list[NDArray[Any]] = [np.zeros(0, np.int64), np.zeros(0)]  # ids, ready
        self._landed: list[NDArray[Any]] = [np.zeros(0, np.int64), np.zeros(0)]  # ids, time
        self._free: I64 = np.zeros(0, np.int64)  # ids whose records may be reused
        self._popped: I64 = np.zeros(0, np.int64)  # handed out by the last pop_landed
        # accounting
        self.bytes_done = 0.0
        self.ios_done = 0
        self.host_memory_bytes = 0.0
        self.copy_cpu_s = 0.0  # client CPU spent per byte (copies), seconds
        self.clients: I64 = np.zeros(0, np.int64)

    @property
    def max_io_bytes(self) -> float:
        """Largest single I/O the path allows (NFS: rsize/wsize)."""
        return self.system.params.nfs_max_io_bytes if self.path.file else float("inf")

    def _grow(self, need: int) -> None:
        cap = max(need, 2 * self._cap)
        dtypes = {"client": np.int64, "target": np.int64, "user_tag": np.int64, "write": bool}
        for k in _IO_FIELDS:
            new = np.zeros(cap, dtype=dtypes.get(k, np.float64))
            if k in self.io:
                new[: self._n] = self.io[k][: self._n]
            self.io[k] = new
        self._cap = cap

    def _alloc(self, n: int) -> I64:
        """Ids for ``n`` new I/Os: freed slots first, then new ones (the arrays stay bounded)."""
        take = min(n, self._free.size)
        reused = self._free[self._free.size - take :]
        self._free = self._free[: self._free.size - take]
        fresh = n - take
        if self._n + fresh > self._cap:
            self._grow(self._n + fresh)
        new = np.arange(self._n, self._n + fresh, dtype=np.int64)
        self._n += fresh
        return np.concatenate([reused, new])

    @property
    def slots(self) -> int:
        """I/O records allocated (in flight, landed or free for reuse)."""
        return self._n

    # ---------------------------------------------------------------- issue
    def issue(
        self,
        client: I64,
        target: I64,
        size: F64,
        t0: F64,
        user_tag: I64,
        *,
        write: bool = False,
    ) -> None:
        """Start I/Os at times ``t0`` (``target`` is ignored on the local path)."""
        n = client.size
        if n == 0:
            return
        ids = self._alloc(n)
        io = self.io
        io["client"][ids] = client
        io["target"][ids] = client if not self.path.remote else target
        io["user_tag"][ids] = user_tag
        io["write"][ids] = write
        io["size"][ids] = size
        io["issue"][ids] = t0
        s = self.system
        p = s.params
        submit = np.full(n, self.io_cpu_s / 2)
        t = t0
        if write:
            if not self.path.gpu_direct:  # GPU → host bounce buffer first
                t = s.d2h.reserve(client, t, size / p.pcie_Bps)
                submit = submit + p.cuda_memcpy_cpu_s
            submit = submit + size * self.tx_per_byte
            self.copy_cpu_s += float((size * self.tx_per_byte).sum())
        t = s.client_cpu.reserve(client, t, submit)
        if not self.path.remote:
            done = s.drive_io(client, t, size, write)
            if write:
                self._land(ids, done)
            else:
                self._finish_read(ids, done)
            return
        if not write:
            t = t + s.capsule_s
            t = s.target_cpu.reserve(target, t, self.target_io_cpu_s + size * self.tx_per_byte)
            t = s.drive_io(target, t, size, False)
        self._flows = [np.r_[self._flows[0], ids], np.r_[self._flows[1], t]]

    def flows_due(self, now_s: float, dt_s: float) -> FlowRequests:
        """Transfers whose data is ready before the end of this tick."""
        ids, ready = self._flows
        due = ready < now_s + dt_s
        if not due.any():
            return FlowRequests.empty()
        self._flows = [ids[~due], ready[~due]]
        ids, ready = ids[due], ready[due]
        write = self.io["write"][ids]
        client, target = self.io["client"][ids], self.io["target"][ids]
        return FlowRequests(
            src=np.where(write, client, target),
            dst=np.where(write, target, client),
            size_bytes=self.io["size"][ids],
            tag=ids,
            ready_s=np.maximum(ready, now_s),
            extra_latency_s=np.full(ids.size, self.stack_s),
        )

    # ---------------------------------------------------------------- complete
    def on_complete(self, done: Completions) -> None:
        """The fabric delivered transfers (tags are I/O ids)."""
        ids = done.tag
        write = self.io["write"][ids]
        if (~write).any():
            self._finish_read(ids[~write], done.finish_s[~write])
        if write.any():
            w = ids[write]
            s = self.system
            size = self.io["size"][w]
            tgt = self.io["target"][w]
            t = s.target_cpu.reserve(
                tgt, done.finish_s[write], self.target_io_cpu_s + size * self.rx_per_byte
            )
            t = s.drive_io(tgt, t, size, True) + s.capsule_s
            t = s.client_cpu.reserve(self.io["client"][w], t, np.full(w.size, self.io_cpu_s / 2))
            self._land(w, t)

    def _finish_read(self, ids: I64, arrived: F64) -> None:
        s = self.system
        p = s.params
        size = self.io["size"][ids]
        client = self.io["client"][ids]
        copy = size * self.rx_per_byte
        cpu = self.io_cpu_s / 2 + copy
        if not self.path.gpu_direct:
            cpu = cpu + p.cuda_memcpy_cpu_s
        self.copy_cpu_s += float(copy.sum())
        t = s.client_cpu.reserve(client, arrived, cpu)
        if not self.path.gpu_direct:  # host bounce buffer → GPU by DMA
            t = s.h2d.reserve(client, t, size / p.pcie_Bps)
        self._land(ids, t)

    def _land(self, ids: I64, t: F64) -> None:
        """Schedule I/Os ``ids`` to land at times ``t``: counted done when they have
        (``pop_landed``), not here, where ``t`` may be past the end of the run."""
        self._landed = [np.r_[self._landed[0], ids], np.r_[self._landed[1], t]]

    def pop_landed(self, upto_s: float) -> tuple[I64, F64]:
        """I/O ids (and times) that landed before ``upto_s``, in time order.

        Their records (``io[...]``) stay valid until the next ``pop_landed`` call;
        then the ids are reused.
        """
        self._free = np.concatenate([self._free, self._popped])
        self._popped = np.zeros(0, np.int64)
        ids, t = self._landed
        due = t < upto_s
        if not due.any():
            return np.zeros(0, np.int64), np.zeros(0)
        self._landed = [ids[~due], t[~due]]
        ids, t = ids[due], t[due]
        size = float(self.io["size"][ids].sum())
        self.bytes_done += size
        self.ios_done += ids.size
        self.host_memory_bytes += size * self.path.host_passes()
        order = np.argsort(t, kind="stable")
        self._popped = ids[order]
        return ids[order], t[order]

    def quiet_until(self) -> float:
        """The time before which ``flows_due`` and ``pop_landed`` hand out nothing and
        change nothing: the first transfer to be ready or I/O to land (minus infinity
        while the ids the last ``pop_landed`` handed out wait for the next call to free
        them)."""
        if self._popped.size:
            return -np.inf
        first = np.inf
        for times in (self._flows[1], self._landed[1]):
            if times.size:
                first = min(first, float(times.min()))
        return first

    # ---------------------------------------------------------------- figures
    def kpis(self, clients: I64, now_s: float) -> dict[str, float]:
        """Throughput, CPU and host-memory figures of this client."""
        s = self.system
        return {
            "storage_bytes_per_second": self.bytes_done / now_s if now_s > 0 else 0.0,
            "ios_completed": float(self.ios_done),
            "client_cpu_utilisation": s.client_cpu.utilisation(clients, now_s),
            "client_copy_cpu_seconds": self.copy_cpu_s,
            "host_memory_bytes": self.host_memory_bytes,
            "host_memory_bytes_per_byte": self.host_memory_bytes / self.bytes_done
            if self.bytes_done
            else 0.0,
        }


@dataclass
class StorageWorkload(Workload):
    """Base for workloads that do storage I/O on one access path."""

    kind: str = "storage"
    path_name: str = "nvmeof"
    params: StorageParams = field(default_factory=StorageParams)
    targets: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    client: StorageClient | None = None

    def bind_clients(
        self,
        spec: Any,
        what: str,
        gpus: NDArray[np.int32],
        storage: NDArray[np.int32],
        rng: np.random.Generator,
    ) -> I64:
        """Remember the storage targets (a remote path needs at least one) and return the
        client GPUs ``spec`` picks (``what`` names them in errors)."""
        path = get_path(self.path_name)
        if path.remote and storage.size == 0:
            raise ValueError(
                f"workload {self.name!r}: path {path.name} needs storage targets "
                "(topology.storage_targets)"
            )
        self.targets = storage.astype(np.int64)
        return pick_endpoints(spec, gpus, rng, f"workload {self.name!r} {what}").astype(np.int64)

    def attach(self, fabric: Any) -> None:
        super().attach(fabric)
        try:
            system = storage_system(fabric, self.params)
        except ValueError as exc:  # (which workload: the first to differ)
            raise ValueError(f"workload {self.name!r}: {exc}") from None
        self.client = StorageClient(system, get_path(self.path_name))

    @property
    def io(self) -> StorageClient:
        """The attached client (after ``attach``)."""
        if self.client is None:
            raise RuntimeError(f"workload {self.name!r} is not attached to a fabric")
        return self.client

    def on_complete(self, done: Completions, now_s: float) -> None:
        self.io.on_complete(done)

    def quiet_until(self, now_s: float, dt_s: float) -> float:
        """Until the first of its client's next ready transfer or landed I/O and its own
        next act (``_next_act_s``), less a tick: a tick acts on what comes before its end."""
        return min(self.io.quiet_until(), self._next_act_s()) - dt_s

    def _next_act_s(self) -> float:
        """When the workload next acts of itself, not on its client's news: minus
        infinity for at once, infinity for never (the default)."""
        return float("inf")


@dataclass
class StorageProbe(StorageWorkload):
    """Closed-loop I/O probe: ``depth`` outstanding I/Os of ``size_bytes`` per client."""

    kind: str = "storage_io"
    clients_spec: Any = 1
    size_bytes: float = 4096.0
    depth: int = 1
    write: bool = False
    clients: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    _started: bool = False

    def bind(
        self, gpus: NDArray[np.int32], storage: NDArray[np.int32], rng: np.random.Generator
    ) -> None:
        self.clients = self.bind_clients(self.clients_spec, "clients", gpus, storage, rng)
        if self.depth < 1:
            raise ValueError(f"workload {self.name!r}: depth must be >= 1")

    def _issue(self, client: I64, t: F64, rng: np.random.Generator) -> None:
        n = client.size
        target = (
            self.targets[rng.integers(0, self.targets.size, n)] if self.targets.size else client
        )
        size = np.full(n, min(self.size_bytes, self.io.max_io_bytes))
        self.io.issue(client, target, size, t, np.zeros(n, np.int64), write=self.write)

    def _next_act_s(self) -> float:
        # the first tick issues the first I/Os; then each landed I/O issues the next
        return -np.inf if self.running and not self._started else np.inf

    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        io = self.io
        if self.running and not self._started:
            self._started = True
            c = np.repeat(self.clients, self.depth)
            self._issue(c, np.full(c.size, now_s), rng)
        # each landed I/O starts the next one of its client at once; on a fast path
        # that one may land within this tick too
        while True:
            ids, t = io.pop_landed(now_s + dt_s)
            if ids.size == 0:
                break
            self.histogram("io_seconds").observe_many(t - io.io["issue"][ids])
            if self.running:
                self._issue(io.io["client"][ids], t, rng)
        return io.flows_due(now_s, dt_s)

    def kpis(self, now_s: float) -> Mapping[str, float]:
        h = self.histograms.get("io_seconds")
        v = h.freeze() if h is not None else None
        out = {
            "io_latency_p50_seconds": v.quantile(0.5) if v else float("nan"),
            "io_latency_p99_seconds": v.quantile(0.99) if v else float("nan"),
            "io_latency_mean_seconds": v.mean() if v else float("nan"),
            "iops": self.io.ios_done / now_s if now_s > 0 else 0.0,
        }
        out.update(self.io.kpis(self.clients, now_s))
        return out
