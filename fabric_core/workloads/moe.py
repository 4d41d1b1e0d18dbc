"""MoE expert-parallel all-to-all in the DeepEP low-latency style (dispatch, compute, combine).

Per layer, each of the ``ranks`` GPUs of the expert-parallel group holds
``tokens_per_rank`` tokens; each token goes to ``top_k`` distinct experts drawn
uniformly from ``experts`` (experts are spread evenly over the ranks). Dispatch
sends one message per (token, expert) of ``16 + hidden + hidden/128 * 4`` bytes
(FP8 with per-128 scales: 7,408 B at hidden 7168) or ``16 + 2 * hidden`` (BF16:
14,352 B); after the expert compute, combine sends one BF16 message back per
(token, expert). Then attention compute, and the next layer.

Every message to a GPU of another node goes through the endpoint model (IBGDA or
CPU proxy posting, GDR or bounce data path) before the fabric. A message to a GPU
of the sender's own node (``[topology] gpus_per_node`` > 1) goes over the scale-up
domain instead (``fabric_core.net.scaleup``: an NVLink put through the NVSwitch, as
DeepEP's low-latency kernels do with ``allow_nvlink_for_low_latency_mode``): no WQE,
no NIC, no PCIe; its bytes share the GPUs' NVLink ports and it pays the NVLink
latency. With one GPU per node (the default) a message whose expert lives on the
sender's own rank does not cross the fabric: it completes when posted plus the
receive cost (the fabric has no loopback path). Phases are synchronous across the
group: a phase ends when its last message is received, over the fabric or NVLink.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabric_core.endpoints.model import EndpointModel, EndpointParams, fault_masks
from fabric_core.tick.scaleup import ScaleUpDomain
from fabric_core.workloads.base import (
    Completions,
    FlowRequests,
    Workload,
    WorkloadHost,
    pick_endpoints,
)

TAG_SHIFT = 32  # a message's tag: phase << 32 | index (unique per message: routing hashes it)


def _tags(phase: int, n: int) -> NDArray[np.int64]:
    return (np.int64(phase) << TAG_SHIFT) + np.arange(n, dtype=np.int64)


def nic_payload_Bps(fabric: WorkloadHost) -> NDArray[np.float64]:
    """Each node's NIC payload line rate (all its planes' ports; infinite for a node
    without one): link bandwidth × MTU / (MTU + headers)."""
    topo, prof = fabric.topo, fabric.profile
    up = topo.ep_uplink
    bw = np.where(up >= 0, topo.links.bandwidth_Bps[np.maximum(up, 0)], 0.0).sum(axis=1)
    payload = bw * prof.mtu_bytes / (prof.mtu_bytes + prof.header_bytes)
    return np.where(payload > 0, payload, np.inf)


#: The dispatch's number formats (``dispatch_bytes``; a scenario's ``dispatch_dtype``)
DISPATCH_DTYPES = ("fp8", "bf16")


def dispatch_bytes(hidden: int, dtype: str) -> float:
    """DeepEP low-latency message per token: 16 B header + payload (+ FP8 scales per 128)."""
    if dtype == "fp8":
        return float(16 + hidden + hidden // 128 * 4)
    if dtype == "bf16":
        return float(16 + 2 * hidden)
    raise ValueError(f"dtype: expected {' or '.join(map(repr, DISPATCH_DTYPES))}, got {dtype!r}")


#: Random draws of one dispatch's router at most (8 bytes each: 1 GiB); DeepEP's tests
#: route 128-4,096 tokens a rank over up to 256 experts, some 10^6 draws a rank.
MAX_ROUTER_DRAWS = 1 << 27


@dataclass
class MoEAllToAll(Workload):
    """DeepEP-style MoE dispatch/combine; see the module docstring."""

    kind: str = "moe"
    ranks_spec: Any = 8
    tokens_per_rank: int = 128
    top_k: int = 8
    hidden: int = 7168
    experts: int = 0  # 0: 32 per rank (DeepSeek-V3: 256 experts on EP8)
    dispatch_dtype: str = "fp8"
    layers: int = 0  # 0 = forever
    expert_compute_s: float = 20e-6
    attention_compute_s: float = 50e-6
    endpoint: EndpointParams = field(default_factory=EndpointParams)
    ranks: NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    ep: EndpointModel | None = None
    phase: str = "dispatch"
    phase_seq: int = 0
    phase_start_s: float = 0.0
    phase_end_s: float = 0.0
    left: int = 0
    layer: int = 0
    msg_src: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    msg_dst: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    comm_s: float = 0.0
    bytes_per_phase: dict[str, float] = field(default_factory=dict)
    bw_sum: float = 0.0
    bw_n: int = 0
    failed: int = 0
    last: dict[str, float] = field(default_factory=dict)
    #: the GPUs' scale-up domain (None with one GPU per node: every peer over the NIC)
    scaleup: ScaleUpDomain | None = None
    scaleup_messages: int = 0
    scaleup_bytes: float = 0.0
    all_bytes: float = 0.0
    _phase_scaleup: int = 0  # messages of the current phase over the scale-up domain
    _scaleup_end_s: float = 0.0  # the latest of them completed
    _first_post_due: bool = True
    _next_dispatch_s: float = 0.0
    _rng: np.random.Generator = field(default_factory=np.random.default_rng)

    def __post_init__(self) -> None:
        for name in ("tokens_per_rank", "top_k", "hidden"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        self.dispatch_size = dispatch_bytes(self.hidden, self.dispatch_dtype)
        self.combine_size = dispatch_bytes(self.hidden, "bf16")

    def bind(
        self, gpus: NDArray[np.int32], storage: NDArray[np.int32], rng: np.random.Generator
    ) -> None:
        self.ranks = pick_endpoints(self.ranks_spec, gpus, rng, f"workload {self.name!r} ranks")
        n = self.ranks.size
        if n < 2:
            raise ValueError(f"workload {self.name!r}: expert parallelism needs at least 2 ranks")
        if self.experts == 0:
            self.experts = 32 * n
        if self.experts % n:
            raise ValueError(
                f"workload {self.name!r}: experts ({self.experts}) must be a multiple of ranks ({n})"
            )
        if self.top_k > self.experts:
            raise ValueError(f"workload {self.name!r}: top_k > experts")
        draws = n * self.tokens_per_rank * self.experts
        if draws > MAX_ROUTER_DRAWS:
            raise ValueError(
                f"workload {self.name!r}: the router draws one number per token and expert, "
                f"{draws:.3g} a dispatch ({n} ranks x {self.tokens_per_rank} tokens x "
                f"{self.experts} experts); at most {MAX_ROUTER_DRAWS:.3g} (1 GiB) fit: "
                "fewer tokens_per_rank or experts"
            )
        self.ep = EndpointModel(self.endpoint, int(gpus.max()) + 1)
        # the router's generator, from the workload's own stream (workloads.base.workload_rngs):
        # two MoE workloads of one scenario route their tokens each its own way
        self._rng = np.random.default_rng(int(rng.integers(1 << 31)))

    def attach(self, fabric: WorkloadHost) -> None:
        super().attach(fabric)
        assert self.ep is not None
        self.ep.wire_Bps = nic_payload_Bps(fabric)[: self.ep.n_nodes]
        topo = fabric.topo
        if topo.gpus_per_node > 1:
            self.scaleup = ScaleUpDomain(topo.scaleup, topo.node_domains())

    def _intra_node(self, src: NDArray[np.int64], dst: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Which messages go over the scale-up domain (both GPUs in one node)."""
        if self.scaleup is None:
            return np.zeros(src.size, dtype=bool)
        return self.scaleup.same_domain(src, dst)

    def nic_bounds_s(self) -> tuple[float, float]:
        """(dispatch, combine) lower bounds of the last layer routed: the busiest NIC's
        messages to other nodes (sent or received) at its payload line rate. No schedule
        beats it. With one GPU per node every message to another GPU counts."""
        remote = (self.msg_src != self.msg_dst) & ~self._intra_node(self.msg_src, self.msg_dst)
        rate = nic_payload_Bps(self.fabric)
        n = rate.size
        sent = np.bincount(self.msg_src[remote], minlength=n)
        got = np.bincount(self.msg_dst[remote], minlength=n)
        busiest = float(np.max(np.maximum(sent, got) / rate))
        return busiest * self.dispatch_size, busiest * self.combine_size

    def scaleup_bounds_s(self) -> tuple[float, float]:
        """(dispatch, combine) lower bounds of the last layer's messages within nodes: the
        busiest NVLink port's bytes at its payload rate plus one NVLink latency (0, 0 with no
        scale-up domain or no such message)."""
        if self.scaleup is None:
            return 0.0, 0.0
        intra = self._intra_node(self.msg_src, self.msg_dst)
        if not intra.any():
            return 0.0, 0.0
        s, d = self.msg_src[intra], self.msg_dst[intra]
        one = np.ones(s.size)
        return (
            self.scaleup.bound_s(s, d, one * self.dispatch_size),
            self.scaleup.bound_s(d, s, one * self.combine_size),
        )

    # ------------------------------------------------------------------ phases
    def _route_tokens(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(src, dst) node ids of one dispatch: top-k distinct experts per token."""
        n = self.ranks.size
        t = n * self.tokens_per_rank
        keys = self._rng.random((t, self.experts))
        chosen = np.argpartition(keys, self.top_k - 1, axis=1)[:, : self.top_k]
        dst_rank = (chosen // (self.experts // n)).ravel()
        src_rank = np.repeat(np.arange(n), self.tokens_per_rank * self.top_k)
        return self.ranks[src_rank].astype(np.int64), self.ranks[dst_rank].astype(np.int64)

    def _start_phase(
        self, name: str, src: NDArray[np.int64], dst: NDArray[np.int64], at_s: float
    ) -> None:
        assert self.ep is not None
        self.phase = name
        self.phase_seq += 1
        self.phase_start_s = at_s
        self.phase_end_s = at_s
        size = self.dispatch_size if name == "dispatch" else self.combine_size
        sizes = np.full(src.size, size)
        tags = _tags(self.phase_seq, src.size)
        intra = self._intra_node(src, dst)
        ok = np.ones(src.size, dtype=bool)
        if intra.any():
            # NVLink puts: no WQE, so a version_mismatch fault (WQE posts) does not touch them
            assert self.scaleup is not None
            self.scaleup.send(src[intra], dst[intra], sizes[intra], tags[intra], at_s)
            self.scaleup_messages += int(intra.sum())
            self.scaleup_bytes += float(sizes[intra].sum())
        far = ~intra
        fail, hang = fault_masks(self.fabric.topo.nodes, self.fabric.faults)
        ok[far] = self.ep.post(
            src[far],
            dst[far],
            sizes[far],
            tags[far],
            np.full(int(far.sum()), at_s),
            fail=fail,
            hang=hang,
        )
        self._phase_scaleup = int(intra.sum())
        self._scaleup_end_s = at_s
        self.failed += int((~ok).sum())
        self.left = int(ok.sum())
        self.all_bytes += float(sizes[ok].sum())
        self.bytes_per_phase[name] = float(sizes.sum()) / self.ranks.size
        if name == "dispatch":
            self.msg_src, self.msg_dst = src[ok], dst[ok]
        if self.left == 0:
            self._end_phase(at_s)

    def _end_phase(self, end_s: float) -> None:
        t = max(end_s - self.phase_start_s, 0.0)
        self.comm_s += t
        self.histogram(f"{self.phase}_seconds").observe_many(np.array([t]))
        self.last[self.phase] = t
        self.last[f"{self.phase}_scaleup"] = (
            self._scaleup_end_s - self.phase_start_s if self._phase_scaleup else float("nan")
        )
        if t > 0:
            self.bw_sum += self.bytes_per_phase[self.phase] / t
            self.bw_n += 1
        if self.phase == "dispatch":
            # DeepEP's combine posts from one warp group per (peer, expert) at once, so a GPU's
            # messages reach its NIC interleaved across peers, in no fixed order; taken in
            # dispatch order they would go to one peer after another and every GPU would
            # send to the same peer at once
            order = self._rng.permutation(self.msg_src.size)
            self._start_phase(
                "combine", self.msg_dst[order], self.msg_src[order], end_s + self.expert_compute_s
            )
        else:
            self.layer += 1
            self.phase = "between"
            self._next_dispatch_s = end_s + self.attention_compute_s

    # ------------------------------------------------------------------ tick
    def generate(self, now_s: float, dt_s: float, rng: np.random.Generator) -> FlowRequests:
        assert self.ep is not None
        if self._first_post_due and self.running:
            self._first_post_due = False
            src, dst = self._route_tokens()
            self._start_phase("dispatch", src, dst, now_s)
        elif (
            self.phase == "between"
            and self.running
            and (self.layers == 0 or self.layer < self.layers)
            and self._next_dispatch_s < now_s + dt_s
        ):
            src, dst = self._route_tokens()
            self._start_phase("dispatch", src, dst, max(self._next_dispatch_s, now_s))
        if self.scaleup is not None:
            over = self.scaleup.advance(now_s, dt_s)
            if len(over):
                self._done(over.tag, over.src, over.finish_s, nic=False)
        req, _ = self.ep.release(now_s, dt_s)
        if len(req) == 0:
            return req
        local = req.src == req.dst
        if local.any():
            assert req.extra_latency_s is not None
            finish = req.ready_s[local] + req.extra_latency_s[local]
            self._done(req.tag[local], req.src[local], finish)
            keep = ~local
            req = FlowRequests(
                req.src[keep],
                req.dst[keep],
                req.size_bytes[keep],
                req.tag[keep],
                req.ready_s[keep],
                req.extra_latency_s[keep],
            )
        return req

    def flows_at_once(self) -> tuple[int, str] | None:
        # (an upper bound: a token's expert on its own rank, or over NVLink, is no flow,
        # and the endpoint model posts a GPU's messages one after another)
        n = int(self.ranks.size) * self.tokens_per_rank * self.top_k
        return n, (
            f"posts up to {n:,} flows a dispatch ({self.ranks.size:,} ranks x "
            f"{self.tokens_per_rank:,} tokens x top-{self.top_k})"
        )

    def quiet_until(self, now_s: float, dt_s: float) -> float:
        if self.ep is None or (self._first_post_due and self.running):
            return now_s
        if self.scaleup is not None and self.scaleup.in_flight:
            return now_s  # NVLink transfers move every tick
        until = self.ep.quiet_until(now_s, dt_s)
        if (
            self.phase == "between"
            and self.running
            and (self.layers == 0 or self.layer < self.layers)
        ):
            until = min(until, self._next_dispatch_s - dt_s)  # (``generate``'s test)
        return until

    def _done(
        self,
        tag: NDArray[np.int64],
        src: NDArray[np.int64],
        finish: NDArray[np.float64],
        *,
        nic: bool = True,
    ) -> None:
        """Messages received (``nic``: over the fabric, their WQEs complete; else over the
        scale-up domain)."""
        assert self.ep is not None
        if nic:
            self.ep.complete(src)
        mine = (tag >> TAG_SHIFT) == self.phase_seq
        if not mine.any():
            return
        self.left -= int(mine.sum())
        self.phase_end_s = max(self.phase_end_s, float(finish[mine].max()))
        if not nic:
            self._scaleup_end_s = max(self._scaleup_end_s, float(finish[mine].max()))
        self.histogram("message_seconds").observe_many(finish[mine] - self.phase_start_s)
        if self.left == 0:
            self._end_phase(self.phase_end_s)

    def on_complete(self, done: Completions, now_s: float) -> None:
        self._done(done.tag, done.src, done.finish_s)

    def kpis(self, now_s: float) -> Mapping[str, float]:
        def q(name: str, p: float) -> float:
            h = self.histograms.get(name)
            return h.freeze().quantile(p) if h is not None else float("nan")

        out = {
            "layers_completed": float(self.layer),
            "dispatch_p50_seconds": q("dispatch_seconds", 0.5),
            "dispatch_p99_seconds": q("dispatch_seconds", 0.99),
            "combine_p50_seconds": q("combine_seconds", 0.5),
            "combine_p99_seconds": q("combine_seconds", 0.99),
            "dispatch_last_seconds": self.last.get("dispatch", float("nan")),
            "combine_last_seconds": self.last.get("combine", float("nan")),
            "rdma_bytes_per_second_per_rank": self.bw_sum / self.bw_n
            if self.bw_n
            else float("nan"),
            "gpu_comm_wait_fraction": self.comm_s / now_s if now_s > 0 else 0.0,
            "messages_failed": float(self.failed),
            "messages_outstanding": float(self.left),
            # the scale-up domain (NVLink within a node; 0 / nan with one GPU per node)
            "scaleup_messages_total": float(self.scaleup_messages),
            "scaleup_bytes_total": self.scaleup_bytes,
            "scaleup_byte_fraction": self.scaleup_bytes / self.all_bytes if self.all_bytes else 0.0,
            "dispatch_scaleup_last_seconds": self.last.get("dispatch_scaleup", float("nan")),
            "combine_scaleup_last_seconds": self.last.get("combine_scaleup", float("nan")),
        }
        if self.ep is not None:
            out.update(self.ep.kpis(self.ranks, now_s))
            # messages, not WQEs: a message over NVLink posts none
            sent = float(self.ep.posted[self.ranks].sum()) + self.scaleup_messages
            out["message_rate_per_second_per_rank"] = (
                sent / self.comm_s / self.ranks.size if self.comm_s > 0 else float("nan")
            )
        return out
