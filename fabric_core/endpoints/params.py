"""Parameters of a GPU endpoint (GPU, PCIe, NIC, host CPU), each with its source, and the
cost formulas the endpoint model (``fabric_core.endpoints.model``) and its docs use.

``docs/ENDPOINTS.md``'s parameter table is generated from the ``metadata["source"]``
of these fields (``python -m fabric_core.reports.endpoints_doc``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabric_core.net import endpoint_costs as ec
from fabric_core.sourced import param, parameter_sources, with_checked_overrides

CONTROLS = ("ibgda", "proxy")
DATA_PATHS = ("gdr", "bounce")


@dataclass(frozen=True, slots=True)
class EndpointParams:
    """Costs of one GPU endpoint (GPU + PCIe + NIC + host CPU), each with its source."""

    control: str = param(
        "ibgda", "design: 'ibgda' (GPU posts WQEs) or 'proxy' (CPU proxy thread posts); article C2"
    )
    data_path: str = param(
        "gdr", "design: 'gdr' (NIC reads GPU memory) or 'bounce' (host staging copies); article C1"
    )
    gpu_wqe_post_s: float = param(
        1.0e-6,
        "one GPU thread builds a 64 B WQE, updates the doorbell record and fences "
        "(__threadfence_system) before ringing: several dependent stores to GPU memory plus a "
        "system-scope fence. NVSHMEM best-practice guide ('performance'): a GPU thread fills a "
        "WQE more slowly than a CPU thread. The value is a guess of that order",
        "s",
    )
    ibgda_posters: int = param(
        32,
        "GPU threads posting in parallel, one per QP: DeepEP low-latency mode uses "
        "num_qps_per_rank = num_experts / ep_size (DeepEP README), 256 / 8 = 32 for DeepSeek-V3 "
        "on EP8 (derived)",
    )
    gpu_request_s: float = param(
        0.3e-6,
        "proxy path: a GPU thread writes one request (a few words) into the host ring and "
        "fences: fewer stores than a WQE; a guess",
        "s",
    )
    cpu_post_s: float = param(
        ec.CPU_POST_S,
        "proxy CPU thread, per message (it also reads the ring entry): "
        + ec.CPU_POST_SOURCE
        + "; the same figure as Profile.host_post_s, what the fabric charges a CPU-posted "
        "message",
        "s",
    )
    proxy_poll_interval_s: float = param(
        0.2e-6,
        "an idle proxy thread spins on the ring; one loop iteration (a host-memory read of "
        "the ring head plus the CQ check) is a guess; an arrival waits half of it on average",
        "s",
    )
    pcie_rtt_s: float = param(
        ec.PCIE_READ_S,
        ec.PCIE_READ_SOURCE
        + ". Here the NIC's WQE fetch from GPU memory (IBGDA); the payload's read is the "
        "fabric's, for every message not sent inline (Profile.pcie_read_latency_s, the same "
        "figure)",
        "s",
    )
    pcie_write_s: float = param(
        ec.PCIE_WRITE_S,
        ec.PCIE_WRITE_SOURCE
        + ". Here the doorbell and the GPU's request write into the proxy's ring; the "
        "receiver's DMA write is the fabric's (Profile.pcie_write_latency_s, the same figure)",
        "s",
    )
    host_copy_Bps: float = param(
        ec.PCIE_DMA_BPS,
        "pinned cudaMemcpy GPU<->host (bounce staging) crosses the same PCIe link as the NIC, "
        "at its DMA goodput: "
        + ec.PCIE_BPS_SOURCE
        + " (range 50-57.6 GB/s: NVIDIA GDS blog ~50 GB/s through system memory on DGX-2)",
        "B/s",
    )
    copy_launch_s: float = param(
        ec.CUDA_COPY_S,
        ec.CUDA_COPY_SOURCE + "; the storage model's cuda_memcpy_cpu_s is the same figure",
        "s",
    )
    nic_msg_rate_per_s: float = param(
        330e6,
        "ConnectX-7 product brief: up to ~330 million messages/s; the NIC processes WQEs "
        "one after another at this rate (a serial stage after posting)",
        "1/s",
    )
    recv_poll_s: float = param(
        ec.RECV_POLL_S,
        ec.RECV_POLL_SOURCE
        + "; the same figure as Profile.host_poll_s, what the fabric charges a CPU-polled "
        "message",
        "s",
    )
    sq_depth: int = param(
        1024,
        "WQE slots per GPU endpoint (all its QPs): a WQE holds its slot until its completion "
        "is seen. NVSHMEM sizes it with NVSHMEM_IBGDA_QP_DEPTH per QP (nvshmem ibgda transport "
        "source); the total per GPU is a guess. Enforced: posts beyond it wait for a slot",
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
        """A copy with some parameters changed.

        Raises:
            ValueError: an unknown name, or a value of the wrong type (named).
        """
        return with_checked_overrides(self, overrides, label="endpoint", key="endpoint")

    @classmethod
    def parameter_sources(cls) -> list[tuple[str, str, str, Any]]:
        """(name, unit, source, default) for every parameter (the docs are generated from it)."""
        return parameter_sources(cls)

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
        return self.gpu_request_s + self.pcie_write_s + self.proxy_poll_interval_s / 2

    def post_to_wire_s(self) -> float:
        """From a posted WQE to the NIC holding it (doorbell, then the WQE fetch for IBGDA).

        The payload's DMA read, the NIC pipelines and the receiver's DMA write come after:
        the fabric charges them to every message (``endpoint_costs.data_path_fixed_s``).
        ``endpoint.EndpointModel`` times its NIC server from a doorbell of ``pcie_rtt_s / 2``
        and takes that back off here, so a uniform shift of the server's arrivals; the
        message is ready ``pcie_write_s + WQE fetch`` after its post.
        """
        doorbell = self.pcie_write_s
        wqe_fetch = self.pcie_rtt_s if self.control == "ibgda" else 0.0  # proxy: BlueFlame
        return doorbell + wqe_fetch

    def receive_s(self, size: NDArray[np.float64]) -> NDArray[np.float64]:
        """After the NIC's DMA write lands: host→GPU copy (bounce) and noticing the arrival."""
        return self.bounce_copy_s(size) + self.recv_poll_s

    def isolated_latency_s(self, size: float) -> float:
        """Endpoint share of one message's latency on an idle endpoint, the data path the
        fabric charges (``endpoint_costs.data_path_fixed_s``) not included."""
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
