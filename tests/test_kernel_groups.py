"""The names of the ticks-at-once kernels' argument groups (``kernels.groups``) say where
each member is: the busy kernel reads and replaces members by these places, so a group
that gained, lost or reordered a member would hand it the wrong array without them."""

from __future__ import annotations

import inspect

import numpy as np

from fabric_core.net.profiles import ROCE_400G
from fabric_core.net.topology import leaf_spine
from fabric_core.runtime.fabric import Fabric
from fabric_core.tick.kernels import groups
from fabric_core.tick.kernels.uneventful import uneventful_ticks
from fabric_core.tick.pfc import FRESH_SENDER, SENDER_FIELDS, Dcqcn
from fabric_core.workloads.traffic import Bulk


def test_the_groups_are_the_uneventful_kernels_parameters_in_order() -> None:
    params = list(inspect.signature(uneventful_ticks.py_func).parameters)
    first, last = params.index("pos"), params.index("cwnd")
    named = groups.INDEX + groups.FLOW_TABLE + groups.LINK_BOOK + groups.SOLVED + groups.REST
    assert list(named) == params[first : last + 1]
    # the senders' arrays in ``rest`` are DCQCN's fields in its order
    senders = groups.REST[groups.REST_RC : groups.REST_CWND + 1]
    assert [s.removeprefix("dc_") for s in senders] == list(SENDER_FIELDS)


def test_the_places_name_the_fabrics_own_arrays() -> None:
    """On a running RoCE fabric, the members the busy kernel reads by name are the
    fabric's arrays of that name."""
    topo = leaf_spine(ROCE_400G, leaves=2, spines=2, gpus_per_leaf=4)
    fabric = Fabric(
        topo,
        ROCE_400G,
        [Bulk(name="bulk", traffic_class="bulk", size_bytes=1 << 20)],
        dt_s=1e-6,
        seed=3,
    )
    fabric.run_ticks(20)
    idx = fabric._current_index()
    g = fabric._kernel_groups(
        fabric._tick,
        idx,
        1,
        np.inf,
        *fabric._settled_links(),  # type: ignore[arg-type,misc]
    )
    counters = fabric.link_book.counters
    assert g.entries[groups.IX_USED_LINKS] is idx.csr.used_links
    assert g.entries[groups.IX_PREV_PAD] is idx.prev_pad
    assert g.entries[groups.IX_FEEDFORWARD] == idx.feedforward
    assert g.flow_table[groups.FT_START_S] is fabric.flows.start_s
    assert g.flow_table[groups.FT_LIVE_END] == fabric.flows.live_end
    assert g.link_book[groups.LB_DISCARDS] is counters["discards_bytes_total"]
    assert g.flow_table[groups.FT_RESEND_BYTES] is fabric.flows.resend_bytes
    assert g.link_book[groups.LB_OCC] is fabric.link_book.occupancy
    assert g.link_book[groups.LB_PAUSED] is fabric.link_book.paused
    assert g.rest[groups.REST_ROCE] is True
    assert g.rest[groups.REST_CWND] is fabric.roce.dcqcn.cwnd  # type: ignore[union-attr]
    assert g.rest[groups.REST_DC_ALPHA] is fabric.roce.dcqcn.alpha  # type: ignore[union-attr]


def test_a_fresh_sender_is_dcqcns_fresh_state() -> None:
    dc = Dcqcn.empty(3)
    assert [float(getattr(dc, name)[0]) for name in SENDER_FIELDS] == list(FRESH_SENDER)
    dc.alpha[:] = 0.3
    dc.start(np.array([1]), np.array([5e10]))
    assert dc.rc[1] == dc.rt[1] == 5e10 and dc.alpha[1] == 1.0 and dc.since_inc_s[1] == -1.0
    assert dc.alpha[0] == 0.3
