"""One engine per plane on Ray (``cluster.ray_planes``; issue 19): each plane of
``planes-2`` a Ray actor on a local cluster of this machine (2 CPUs, loopback only),
held to the same coordinator run in one process (``tests/test_planes.py``).

One cluster serves the module (starting it takes seconds); each test starts its own
plane actors. The speed of the two is compared by ``benchmarks/bench_planes.py``, not here.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

# the test extra installs Ray (``fabtop[cluster]``): without it these fail, never skip
import ray

from cluster import ray_planes
from cluster.ray_planes import RayPool, ray_pool_factory
from fabric_core.commands import ClearFault, CommandError, InjectFault, SetTick
from fabric_core.net.tables import LinkStatus
from fabric_core.planes.coordinator import PlanedFabric
from fabric_core.planes.pool import InProcessPool, PlaneLostError
from fabric_core.reports.record import Recorder, load_record, replay
from fabric_core.reports.run import summarise
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.scenario import load_scenario

pytestmark = pytest.mark.slow

TICKS = 400


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[None]:
    """A Ray cluster of 2 CPUs on this machine for the module, stopped at its end (one
    already up in this process, another module's, is used as it is)."""
    owns = not ray.is_initialized()
    if owns:
        ray_planes.start_local_cluster(num_cpus=2)
    try:
        yield
    finally:
        if owns:
            ray.shutdown()


def planed(pool: Any, batch_ticks: int = 8) -> PlanedFabric:
    return PlanedFabric(load_scenario("planes-2"), pool, batch_ticks=batch_ticks)


def assert_close(a: Any, b: Any, where: str = "report") -> None:
    """Every number in two reports within 1e-6 relative; everything else equal."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            assert_close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_close(x, y, f"{where}[{i}]")
    elif isinstance(a, int | float) and not isinstance(a, bool):
        assert isinstance(b, int | float), where
        assert math.isclose(a, b, rel_tol=1e-6, abs_tol=0.0) or a == b, (where, a, b)
    else:
        assert a == b, (where, a, b)


def test_distributed_run_reports_what_one_process_does(local_cluster: None) -> None:
    ray_fabric = planed(ray_pool_factory(None))
    try:
        assert ray_fabric.pool.placement == "ray"
        # the local cluster is on the loopback interface only
        assert ray_fabric.pool.address.startswith("127.0.0.1:")  # type: ignore[attr-defined]
        pids = ray_fabric.pool.pids  # type: ignore[attr-defined]
        assert len(set(pids)) == 2 and os.getpid() not in pids
        # the planes run at this process's priority (Ray's default niceness is 15)
        actors = ray_fabric.pool.actors  # type: ignore[attr-defined]
        assert ray.get([a.niceness.remote() for a in actors]) == [os.nice(0)] * 2
        ray_fabric.run_ticks(TICKS)
        distributed = summarise(ray_fabric.snapshot())
    finally:
        ray_fabric.close()
    here = planed(InProcessPool)
    here.run_ticks(TICKS)
    one_process = summarise(here.snapshot())
    assert one_process["totals"]["completed_flows"] > 1000
    assert_close(distributed, one_process)


def test_a_fault_lands_on_its_plane_only(local_cluster: None) -> None:
    fabric = planed(RayPool)
    try:
        fabric.run_ticks(16)
        fabric.apply(InjectFault(kind="link_down", target="p1leaf00->p1spine00"))
        fabric.run_ticks(16)
        snap = fabric.snapshot()
    finally:
        fabric.close()
    names = list(snap.links.name)
    status = np.asarray(snap.link_state.status)
    down = {names[i] for i in np.flatnonzero(status == LinkStatus.DOWN)}
    assert {"p1leaf00->p1spine00", "p1spine00->p1leaf00"} <= down
    plane = np.asarray(snap.nodes.plane)
    src, dst = np.asarray(snap.links.src), np.asarray(snap.links.dst)
    in_plane0 = (plane[src] == 0) & (snap.nodes.tier[src] > 0) | (plane[dst] == 0) & (
        snap.nodes.tier[dst] > 0
    )
    assert not (status[in_plane0] == LinkStatus.DOWN).any()
    assert [f.target for f in snap.faults] == ["p1leaf00->p1spine00"]


def test_a_killed_plane_worker_ends_the_run_with_an_event(local_cluster: None) -> None:
    fabric = planed(RayPool)
    try:
        fabric.run_ticks(16)
        fabric.snapshot()
        os.kill(fabric.pool.pids[1], signal.SIGKILL)  # type: ignore[attr-defined]
        with pytest.raises(PlaneLostError) as lost:
            fabric.run_ticks(16)
        assert lost.value.plane == 1
        assert "plane 1" in str(lost.value) and "died" in str(lost.value)
        snap = fabric.snapshot()
        events = [e for e in snap.events if e.kind == "plane_lost"]
        assert [(e.target, e.severity) for e in events] == [("plane1", "error")]
        assert "plane 1" in events[0].message
        # the run has stopped: it does not go on, and says why
        with pytest.raises(PlaneLostError):
            fabric.run_ticks(1)
    finally:
        fabric.close()
    # the other plane's actor is gone too, and the cluster is still up for the next one
    assert ray.is_initialized()


def test_a_killed_worker_ends_the_engines_run_and_loses_no_recorded_command(
    local_cluster: None, tmp_path: Path
) -> None:
    """The engine runs the Ray planes with a recorder; commands apply; plane 1's worker
    is killed: the run ends with the event, and the record holds every command applied,
    with the state after each, and replays them (its planes in one process)."""
    scn = load_scenario("planes-2")
    fabric = PlanedFabric(scn, RayPool, batch_ticks=8)
    recorder = Recorder.start(scn, fabric)

    async def main() -> Engine:
        engine = Engine(fabric, speed=2e-4, on_command=recorder.on_command)
        task = asyncio.create_task(engine.run())
        for cmd in (
            InjectFault(kind="link_down", target="p1leaf00->p1spine01"),
            SetTick(dt_s=2e-6),
            ClearFault(all=True),
        ):
            assert (await engine.submit(cmd)).ok
        while fabric.tick < 40:
            await asyncio.sleep(0.01)
        os.kill(fabric.pool.pids[1], signal.SIGKILL)  # type: ignore[attr-defined]
        await asyncio.wait_for(task, timeout=120)  # the run ends on its own
        return engine

    try:
        engine = asyncio.run(main())
    finally:
        fabric.close()
    assert engine.ended is not None and "plane 1's engine was lost" in engine.ended
    last = engine.bus.latest
    assert last is not None
    assert [e.target for e in last.events if e.kind == "plane_lost"] == ["plane1"]
    assert [c["command"]["command"] for c in recorder.commands] == ["inject", "tick", "clear"]
    path = tmp_path / "killed.record"
    recorder.save(path)
    result = replay(load_record(path))
    assert result.ok and result.checked == 3, result.mismatches


def test_a_plane_lost_under_a_command_stops_the_run(local_cluster: None) -> None:
    fabric = planed(RayPool)
    try:
        fabric.run_ticks(8)
        fabric.snapshot()
        os.kill(fabric.pool.pids[0], signal.SIGKILL)  # type: ignore[attr-defined]
        with pytest.raises(CommandError, match="plane 0's engine was lost"):
            fabric.apply(InjectFault(kind="link_down", target="p0leaf00->p0spine00"))
        events = [e for e in fabric.snapshot().events if e.kind == "plane_lost"]
        assert [e.target for e in events] == ["plane0"]
        with pytest.raises(PlaneLostError):
            fabric.run_ticks(1)
    finally:
        fabric.close()


def test_without_ray_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[cluster\]'"):
        RayPool([])


def test_a_cluster_address_nothing_listens_at_fails_at_once() -> None:
    """A wrong ``RAY_ADDRESS`` is refused in seconds, naming it (Ray alone retries for
    minutes), and ``fabtop run`` says so and exits 2."""
    with socket.socket() as s:  # a port just freed: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ray_planes.ClusterError, match=f"127.0.0.1:{port}.*RAY_ADDRESS"):
        ray_planes.check_reachable(f"127.0.0.1:{port}")
    r = subprocess.run(
        [sys.executable, "-m", "console.cli", "run", "planes-2", "--planes-distributed"],
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "RAY_ADDRESS": f"127.0.0.1:{port}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert f"could not connect to the Ray cluster at 127.0.0.1:{port}" in r.stderr, r.stderr
