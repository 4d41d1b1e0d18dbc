"""The scale-up domain: GPUs of one node reach each other over NVLink through an NVSwitch,
not through their NICs and the fabric.

A topology groups its GPUs into nodes of ``gpus_per_node`` consecutive GPUs (``[topology]
gpus_per_node`` in a scenario; 1, the default, means no scale-up domain: every GPU is its
own node and every message to another GPU takes the NIC). A message between two GPUs of
one node is an NVLink put issued by the sending kernel (DeepEP's low-latency kernels with
``allow_nvlink_for_low_latency_mode``, deepseek-ai/DeepEP PR #173): GPU threads store the
payload into the peer's memory and then a flag the peer polls. So it costs no WQE post, no
doorbell, no NIC, no PCIe DMA and none of the fabric's data path; what it costs is

* **bandwidth**: every GPU has one egress and one ingress NVLink port of
  ``ScaleUpParams.payload_Bps``; the NVSwitch is non-blocking, so the only contention is at
  the ports. Concurrent messages share them max-min fairly (``fabric_core.tick.kernels.scaleup``:
  an exact fluid model, event by event within a tick, so tick-independent);
* **latency**: ``latency_s`` once per message, after its last byte has moved (from the
  sender's stores to the receiver seeing the flag; the receiver's poll is in it).

A message from a GPU to itself is a copy within its own memory: it crosses no port and
costs the latency alone (an upper bound: a local copy needs no NVSwitch traversal).

``ScaleUpParams`` holds the figures, each with its source (``docs/ENDPOINTS.md``'s table is
generated from the metadata, ``python -m fabric_core.reports.endpoints_doc``);
``fabric_core.tick.scaleup.ScaleUpDomain`` the messages in flight, vectorised over all nodes
of a fabric.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabric_core.sourced import param, parameter_sources, with_checked_overrides

#: Source of the domain size itself (a topology key, not a parameter of the link class).
GPUS_PER_NODE_SOURCE = (
    "[topology] gpus_per_node: consecutive GPU ids form one NVSwitch domain. DGX / HGX H100: "
    "8 GPUs, all 18 NVLink 4 links of each GPU to 4 NVSwitch chips (NVIDIA DGX H100 "
    "datasheet); GB200 NVL72: 72 GPUs in one domain (NVIDIA GB200 NVL72 datasheet). Default 1: "
    "no scale-up domain (every GPU its own node, every peer over the NIC)"
)


@dataclass(frozen=True, slots=True)
class ScaleUpParams:
    """The intra-node link class (NVLink through NVSwitch), each figure with its source."""

    link_Bps: float = param(
        450e9,
        "NVLink bandwidth per GPU per direction, H100 SXM5 (NVLink 4): 18 links x 25 GB/s = "
        "450 GB/s (NVIDIA H100 Tensor Core GPU datasheet: 900 GB/s, both directions; NVIDIA "
        "Hopper architecture whitepaper: 18 fourth-generation links, 50 GB/s each both "
        "directions). Through NVSwitch every GPU reaches every other at this rate",
        "B/s",
    )
    efficiency: float = param(
        0.835,
        "payload share of link_Bps a GPU reaches: unidirectional P2P writes between the 8 "
        "GPUs of an HGX H100 SXM 371-377 GB/s of 450 (cuda-samples p2pBandwidthLatencyTest, "
        "NVIDIA/nccl issue #1264), i.e. 0.82-0.84; DeepSeek measure ~160 of 200 GB/s nominal "
        "on H800 (0.80; DeepEP issue #16, DeepSeek-V3 report). 376 / 450 = 0.835 taken "
        "(range 0.80-0.85)",
    )
    latency_s: float = param(
        1.0e-6,
        "fixed cost of one message, from the sender's first store to the receiver seeing its "
        "flag (the receiver's poll included; no kernel launch: the kernel is running, as on "
        "the RDMA path): an assumption, 1 µs (range 0.6-3.4 µs: NCCL's tuning model, "
        "src/graph/tuning.cc hwLatencies, charges an NVLink hop 0.6 µs with its LL protocol, "
        "where the flag travels with the data, and 3.4 µs with Simple, data then a fenced "
        "flag; cuda-samples p2pBandwidthLatencyTest measures 1.8-2.3 µs P2P write latency "
        "over NVLink, a copy-engine launch included, cuda-samples issue #230). DeepEP's "
        "NVLink path stores the data, then a release flag: between LL and Simple",
        "s",
    )

    def __post_init__(self) -> None:
        if not self.link_Bps > 0:
            raise ValueError(f"link_Bps must be > 0, got {self.link_Bps!r}")
        if not 0 < self.efficiency <= 1:
            raise ValueError(f"efficiency must be in (0, 1], got {self.efficiency!r}")
        if not self.latency_s >= 0:
            raise ValueError(f"latency_s must be >= 0, got {self.latency_s!r}")

    @property
    def payload_Bps(self) -> float:
        """Payload rate of one GPU's port, per direction."""
        return self.link_Bps * self.efficiency

    def with_overrides(self, **overrides: Any) -> ScaleUpParams:
        """A copy with some parameters changed.

        Raises:
            ValueError: an unknown name, a value that is not a number, or out of range.
        """
        return with_checked_overrides(self, overrides, label="scale-up")

    @classmethod
    def parameter_sources(cls) -> list[tuple[str, str, str, Any]]:
        """(name, unit, source, default) for every parameter (the docs are generated from it)."""
        return parameter_sources(cls)

    def isolated_s(self, size: float) -> float:
        """One message alone between two GPUs of a node: its bytes at the port rate + latency."""
        return size / self.payload_Bps + self.latency_s
