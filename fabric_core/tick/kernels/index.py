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

from typing import Any

import numpy as np
from numba import prange
from numpy.typing import NDArray

from fabric_core.tick.kernels._jit import (
    inline_kernel,
    kernel,
    parallel_kernel,
    specialised_kernel,
)
from fabric_core.tick.kernels.blocks import block

_I = NDArray[np.intp]

#: Blocks of the flows in flight that the index's first two passes are split into: 1 in
#: ``entry_index``; 0 in ``entry_index_parallel``, which takes ``blocks`` as it is called.
#: A constant, not an argument, where it is 1: with the count known only at run time the
#: serial passes took 5-10 % longer (the captured 10k and default-scenario indexes).
BLOCKS = 1
#: Tasks the grouping of the used links and buffers is split into: 1 in ``entry_index``,
#: where the two run one after the other; 2 in ``entry_index_parallel``, a core each. (As
#: two iterations of a loop in the serial kernel too, the default scenario's index took
#: 10 % longer.)
GROUPING_TASKS = 1

#: The index's arrays in ``entry_index``'s one buffer, in order: those with one value per
#: entry (``buf_ent`` has one per entry that feeds a buffer), then the groups.
PARTS = (
    "pos",
    "hop",
    "flow",
    "link",
    "queue",
    "prev_pad",
    "nxt_pad",
    "buf_pad",
    "drains_pad",
    "first",
    "link_ent",
    "ent_link",
    "buf_ent",
    "heads",
    "last",
    "last_flow",
    "key_ptr",
    "used_links",
    "rank_ptr",
    "link_ptr",
    "used_bufs",
    "buf_group_ptr",
    "buf_ptr",
    "lane_buf",
    "feedforward",
)
# each part's place in ``PARTS`` (numba reads a module's integers as constants)
PART_POS = PARTS.index("pos")
PART_HOP = PARTS.index("hop")
PART_FLOW = PARTS.index("flow")
PART_LINK = PARTS.index("link")
PART_QUEUE = PARTS.index("queue")
PART_PREV = PARTS.index("prev_pad")
PART_NXT = PARTS.index("nxt_pad")
PART_BUF = PARTS.index("buf_pad")
PART_DRAINS = PARTS.index("drains_pad")
PART_FIRST = PARTS.index("first")
PART_LENT = PARTS.index("link_ent")
PART_ELINK = PARTS.index("ent_link")
PART_BUF_ENT = PARTS.index("buf_ent")
PART_HEADS = PARTS.index("heads")
PART_LAST = PARTS.index("last")
PART_LAST_FLOW = PARTS.index("last_flow")
PART_KEY_PTR = PARTS.index("key_ptr")
PART_USED_LINKS = PARTS.index("used_links")
PART_RANK_PTR = PARTS.index("rank_ptr")
PART_LINK_PTR = PARTS.index("link_ptr")
PART_USED_BUFS = PARTS.index("used_bufs")
PART_BUF_GROUP_PTR = PARTS.index("buf_group_ptr")
PART_BUF_PTR = PARTS.index("buf_ptr")
PART_LANE_BUF = PARTS.index("lane_buf")
PART_FEEDFORWARD = PARTS.index("feedforward")
PART_N_ROWS = PART_HEADS  # the per-entry rows, first in ``PARTS``


@inline_kernel
def _part(buf: _I, at: _I, i: int) -> _I:
    """Part ``i`` of ``PARTS`` in the index's buffer (a view)."""
    return buf[at[i] : at[i + 1]]


@inline_kernel
def _running_sums(counts: NDArray[np.integer[Any]], n: int, out: _I) -> _I:
    """``out[k] = counts[0] + ... + counts[k]`` for ``k <= n`` (group ``k``'s start, with
    ``counts[0] = 0``); returns a copy of ``out[:n]``, the places a counting sort fills."""
    total = 0
    for k in range(n + 1):
        total += counts[k]
        out[k] = total
    fill = np.empty(n, dtype=np.intp)
    for k in range(n):
        fill[k] = out[k]
    return fill


