"""The scale-up domain's messages in flight: NVLink puts between the GPUs of a node, one
tick at a time (the model and its figures: ``fabric_core.net.scaleup``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.scaleup import ScaleUpParams
from fabric_core.tick.lazy import LazyModule

if TYPE_CHECKING:
    from fabric_core.tick.kernels import scaleup as scaleup_kernels
else:  # numba is imported when a kernel is first called (fabric_core.tick.lazy)
    scaleup_kernels = LazyModule("fabric_core.tick.kernels.scaleup")


@dataclass
class ScaleUpDone:
    """Messages whose completion the receiver has seen (arrays of one length)."""

    tag: NDArray[np.int64]
    src: NDArray[np.int64]
    dst: NDArray[np.int64]
    size: NDArray[np.float64]
    finish_s: NDArray[np.float64]

    def __len__(self) -> int:
        return int(self.tag.size)


class ScaleUpDomain:
    """The NVSwitch domains of a fabric: the messages in flight over them and their counters.

    ``domain_of`` gives every node id its domain (-1: in none, e.g. a storage target);
    per-node arrays are indexed by node id. ``send`` queues messages (they move from their
    start time), ``advance`` runs one tick and returns the messages completed in it.
    """

    def __init__(self, params: ScaleUpParams, domain_of: NDArray[np.int64]) -> None:
        self.params = params
        self.domain_of = domain_of.astype(np.int64)
        n = self.domain_of.size
        self.n_nodes = n
        z = np.zeros(0)
        zi = np.zeros(0, dtype=np.int64)
        self._src, self._dst, self._tag = zi, zi, zi
        self._size, self._left, self._start, self._done_at = z, z, z, z
        self.sent_messages = np.zeros(n, dtype=np.int64)
        self.sent_bytes = np.zeros(n)
        self.received_bytes = np.zeros(n)
        self.events = 0  # rate recomputations of the fluid model (a cost figure)

    def same_domain(self, src: NDArray[np.int64], dst: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Which (src, dst) pairs are in one domain (and so go over it, not the NIC)."""
        d = self.domain_of
        out: NDArray[np.bool_] = (d[src] >= 0) & (d[src] == d[dst])
        return out

    @property
    def in_flight(self) -> int:
        """Messages sent and not yet completed."""
        return int(self._src.size)

    def send(
        self,
        src: NDArray[np.int64],
        dst: NDArray[np.int64],
        size: NDArray[np.float64],
        tag: NDArray[np.int64],
        start_s: float | NDArray[np.float64],
    ) -> None:
        """Queue messages (each pair in one domain) that start moving at ``start_s``.

        Raises:
            ValueError: a pair that is not in one domain.
        """
        if src.size == 0:
            return
        if not self.same_domain(src, dst).all():
            raise ValueError("scale-up messages must stay within one domain")
        start = np.broadcast_to(np.asarray(start_s, dtype=np.float64), src.shape)
        own = src == dst  # a copy within the GPU: no port, the latency alone
        self._src = np.concatenate([self._src, src])
        self._dst = np.concatenate([self._dst, dst])
        self._tag = np.concatenate([self._tag, tag])
        self._size = np.concatenate([self._size, size])
        self._left = np.concatenate([self._left, np.where(own, 0.0, size)])
        self._start = np.concatenate([self._start, start])
        self._done_at = np.concatenate([self._done_at, np.where(own, start, np.nan)])
        np.add.at(self.sent_messages, src, 1)
        np.add.at(self.sent_bytes, src, size)
        np.add.at(self.received_bytes, dst, size)

    def advance(self, now_s: float, dt_s: float) -> ScaleUpDone:
        """Move the bytes of [now, now + dt); the messages completed by now + dt, removed."""
        end = now_s + dt_s
        if self._src.size and (self._left > 0).any():
            self.events += scaleup_kernels.advance(
                self._src,
                self._dst,
                self._size,
                self._left,
                self._start,
                self._done_at,
                self.n_nodes,
                self.params.payload_Bps,
                now_s,
                end,
            )
        finish = self._done_at + self.params.latency_s
        done = (self._left <= 0) & (finish < end)  # nan (still moving) compares False
        if not done.any():
            z = np.zeros(0)
            zi = np.zeros(0, dtype=np.int64)
            return ScaleUpDone(zi, zi, zi, z, z)
        out = ScaleUpDone(
            self._tag[done], self._src[done], self._dst[done], self._size[done], finish[done]
        )
        keep = ~done
        self._src, self._dst, self._tag = self._src[keep], self._dst[keep], self._tag[keep]
        self._size, self._left = self._size[keep], self._left[keep]
        self._start, self._done_at = self._start[keep], self._done_at[keep]
        return out

    def bound_s(
        self, src: NDArray[np.int64], dst: NDArray[np.int64], size: NDArray[np.float64]
    ) -> float:
        """A lower bound on the time these messages take when sent together: the busiest
        port's bytes at the port rate, plus one latency (0 for no message)."""
        if src.size == 0:
            return 0.0
        cross = src != dst
        n = self.n_nodes
        out_b = np.bincount(src[cross], weights=size[cross], minlength=n)
        in_b = np.bincount(dst[cross], weights=size[cross], minlength=n)
        busiest = float(max(out_b.max(initial=0.0), in_b.max(initial=0.0)))
        return busiest / self.params.payload_Bps + self.params.latency_s
