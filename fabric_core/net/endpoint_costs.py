"""What a message costs at its two endpoints, split once: NIC pipeline, PCIe transactions,
host posting and completion. The fabric charges it to every flow; the endpoint model
(``fabric_core.endpoints.model``) and the storage paths use the same figures.

For a message of ``S`` bytes (docs/MODEL.md "Latency", docs/ENDPOINTS.md):

* **data path** (every flow, whoever posted it; ``data_path_fixed_s`` + ``pcie_rate_s``):
  the sender NIC's pipeline, its DMA read of the payload (one read round trip before the
  first bytes arrive; the rest streams, pipelined with the wire), the receiver NIC's
  pipeline and its DMA write into memory (a posted write: one way). The payload crosses
  PCIe at ``pcie_Bps``; where that is below the line rate the message is bound by it:
  ``S · (1/pcie_Bps − 1/line rate)`` on top of the wire time.
* **host** (``host_costs_s``): the CPU posts the work request (``ibv_post_send``, the WQE
  written with the doorbell, BlueFlame), the doorbell crosses PCIe one way, and the
  receiver polls its completion queue. A workload that models its own endpoints (the
  GPU-initiated or proxy posting of ``fabric_core.endpoints.model``, the kernel TCP stack of the
  storage and PD TCP paths) hands the fabric its own host costs instead.

Every figure here has a source or is an assumption with its range; ``Profile`` and
``EndpointParams`` take their defaults (and the text of their sources) from this module.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray


class EndpointFigures(Protocol):
    """The endpoint figures of a fabric profile (``net.profiles.Profile`` has them): all
    these formulas read, so this module needs no import of the profiles."""

    @property
    def pcie_gen(self) -> int: ...
    @property
    def pcie_lanes(self) -> int: ...
    @property
    def nic_latency_s(self) -> float: ...
    @property
    def pcie_read_latency_s(self) -> float: ...
    @property
    def pcie_write_latency_s(self) -> float: ...
    @property
    def inline_bytes(self) -> float: ...
    @property
    def host_post_s(self) -> float: ...
    @property
    def host_poll_s(self) -> float: ...


#: PCIe transfer rate per lane (GT/s) by generation (PCI-SIG base specifications 3.0-6.0).
PCIE_GT_PER_LANE = {3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
#: Line-code efficiency by generation: 128b/130b for Gen3-5; Gen6 FLIT mode carries 236 B
#: of TLPs in a 256 B flit (the rest DLP, CRC and FEC; PCIe 6.0 base specification).
PCIE_ENCODING = {3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 236 / 256}
#: Largest TLP payload a DMA write or read completion carries (MPS / read completion
#: boundary): 256 B, the common server setting (an assumption, range 128-512 B).
PCIE_TLP_PAYLOAD_BYTES = 256.0
#: What each TLP adds on the link: header, sequence number, LCRC and framing, 20-26 B
#: (Kalia et al., ATC 2016, "Design guidelines for high performance RDMA systems", fig. 2a);
#: 24 B taken.
PCIE_TLP_OVERHEAD_BYTES = 24.0


def pcie_link_Bps(gen: int, lanes: int) -> float:
    """Bytes per second per direction of a PCIe link after line coding."""
    if gen not in PCIE_GT_PER_LANE:
        raise ValueError(f"pcie_gen: must be one of {sorted(PCIE_GT_PER_LANE)}, got {gen!r}")
    if lanes not in (1, 2, 4, 8, 16):
        raise ValueError(f"pcie_lanes: must be 1, 2, 4, 8 or 16, got {lanes!r}")
    return PCIE_GT_PER_LANE[gen] * 1e9 * lanes * PCIE_ENCODING[gen] / 8


def pcie_dma_Bps(gen: int, lanes: int) -> float:
    """DMA goodput of a PCIe link: its rate after coding, less the per-TLP overhead."""
    tlp = PCIE_TLP_PAYLOAD_BYTES
    return pcie_link_Bps(gen, lanes) * tlp / (tlp + PCIE_TLP_OVERHEAD_BYTES)


PCIE_GEN = 5
PCIE_LANES = 16
#: The one PCIe figure of a host: a Gen5 x16 link's DMA goodput, ≈ 57.6 GB/s (derived).
#: The NIC's DMA reads and writes, the GPU↔host copies of bounce buffers
#: (``EndpointParams.host_copy_Bps``) and of the storage and PD TCP paths
#: (``StorageParams.pcie_Bps``) all run at it.
PCIE_DMA_BPS = pcie_dma_Bps(PCIE_GEN, PCIE_LANES)
PCIE_BPS_SOURCE = (
    "PCIe Gen5 x16 DMA goodput: 32 GT/s x 16 lanes x 128b/130b = 63.0 GB/s per direction "
    "(ConnectX-7 OCP manual, derived), less 24 B of TLP overhead per 256 B payload (Kalia "
    "et al., ATC 2016: 20-26 B per TLP) = 57.6 GB/s (derived; fabric_core.net.endpoint_costs). "
    "The same figure as the profile's pcie_gen x pcie_lanes and StorageParams.pcie_Bps"
)

PCIE_READ_S = 0.6e-6
PCIE_READ_SOURCE = (
    "PCIe round trip of a small DMA read (the NIC reads a WQE or the first bytes of a "
    "payload from host or GPU memory): pcie-bench (Neugebauer et al., SIGCOMM 2018) "
    "~0.5-0.6 µs on Xeon hosts; an FPGA ping over Gen3 850 ns (hackingnasdaq blog, 2014); "
    "0.6 µs chosen in that range (range 0.4-0.9 µs)"
)
PCIE_WRITE_S = 0.15e-6
PCIE_WRITE_SOURCE = (
    "one-way latency of a posted PCIe write (a doorbell MMIO write reaching the NIC, the "
    "NIC's DMA write of data and CQE reaching memory): an assumption, 150 ns (range "
    "100-300 ns: less than half a read round trip, which also waits for the memory "
    "access and the completion)"
)
NIC_E2E_S = 0.6e-6
#: Cable of a back-to-back NIC measurement: the endpoint cable's 3 m at 5 ns/m (the
#: profile's defaults).
_B2B_WIRE_S = 3.0 * 5e-9
#: One NIC's pipeline (transmit or receive processing, no PCIe): what the vendor's
#: end-to-end figure leaves after the two posted PCIe writes it contains and the wire.
NIC_PIPELINE_S = (NIC_E2E_S - 2 * PCIE_WRITE_S - _B2B_WIRE_S) / 2
NIC_PIPELINE_SOURCE = (
    "one NIC's transmit or receive pipeline, PCIe excluded: ConnectX-7 product brief "
    "~600 ns end-to-end for small messages, taken as host-to-host on one cable with the "
    "payload inline in the doorbell write (as perftest sends small messages), so it holds "
    "two posted PCIe writes (doorbell, DMA write at the receiver: 2 x pcie_write_latency_s) "
    "and 3 m of cable (15 ns); (600 - 300 - 15) / 2 = 142.5 ns per side (derived; range "
    "0-190 ns over pcie_write_latency_s' range of 100-300 ns). The PCIe transactions, the CPU's post and "
    "poll are charged separately (fabric_core.net.endpoint_costs)"
)
INLINE_BYTES = 220.0
INLINE_SOURCE = (
    "the largest payload sent inline, inside the work request the doorbell write carries, "
    "so that the NIC reads no payload from memory (no DMA read round trip): perftest's "
    "default for its RDMA-write latency test on ConnectX, DEF_INLINE_WRITE = 220 B "
    "(perftest_parameters.h, 'Optimal Values for Inline'; 236 B for an RC send), the test "
    "the NIC's ~600 ns end-to-end figure (nic_latency_s) comes from. Messages up to it skip "
    "pcie_read_latency_s; an application that posts without IBV_SEND_INLINE pays it (0 B "
    "turns inlining off)"
)
CPU_POST_S = 0.2e-6
CPU_POST_SOURCE = (
    "a CPU thread posts one work request: build the WQE, ibv_post_send with a BlueFlame "
    "write. Kalia et al. (ATC 2016, 'Design guidelines for high performance RDMA "
    "systems') reach a few million posts/s per core, i.e. a few hundred ns each; 200 ns "
    "is a guess in that range (range 100-400 ns)"
)
CUDA_COPY_S = 6.5e-6
CUDA_COPY_SOURCE = (
    "the fixed cost of one CUDA copy between GPU and pinned host memory, beyond its bytes "
    "over PCIe: the call, the copy engine's start and the wait for its completion, the "
    "calling thread busy throughout. NVIDIA's GDRCopy README: 'currently a cudaMemcpy can "
    "incur in a 6-7us overhead' (NVIDIA/gdrcopy README.md); DualPath (Wu et al., arXiv "
    "2602.21548, §5.2): submitting one copy with cudaMemcpyAsync 'incurs a latency "
    "overhead of approximately 5-7 µs' -> 6.5 µs (range 5-7 µs). The call alone, issued "
    "back to back, is ~2.3 µs (taco-project/FlexKV PR #193, H20): the CPU's share when a "
    "thread does not wait. Until session 39 the endpoint model charged 2.5 µs and the "
    "storage model 5 µs for the same copy, both guesses"
)
RECV_POLL_S = 0.5e-6
RECV_POLL_SOURCE = (
    "the receiver notices arrival: a thread polling a completion (a CQE in host memory, "
    "or a flag in GPU memory), one memory access plus a loop iteration: a guess, 500 ns "
    "(range 100 ns, a CPU hitting its cache, to 1 µs, a GPU thread reading HBM)"
)


def pcie_Bps(profile: EndpointFigures) -> float:
    """The profile's PCIe DMA goodput (``pcie_gen`` x ``pcie_lanes``)."""
    return pcie_dma_Bps(profile.pcie_gen, profile.pcie_lanes)


