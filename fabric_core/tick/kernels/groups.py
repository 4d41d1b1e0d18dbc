"""Which member is which in the argument groups and the result of the ticks-at-once kernels.

``runtime.uneventful.kernel_groups`` gathers ``kernels.uneventful.uneventful_ticks``'
arguments in groups (the entry index, the flow table, the link book, the solve's kept
results, the links' state with RoCE's queues and senders), and ``kernels.busy.busy_ticks``
takes them as those tuples, reads some members, replaces others and hands them on. The
names below say where each member is, for both sides: a group's names are
``uneventful_ticks``' parameter names, in its order (``tests/test_kernel_groups.py`` holds
them to its signature), and a member's place is its name's place in the group. numba reads
a module's integer as a constant when it compiles, so a tuple indexed or sliced by one of
these costs what a literal does (it must be one: a tuple's members may differ in type).
Plain Python: importing this imports no numba.
"""

from __future__ import annotations

#: The entry index (``EntryIndex`` and its ``IndexCsr``), the solve's buffer order
#: (``places``) and its keys per link rank
INDEX = (
    "pos", "hop", "flow", "link", "queue", "prev_pad", "nxt_pad", "buf_pad", "drains_pad",
    "first", "heads", "key_ptr", "used_links", "rank_ptr", "link_ptr", "link_ent",
    "ent_link", "used_bufs", "buf_group_ptr", "buf_ptr", "buf_ent", "lane_buf",
    "feedforward", "places", "keys_per_rank",
)  # fmt: skip
#: The flow table: flat per-hop backlog and rate, per-slot arrays, 2-D for routing's load,
#: the bytes each slot owes a resend (``FlowTable.resend_bytes``)
FLOW_TABLE = (
    "backlog_table", "rate_table", "delivered_f", "size", "start_s", "fixed_latency_s",
    "active", "path2d", "backlog2d", "hops", "resend_bytes", "live_end",
)  # fmt: skip
#: The link book: the move's sums, the buffers, departures, credits and the counters
LINK_BOOK = (
    "link_rate", "occ_pad", "drain_pad", "inflow_pad", "lb_occ", "lb_drain", "buffer_bytes",
    "into_endpoint", "dq_open", "dq_seen", "dq_bytes", "dq_s", "dq_avg", "free",
    "credit_delay", "loop_bytes", "loop_at", "loop_share", "link_load_bytes", "track_load",
    "tx_bytes", "tx_packets", "retransmitted", "error_recovery", "symbol_errors", "transmit_wait", "discards", "pause_frames",
    "pause_seconds", "pause_frames_vl", "pause_seconds_vl", "ecn_marked", "cnp_handled",
    "link_paused",
)  # fmt: skip
#: The solve's kept results, and the links and buffers the last solve and move wrote
SOLVED = (
    "level", "share", "first_share", "alpha", "credit_level", "s_stale_links",
    "s_stale_bufs", "m_stale_links", "m_stale_bufs",
)  # fmt: skip
#: The links as the faults leave them, RoCE's PFC queues and its DCQCN senders
REST = (
    "cap", "goodput", "ber", "stormed", "to_endpoint", "line_rate", "roce", "xoff", "xon",
    "reaction_s", "q_paused", "paused_since_s", "resume_s", "watchdog_until_s", "q_buffer",
    "frames_owed", "frames_sent", "switch_of", "pool", "share_alpha", "q_mtu", "headroom",
    "rc", "rt", "dc_alpha", "since_cut_s", "since_alpha_s", "since_dec_s", "since_inc_s",
    "stage", "cwnd",
)  # fmt: skip
#: ``uneventful_ticks``' result (``runtime.uneventful.ticks_run`` has what each is)
RESULT = (
    "started", "stop", "t_start", "d_start", "end_s", "delivered", "dropped", "cnps",
    "rate", "new_backlog", "done", "fired", "blocked", "send", "room", "ignoring",
    "occupancy", "dq_open", "starved",
)  # fmt: skip

# -- the places read by name (numba freezes each as a constant)
IX_POS = INDEX.index("pos")
IX_FLOW = INDEX.index("flow")
IX_PREV_PAD = INDEX.index("prev_pad")
IX_BUF_PAD = INDEX.index("buf_pad")
IX_USED_LINKS = INDEX.index("used_links")
IX_LINK_PTR = INDEX.index("link_ptr")
IX_LINK_ENT = INDEX.index("link_ent")
IX_ENT_LINK = INDEX.index("ent_link")
IX_USED_BUFS = INDEX.index("used_bufs")
IX_FEEDFORWARD = INDEX.index("feedforward")
IX_PLACES = INDEX.index("places")
IX_KEYS_PER_RANK = INDEX.index("keys_per_rank")

FT_START_S = FLOW_TABLE.index("start_s")
FT_ACTIVE = FLOW_TABLE.index("active")
FT_AFTER_ACTIVE = FT_ACTIVE + 1  # (a slice's bound must be a constant, not a sum)
FT_BACKLOG2D = FLOW_TABLE.index("backlog2d")
FT_RESEND_BYTES = FLOW_TABLE.index("resend_bytes")
FT_LIVE_END = FLOW_TABLE.index("live_end")

LB_DRAIN_PAD = LINK_BOOK.index("drain_pad")
LB_OCC = LINK_BOOK.index("lb_occ")
LB_DRAIN = LINK_BOOK.index("lb_drain")
LB_AFTER_DRAIN = LB_DRAIN + 1
LB_DQ_OPEN = LINK_BOOK.index("dq_open")
LB_AFTER_DQ_OPEN = LB_DQ_OPEN + 1
LB_DISCARDS = LINK_BOOK.index("discards")
LB_PAUSED = LINK_BOOK.index("link_paused")

SV_LEVEL = SOLVED.index("level")
SV_ALPHA = SOLVED.index("alpha")
SV_CREDIT_LEVEL = SOLVED.index("credit_level")
SV_S_STALE_LINKS = SOLVED.index("s_stale_links")  # (the first of the four stale lists)
SV_S_STALE_BUFS = SOLVED.index("s_stale_bufs")
SV_M_STALE_LINKS = SOLVED.index("m_stale_links")
SV_M_STALE_BUFS = SOLVED.index("m_stale_bufs")

REST_CAP = REST.index("cap")
REST_LINE_RATE = REST.index("line_rate")
REST_ROCE = REST.index("roce")
#: RoCE's DCQCN senders' per-slot arrays, in ``pfc.SENDER_FIELDS``' order, are
#: ``rest[REST_RC:REST_SENDERS_END]``, from ``rc`` to ``cwnd``
REST_RC = REST.index("rc")
REST_DC_ALPHA = REST.index("dc_alpha")
REST_CWND = REST.index("cwnd")
REST_SENDERS_END = REST_CWND + 1

RESULT_STOP = RESULT.index("stop")
RESULT_DELIVERED = RESULT.index("delivered")
RESULT_DROPPED = RESULT.index("dropped")
RESULT_CNPS = RESULT.index("cnps")
RESULT_RATE = RESULT.index("rate")
RESULT_DONE = RESULT.index("done")
RESULT_OCCUPANCY = RESULT.index("occupancy")
RESULT_DQ_OPEN = RESULT.index("dq_open")
RESULT_STARVED = RESULT.index("starved")
