"""Fabric profiles: every physical parameter, with its source beside it.

A profile is what distinguishes the native credit-based fabric from RoCEv2 on
the same topology. Each field carries its source in ``metadata["source"]``;
``docs/MODEL.md``'s parameter tables are generated from these (``python -m
console.docgen``), so the docs cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from typing import Any

from fabric_core.net import endpoint_costs as ec
from fabric_core.sourced import param, with_checked_overrides

#: The MTUs an InfiniBand (and so a RoCE) packet may have (IBTA).
IB_MTUS = (256.0, 512.0, 1024.0, 2048.0, 4096.0)
#: What a RoCEv2 packet adds to its IB payload inside the Ethernet MTU (which counts the
#: IP packet): IPv4 20 + UDP 8 + BTH 12 + ICRC 4 B.
ROCE_IP_OVERHEAD_BYTES = 44.0


def roce_mtu(profile: Profile) -> float:
    """The RoCE MTU of a profile: ``roce_mtu_bytes``, or the largest IB MTU that fits.

    Raises:
        ValueError: no IB MTU fits the Ethernet MTU, or ``roce_mtu_bytes`` is not an IB
            MTU or does not fit.
    """
    room = profile.ethernet_mtu_bytes - ROCE_IP_OVERHEAD_BYTES
    fits = [m for m in IB_MTUS if m <= room]
    if not fits:
        raise ValueError(
            f"ethernet_mtu_bytes: {profile.ethernet_mtu_bytes:g} B leaves room for no IB MTU "
            f"(the smallest, 256 B, needs {256 + ROCE_IP_OVERHEAD_BYTES:g})"
        )
    if profile.roce_mtu_bytes == 0:
        return fits[-1]
    if profile.roce_mtu_bytes not in fits:
        raise ValueError(
            f"roce_mtu_bytes: must be 0 or an IB MTU that fits the Ethernet MTU of "
            f"{profile.ethernet_mtu_bytes:g} B ({', '.join(f'{m:g}' for m in fits)}), "
            f"got {profile.roce_mtu_bytes:g}"
        )
    return profile.roce_mtu_bytes


@dataclass(frozen=True, slots=True)
class Profile:
    """Physical parameters of one fabric generation / flow-control family."""

    name: str = param("native-400g", "")
    description: str = param("", "")
    flow_control: str = param("credit", "design: credit-based lossless (native) or PFC (RoCEv2)")
    link_bandwidth_Bps: float = param(
        50e9, "NDR / 400GbE: 400 Gb/s per direction (IBTA, IEEE 802.3)", "B/s"
    )
    mtu_bytes: float = param(
        4096.0,
        "IB MTU 4096 B (IBTA spec); on RoCE it follows roce_mtu_bytes and the Ethernet MTU",
        "B",
    )
    header_bytes: float = param(
        30.0,
        "IB LRH 8 + BTH 12 + ICRC 4 + VCRC 2 + 4 B framing (IBTA spec, packet format)",
        "B",
    )
    switch_latency_s: float = param(
        275e-9,
        "Quantum-2 NDR port-to-port, an assumption: NVIDIA publishes no figure; third-party "
        "pages say < 150 ns, ~330 ns and < 400 ns; the middle of that range, 275 ns "
        "(range 150-400 ns; the claims table sweeps it)",
        "s",
    )
    cut_through: bool = param(True, "IB switches forward cut-through (IBTA; Quantum-2 docs)")
    nic_latency_s: float = param(ec.NIC_PIPELINE_S, ec.NIC_PIPELINE_SOURCE, "s")
    pcie_gen: int = param(
        ec.PCIE_GEN,
        "PCIe generation of the NIC's host link: Gen5 (ConnectX-7: PCIe Gen5 x16, ConnectX-7 "
        "OCP manual); native-800g: Gen6 (ConnectX-8 SuperNIC: PCIe Gen6, NVIDIA product "
        "brief). With pcie_lanes it sets the DMA goodput every payload crosses at "
        "(fabric_core.net.endpoint_costs: GT/s x lanes x line code x TLP efficiency; Gen5 x16 "
        "57.6 GB/s, Gen6 x16 108 GB/s, derived)",
    )
    pcie_lanes: int = param(ec.PCIE_LANES, "PCIe lanes of the NIC's host link: x16 (same sources)")
    pcie_read_latency_s: float = param(ec.PCIE_READ_S, ec.PCIE_READ_SOURCE, "s")
    pcie_write_latency_s: float = param(ec.PCIE_WRITE_S, ec.PCIE_WRITE_SOURCE, "s")
    inline_bytes: float = param(ec.INLINE_BYTES, ec.INLINE_SOURCE, "B")
    host_post_s: float = param(ec.CPU_POST_S, ec.CPU_POST_SOURCE, "s")
    host_poll_s: float = param(ec.RECV_POLL_S, ec.RECV_POLL_SOURCE, "s")
    propagation_s_per_m: float = param(
        5e-9, "fibre: c / n with n ≈ 1.47 → ≈ 4.9–5 ns/m (physics)", "s/m"
    )
    cable_m_endpoint: float = param(3.0, "in-rack DAC/AOC length: a guess (typical 1–5 m)", "m")
    cable_m_leaf_spine: float = param(30.0, "row-scale fibre: a guess (typical 10–50 m)", "m")
    cable_m_spine_core: float = param(100.0, "hall-scale fibre: a guess (typical 50–150 m)", "m")
    buffer_per_vl_bytes: float = param(
        131072.0,
        "per-port per-VL ingress buffer: not published for Quantum-2; a guess, chosen "
        "≥ 2 × the 400G round-trip BDP on 100 m (2 × 50 GB/s × 1 µs = 100 KB) as credit "
        "flow control needs for line rate",
        "B",
    )
    ib_congestion_control: str = param(
        "none",
        "the credit fabric's congestion control: 'none' (credits alone: congestion trees "
        "spread) or 'ibcc' (IB FECN/BECN with a CCT: IBTA Vol. 1 Annex A10, OpenSM's "
        "congestion-control manager; fabric_core.tick.ibcc)",
    )
    ibcc_threshold_bytes: float = param(
        65536.0,
        "IB CC: FECN marking starts when a port's egress queue passes this: a guess, half "
        "a lane's buffer (the IBTA's 4-bit threshold leaves its scale to the switch)",
        "B",
    )
    ibcc_marking_rate: float = param(
        15.0,
        "IB CC: packets between FECN marks on a hot port (one in 16): a guess; the IBTA "
        "field is a mean of packets skipped",
    )
    ibcc_ccti_increase: float = param(
        1.0, "IB CC: CCT index added per BECN (IBTA CCTI_Increase; OpenSM's usual 1)"
    )
    ibcc_ccti_timer_s: float = param(
        50e-6,
        "IB CC: the CCT index falls by one every this long (IBTA CCTI_Timer, in 1.024 µs "
        "units): a guess of 50 µs; a throttled sender settles where its BECNs balance "
        "the timer, MTU × (marking_rate + 1) / timer = 1.3 GB/s at 4 KiB",
        "s",
    )
    ibcc_ccti_limit: float = param(
        127.0, "IB CC: highest CCT index (a 128-entry table; IBTA allows up to 16,384)"
    )
    ibcc_ipd_step: float = param(
        0.125,
        "IB CC: inter-packet delay per CCT index, in packet times (a linear table: index "
        "8 halves the rate, the limit leaves 1/17 of it): a guess",
    )
    virtual_lanes: int = param(
        4, "IB has up to 15 data VLs (IBTA); 4 used here: classes + a reroute lane"
    )
    routing: str = param(
        "adaptive",
        "native: adaptive routing (least-loaded uplink), article C10; one of ecmp, adaptive, "
        "spray (credit fabric only)",
    )
    fault_detect_s: float = param(
        10e-6,
        "link failure seen by the adjacent port (loss of signal / credit watchdog): a guess, µs scale",
        "s",
    )
    reroute_s: float = param(
        2e-3,
        "local fast reroute: NVIDIA SHIELD claims 5,000× faster than a subnet-manager "
        "recompute of ~10 s (enterpriseai.news 2017) → ~2 ms (derived)",
        "s",
    )

    # ------------------------------------------------ recovery (fabric_core.faults.recovery)
    recovery: str = param(
        "auto",
        "how a failed link is routed around: 'fast-reroute' (native: local adaptive reroute, "
        "NVIDIA SHIELD), 'bfd-ecmp' (RoCE: BFD detection then ECMP reconvergence), "
        "'sm-resweep' (IB subnet-manager resweep); 'auto' = fast-reroute on credit fabrics, "
        "bfd-ecmp on PFC fabrics (design)",
    )
    bfd_interval_s: float = param(
        300e-3,
        "BFD receive interval: IBM / Cisco docs give intervals from 300 ms (PARAMETERS.md); "
        "vendor defaults range from 10 ms (Huawei NE8000 TE) via 100 ms (Dell OS9), 200 ms "
        "(Dell OS10), 250 ms (OcNOS) to 800 ms (A10 ACOS)",
        "s",
    )
    bfd_multiplier: int = param(
        3,
        "BFD detect multiplier: detection time = interval × multiplier (RFC 5880 §6.8.4); "
        "default 3 (Dell OS9/OS10, OcNOS, Huawei)",
    )
    ecmp_reconverge_s: float = param(
        0.1,
        "BGP withdrawal + ECMP group / FIB update after BFD declares a session down. An "
        "assumption: no public figure for an AI fabric; its range runs from tens of ms "
        "(a few prefixes, hardware next-hop groups) to about 1 s (a full FIB rewrite); "
        "routing knows of the failure BFD's 0.9 s plus this after it",
        "s",
    )
    local_ack_timeout_s: float = param(
        4.096e-6 * 2**18,
        "RC local ACK timeout: a sender that hears neither ACK nor NAK resends from the "
        "first unacknowledged packet after 4.096 µs × 2^timeout (IBTA, the QP's 5-bit "
        "timeout); NCCL sets timeout 18 by default (NCCL_IB_TIMEOUT, NVIDIA/nccl "
        "src/transport/net_ib.cc; 20 in later releases), 1.07 s. Used where bytes are "
        "lost to a dead link that routing does not know of yet",
        "s",
    )
    go_back_n_rtt_s: float = param(
        0.0,
        "RoCE's go-back-N: a packet lost to a bit error is resent with every packet sent "
        "after it until the receiver's NAK reaches the sender, about one round trip of "
        "bytes at line rate (IBTA RC transport; RoCE NICs without selective repeat). 0 = "
        "the unloaded round trip of the fabric's longest path from this profile's own "
        "figures (Profile.go_back_n_round_trip_s): the two NICs' pipelines and 2 x tiers - "
        "1 switches each way, the fibre of the built-in topologies (3 + 30 + 100 m a side "
        "on 3 tiers), and the packet's serialisation once where switches cut through (once "
        "a link where they do not). 6.1 µs on a 3-tier roce-400g fat-tree, 3.0 µs on a "
        "leaf-spine (derived; until session 39 a fixed 10 µs, a guess). Queueing lengthens "
        "a loaded round trip, so this is a floor",
        "s",
    )
    sm_resweep_s: float = param(
        10.0,
        "IB subnet-manager resweep and LFT reprogramming: '10–20 s' on very large fabrics "
        "(enterpriseai.news 2017); OpenSM's periodic sweep_interval default is 10 s",
        "s",
    )
    credit_watchdog_s: float = param(
        1e-3,
        "time for the port's credit watchdog to notice leaked credits (NVIDIA MLNX-OS "
        "'unbreakable link': credit watchdog); no published interval: a guess",
        "s",
    )
    link_retrain_s: float = param(
        1e-3,
        "link retrain that restores the full credit count after credit loss: no published "
        "figure; a guess (ms scale, as IB link-level recovery is described)",
        "s",
    )

    # ---------------------------------------------------------------- PFC, ECN, DCQCN (RoCE)
    ethernet_mtu_bytes: float = param(
        9000.0,
        "Ethernet MTU of the ports: jumbo frames, as RDMA fabrics run them (NVIDIA's RoCE "
        "configuration guides set MTU 9000 on hosts and switches so that RoCE can use a "
        "4096 B MTU); 1500 is the Ethernet default",
        "B",
    )
    roce_mtu_bytes: float = param(
        0.0,
        "RoCE MTU: 0 = the largest IB MTU (256 … 4096 B) whose RoCEv2 packet (+ IPv4 20, "
        "UDP 8, BTH 12, ICRC 4 B) fits the Ethernet MTU, as the RDMA stack picks it "
        "(1500 → 1024, 9000 → 4096); or one of the IB MTUs that fits",
        "B",
    )
    pfc_buffer_mode: str = param(
        "shared",
        "'shared': a switch's ports share its buffer and each lossless queue pauses at a "
        "dynamic threshold, pfc_alpha × the shared buffer still free (Broadcom's dynamic "
        "threshold; HPCC ns-3 switch-mmu.cc GetPfcThreshold), with headroom reserved per "
        "queue; 'static': a fixed pfc_buffer_bytes per port and priority",
    )
    switch_buffer_bytes: float = param(
        128e6,
        "packet buffer of one switch, shared by its ports: Spectrum-4 (SN5600) 128 MB "
        "(third-party figure, probsee.com; NVIDIA publishes none)",
        "B",
    )
    pfc_alpha: float = param(
        1 / 8,
        "dynamic-threshold factor: a queue may hold 1/8 of the free shared buffer before "
        "it pauses (HPCC ns-3 switch-mmu.cc, pfc_a_shift = 3; PARAMETERS.md)",
    )
    pfc_buffer_bytes: float = param(
        16e6,
        "lossless ingress limit per port and priority when pfc_buffer_mode = 'static': "
        "what the dynamic threshold of free shared buffer / 8 (HPCC ns-3 third.cc) gives on "
        "Spectrum-4's 128 MB shared buffer (probsee.com) while few queues are congested, "
        "16 MB (derived)",
        "B",
    )
    pfc_headroom_bytes: float = param(
        0.0,
        "0 = computed as the mlx5 driver does: (301 + 2.16·cable_m)·speed_Gbps + 2.72·MTU "
        "(Linux mlx5 port_buffer.c calculate_xoff, commit 0696d608); > 0 overrides",
        "B",
    )
    pfc_reaction_s: float = param(
        1e-6,
        "time from XOFF crossing to the upstream sender stopping (pause frame generation, "
        "transmission and MAC response): a guess, µs scale; cable delay is added per link",
        "s",
    )
    pfc_refresh_fraction: float = param(
        0.5,
        "a paused receiver re-sends PAUSE before the quanta it asked for expire: each frame "
        "asks for 65535 quanta of 512 bit times (IEEE 802.1Qbb), so at L b/s the pause lasts "
        "65535·512/L s (84 µs at 400 Gb/s, 336 µs at 100 Gb/s); re-sent at this fraction of "
        "it (half: the usual switch and NIC default, e.g. Linux mlx5 and SONiC; derived)",
        "",
    )
    pfc_watchdog_s: float = param(
        0.2,
        "PFC watchdog: poll 100 ms, detect after 2 polls (Juniper 'cos PFC watchdog')",
        "s",
    )
    pfc_watchdog_recovery_s: float = param(
        0.2, "PFC watchdog recovery period: pause ignored, queue drops (Juniper docs)", "s"
    )
    ecn_kmin_s: float = param(
        32e-6,
        "ECN marking starts above this much queue at the port's line rate: DCQCN production "
        "Kmin = 100 KB × (speed / 25 Gb/s) (HPCC repo mix/config_doc.txt, issue #21) = 32 µs "
        "of line rate, so 1.6 MB at 400G and 400 KB at 100G",
        "s",
    )
    ecn_kmax_s: float = param(
        128e-6,
        "every packet is marked above this much queue at line rate: Kmax = 400 KB × "
        "(speed / 25 Gb/s) (same source) = 128 µs of line rate",
        "s",
    )
    ecn_pmax: float = param(0.2, "DCQCN production: Pmax = 0.2 (same source)", "")
    congestion_control: str = param(
        "dcqcn",
        "the RoCE senders' congestion control: 'dcqcn' (ECN marks → CNPs → rate cuts; "
        "DCQCN, SIGCOMM 2015, as the HPCC repository's Mellanox-style RP runs it), 'swift' (delay-based AIMD on the fabric's queueing "
        "delay; Kumar et al., SIGCOMM 2020) or 'none' (line rate, PFC alone); user "
        "configurable on RoCE NICs, as the article says. The credit fabric has none",
    )
    swift_target_delay_s: float = param(
        20e-6,
        "Swift's target fabric queueing delay: a guess within the tens of µs the Swift "
        "paper's fabric targets span (it scales them with hops and flows; not modelled)",
        "s",
    )
    swift_ai_packets: float = param(
        1.0,
        "Swift additive increase, packets per RTT (Swift paper: ai of about one packet; "
        "public ns-3 ports use 0.5-2)",
    )
    swift_beta: float = param(
        0.8,
        "Swift multiplicative-decrease gain: cut by beta·(delay − target)/delay (Swift "
        "paper §3; public ports use 0.5-0.8)",
    )
    swift_max_mdf: float = param(
        0.5, "Swift's largest cut at once, at most once per RTT (Swift paper §3)"
    )
    # DCQCN as the HPCC repository runs it (simulation/run.py, --cc dcqcn; its
    # Mellanox-style reaction point, rdma-hw.cc *Mlx): one coherent, cited set
    dcqcn_g: float = param(
        1 / 256,
        "DCQCN alpha gain g = 1/256 (HPCC repo simulation/run.py --cc dcqcn, EWMA_GAIN)",
        "",
    )
    dcqcn_alpha_interval_s: float = param(
        1e-6,
        "alpha update period: every 1 µs alpha = (1 − g)·alpha, plus g if a CNP arrived "
        "since the last update (HPCC repo run.py --cc dcqcn ALPHA_RESUME_INTERVAL 1; "
        "rdma-hw.cc UpdateAlphaMlx)",
        "s",
    )
    dcqcn_decrease_interval_s: float = param(
        4e-6,
        "rate-decrease check: every 4 µs, if a CNP arrived since the last check, rate × "
        "(1 − alpha/2) (HPCC repo run.py RATE_DECREASE_INTERVAL 4; rdma-hw.cc "
        "CheckRateDecreaseMlx)",
        "s",
    )
    dcqcn_timer_s: float = param(
        300e-6,
        "rate-increase timer: 300 µs after a cut, then every 300 µs (HPCC repo run.py "
        "--cc dcqcn RP_TIMER 300; its config.txt has 900 and the DCQCN paper 55 µs, range "
        "55-1500 µs); the timer is the only increase (the Mellanox-style RP has no byte "
        "counter)",
        "s",
    )
    dcqcn_fast_recovery_steps: int = param(
        1,
        "F: increase events that only halve the gap to the target rate before additive "
        "increase (HPCC repo run.py FAST_RECOVERY_TIMES 1; the DCQCN paper uses 5)",
    )
    dcqcn_ai_at_25g_Bps: float = param(
        5e6 / 8,
        "additive increase 5 Mb/s at 25 Gb/s, scaled with the port's line rate (80 Mb/s "
        "at 400G) (HPCC repo run.py: ai = 5 × bw / 25 Mb/s)",
        "B/s",
    )
    dcqcn_hai_at_25g_Bps: float = param(
        50e6 / 8,
        "hyper increase 50 Mb/s at 25 Gb/s, scaled with the port's line rate (800 Mb/s at "
        "400G) (HPCC repo run.py: hai = 50 × bw / 25 Mb/s; rdma-hw.cc HyperIncreaseMlx "
        "adds it once per event)",
        "B/s",
    )
    dcqcn_min_rate_Bps: float = param(
        1e9 / 8,
        "a cut never goes below 1 Gb/s (HPCC repo run.py MIN_RATE 1000Mb/s)",
        "B/s",
    )
    dcqcn_clamp_target: bool = param(
        False,
        "a cut sets the target rate to the current rate only after an increase event "
        "(HPCC repo run.py CLAMP_TARGET_RATE 0; rdma-hw.cc CheckRateDecreaseMlx)",
    )
    cnp_interval_s: float = param(
        0.0,
        "the notification point's CNP rate limit per flow; 0: every marked packet's "
        "feedback reaches the sender (HPCC repo: the receiver echoes ECN on every ACK, "
        "L2_ACK_INTERVAL 1). NICs can limit CNPs per QP (the DCQCN paper's N = 50 µs); "
        "with a limit T an interval t sees feedback at most t/T of the time",
        "s",
    )

    def __post_init__(self) -> None:
        ec.pcie_link_Bps(self.pcie_gen, self.pcie_lanes)  # a known generation and width
        # a RoCE port's packets carry the IB MTU that fits its Ethernet MTU
        if self.flow_control == "pfc":
            object.__setattr__(self, "mtu_bytes", roce_mtu(self))

    # ---------------------------------------------------------------- helpers
    def cable_m(self, tier_pair: str) -> float:
        """Cable length for a link between two tiers (``"gpu-leaf"``, ``"leaf-spine"`` ...)."""
        if "gpu" in tier_pair or "stor" in tier_pair:
            return self.cable_m_endpoint
        if "core" in tier_pair:
            return self.cable_m_spine_core
        return self.cable_m_leaf_spine

    def go_back_n_round_trip_s(self, tiers: int = 3) -> float:
        """The round trip whose bytes go-back-N resends after a loss: ``go_back_n_rtt_s``,
        or, where that is 0, the unloaded round trip of the longest path of a fabric of
        ``tiers`` switch tiers (``2 * tiers - 1`` switches, ``2 * tiers`` links) from this
        profile's figures: NIC pipelines, switches and fibre both ways, and the packet's
        serialisation on the way out (once when switches cut through, else once a link;
        the NAK back is one small packet). The NICs' PCIe transfers are not on it: the
        receiving NIC sends the NAK, the sending NIC resends."""
        if self.go_back_n_rtt_s > 0:
            return self.go_back_n_rtt_s
        cable_m = self.cable_m_endpoint + self.cable_m_leaf_spine * (tiers >= 2)
        cable_m += self.cable_m_spine_core * (tiers >= 3)
        one_way = (
            2 * self.nic_latency_s
            + (2 * tiers - 1) * self.switch_latency_s
            + 2 * cable_m * self.propagation_s_per_m
        )
        packet_s = (self.mtu_bytes + self.header_bytes) / self.link_bandwidth_Bps
        return 2 * one_way + packet_s * (1 if self.cut_through else 2 * tiers)

    def with_overrides(self, **overrides: Any) -> Profile:
        """A copy with some parameters changed.

        Raises:
            KeyError: an unknown name.
            ValueError: a value of the wrong kind (``name: expected a number, got ...``;
                ``sourced.with_checked_overrides``) or one the profile refuses.
        """
        known = {f.name for f in fields(self)}
        bad = sorted(set(overrides) - known)
        if bad:
            raise KeyError(f"unknown profile parameter(s): {', '.join(bad)}")
        new = with_checked_overrides(self, overrides, label="profile")
        if "mtu_bytes" in overrides and new.flow_control == "pfc":
            # (``__post_init__`` set it again from those: the value given was dropped unread)
            raise ValueError(
                f"mtu_bytes: a RoCE profile's MTU follows roce_mtu_bytes and "
                f"ethernet_mtu_bytes (the largest IB MTU their frame fits: "
                f"{new.mtu_bytes:g} B here); set those instead"
            )
        for name in overrides:
            check_value(name, getattr(new, name))
        return new

    @classmethod
    def parameter_sources(cls) -> list[tuple[str, str, str]]:
        """(name, unit, source) for every documented parameter."""
        return [
            (f.name, f.metadata.get("unit", ""), f.metadata["source"])
            for f in fields(cls)
            if f.metadata.get("source")
        ]


#: The values ``Profile.routing`` may take (see ``fabric_core.net.routing``).
ROUTING_MODES = ("ecmp", "adaptive", "spray")


#: The values ``Profile.pfc_buffer_mode`` may take (see ``fabric_core.tick.pfc``).
PFC_BUFFER_MODES = ("shared", "static")


#: The values ``Profile.ib_congestion_control`` may take on the credit fabric.
IB_CONGESTION_CONTROLS = ("none", "ibcc")

#: The values ``Profile.congestion_control`` may take on RoCE (see ``fabric_core.tick.pfc``).
CONGESTION_CONTROLS = ("dcqcn", "swift", "none")


#: The values ``Profile.flow_control`` may take: the credit fabric and RoCE's PFC.
FLOW_CONTROLS = ("credit", "pfc")

#: The values ``Profile.recovery`` may take besides ``auto`` (``fabric_core.faults.recovery``).
RECOVERY_MODES = ("fast-reroute", "bfd-ecmp", "sm-resweep")

#: Numbers that must be above 0: rates, sizes and periods the model divides by.
_POSITIVE = frozenset(
    {
        "link_bandwidth_Bps",
        "buffer_per_vl_bytes",
        "ibcc_ccti_timer_s",
        "bfd_interval_s",
        "local_ack_timeout_s",
        "ethernet_mtu_bytes",
        "switch_buffer_bytes",
        "pfc_alpha",
        "pfc_buffer_bytes",
        "pfc_refresh_fraction",
        "pfc_watchdog_s",
        "dcqcn_alpha_interval_s",
        "dcqcn_decrease_interval_s",
        "dcqcn_timer_s",
        "swift_target_delay_s",
    }
)
#: Numbers with both bounds: (least, most). IB's MTUs run from 256 B to 4 KiB and no link
#: layer carries frames past 64 KiB; IB has 15 data lanes (VL0-VL14) and Ethernet 8
#: priorities; the rest are probabilities and fractions.
_BOUNDED: dict[str, tuple[float, float]] = {
    "mtu_bytes": (256.0, 65536.0),
    "virtual_lanes": (1, 15),
    "bfd_multiplier": (1, 255),
    "ecn_pmax": (0.0, 1.0),
    "dcqcn_g": (1e-9, 1.0),
    "swift_beta": (0.0, 1.0),
    "swift_max_mdf": (0.0, 1.0),
}
#: Text parameters and the values they may take.
_CHOICES: dict[str, tuple[str, ...]] = {
    "flow_control": FLOW_CONTROLS,
    "recovery": ("auto", *RECOVERY_MODES),
    "routing": ROUTING_MODES,
    "pfc_buffer_mode": PFC_BUFFER_MODES,
    "ib_congestion_control": IB_CONGESTION_CONTROLS,
    "congestion_control": CONGESTION_CONTROLS,
}


def check_value(name: str, value: Any) -> None:
    """Reject a value of profile parameter ``name`` the model cannot run: a negative or
    non-finite number (a negative latency, a zero link rate), one out of its range, or
    an unknown choice.

    Raises:
        ValueError: ``name: must be ..., got ...``.
    """
    if name in _CHOICES:
        if value not in _CHOICES[name]:
            raise ValueError(f"{name}: must be one of {', '.join(_CHOICES[name])}, got {value!r}")
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        return
    if name in _BOUNDED:
        low, high = _BOUNDED[name]
        if not low <= value <= high:
            raise ValueError(f"{name}: must be in [{low:g}, {high:g}], got {value!r}")
    elif name in _POSITIVE:
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name}: must be > 0, got {value!r}")
    elif not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name}: must be >= 0, got {value!r}")


def check_pfc(profile: Profile) -> None:
    """Reject PFC buffer and congestion-control settings the model cannot run (by
    ``check_value``, which a scenario's overrides meet first).

    Raises:
        ValueError: an unknown ``pfc_buffer_mode``, ``ib_congestion_control`` or
            ``congestion_control``, or a dynamic threshold factor or switch buffer that is
            not positive.
    """
    for name in (
        "pfc_buffer_mode",
        "pfc_alpha",
        "ib_congestion_control",
        "congestion_control",
        "switch_buffer_bytes",
    ):
        check_value(name, getattr(profile, name))


def check_routing(profile: Profile) -> None:
    """Reject a routing mode the fabric cannot model.

    Raises:
        ValueError: ``routing`` is unknown, or ``spray`` on a PFC (RoCE) profile: the
            lossy-Ethernet model routes with ECMP (or adaptively) and has no spraying.
    """
    check_value("routing", profile.routing)
    if profile.routing == "spray" and profile.flow_control != "credit":
        raise ValueError(
            f"routing: 'spray' is modelled on the credit fabric only (flow_control = "
            f"'credit'); profile {profile.name!r} uses {profile.flow_control!r}: "
            "route it with 'ecmp' or 'adaptive'"
        )


NATIVE_400G = Profile(
    name="native-400g",
    description="native credit-based lossless RDMA, cut-through, adaptive routing (scaleFabric/IB NDR class)",
)

NATIVE_800G = dataclasses.replace(
    NATIVE_400G,
    name="native-800g",
    description="next generation: 800 Gb/s links (article C10; XDR class) with packet spraying: every flow spread evenly over up to 8 equal-cost paths; NIC and switch latencies are the 400G parts' (no 800G figures are published)",
    link_bandwidth_Bps=100e9,
    routing="spray",
    pcie_gen=6,
    buffer_per_vl_bytes=262144.0,
)
# Per-field sources of the 800G profile where its value differs from the 400G part's.
NATIVE_800G_SOURCES: dict[str, str] = {
    "link_bandwidth_Bps": "XDR / 800GbE: 800 Gb/s per direction (NVIDIA Quantum-X800 / Spectrum-X800 announcements)",
    "routing": "spray: packet spraying over up to 8 equal-cost paths, the article's next-generation fabric (C10)",
    "buffer_per_vl_bytes": "the 400G part's rule at 800G: ≥ 2 × the round-trip BDP on 100 m (2 × 100 GB/s × 1 µs = 200 KB), so 256 KiB (a guess by the same rule; until session 38 the 400G part's 128 KiB, which holds an 800G link below line rate over 100 m)",
}

ROCE_400G = dataclasses.replace(
    NATIVE_400G,
    name="roce-400g",
    description="RoCEv2 over lossless Ethernet: PFC + ECN/DCQCN, ECMP, cut-through falling back to store-and-forward",
    flow_control="pfc",
    header_bytes=82.0,
    routing="ecmp",
)
# Per-field sources that differ from the native profile (docs read these).
ROCE_SOURCES: dict[str, str] = {
    "mtu_bytes": "RoCE MTU from roce_mtu_bytes: the largest IB MTU whose packet fits the Ethernet MTU (IBM 'set MTU' docs); 4096 with jumbo frames",
    "header_bytes": "Ethernet 14 + FCS 4 + preamble 8 + IFG 12 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 (IEEE 802.3, RFC 791/768, IBTA RoCEv2 annex)",
    "switch_latency_s": "a 51.2 Tb/s Ethernet switch of the same generation (Spectrum-4, Tomahawk 5): no vendor publishes a figure either, so an assumption equal to the IB part's (range 250 ns, Broadcom's Tomahawk Ultra claim, to 850 ns, Arista 7050 datasheet, an older generation; the claims table sweeps it)",
    "routing": "ECMP: a static hash per flow (RFC 2992), so collisions and polarisation happen",
    "cut_through": "Ethernet switches forward cut-through and fall back to store-and-forward when the egress is busy or the speeds differ (Cisco white paper 'Cut-Through and Store-and-Forward Ethernet Switching for Low-Latency Environments')",
}

PROFILES: dict[str, Profile] = {p.name: p for p in (NATIVE_400G, NATIVE_800G, ROCE_400G)}


def register_profile(profile: Profile) -> None:
    """Make a profile available by name (the RoCE module registers its own)."""
    PROFILES[profile.name] = profile


def get_profile(name: str) -> Profile:
    """The profile called ``name``.

    Raises:
        KeyError: naming the known profiles.
    """
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(f"unknown profile {name!r}; known: {', '.join(sorted(PROFILES))}") from None
