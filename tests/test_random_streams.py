"""Each workload draws from a random stream of its own (``workloads.base.workload_rngs``):
what it draws does not depend on the fabric's own draws or on the other workloads'."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from fabric_core.runtime import busy
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario, parse_scenario
from fabric_core.workloads import Workload
from fabric_core.workloads.base import workload_rngs

Offered = list[tuple[float, list[int], list[int], list[float]]]


def _offered(fabric: Fabric, name: str, ticks: int) -> Offered:
    """What workload ``name`` asks for, tick by tick: (time, sources, peers, sizes)."""
    wl = next(w for w in fabric.workloads if w.name == name)
    seen: Offered = []
    generate = wl.generate

    def recording(now_s: float, dt_s: float, rng: np.random.Generator) -> Any:
        req = generate(now_s, dt_s, rng)
        if len(req):
            seen.append((now_s, req.src.tolist(), req.dst.tolist(), req.size_bytes.tolist()))
        return req

    wl.generate = recording  # type: ignore[method-assign]
    # every tick through ``generate`` (busy ticks at once make the same flows in a kernel:
    # tests/test_busy.py)
    saved, busy.ENABLED = busy.ENABLED, False
    try:
        fabric.run_ticks(ticks)
    finally:
        busy.ENABLED = saved
    return seen


def test_an_open_loop_workload_offers_both_fabrics_the_same_arrivals() -> None:
    """RoCE draws for DCQCN every tick from the fabric's generator; the RPC probes' Poisson
    arrivals, peers and sizes are the same on both fabrics all the same."""
    runs = {
        p: _offered(Fabric.from_scenario(load_scenario("tiny", profile=p)), "probe", 400)
        for p in ("native-400g", "roce-400g")
    }
    native, roce = runs["native-400g"], runs["roce-400g"]
    assert len(native) > 3  # 20,000 a second over 400 µs: about 8 messages
    assert native == roce


def test_adding_a_workload_leaves_the_others_draws_alone() -> None:
    raw = copy.deepcopy(load_scenario("tiny").raw)
    base = _offered(Fabric.from_scenario(parse_scenario(raw, "tiny")), "probe", 300)
    extra = {"name": "more", "kind": "rpc", "class": "rpc", "size": "2KiB", "rate_per_s": 50000}
    raw["workload"].insert(0, extra)
    more = Fabric.from_scenario(parse_scenario(raw, "tiny+"))
    assert _offered(more, "probe", 300) == base
    # (and the new workload draws something else than the probes)
    assert _offered(Fabric.from_scenario(parse_scenario(raw, "tiny+")), "more", 300) != base


def test_streams_differ_by_seed_name_and_occurrence() -> None:
    def first(seed: int, names: list[str]) -> list[float]:
        wls = [Workload(name=n, traffic_class="bulk") for n in names]
        return [float(g.random()) for g in workload_rngs(seed, wls)]

    a, b = first(1, ["x", "y"])
    assert a != b
    assert first(1, ["x", "y"]) == [a, b]  # the same seed and names: the same streams
    assert first(2, ["x"])[0] != a
    twice = first(1, ["x", "x"])
    assert twice[0] == a and twice[1] != a  # a name used twice: two streams
