"""Uneventful ticks run in one compiled call (``fabric_core.runtime.uneventful``) leave the
fabric exactly as the same ticks run one by one through ``Fabric.step``: every array of
the flow table, the link book, the PFC queues and the DCQCN senders, the totals, the
generator's state, the throughput window, the fault tracking's history, the latency
histograms and the event log. And they are run: most ticks of a quiet fabric go through
the compiled loop, none of a fabric with a Poisson workload (its draws every tick)."""

from __future__ import annotations

import copy
import io
import pickle
import types
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_core.net.profiles import NATIVE_400G, NATIVE_800G, ROCE_400G
from fabric_core.net.topology import leaf_spine
from fabric_core.runtime import busy
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.workloads.traffic import AllToAll, Bulk, Incast, Pairs, Rpc, Scripted
from tests.helpers import draw_flows, scenario_alone


def _arrays(obj: object, prefix: str, out: dict[str, Any]) -> None:
    for name, value in vars(obj).items():
        if isinstance(value, np.ndarray):
            out[prefix + name] = value.copy()
        elif isinstance(value, dict):
            for key, inner in value.items():
                if isinstance(inner, np.ndarray):
                    out[f"{prefix}{name}.{key}"] = inner.copy()


def state(f: Fabric) -> dict[str, Any]:
    """Everything a tick may change, as plain values (the generator by its next draws,
    which leaves the fabric's own generator as it was)."""
    out: dict[str, Any] = {}
    _arrays(f.flows, "flows.", out)
    _arrays(f.link_book, "links.", out)
    if f.roce is not None:
        _arrays(f.roce.pfc, "pfc.", out)
        _arrays(f.roce.dcqcn, "dcqcn.", out)
        out["cnps"] = f.roce.dcqcn.cnps_total
        out["deadlocks"] = f.roce.deadlocks
        out["deadlock_set"] = f.roce._deadlock_set
        if f.roce._pause is not None:
            _arrays(f.roce._pause, "pause.", out)
    for name in ("tick", "sim_time_s", "delivered_bytes", "dropped_bytes", "hop_updates"):
        out[name] = getattr(f, name)
    out["completed"] = f.completed_flows
    out["rng"] = copy.deepcopy(f.rng).random(4)
    out["window"] = list(f._window)
    out["history"] = list(f.faults.delivered_history)
    out["latency"] = {c: h.freeze().counts.tolist() for c, h in f.class_hist.items()}
    out["events"] = [(e.time_s, e.kind, e.target, e.message) for e in f.events]
    out["workloads"] = [
        (
            {k: "nan" if v != v else v for k, v in wl.kpis(f.sim_time_s).items()},
            {k: h.freeze().counts.tolist() for k, h in wl.histograms.items()},
        )
        for wl in f.workloads
    ]
    if f.solution is not None:
        out["solution"] = f.solution.padded.copy()
    return out


def assert_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], np.ndarray):
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        else:
            assert a[key] == b[key], key


