"""KV messages over kernel TCP: the host costs of the storage TCP paths, applied to PD.

The same model and the same parameters as ``nfs-tcp`` / ``nvme-tcp`` in
``fabric_core.storage.model`` (``StorageParams``; the queues of ``StorageSystem``, shared
with any storage workload of the fabric). Kernel TCP cannot read or write GPU
memory, so a KV message of ``S`` bytes from prefill node ``p`` to decode node ``d``:

    t1 = d2h(p, t0, S / pcie_Bps)                                    GPU → host bounce buffer
    t2 = client_cpu(p, t1, tcp_io_cpu_s / 2 + cuda_memcpy_cpu_s + S · tcp_tx_cpu_s_per_byte)
    t3 = the fabric flow p → d released at t2, + tcp_stack_latency_s
    t4 = client_cpu(d, t3, tcp_io_cpu_s / 2 + cuda_memcpy_cpu_s + S · tcp_rx_cpu_s_per_byte)
    t5 = h2d(d, t4, S / pcie_Bps)                                    landed in the decode GPU

A node's CPU pool has ``client_cores`` servers: per-byte work beyond them queues, so a
node receives at most ``client_cores / tcp_rx_cpu_s_per_byte`` bytes per second.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.storage.model import PATHS, StorageSystem
from fabric_core.workloads.base import Completions, FlowRequests

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


class TcpTransport:
    """KV messages through the storage TCP host model; see the module docstring."""

    def __init__(self, system: StorageSystem) -> None:
        self.system = system
        p = system.params
        self._send_cpu_s = p.tcp_io_cpu_s / 2 + p.cuda_memcpy_cpu_s
        self._host_passes = PATHS["nfs-tcp"].host_passes()  # NIC write, copy r+w, DMA read
        # messages in the sender's pipeline: src, dst, tag, size, ready (flat arrays)
        self._pending: list[NDArray[np.float64] | I64] = [np.zeros(0, np.int64)] * 3 + [
            np.zeros(0)
        ] * 2
        self.copy_cpu_s = 0.0  # per-byte CPU (socket copies), both ends
        self.host_memory_bytes = 0.0
        self.nodes: I64 = np.zeros(0, np.int64)

    def send(self, src: I64, dst: I64, size: F64, tag: I64, t0: F64) -> None:
        """Start messages at times ``t0``: the bounce copy and the sender's CPU."""
        s, p = self.system, self.system.params
        t = s.d2h.reserve(src, t0, size / p.pcie_Bps)
        per_byte = size * p.tcp_tx_cpu_s_per_byte
        t = s.client_cpu.reserve(src, t, self._send_cpu_s + per_byte)
        self.copy_cpu_s += float(per_byte.sum())
        self.nodes = np.union1d(self.nodes, np.r_[src, dst])
        old = self._pending
        self._pending = [
            np.r_[old[0], src],
            np.r_[old[1], dst],
            np.r_[old[2], tag],
            np.r_[old[3], size],
            np.r_[old[4], t],
        ]

    def quiet_until(self) -> float:
        """When the first message waiting in the sender's pipeline is in the socket
        (infinity for none): ``flows_due`` hands out nothing before."""
        ready = self._pending[4]
        return float(ready.min()) if ready.size else float("inf")

    def flows_due(self, now_s: float, dt_s: float) -> FlowRequests:
        """Messages whose bytes are in the socket before the end of this tick."""
        src, dst, tag, size, ready = self._pending
        due = ready < now_s + dt_s
        if not due.any():
            return FlowRequests.empty()
        self._pending = [a[~due] for a in self._pending]
        return FlowRequests(
            src=src[due].astype(np.int64),
            dst=dst[due].astype(np.int64),
            size_bytes=size[due].astype(np.float64),
            tag=tag[due].astype(np.int64),
            ready_s=np.maximum(ready[due], now_s),
            extra_latency_s=np.full(int(due.sum()), self.system.params.tcp_stack_latency_s),
        )

    def landed(self, done: Completions) -> F64:
        """When delivered messages are in the decode GPU's memory (receiver CPU, h2d)."""
        s, p = self.system, self.system.params
        per_byte = done.size_bytes * p.tcp_rx_cpu_s_per_byte
        t = s.client_cpu.reserve(done.dst, done.finish_s, self._send_cpu_s + per_byte)
        self.copy_cpu_s += float(per_byte.sum())
        self.host_memory_bytes += float(done.size_bytes.sum()) * self._host_passes
        out: F64 = s.h2d.reserve(done.dst, t, done.size_bytes / p.pcie_Bps)
        return out

    def kpis(self, now_s: float) -> dict[str, float]:
        """Host figures of the TCP transport (base units)."""
        return {
            "host_cpu_utilisation": self.system.client_cpu.utilisation(self.nodes, now_s),
            "host_copy_cpu_seconds": self.copy_cpu_s,
            "host_memory_bytes": self.host_memory_bytes,
        }