def data_path_fixed_s(profile: EndpointFigures) -> float:
    """Fixed part of every message's endpoint costs: both NIC pipelines, the sender's DMA
    read round trip and the receiver's one-way DMA write (a message sent inline, of at
    most ``inline_bytes``, takes ``inline_saving_s`` off it)."""
    p = profile
    return 2 * p.nic_latency_s + p.pcie_read_latency_s + p.pcie_write_latency_s


def inline_saving_s(
    profile: EndpointFigures, size_bytes: NDArray[np.float64]
) -> NDArray[np.float64]:
    """What inlining takes off ``data_path_fixed_s`` for messages of ``size_bytes``: the
    payload's DMA read round trip, for a payload of at most ``inline_bytes``."""
    return np.where(size_bytes <= profile.inline_bytes, profile.pcie_read_latency_s, 0.0)


def sprayed_read_s(
    profile: EndpointFigures, sub_size: NDArray[np.float64], message_size: NDArray[np.float64]
) -> NDArray[np.float64]:
    """The DMA read a sprayed message's sub-flows pay back: ``lanes_and_costs`` judges
    inlining by the sizes it is given, and a sub-flow small enough to go inline belongs to
    a message that was not (inlining is the message's, posted whole)."""
    return inline_saving_s(profile, sub_size) - inline_saving_s(profile, message_size)


def pcie_rate_s(size_bytes: float, pcie: float, line_Bps: float) -> float:
    """What the payload's PCIe crossing adds to the wire time: ``S/pcie - S/line`` when
    PCIe is the slower (the two are pipelined), else 0."""
    return max(0.0, size_bytes / pcie - size_bytes / line_Bps)


def host_costs_s(profile: EndpointFigures) -> float:
    """A CPU-posted message's host costs: post, doorbell (one posted write), CQ poll."""
    p = profile
    return p.host_post_s + p.pcie_write_latency_s + p.host_poll_s


def breakdown_s(profile: EndpointFigures, size_bytes: float, line_Bps: float) -> dict[str, float]:
    """Every endpoint cost of one CPU-posted message, by component (docs and tests)."""
    p = profile
    return {
        "post": p.host_post_s,
        "doorbell": p.pcie_write_latency_s,
        "nic pipelines": 2 * p.nic_latency_s,
        "DMA read": p.pcie_read_latency_s - float(inline_saving_s(p, np.array(size_bytes))),
        "PCIe rate bound": pcie_rate_s(size_bytes, pcie_Bps(p), line_Bps),
        "DMA write": p.pcie_write_latency_s,
        "poll": p.host_poll_s,
    }
