"""Small builders for core tests: fabrics with hand-placed flows."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from hypothesis import strategies as st
from numpy.typing import NDArray

from fabric_core.net.profiles import NATIVE_400G, Profile
from fabric_core.net.topology import Topology, leaf_spine
from fabric_core.runtime.fabric import SOLVERS, Fabric, Solver
from fabric_core.runtime.scenario import load_scenario, parse_scenario
from fabric_core.workloads.traffic import Scripted

if TYPE_CHECKING:
    from textual.pilot import Pilot

__all__ = [
    "SOLVERS",
    "bulk_leaf_spine",
    "credit_loop_bytes",
    "credit_loop_rate",
    "profile",
    "scenario_alone",
    "scripted_fabric",
    "settle",
    "small_leaf_spine",
    "until",
    "with_probe",
]


def bulk_leaf_spine(leaves: int, spines: int, gpus_per_leaf: int) -> Fabric:
    """A native leaf-spine fabric of that size with one bulk workload: names to look up
    (``gpu0000``.., ``leaf00``.., ``spine00``..) for the commands' tests."""
    topology = {"kind": "leaf-spine", "leaves": leaves, "spines": spines}
    scn = parse_scenario(
        {
            "name": "names",
            "topology": {**topology, "gpus_per_leaf": gpus_per_leaf},
            "workload": [{"name": "bg", "kind": "bulk", "class": "bulk", "size": "64KiB"}],
        }
    )
    return Fabric.from_scenario(scn)


def credit_loop_rate(fabric: Fabric, hops: list[str]) -> float:
    """The most a flow over ``hops`` carries by its credit loops: the least, over the
    hops into a switch, of the buffer per round trip of its credits, over the hop's cable
    and back and through the switch's forwarding time (docs/MODEL.md, "Credits"; a hop
    into an endpoint sinks at line rate)."""
    links = fabric.topo.links
    ids = [links.index[h] for h in hops if fabric.topo.nodes.tier[links.dst[links.index[h]]] > 0]
    s = fabric.profile.switch_latency_s
    return min(float(links.buffer_bytes[i] / (2 * links.prop_delay_s[i] + s)) for i in ids)


def credit_loop_bytes(
    fabric: Fabric, link: str, rate_in: float, rate_out: float | None = None
) -> float:
    """The bytes of ``link``'s credit loop in a steady state, with ``rate_in`` coming in
    over its cable and ``rate_out`` (default: the same) draining, whose credits go back
    over it: what a full buffer keeps free of its size (docs/MODEL.md, "Credits"). The
    switch's forwarding time ``s`` holds the bytes that came in, ``rate_in·s``, before
    they can leave; the model keeps the loop as ``(x + y)·(t + s/2)``, the same bytes
    where ``rate_in = rate_out``, so the two differ by ``(x - y)·s/2`` elsewhere."""
    out = rate_in if rate_out is None else rate_out
    t = float(fabric.topo.links.prop_delay_s[fabric.topo.links.index[link]])
    return (rate_in + out) * t + rate_in * fabric.profile.switch_latency_s


def profile(**overrides: Any) -> Profile:
    """The native profile with some parameters changed."""
    return dataclasses.replace(NATIVE_400G, **overrides)


def scenario_alone(scenario: str, kind: str, *, dt: str | None = None, **settings: Any) -> Fabric:
    """The bundled ``scenario`` with its workloads of ``kind`` alone (each with
    ``settings``), at tick ``dt`` if given."""
    raw = copy.deepcopy(load_scenario(scenario).raw)
    if dt is not None:
        raw["dt"] = dt
    raw["workload"] = [dict(w, **settings) for w in raw["workload"] if w["kind"] == kind]
    return Fabric.from_scenario(parse_scenario(raw, f"{scenario}, {kind} alone"))


