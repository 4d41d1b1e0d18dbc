"""RoCE's go-back-N after a PFC buffer overflows, held to what the counters show (both
solvers).

IBTA RC transport (RoCEv2 without selective repeat): the receiver takes packets in order
only; at the first one missing it sends a NAK and discards every later one, and the
sender resends from the first packet lost. So a drop costs the bytes lost at the full
buffer and the bytes the sender sent after them (those between its source and the
drop), not the bytes already past the drop point, which were sent before the loss and
arrive. Written against ``Fabric`` and the per-link counters a user reads
(``discards_bytes_total``, ``retransmitted_bytes_total``, ``tx_bytes_total``,
``queue_bytes``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fabric_core.runtime.fabric import Fabric, Solver
from fabric_core.runtime.scenario import parse_scenario
from tests.helpers import SOLVERS, scripted_fabric

MiB = 1024**2
#: flow A's size; each of the seven flows sharing its receiver's downlink sends as much
SIZE = 2 * MiB
#: the path of A, gpu0000 on leaf00 to gpu0008 on leaf01, link by link (hops 0-3)
PATH = ("gpu0000->leaf00", "leaf00->spine00", "spine00->leaf01", "leaf01->gpu0008")


def fabric_with(links: dict[str, Any], solver: Solver) -> Fabric:
    """A 2-leaf RoCE fabric, PFC alone with static buffers and too little headroom (2000
    B: what a 400G sender sends in a pause's reaction time overflows any queue it
    fills), ``links`` set by name. A sends ``SIZE`` bytes along ``PATH``; seven GPUs of
    leaf01 send as much to the same receiver, so A gets an eighth of the downlink
    (50 Gb/s) and its bytes queue at leaf01."""
    scn = parse_scenario(
        {
            "profile": "roce-400g",
            "profile_overrides": {
                "pfc_buffer_mode": "static",
                "pfc_headroom_bytes": 2000.0,
                "congestion_control": "none",
            },
            "topology": {"kind": "leaf-spine", "leaves": 2, "spines": 1, "gpus_per_leaf": 8},
            "links": {"named": links},
        },
        "go-back-n.toml",
    )
    rows = [("gpu0000", "gpu0008", SIZE, 0.0)]
    rows += [(f"gpu{k:04d}", "gpu0008", SIZE, 0.0) for k in range(9, 16)]
    fabric, _ = scripted_fabric(scn.build_topology(), scn.profile, rows, dt_s=1e-6, solver=solver)
    return fabric


def run_to_the_end(fabric: Fabric) -> None:
    for _ in range(20_000):
        if fabric.snapshot().totals.completed_flows_total == 8:
            return
        fabric.step()
    pytest.fail("the flows never finished")


def counter(fabric: Fabric, name: str, link: str) -> float:
    return float(fabric.counters[name][fabric.topo.links.index[link]])


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_drop_at_the_first_switch_resends_only_the_bytes_lost(solver: Solver) -> None:
    """A's uplink from leaf00 runs at 100 Gb/s and leaf00's shallow buffer for A
    overflows: every drop is at A's first switch, while A has bytes queued past it, at
    leaf01. Those were sent before the loss and arrive: A resends what was dropped and no
    more (the code before resent its bytes past the drop too: 1.5 times what it lost),
    and the links past the drop carry each of A's bytes once."""
    fabric = fabric_with(
        {"leaf00->spine00": {"bandwidth": "100Gb/s"}, "gpu0000->leaf00": {"buffer": "256KiB"}},
        solver,
    )
    run_to_the_end(fabric)
    dropped = fabric.dropped_bytes
    assert dropped > 0.05 * SIZE
    # every drop at leaf00's buffer for A (discards count on the link into the buffer)
    assert counter(fabric, "discards_bytes_total", PATH[0]) == pytest.approx(dropped, rel=1e-9)
    resent = np.asarray(fabric.counters["retransmitted_bytes_total"])
    assert resent.sum() == pytest.approx(dropped, rel=1e-9)
    assert resent[fabric.topo.links.index[PATH[0]]] == pytest.approx(dropped, rel=1e-9)
    # A's source sent its bytes and the dropped ones again; past the drop, each byte once
    assert counter(fabric, "tx_bytes_total", PATH[0]) == pytest.approx(SIZE + dropped, rel=1e-9)
    for link in PATH[1:3]:
        assert counter(fabric, "tx_bytes_total", link) == pytest.approx(SIZE, rel=1e-9), link
    # (the downlink carries the seven other flows too)
    assert counter(fabric, "tx_bytes_total", PATH[3]) == pytest.approx(8 * SIZE, rel=1e-9)
    assert fabric.delivered_bytes == pytest.approx(8 * SIZE, rel=1e-9)


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_drop_at_the_last_switch_resends_what_was_sent_after_it(solver: Solver) -> None:
    """A's links narrow (400, 200, 100 Gb/s, then its 50 Gb/s share of the downlink), so
    its bytes queue at each switch, and only leaf01's buffer for A is shallow: every
    drop is at A's last switch. The bytes A has queued at leaf00 and at the spine when
    it loses some there were sent after the loss, and the receiver would discard them:
    A resends them too (the code before resent the dropped bytes alone)."""
    fabric = fabric_with(
        {
            "leaf00->spine00": {"bandwidth": "200Gb/s"},
            "spine00->leaf01": {"bandwidth": "100Gb/s", "buffer": "256KiB"},
        },
        solver,
    )
    links = fabric.topo.links.index
    upstream = [links[PATH[0]], links[PATH[1]]]  # A's bytes at leaf00 and at the spine
    queued = 0.0
    while fabric.dropped_bytes == 0:
        queued = float(fabric.snapshot().link_state.queue_bytes[upstream].sum())
        fabric.step()
        assert fabric.sim_time_s < 1e-3, "nothing was dropped"
    assert queued > 0.1 * SIZE
    run_to_the_end(fabric)
    dropped = fabric.dropped_bytes
    assert counter(fabric, "discards_bytes_total", PATH[2]) == pytest.approx(dropped, rel=1e-9)
    resent = float(np.sum(fabric.counters["retransmitted_bytes_total"]))
    # the first drop alone sends again at least what A had queued behind it
    assert resent >= dropped + queued
    # A's source sent its bytes and all it resent; of those, only the dropped ones had
    # crossed the spine's link to leaf01; the downlink carried each byte once
    assert counter(fabric, "tx_bytes_total", PATH[0]) == pytest.approx(SIZE + resent, rel=1e-9)
    assert counter(fabric, "tx_bytes_total", PATH[2]) == pytest.approx(SIZE + dropped, rel=1e-9)
    assert counter(fabric, "tx_bytes_total", PATH[3]) == pytest.approx(8 * SIZE, rel=1e-9)
    assert fabric.delivered_bytes == pytest.approx(8 * SIZE, rel=1e-9)
