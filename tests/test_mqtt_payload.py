"""Telemetry round trip: a real fabric's snapshot → JSON → the remote snapshot.

What the remote console renders must be the served fabric's figures, exactly,
for every link telemetry reports.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from exporters.mqtt.decode import node_table, snapshot_from
from exporters.mqtt.encode import (
    EventCursor,
    encode_event,
    encode_meta,
    encode_telemetry,
    top_links,
)
from exporters.mqtt.schema import EventStatsMsg, encoder, meta_decoder, telemetry_decoder
from fabric_core.commands import InjectFault
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.runtime.snapshot import Event, LinkStatus, Snapshot

DOWN = "leaf00->spine01"


@pytest.fixture(scope="module")
def snap() -> Snapshot:
    fabric = Fabric.from_scenario(load_scenario("tiny"))
    fabric.run_ticks(300)
    fabric.apply(InjectFault(kind="link_down", target=DOWN, id="f1"))
    fabric.run_ticks(300)
    return fabric.snapshot(wall_time_s=1.0, target_speed=1e-3, measured_speed=1e-3)


def roundtrip(snap: Snapshot, k: int) -> Snapshot:
    tm = telemetry_decoder.decode(encoder.encode(encode_telemetry(snap, run_id="r", top_k=k)))
    meta = meta_decoder.decode(encoder.encode(encode_meta(snap, run_id="r")))
    return snapshot_from(meta, tm, node_table(meta.nodes), ())


def test_reported_links_carry_the_served_figures(snap: Snapshot) -> None:
    remote = roundtrip(snap, k=4)
    assert DOWN in remote.links.index
    assert len(remote.links) == 4
    assert remote.links.name[0] == DOWN  # a down link comes first
    assert remote.link_state.status[0] == LinkStatus.DOWN
    for j, name in enumerate(remote.links.name):
        i = snap.links.index[name]
        for field in ("bandwidth_Bps", "prop_delay_s", "buffer_bytes"):
            assert getattr(remote.links, field)[j] == getattr(snap.links, field)[i], field
        assert remote.nodes.name[remote.links.src[j]] == snap.nodes.name[snap.links.src[i]]
        for field in snap.link_state.__dataclass_fields__:
            a = np.asarray(getattr(snap.link_state, field))[i]
            b = np.asarray(getattr(remote.link_state, field))[j]
            assert np.array_equal(a, b), field


def test_histograms_kpis_faults_and_totals_survive(snap: Snapshot) -> None:
    remote = roundtrip(snap, k=2)
    assert remote.latency.keys() == snap.latency.keys()
    assert any(h.count > 0 for h in snap.latency.values())
    for cls, h in snap.latency.items():
        assert np.array_equal(remote.latency[cls].counts, h.counts)
        assert remote.latency[cls].sum_s == h.sum_s
    for name, w in snap.workloads.items():
        rw = remote.workloads[name]
        for key, value in w.kpis.items():
            assert rw.kpis[key] == value or (math.isnan(value) and math.isnan(rw.kpis[key]))
        for key, h in w.histograms.items():
            assert np.array_equal(rw.histograms[key].counts, h.counts)
    assert [(f.id, f.kind, f.target, f.state) for f in remote.faults] == [
        (f.id, f.kind, f.target, f.state) for f in snap.faults
    ]
    assert remote.totals == snap.totals
    assert remote.nodes.name == snap.nodes.name
    assert (remote.tick, remote.sim_time_s, remote.profile) == (
        snap.tick,
        snap.sim_time_s,
        snap.profile,
    )


def test_reverse_is_minus_one_for_unreported_directions(snap: Snapshot) -> None:
    remote = roundtrip(snap, k=1)
    assert remote.links.name == (DOWN,)
    assert remote.links.reverse.tolist() == [-1]
    full = roundtrip(snap, k=len(snap.links))
    for j, name in enumerate(full.links.name):
        a, b = name.split("->")
        assert full.links.name[full.links.reverse[j]] == f"{b}->{a}"


def test_top_links_always_include_fault_targets(snap: Snapshot) -> None:
    assert DOWN in [snap.links.name[i] for i in top_links(snap, 0)]


def test_event_cursor_sends_each_event_once() -> None:
    e = [Event(float(i), "info", "k", "t", f"m{i}") for i in range(6)]
    cur = EventCursor()
    assert cur.new_events(tuple(e[:3])) == tuple(e[:3])
    assert cur.new_events(tuple(e[:3])) == ()
    assert cur.new_events(tuple(e[1:5])) == tuple(e[3:5])  # window moved on
    assert cur.gaps == 0
    assert cur.new_events(tuple(e[5:])) == (e[5],)  # last sent scrolled out
    assert cur.gaps == 1  # e[4] is lost unseen: the cursor can only count the occasion


def test_telemetry_carries_the_bridges_event_counters(snap: Snapshot) -> None:
    stats = EventStatsMsg(sent=7, dropped=2, gaps=1)
    tm = telemetry_decoder.decode(encoder.encode(encode_telemetry(snap, run_id="r", events=stats)))
    assert tm.events == stats


def test_an_events_time_is_sent_to_the_picosecond() -> None:
    """Simulated time, a sum of ticks, was sent with its float noise: 0.06675099999999999."""
    event = Event(0.06675099999999999, "info", "param_set", "fabric", "reroute_s = 0.001")
    assert encode_event(event, run_id="r").time_s == 0.066751
    assert encode_event(replace(event, time_s=0.1 + 0.2), run_id="r").time_s == 0.3
