"""Hand-built snapshots of a tiny leaf-spine, for console tests that need exact values.

These are *not* emulator output: they follow the ``Snapshot`` contract so that
sorting, filtering, cursor and rendering logic can be tested with values chosen
by the test. Tests of behaviour against the emulator use the real engine.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fabric_core.commands import Command, CommandResult
from fabric_core.runtime.snapshot import (
    Event,
    LinkState,
    LinkTable,
    NodeTable,
    Snapshot,
    Totals,
)
from fabric_core.tick.histogram import Histogram


def tables(leaves: int = 2, spines: int = 2, gpus_per_leaf: int = 4) -> tuple[NodeTable, LinkTable]:
    """Node and link tables of a 2-tier leaf-spine (both directions of every cable)."""
    names: list[str] = []
    kinds: list[str] = []
    tiers: list[int] = []
    for g in range(leaves * gpus_per_leaf):
        names.append(f"gpu{g:04d}"), kinds.append("gpu"), tiers.append(0)
    for leaf in range(leaves):
        names.append(f"leaf{leaf:02d}"), kinds.append("switch"), tiers.append(1)
    for s in range(spines):
        names.append(f"spine{s:02d}"), kinds.append("switch"), tiers.append(2)
    index = {n: i for i, n in enumerate(names)}
    pairs: list[tuple[str, str]] = []
    for g in range(leaves * gpus_per_leaf):
        pairs.append((f"gpu{g:04d}", f"leaf{g // gpus_per_leaf:02d}"))
    for leaf in range(leaves):
        for s in range(spines):
            pairs.append((f"leaf{leaf:02d}", f"spine{s:02d}"))
    src: list[int] = []
    dst: list[int] = []
    link_names: list[str] = []
    reverse: list[int] = []
    for a, b in pairs:
        n = len(link_names)
        for x, y in ((a, b), (b, a)):
            link_names.append(f"{x}->{y}")
            src.append(index[x])
            dst.append(index[y])
        reverse += [n + 1, n]
    n_links = len(link_names)
    nodes = NodeTable(
        name=tuple(names),
        kind=tuple(kinds),
        tier=np.array(tiers, dtype=np.int8),
        plane=np.zeros(len(names), dtype=np.int16),
        index=index,
    )
    links = LinkTable(
        name=tuple(link_names),
        src=np.array(src, dtype=np.int32),
        dst=np.array(dst, dtype=np.int32),
        tier=tuple(f"{kinds[s]}-{kinds[d]}" for s, d in zip(src, dst, strict=True)),
        bandwidth_Bps=np.full(n_links, 50e9),
        prop_delay_s=np.full(n_links, 1e-8),
        buffer_bytes=np.full(n_links, 256e3),
        reverse=np.array(reverse, dtype=np.int32),
        index={n: i for i, n in enumerate(link_names)},
    )
    return nodes, links


def snapshot(
    *,
    tick: int = 1,
    utilisation: list[float] | None = None,
    status: dict[str, int] | None = None,
    events: tuple[Event, ...] = (),
    running: bool = True,
    base: tuple[NodeTable, LinkTable] | None = None,
) -> Snapshot:
    """A snapshot with chosen utilisations (by link index) and statuses (by link name)."""
    nodes, links = base or tables()
    n = len(links)
    util = np.zeros(n)
    if utilisation is not None:
        util[: len(utilisation)] = utilisation
    st = np.zeros(n, dtype=np.int8)
    for name, value in (status or {}).items():
        st[links.index[name]] = value
    zeros = np.zeros(n)
    hist = Histogram()
    hist.observe_many(np.array([1e-6, 2e-6, 5e-6]) * (1 + tick % 3))
    state = LinkState(
        status=st,
        utilisation=util,
        queue_bytes=util * 1e5,
        queue_vl_bytes=np.zeros((n, 2)),
        credits_bytes=256e3 - util * 1e5,
        paused=np.zeros(n, dtype=bool),
        tx_bytes_total=zeros + tick,
        tx_packets_total=zeros,
        transmit_wait_seconds_total=zeros,
        pause_frames_total=zeros,
        pause_seconds_total=zeros,
        ecn_marked_packets_total=zeros,
        cnp_handled_total=zeros,
        pause_frames_vl_total=np.zeros((n, 2)),
        pause_seconds_vl_total=np.zeros((n, 2)),
        discards_bytes_total=zeros,
        retransmitted_bytes_total=zeros,
        link_downed_total=zeros,
        link_error_recovery_total=zeros,
        symbol_errors_total=zeros,
    )
    return Snapshot(
        cluster="synthetic",
        scenario="synthetic",
        profile="native-400g",
        flow_control="credit",
        seed=1,
        tick=tick,
        sim_time_s=tick * 1e-6,
        dt_s=1e-6,
        wall_time_s=0.0,
        target_speed=1e-3,
        measured_speed=0.0,
        running=running,
        nodes=nodes,
        links=links,
        link_state=state,
        totals=Totals(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0),
        latency={"bulk": hist.freeze()},
        workloads={},
        faults=(),
        events=events,
        params={},
    )


class StubSource:
    """A ``FabricSource`` whose snapshot the test sets; it records the commands sent."""

    description = "synthetic"

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.commands: list[Command] = []

    def latest(self) -> Snapshot | None:
        """The snapshot the test set last."""
        return self.snap

    async def submit(self, command: Command) -> CommandResult:
        """Record the command; accept it."""
        self.commands.append(command)
        return CommandResult(id=command.id, ok=True)

    def set(self, snap: Snapshot) -> None:
        """Publish a new snapshot."""
        self.snap = snap

    def advance(self, **changes: object) -> None:
        """Publish the same snapshot one tick later, with ``changes``."""
        self.snap = replace(self.snap, tick=self.snap.tick + 1, **changes)  # type: ignore[arg-type]
