"""The entry index in one compiled pass: the active (hop, flow) entries, ordered and grouped.

An *entry* is one hop of one active flow. The order is the reference's
(``fabric_core.tick.step.build_index``): by key (link rank, lane, feeds a buffer), and
by flat position ``hop * capacity + flow`` within a key, so both solvers see the
same entries in the same places. A counting sort gives it in two passes over the
flows in flight, both hop by hop, which is the flow table's own order: the first
counts the keys, the second places each entry and links it to the entry of its
upstream hop, placed one row before. The index is rebuilt whenever the set of flows
changes, at a cost linear in the entries (no per-flow Python work).

Besides the per-entry arrays the kernel groups entries by link and by downstream
buffer (CSR: ``*_ptr`` offsets into ``*_ent``), which is what the compiled solver
walks. Only the links and buffers that carry entries are numbered there (``used_links``,
``used_bufs``: compact ids, in the order the entries first name them), so the index, and
the kernels that walk it, cost what the traffic touches, not what the fabric holds: on a
fabric of a million links a tick touches a few percent of them.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.kernels._jit import kernel

_I = NDArray[np.intp]


@kernel
def entry_index(
    path: NDArray[np.int32],
    vl: NDArray[np.int8],
    active: NDArray[np.bool_],
    link_rank: NDArray[np.int64],
    n_ranks: int,
    n_vls: int,
    link_slot: _I,
    buf_slot: _I,
) -> tuple[_I, ...]:
    """Entries of the active flows (see the module docstring).

    ``link_slot`` and ``buf_slot`` (one per link, one per buffer) are scratch, -1
    everywhere on entry and again on return.

    Returns, per entry: ``pos``, ``hop``, ``flow``, ``link``, ``queue`` (link * lanes + lane),
    ``prev_pad``/``nxt_pad`` (the entry one hop up/downstream, ``n`` if none),
    ``buf_pad`` (the downstream buffer, ``n_bufs`` at the last hop),
    ``drains_pad`` (the buffer it drains: its previous hop's, ``n_bufs`` at the
    source), ``first`` (the flow's hop-0 entry); the hop-0 and last-hop entries
    (``heads``, ``last``, in entry order); ``key_ptr`` (entries of key ``k`` are
    ``key_ptr[k]:key_ptr[k + 1]``); then the links with entries: ``used_links`` (link
    ids; by rank, since entries are), ``rank_ptr`` (those of rank ``r`` are
    ``rank_ptr[r]:rank_ptr[r + 1]``), ``link_ptr``/``link_ent`` (entries by used link, in
    entry order) and ``ent_link`` (each entry's used link); the buffers that entries
    feed: ``used_bufs`` (buffer ids, grouped by (rank, lane) in key order),
    ``buf_group_ptr`` (the groups), ``buf_ptr``/``buf_ent`` (entries feeding each used
    buffer, in entry order) and ``lane_buf`` (the used buffer of used link ``k``'s lane
    ``v`` at ``k * n_vls + v``, -1 if none); and whether every path climbs the link
    ranks (``feedforward``, 1 or 0).
    """
    max_hops, cap = path.shape
    n_bufs = link_slot.size * n_vls
    n_keys = n_ranks * n_vls * 2
    live = np.flatnonzero(active)  # one pass over the slots; then only flows in flight
    n_live = live.size
    # each live flow's key per hop (-1 from its first missing hop on), hop by hop: the
    # flow table is hop-major, so a row of ``path`` is read in order, not a column
    keys = np.full((max_hops, n_live), -1, dtype=np.intp)
    key_count = np.zeros(n_keys + 1, dtype=np.intp)
    for h in range(max_hops):
        for j in range(n_live):
            if h > 0 and keys[h - 1, j] < 0:
                continue  # the path ended at an earlier hop
            f = live[j]
            li = path[h, f]
            if li < 0:
                continue
            fed = 1 if h + 1 < max_hops and path[h + 1, f] >= 0 else 0
            key = (link_rank[li] * n_vls + vl[h, f]) * 2 + fed
            keys[h, j] = key
            key_count[key + 1] += 1
    key_ptr = np.cumsum(key_count)
    n = key_ptr[n_keys]
    fill = key_ptr[:-1].copy()
    pos = np.empty(n, dtype=np.intp)
    hop = np.empty(n, dtype=np.intp)
    flow = np.empty(n, dtype=np.intp)
    link = np.empty(n, dtype=np.intp)
    queue = np.empty(n, dtype=np.intp)
    prev_pad = np.empty(n, dtype=np.intp)
    nxt_pad = np.full(n, n, dtype=np.intp)  # set when the next hop's entry is placed
    buf_pad = np.empty(n, dtype=np.intp)
    drains_pad = np.empty(n, dtype=np.intp)
    first = np.empty(n, dtype=np.intp)
    # the entry placed at the previous hop of the j-th flow in flight (n: none yet) and at
    # its hop 0
    upstream = np.full(n_live, n, dtype=np.intp)
    head = np.empty(n_live, dtype=np.intp)
    feedforward = 1
    for h in range(max_hops):  # hop-major: within a key, entries follow h * cap + f
        for j in range(n_live):
            key = keys[h, j]
            if key < 0:
                continue
            f = live[j]
            e = fill[key]
            fill[key] += 1
            li = path[h, f]
            pos[e] = h * cap + f
            hop[e] = h
            flow[e] = f
            link[e] = li
            queue[e] = li * n_vls + vl[h, f]
            buf_pad[e] = queue[e] if key & 1 else n_bufs
            p = upstream[j]
            prev_pad[e] = p
            if p < n:
                nxt_pad[p] = e
                drains_pad[e] = buf_pad[p]
                if keys[h - 1, j] // (2 * n_vls) >= key // (2 * n_vls):
                    feedforward = 0  # a hop that does not climb the link ranks
            else:
                drains_pad[e] = n_bufs
                head[j] = e
            first[e] = head[j]
            upstream[j] = e
    heads = np.empty(n_live, dtype=np.intp)
    last = np.empty(n_live, dtype=np.intp)
    n_heads = n_last = 0
    # the used links and buffers, numbered as the entries first name them (so by key:
    # links by rank, buffers by (rank, lane)), and how many entries each has
    used_links = np.empty(n, dtype=np.intp)
    used_bufs = np.empty(n, dtype=np.intp)
    ent_link = np.empty(n, dtype=np.intp)
    ent_buf = np.empty(n, dtype=np.intp)
    link_count = np.zeros(n + 1, dtype=np.intp)
    buf_count = np.zeros(n + 1, dtype=np.intp)
    rank_ptr = np.zeros(n_ranks + 1, dtype=np.intp)
    buf_group_ptr = np.empty(n + 1, dtype=np.intp)
    buf_group_ptr[0] = 0
    n_groups = 0
    group_key = -1
    n_ul = n_ub = 0
    for e in range(n):
        if prev_pad[e] == n:
            heads[n_heads] = e
            n_heads += 1
        if nxt_pad[e] == n:
            last[n_last] = e
            n_last += 1
        li = link[e]
        k = link_slot[li]
        if k < 0:
            k = n_ul
            link_slot[li] = k
            used_links[k] = li
            rank_ptr[link_rank[li] + 1] += 1
            n_ul += 1
        ent_link[e] = k
        link_count[k + 1] += 1
        b = buf_pad[e]
        if b < n_bufs:
            kb = buf_slot[b]
            if kb < 0:
                kb = n_ub
                buf_slot[b] = kb
                used_bufs[kb] = b
                n_ub += 1
                key = link_rank[li] * n_vls + b % n_vls
                if key != group_key:  # a new (rank, lane): the group before ends here
                    if group_key >= 0:
                        n_groups += 1
                        buf_group_ptr[n_groups] = kb
                    group_key = key
            ent_buf[e] = kb
            buf_count[kb + 1] += 1
    if n_ub > 0:
        n_groups += 1
        buf_group_ptr[n_groups] = n_ub
    rank_ptr = np.cumsum(rank_ptr)
    link_ptr = np.cumsum(link_count[: n_ul + 1])
    buf_ptr = np.cumsum(buf_count[: n_ub + 1])
    link_ent = np.empty(n, dtype=np.intp)
    buf_ent = np.empty(buf_ptr[n_ub], dtype=np.intp)
    lfill = link_ptr[:-1].copy()
    bfill = buf_ptr[:-1].copy()
    for e in range(n):
        k = ent_link[e]
        link_ent[lfill[k]] = e
        lfill[k] += 1
        if buf_pad[e] < n_bufs:
            kb = ent_buf[e]
            buf_ent[bfill[kb]] = e
            bfill[kb] += 1
    lane_buf = np.full(n_ul * n_vls, -1, dtype=np.intp)
    for kb in range(n_ub):
        b = used_bufs[kb]
        lane_buf[link_slot[b // n_vls] * n_vls + b % n_vls] = kb
    # the scratch back to -1, at the places used
    for k in range(n_ul):
        link_slot[used_links[k]] = -1
    for kb in range(n_ub):
        buf_slot[used_bufs[kb]] = -1
    return (
        pos,
        hop,
        flow,
        link,
        queue,
        prev_pad,
        nxt_pad,
        buf_pad,
        drains_pad,
        first,
        heads[:n_heads],
        last[:n_last],
        key_ptr,
        used_links[:n_ul],
        rank_ptr,
        link_ptr,
        link_ent,
        ent_link,
        used_bufs[:n_ub],
        buf_group_ptr[: n_groups + 1],
        buf_ptr,
        buf_ent,
        lane_buf,
        np.array([feedforward], dtype=np.intp),
    )