def scripted_fabric(
    topo: Topology,
    prof: Profile,
    flows: list[tuple[str, str, float, float]],
    *,
    dt_s: float,
    traffic_class: str = "bulk",
    extra: list[tuple[str, str, list[tuple[str, str, float, float]]]] | None = None,
    class_vl: dict[str, int] | None = None,
    seed: int = 1,
    solver: Solver = "compiled",
) -> tuple[Fabric, list[Scripted]]:
    """A fabric running scripted flows ``(src name, dst name, bytes, start s)``.

    ``extra`` adds more scripted workloads as ``(name, class, flows)``; ``solver`` picks
    the compiled tick (the default) or the numpy reference.
    """
    idx = topo.nodes.index

    def conv(rows: list[tuple[str, str, float, float]]) -> list[tuple[int, int, float, float]]:
        return [(idx[s], idx[d], size, at) for s, d, size, at in rows]

    wls = [Scripted(name="main", traffic_class=traffic_class, flows=conv(flows))]
    for name, cls, rows in extra or []:
        wls.append(Scripted(name=name, traffic_class=cls, flows=conv(rows)))
    fabric = Fabric(topo, prof, list(wls), dt_s=dt_s, seed=seed, class_vl=class_vl, solver=solver)
    return fabric, wls


def with_probe(
    topo: Topology,
    prof: Profile,
    background: list[tuple[str, str, float, float]],
    probe: tuple[str, str, float, float],
    *,
    dt_s: float,
    solver: Solver = "compiled",
) -> tuple[Fabric, Scripted]:
    """``background`` flows as in ``scripted_fabric`` and one probe message beside them
    (a ``bulk``-class workload of its own), with the probe's workload."""
    fabric, (_, probe_workload) = scripted_fabric(
        topo, prof, background, dt_s=dt_s, extra=[("probe", "bulk", [probe])], solver=solver
    )
    return fabric, probe_workload


def small_leaf_spine(
    prof: Profile, leaves: int = 2, spines: int = 1, gpus_per_leaf: int = 4
) -> Topology:
    """A small 2-tier fabric."""
    return leaf_spine(prof, leaves=leaves, spines=spines, gpus_per_leaf=gpus_per_leaf)


async def until(
    cond: Callable[[], bool], what: str = "the condition", timeout: float = 30.0
) -> None:
    """Wait (polling every 20 ms) until ``cond()`` holds; fail naming ``what`` after
    ``timeout`` seconds (a bound against a hang, not a timing assertion)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def settle(pilot: Pilot[Any], cond: Callable[[], bool], limit: int = 400) -> None:
    """Let a Textual app run until ``cond()`` holds (a refresh timer or a worker must act
    first); fail after ``limit`` pauses of 50 ms. A bound against hangs, not a timing
    assertion: on a loaded machine it just takes more of the pauses."""
    for _ in range(limit):
        if cond():
            return
        await pilot.pause(0.05)
    raise AssertionError("the app never got there")


def draw_flows(
    draw: st.DrawFn, gpus: NDArray[np.int32], max_flows: int
) -> list[tuple[int, int, float, float]]:
    """Scripted flows for a hypothesis test: ``(src, dst, bytes, start s)`` between
    distinct GPUs (node ids), 1 B to 4 MB, starting in the first 30 µs, in start order."""
    n = int(gpus.size)
    rows = draw(
        st.lists(
            st.tuples(
                st.integers(0, n - 1),
                st.integers(0, n - 1),
                st.floats(1, 4e6),
                st.floats(0, 30e-6),
            ).filter(lambda t: t[0] != t[1]),
            min_size=1,
            max_size=max_flows,
        )
    )
    return sorted(
        ((int(gpus[s]), int(gpus[d]), size, at) for s, d, size, at in rows), key=lambda f: f[3]
    )


def step_resending(fabric: Fabric, nic: int) -> tuple[float, float]:
    """One tick: the bytes link ``nic`` resent and sent in it. Checks on the way that no
    link resends more than it sends and that only ``nic`` resends (a sender goes back to
    its own first link; no bit errors)."""
    before = fabric.snapshot().link_state
    fabric.step()
    after = fabric.snapshot().link_state
    sent = after.tx_bytes_total - before.tx_bytes_total
    resent = after.retransmitted_bytes_total - before.retransmitted_bytes_total
    assert (resent <= sent + 1e-6).all()
    assert np.count_nonzero(np.delete(resent, nic)) == 0
    return float(resent[nic]), float(sent[nic])