def run_both(build: Any, ticks: int, batch: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """The fabric ``build()`` makes, run ``ticks`` ticks one by one and in batches of
    ``batch`` (uneventful ones at once), compared after every batch; returns the ticks
    run at once."""
    one_by_one, at_once = build(), build()
    counted = [0]
    run = Fabric._run_uneventful

    def counting(f: Fabric, most: int) -> int:
        ran = run(f, most) if f is at_once else 0
        counted[0] += ran
        return ran

    monkeypatch.setattr(Fabric, "_run_uneventful", counting)
    monkeypatch.setattr(busy, "ENABLED", False)  # (busy ticks at once: tests/test_busy.py)
    done = 0
    while done < ticks:
        n = min(batch, ticks - done)
        one_by_one.run_ticks(n)
        at_once.run_ticks(n)
        done += n
        assert_same(state(one_by_one), state(at_once))
    assert at_once.completed_flows > 0  # flows finished inside the batches
    return counted[0]


@pytest.mark.parametrize(
    ("scenario", "profile", "least"),
    [
        ("incast-100g", None, 0.95),  # RoCE, DCQCN: the incast to its end
        ("incast-100g", "native-400g", 0.95),  # credits
        ("incast-100g", "native-800g", 0.95),  # sprayed sub-flows
        ("pfc-deadlock", "roce-400g", 0.8),  # a deadlock reported from a tick run at once
        ("chaos-linkdown", "roce-400g", 0.3),  # quiet until the fault, then tick by tick
        ("chaos-recovery", "native-400g", 0.3),
        ("moe-ep64-nvlink", None, 0.05),  # quiet between an MoE layer's phases
    ],
)
def test_ticks_run_at_once_leave_the_fabric_as_ticks_run_one_by_one(
    scenario: str, profile: str | None, least: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    ticks = 1100

    def build() -> Fabric:
        return Fabric.from_scenario(load_scenario(scenario, profile=profile))

    assert run_both(build, ticks, 97, monkeypatch) >= least * ticks


def test_a_fabric_with_a_poisson_workload_runs_almost_every_tick_through_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default scenario's RPC probes arrive 2.6 times a tick on average, and its
    bulk flows start as others end: hardly a tick is uneventful, and the results are the
    same."""

    def build() -> Fabric:
        return Fabric.from_scenario(load_scenario("default"))

    ticks = 120
    assert run_both(build, ticks, 40, monkeypatch) <= 0.05 * ticks


@pytest.mark.parametrize("prof", [NATIVE_400G, ROCE_400G, NATIVE_800G], ids=lambda p: p.name)
def test_an_idle_fabric_between_flows_passes_its_ticks_at_once(
    prof: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two flows 300 µs apart: the ticks between, with nothing in flight, pass at once."""
    topo = leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=2)
    idx = topo.nodes.index
    rows = [
        (idx["gpu0000"], idx["gpu0003"], 2e5, 0.0),
        (idx["gpu0001"], idx["gpu0002"], 3e5, 300e-6),
    ]

    def build() -> Fabric:
        wl = Scripted(name="two", traffic_class="bulk", flows=list(rows))
        return Fabric(topo, prof, [wl], dt_s=1e-6, seed=3)

    assert run_both(build, 500, 64, monkeypatch) > 400


@pytest.mark.parametrize(
    ("scenario", "kind", "settings"),
    [
        ("storage-kvcache", "kvcache", {}),
        ("storage-random-read", "storage_io", {}),
        ("training-nfs", "training", {}),
        ("checkpoint-burst", "checkpoint", {}),
        ("pd-llama70b", "pd", {"rate_per_s": 300, "context_tokens": 512}),
        ("pd-llama70b", "pd", {"rate_per_s": 300, "context_tokens": 512, "transport": "tcp"}),
    ],
)
def test_storage_and_inference_alone_pass_their_quiet_ticks_at_once(
    scenario: str, kind: str, settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A storage or inference workload alone (its scenario's RPC probes, which send nearly
    every tick, left out): the ticks between its requests, I/Os and transfers pass at once,
    and leave the fabric as ticks run one by one."""

    def build() -> Fabric:
        return scenario_alone(scenario, kind, **settings)

    assert run_both(build, 1500, 100, monkeypatch) > 100


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_flows_and_batches_give_the_same_fabric(data: st.DataObject) -> None:
    """Random scripted flows on a small fabric, credit or PFC, in random batches."""
    prof = data.draw(st.sampled_from([NATIVE_400G, ROCE_400G, NATIVE_800G]))
    topo = leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=3)
    rows = draw_flows(data.draw, topo.gpus, 6)
    batches = data.draw(st.lists(st.integers(1, 60), min_size=4, max_size=12))

    def build() -> Fabric:
        wl = Scripted(name="random", traffic_class="bulk", flows=list(rows))
        return Fabric(topo, prof, [wl], dt_s=1e-6, seed=5)

    one_by_one, at_once = build(), build()
    for n in batches:
        for _ in range(n):
            one_by_one.step()
        at_once.run_ticks(n)
        assert_same(state(one_by_one), state(at_once))


def _workloads() -> list[Any]:
    return [
        Bulk(name="bulk", traffic_class="bulk", senders_spec=4, size_bytes=1e5),
        Incast(name="incast", traffic_class="bulk", senders_spec=3, period_s=40e-6),
        AllToAll(name="a2a", traffic_class="bulk", ranks_spec=3, size_bytes=2e4, period_s=30e-6),
        Pairs(name="pairs", traffic_class="bulk", pair_names=[("gpu0000", "gpu0005")]),
        Scripted(name="script", traffic_class="bulk", flows=[(0, 5, 1e4, 57e-6)]),
        Rpc(name="rpc", traffic_class="bulk", rate_per_s=2e4),
    ]


def _traffic_fabric(pick: int) -> tuple[Fabric, Any]:
    topo = leaf_spine(NATIVE_400G, leaves=2, spines=1, gpus_per_leaf=3)
    wl = _workloads()[pick]
    return Fabric(topo, NATIVE_400G, [wl], dt_s=1e-6, seed=2), wl


def _scenario_fabric(name: str) -> tuple[Fabric, Any]:
    fabric = Fabric.from_scenario(load_scenario(name))
    return fabric, fabric.workloads[0]


def _alone(scenario: str, kind: str, **settings: Any) -> tuple[Fabric, Any]:
    fabric = scenario_alone(scenario, kind, **settings)
    return fabric, fabric.workloads[0]


WORKLOADS = {w.kind: lambda i=i: _traffic_fabric(i) for i, w in enumerate(_workloads())} | {
    "moe-nvlink": lambda: _scenario_fabric("moe-ep64-nvlink"),  # NVLink and the NIC
    "moe-proxy": lambda: _scenario_fabric("moe-proxy"),  # a CPU proxy posts the messages
    "kvcache": lambda: _scenario_fabric("storage-kvcache"),  # restores from NVMe targets
    "storage_io": lambda: _scenario_fabric("storage-random-read"),  # closed-loop reads
    "training": lambda: _alone("training-nfs", "training"),  # steps wait for their batches
    "checkpoint": lambda: _alone("checkpoint-burst", "checkpoint", start="100us"),  # a burst
    # PD requests often enough to queue: arrivals, starts, KV releases and messages
    "pd": lambda: _alone("pd-llama70b", "pd", rate_per_s=300, context_tokens=512),
    "pd-tcp": lambda: _alone(
        "pd-llama70b", "pd", rate_per_s=300, context_tokens=512, transport="tcp"
    ),
}


@pytest.mark.parametrize("kind", list(WORKLOADS))
def test_a_workload_is_silent_before_the_time_it_says_it_is_quiet_until(kind: str) -> None:
    """At every tick of a run, ``generate`` called on a copy for each tick that starts
    before ``quiet_until`` (with half a tick to spare, as the fabric asks) starts nothing
    and changes neither the workload nor the generator."""
    fabric, wl = WORKLOADS[kind]()
    shared = {id(fabric): fabric}  # the copies share the fabric, not the workload
    quiet_ticks = 0
    for _ in range(300):
        now, dt = fabric.sim_time_s, fabric.dt_s
        until = wl.quiet_until(now, dt)
        ahead, rng = copy.deepcopy(wl, dict(shared)), copy.deepcopy(fabric.rng)
        before = _state_of(ahead)
        k = 0
        while now + k * dt + 0.5 * dt < until and k < 50:
            assert len(ahead.generate(now + k * dt, dt, rng)) == 0
            k += 1
        quiet_ticks += k
        assert _state_of(ahead) == before
        np.testing.assert_array_equal(rng.random(3), copy.deepcopy(fabric.rng).random(3))
        fabric.step()
    assert quiet_ticks > 0


class _StatePickler(pickle.Pickler):
    """Pickles a workload's state, with the fabric it is attached to and the functions it
    holds (a storage system's callbacks into the fabric) by name only."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Fabric):
            return str, ("the fabric",)
        if isinstance(obj, types.FunctionType | types.MethodType):
            return str, (obj.__qualname__,)
        return NotImplemented


def _state_of(wl: Any) -> bytes:
    """The workload's state, all of it but the fabric it is attached to, as bytes."""
    out = io.BytesIO()
    _StatePickler(out).dump({k: v for k, v in vars(wl).items() if k != "fabric"})
    return out.getvalue()


@pytest.mark.parametrize("prof", [NATIVE_400G, ROCE_400G], ids=lambda p: p.name)
def test_flows_started_by_hand_on_an_idle_fabric_are_moved_from_their_first_tick(
    prof: Any,
) -> None:
    """An idle fabric's ticks pass at once; then flows are started by hand (as a fault's
    incast starts its own): their first tick cannot run at once (nothing the move and the
    solve keep exists yet), and it is not skipped either: the fabric is where one run tick
    by tick is."""
    topo = leaf_spine(prof, leaves=2, spines=2, gpus_per_leaf=2)

    def build() -> Fabric:
        fabric = Fabric(topo, prof, [], dt_s=1e-6, seed=4)
        fabric.run_ticks(10)
        return fabric

    one_by_one, at_once = build(), build()
    for fabric in (one_by_one, at_once):
        fabric.start_flows(
            topo.gpus[:3].astype(np.int64),
            topo.gpus[[3, 2, 0]].astype(np.int64),
            np.full(3, 3e5),
            traffic_class=0,
            workload=-1,
            tag=np.arange(3),
            ready_s=np.full(3, fabric.sim_time_s),
        )
    for _ in range(40):
        one_by_one.step()
    at_once.run_ticks(40)
    assert at_once.tick == 50
    assert_same(state(one_by_one), state(at_once))