#: What the index's two grouping tasks found (``_group_by_link``, ``_group_by_buffer``),
#: by place in one array: the hop-0 and last-hop entries, the used links, the used
#: buffers and their (rank, lane) groups
_FOUND_HEADS, _FOUND_LAST, _FOUND_LINKS, _FOUND_BUFS, _FOUND_GROUPS = range(5)
_N_FOUND = 5


@inline_kernel
def _group_by_link(
    prev_pad: _I,
    nxt_pad: _I,
    flow: _I,
    link: _I,
    link_rank: NDArray[np.int64],
    link_slot: NDArray[np.int32],
    heads: _I,
    last: _I,
    last_flow: _I,
    used_links: _I,
    rank_ptr: _I,
    link_ptr: _I,
    ent_link: _I,
    link_ent: _I,
    n_ranks: int,
    found: _I,
) -> None:
    """The hop-0 and last-hop entries, and the links with entries: numbered as the
    entries first name them (``link_slot``, their number by link, -1 before), counted
    by rank, and their entries grouped (``link_ptr``/``link_ent``) in entry order."""
    n = link.size
    n_heads = n_last = n_ul = 0
    # (32-bit: this pass's scratch, read at random, then takes half the cache)
    link_count = np.zeros(n + 1, dtype=np.int32)
    for r in range(n_ranks + 1):
        rank_ptr[r] = 0
    for e in range(n):
        if prev_pad[e] == n:
            heads[n_heads] = e
            n_heads += 1
        if nxt_pad[e] == n:
            last[n_last] = e
            last_flow[n_last] = flow[e]
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
    for r in range(n_ranks):
        rank_ptr[r + 1] += rank_ptr[r]
    fill = _running_sums(link_count, n_ul, link_ptr)
    for e in range(n):
        k = ent_link[e]
        link_ent[fill[k]] = e
        fill[k] += 1
    found[_FOUND_HEADS], found[_FOUND_LAST], found[_FOUND_LINKS] = n_heads, n_last, n_ul


@inline_kernel
def _group_by_buffer(
    link: _I,
    buf_pad: _I,
    link_rank: NDArray[np.int64],
    n_vls: int,
    n_bufs: int,
    buf_slot: NDArray[np.int32],
    used_bufs: _I,
    buf_group_ptr: _I,
    buf_ptr: _I,
    buf_ent: _I,
    found: _I,
) -> None:
    """The buffers that entries feed: numbered as the entries first name them
    (``buf_slot``, their number by buffer, -1 before), in groups of one (rank, lane)
    (``buf_group_ptr``), and the entries feeding each (``buf_ptr``/``buf_ent``) in entry
    order."""
    n = link.size
    ent_buf = np.empty(n, dtype=np.int32)
    buf_count = np.zeros(n + 1, dtype=np.int32)
    buf_group_ptr[0] = 0
    n_groups = 0
    group_key = -1
    n_ub = 0
    for e in range(n):
        b = buf_pad[e]
        if b < n_bufs:
            kb = buf_slot[b]
            if kb < 0:
                kb = n_ub
                buf_slot[b] = kb
                used_bufs[kb] = b
                n_ub += 1
                key = link_rank[link[e]] * n_vls + b % n_vls
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
    fill = _running_sums(buf_count, n_ub, buf_ptr)
    for e in range(n):
        if buf_pad[e] < n_bufs:
            kb = ent_buf[e]
            buf_ent[fill[kb]] = e
            fill[kb] += 1
    found[_FOUND_BUFS], found[_FOUND_GROUPS] = n_ub, n_groups


