"""The flow table's slot bookkeeping, compiled: work that grows with the flows that start
and finish, never with the table's capacity (which stays at the largest burst seen)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.kernels._jit import kernel

_I = NDArray[np.intp]


@kernel
def lowest_free(active: NDArray[np.bool_], held: NDArray[np.bool_], n: int) -> _I:
    """The ``n`` lowest slots neither active nor held (fewer when the table is full).

    Lowest first keeps the flows in flight packed at the start of the table, so this
    scan stops after about as many slots as there are flows in flight.
    """
    out = np.empty(n, dtype=np.intp)
    k = 0
    for s in range(active.size):
        if k == n:
            break
        if not active[s] and not held[s]:
            out[k] = s
            k += 1
    return out[:k]


@kernel
def retire(
    parent: _I,
    pending: NDArray[np.int32],
    latest_finish_s: NDArray[np.float64],
    held: NDArray[np.bool_],
    slots: _I,
    finish_s: NDArray[np.float64],
) -> _I:
    """Count finished sub-flows against their flows (in place); returns the heads of the
    flows that are now whole, in the order their first sub-flow appears in ``slots``.

    A head that finishes before its siblings is held (out of the solve, not reusable)
    until the last one is done.
    """
    heads = np.empty(slots.size, dtype=np.intp)
    for i in range(slots.size):
        h = parent[slots[i]]
        heads[i] = h
        latest_finish_s[h] = max(latest_finish_s[h], finish_s[i])
        pending[h] -= 1
    # each head once, in the order of its first appearance (np.unique's return_index)
    by_head = np.argsort(heads, kind="mergesort")
    firsts = np.empty(slots.size, dtype=np.intp)
    n_heads = 0
    for k in range(by_head.size):
        if k == 0 or heads[by_head[k]] != heads[by_head[k - 1]]:
            firsts[n_heads] = by_head[k]
            n_heads += 1
    firsts = np.sort(firsts[:n_heads])
    order = np.empty(n_heads, dtype=np.intp)
    for j in range(n_heads):
        order[j] = heads[firsts[j]]
    for s in slots:
        if parent[s] == s:
            held[s] = True
    whole = np.empty(n_heads, dtype=np.intp)
    n_whole = 0
    for j in range(n_heads):
        h = order[j]
        if pending[h] <= 0:
            whole[n_whole] = h
            n_whole += 1
            held[h] = False
    return whole[:n_whole]
