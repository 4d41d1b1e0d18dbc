"""Compiled steps of the open- and closed-loop traffic workloads (``workloads.traffic``).

A workload draws its random numbers with numpy's generator, in the order it always has
(so a seed gives the same flows); what it does with them, per flow, is a loop here.
The numpy version of the same steps cost about twenty small array calls a tick, a
large share of a quiet tick of the default scenario.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.kernels._jit import inline_kernel, kernel

_I64 = NDArray[np.int64]
_F = NDArray[np.float64]


@kernel
def repeat_senders(senders: NDArray[np.int32], counts: _I64) -> _I64:
    """Each sender ``counts[i]`` times, in order (``np.repeat``; negative counts as 0)."""
    n = 0
    for i in range(senders.size):
        n += max(counts[i], 0)
    src = np.empty(n, dtype=np.int64)
    k = 0
    for i in range(senders.size):
        for _ in range(counts[i]):
            src[k] = senders[i]
            k += 1
    return src


@kernel
def top_up(senders: NDArray[np.int32], in_flight: _I64, outstanding: int) -> _I64:
    """Each sender once per flow it is short of ``outstanding`` (in sender order)."""
    counts = np.empty(senders.size, dtype=np.int64)
    for i in range(senders.size):
        counts[i] = outstanding - in_flight[senders[i]]
    return repeat_senders(senders, counts)


@inline_kernel
def _peer(src: int, pool: NDArray[np.int32], pick: int) -> int:
    """``pool[pick]``, skipping ``src``'s own place in the (sorted) ``pool``."""
    last = pool.size - 1
    pos = np.searchsorted(pool, src)  # side="left": the source's place if there
    if pos <= last and pool[pos] == src and pick >= pos:
        pick += 1
    return int(pool[min(pick, last)])


@kernel
def random_peers(src: _I64, pool: NDArray[np.int32], pick: _I64) -> _I64:
    """``pool[pick[i]]`` for each source, skipping the source's own place in the (sorted)
    ``pool``: ``pick`` is uniform on ``0 .. pool.size - 2``, so every other endpoint is
    equally likely and the source never picks itself."""
    dst = np.empty(src.size, dtype=np.int64)
    for i in range(src.size):
        dst[i] = _peer(src[i], pool, pick[i])
    return dst


@kernel
def uniform_peers(
    senders: NDArray[np.int32], sender: _I64, u: _F, pool: NDArray[np.int32]
) -> NDArray[np.int64]:
    """Sources and peers of arrivals, as rows 0 and 1: arrival ``i`` comes from
    ``senders[sender[i]]`` and goes to a peer uniform over the rest of ``pool``, its
    uniform number ``u[i]`` (on [0, 1)) scaled to a place on ``0 .. pool.size - 2``
    (``random_peers``). One array, not two: numba boxes each array a kernel returns."""
    n = sender.size
    out = np.empty((2, n), dtype=np.int64)
    for i in range(n):
        src = int(senders[sender[i]])
        out[0, i] = src
        # (int: toward zero, as numpy's astype; u is never negative)
        out[1, i] = _peer(src, pool, min(int(u[i] * (pool.size - 1)), pool.size - 2))
    return out


@kernel
def hotspot_peers(
    src: _I64,
    dst: _I64,
    pool: NDArray[np.int32],
    u: _F,
    hot_pick: _I64,
    fraction: float,
) -> None:
    """Send flow ``i`` to hotspot ``pool[hot_pick[i]]`` instead (in place) when
    ``u[i] < fraction``, unless that is its own source."""
    for i in range(src.size):
        if u[i] < fraction:
            hot = pool[hot_pick[i]]
            if hot != src[i]:
                dst[i] = hot


@kernel
def count_started(in_flight: _I64, src: _I64) -> None:
    """One more flow in flight per source listed (``np.add.at``)."""
    for i in range(src.size):
        in_flight[src[i]] += 1


@kernel
def count_finished(in_flight: _I64, src: _I64) -> None:
    """One flow fewer in flight per source listed (``np.subtract.at``)."""
    for i in range(src.size):
        in_flight[src[i]] -= 1