@kernel
def entry_index(
    path: NDArray[np.int32],
    vl: NDArray[np.int8],
    active: NDArray[np.bool_],
    link_rank: NDArray[np.int64],
    n_ranks: int,
    n_vls: int,
    link_slot: NDArray[np.int32],
    buf_slot: NDArray[np.int32],
    blocks: int = 1,
) -> tuple[_I, _I]:
    """Entries of the active flows (see the module docstring), as one buffer and where
    each of its arrays (``PARTS``) is in it: ``buf[bounds[2 * i]:bounds[2 * i + 1]]`` is
    part ``i``. One buffer, not two dozen arrays: numba boxes every array a kernel returns
    (about 0.7 µs each), which cost more than the index's own work on a small fabric.

    ``link_slot`` and ``buf_slot`` (one per link, one per buffer) are scratch, -1
    everywhere on entry and again on return; 32-bit, as the pass's other scratch, so that
    the lookups at random take half the cache (on the 10k fat-tree's index, replayed:
    3.02 -> 2.89 ms).

    The parts, per entry: ``pos``, ``hop``, ``flow``, ``link``, ``queue`` (link * lanes +
    lane), ``prev_pad``/``nxt_pad`` (the entry one hop up/downstream, ``n`` if none),
    ``buf_pad`` (the downstream buffer, ``n_bufs`` at the last hop), ``drains_pad`` (the
    buffer it drains: its previous hop's, ``n_bufs`` at the source), ``first`` (the flow's
    hop-0 entry); the hop-0 and last-hop entries (``heads``, ``last``, in entry order)
    and the flows of the latter (``last_flow``); ``key_ptr`` (entries of key ``k`` are
    ``key_ptr[k]:key_ptr[k + 1]``); then the links with entries: ``used_links`` (link ids;
    by rank, since entries are), ``rank_ptr`` (those of rank ``r`` are
    ``rank_ptr[r]:rank_ptr[r + 1]``), ``link_ptr``/``link_ent`` (entries by used link, in
    entry order) and ``ent_link`` (each entry's used link); the buffers that entries feed:
    ``used_bufs`` (buffer ids, grouped by (rank, lane) in key order), ``buf_group_ptr``
    (the groups), ``buf_ptr``/``buf_ent`` (entries feeding each used buffer, in entry
    order) and ``lane_buf`` (the used buffer of used link ``k``'s lane ``v`` at
    ``k * n_vls + v``, -1 if none); and whether every path climbs the link ranks
    (``feedforward``, 1 or 0).

    ``entry_index_parallel`` is this kernel over the cores: it splits the flows in flight
    into ``blocks`` slices (one per thread) for the two passes that find and place the
    entries, each block counting its entries per hop and key and placing them after those
    of the blocks before it, so the index comes out the same, bit for bit. Numbering and
    grouping the used links and the used buffers are not split by entries (each block
    would number what it names and the numbers be merged, which cost more than it saved)
    but run as two tasks side by side, each over all the entries in order
    (``GROUPING_TASKS``).
    """
    max_hops, cap = path.shape
    n_bufs = link_slot.size * n_vls
    n_keys = n_ranks * n_vls * 2
    live = np.flatnonzero(active)  # one pass over the slots; then only flows in flight
    n_live = live.size
    # each live flow's key per hop (-1 from its first missing hop on), hop by hop: the
    # flow table is hop-major, so a row of ``path`` is read in order, not a column
    keys = np.full((max_hops, n_live), -1, dtype=np.intp)
    n_blocks = BLOCKS if BLOCKS > 0 else blocks
    # the entries of each (block, hop, key): block ``t`` is the ``t``-th slice of ``live``
    counts = np.zeros((n_blocks * max_hops, n_keys), dtype=np.intp)
    for t in prange(n_blocks):
        j0, j1 = block(0, n_live, t, n_blocks)
        for h in range(max_hops):
            counted = counts[t * max_hops + h]
            for j in range(j0, j1):
                if h > 0 and keys[h - 1, j] < 0:
                    continue  # the path ended at an earlier hop
                f = live[j]
                li = path[h, f]
                if li < 0:
                    continue
                fed = 1 if h + 1 < max_hops and path[h + 1, f] >= 0 else 0
                key = (link_rank[li] * n_vls + vl[h, f]) * 2 + fed
                keys[h, j] = key
                counted[key] += 1
    n = 0
    for row in range(n_blocks * max_hops):
        for k in range(n_keys):
            n += counts[row, k]
    # the buffer: every part at its place, with room for its most (a used link, buffer or
    # group per entry at most); the places a part leaves unused are never written
    room = np.empty(len(PARTS), dtype=np.intp)
    for i in range(PART_N_ROWS):
        room[i] = n
    room[PART_HEADS] = room[PART_LAST] = room[PART_LAST_FLOW] = n_live
    room[PART_KEY_PTR] = n_keys + 1
    room[PART_USED_LINKS] = room[PART_USED_BUFS] = n
    room[PART_RANK_PTR] = n_ranks + 1
    room[PART_LINK_PTR] = room[PART_BUF_GROUP_PTR] = room[PART_BUF_PTR] = n + 1
    room[PART_LANE_BUF] = n * n_vls
    room[PART_FEEDFORWARD] = 1
    at = np.empty(len(PARTS) + 1, dtype=np.intp)
    at[0] = 0
    for i in range(len(PARTS)):
        at[i + 1] = at[i] + room[i]
    buf = np.empty(at[len(PARTS)], dtype=np.intp)
    pos = _part(buf, at, PART_POS)
    hop = _part(buf, at, PART_HOP)
    flow = _part(buf, at, PART_FLOW)
    link = _part(buf, at, PART_LINK)
    queue = _part(buf, at, PART_QUEUE)
    prev_pad = _part(buf, at, PART_PREV)
    nxt_pad = _part(buf, at, PART_NXT)
    buf_pad = _part(buf, at, PART_BUF)
    drains_pad = _part(buf, at, PART_DRAINS)
    first = _part(buf, at, PART_FIRST)
    link_ent = _part(buf, at, PART_LENT)
    ent_link = _part(buf, at, PART_ELINK)
    buf_ent = _part(buf, at, PART_BUF_ENT)
    heads = _part(buf, at, PART_HEADS)
    last = _part(buf, at, PART_LAST)
    last_flow = _part(buf, at, PART_LAST_FLOW)
    key_ptr = _part(buf, at, PART_KEY_PTR)
    used_links = _part(buf, at, PART_USED_LINKS)
    rank_ptr = _part(buf, at, PART_RANK_PTR)
    link_ptr = _part(buf, at, PART_LINK_PTR)
    used_bufs = _part(buf, at, PART_USED_BUFS)
    buf_group_ptr = _part(buf, at, PART_BUF_GROUP_PTR)
    buf_ptr = _part(buf, at, PART_BUF_PTR)
    lane_buf = _part(buf, at, PART_LANE_BUF)
    # where each (block, hop, key)'s entries go: by key, then hop, then block (whose flows
    # come in the order of their slots), which is the order by key and ``h * cap + f``
    fill = np.empty((n_blocks * max_hops, n_keys), dtype=np.intp)
    total = 0
    for k in range(n_keys):
        key_ptr[k] = total
        for h in range(max_hops):
            for t in range(n_blocks):
                fill[t * max_hops + h, k] = total
                total += counts[t * max_hops + h, k]
    key_ptr[n_keys] = total
    for e in prange(n):
        nxt_pad[e] = n  # set when the next hop's entry is placed
    # the entry placed at the previous hop of the j-th flow in flight (n: none yet) and at
    # its hop 0; a block's entries link only to its own flows' entries
    upstream = np.full(n_live, n, dtype=np.intp)
    head = np.empty(n_live, dtype=np.intp)
    climbs = np.ones(n_blocks, dtype=np.intp)
    for t in prange(n_blocks):
        j0, j1 = block(0, n_live, t, n_blocks)
        for h in range(max_hops):  # hop-major: within a key, entries follow h * cap + f
            places = fill[t * max_hops + h]
            for j in range(j0, j1):
                key = keys[h, j]
                if key < 0:
                    continue
                f = live[j]
                e = places[key]
                places[key] += 1
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
                        climbs[t] = 0  # a hop that does not climb the link ranks
                else:
                    drains_pad[e] = n_bufs
                    head[j] = e
                first[e] = head[j]
                upstream[j] = e
    feedforward = 1
    for t in range(n_blocks):
        feedforward = min(feedforward, climbs[t])
    # the used links and buffers, numbered as the entries first name them (so by key:
    # links by rank, buffers by (rank, lane)), and the entries of each, in entry order:
    # two tasks that write apart, a core each where the kernel runs over them
    # (``entry_index_parallel``), one after the other here
    found = np.zeros(_N_FOUND, dtype=np.intp)
    for task in prange(GROUPING_TASKS):
        if task == 0 or GROUPING_TASKS == 1:
            _group_by_link(
                prev_pad, nxt_pad, flow, link, link_rank, link_slot, heads, last, last_flow,
                used_links, rank_ptr, link_ptr, ent_link, link_ent, n_ranks, found,
            )  # fmt: skip
        if task == 1 or GROUPING_TASKS == 1:
            _group_by_buffer(
                link, buf_pad, link_rank, n_vls, n_bufs, buf_slot, used_bufs, buf_group_ptr,
                buf_ptr, buf_ent, found,
            )  # fmt: skip
    n_heads, n_last, n_ul = found[_FOUND_HEADS], found[_FOUND_LAST], found[_FOUND_LINKS]
    n_ub, n_groups = found[_FOUND_BUFS], found[_FOUND_GROUPS]
    for i in range(n_ul * n_vls):
        lane_buf[i] = -1
    for kb in range(n_ub):
        b = used_bufs[kb]
        lane_buf[link_slot[b // n_vls] * n_vls + b % n_vls] = kb
    # the scratch back to -1, at the places used
    for k in range(n_ul):
        link_slot[used_links[k]] = -1
    for kb in range(n_ub):
        buf_slot[used_bufs[kb]] = -1
    buf[at[PART_FEEDFORWARD]] = feedforward
    # each part's bounds: its place, and as long as it came out
    used = np.empty(len(PARTS), dtype=np.intp)
    for i in range(PART_N_ROWS):
        used[i] = n
    used[PART_BUF_ENT] = buf_ptr[n_ub]  # the entries that feed a buffer
    used[PART_HEADS] = n_heads
    used[PART_LAST] = used[PART_LAST_FLOW] = n_last
    used[PART_KEY_PTR] = n_keys + 1
    used[PART_USED_LINKS] = n_ul
    used[PART_RANK_PTR] = n_ranks + 1
    used[PART_LINK_PTR] = n_ul + 1
    used[PART_USED_BUFS] = n_ub
    used[PART_BUF_GROUP_PTR] = n_groups + 1
    used[PART_BUF_PTR] = n_ub + 1
    used[PART_LANE_BUF] = n_ul * n_vls
    used[PART_FEEDFORWARD] = 1
    bounds = np.empty(2 * len(PARTS), dtype=np.intp)
    for i in range(len(PARTS)):
        bounds[2 * i] = at[i]
        bounds[2 * i + 1] = at[i] + used[i]
    return buf, bounds


#: ``entry_index`` over the cores (see there): its first two passes in ``blocks`` slices
entry_index_parallel = specialised_kernel(
    entry_index, "entry_index_parallel", parallel=True, BLOCKS=0, GROUPING_TASKS=2
)


def _flow_values(table: NDArray[np.float64], pos: _I) -> NDArray[np.float64]:
    """``table`` (one of the flow table's per-hop arrays, flat) at the entries' places
    ``pos``: ``table[pos]``."""
    out = np.empty(pos.size)
    for e in prange(pos.size):
        out[e] = table[pos[e]]
    return out


#: ``table[pos]`` with its reads shared over the cores (``CompiledTick.flow_values`` takes
#: it on the ticks that share them: a 10k fat-tree's backlogs, replayed, in 29 µs against
#: numpy's 89)
flow_values_parallel = parallel_kernel(_flow_values)
