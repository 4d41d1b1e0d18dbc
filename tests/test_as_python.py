"""A first run's ticks as Python while the kernels compile aside (``kernels.as_python``,
``kernels.warmup``): the same run as compiled, nothing compiled or loaded meanwhile, the
compiled kernels back once they are in the cache, and the live engine's tick kept."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numba
import numpy as np
import pytest

from console.cli.run import print_summary
from fabric_core.commands import InjectFault
from fabric_core.planes.coordinator import PlanedFabric
from fabric_core.planes.pool import InProcessPool
from fabric_core.reports.record import Recorder, fabric_digest, replay
from fabric_core.reports.run import report_of
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.tick.kernels import as_python, sorting, warmup
from tests.helpers import until

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def compiled_after() -> Iterator[None]:
    """The kernels compiled again after the test, whatever it left."""
    try:
        yield
    finally:
        as_python.run_compiled()


def _state(fabric: Fabric) -> list[float]:
    return [
        fabric.tick, fabric.sim_time_s, fabric.delivered_bytes, fabric.dropped_bytes,
        fabric.completed_flows, fabric.hop_updates, float(fabric.link_book.occupancy.sum()),
        float(fabric.flows.delivered.sum()),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("scenario", "profile", "ticks"),
    [("default", None, 8), ("tiny", "roce-400g", 30), ("default", "roce-400g", 8)],
)
def test_ticks_run_as_python_are_the_compiled_ones(
    scenario: str, profile: str | None, ticks: int, compiled_after: None
) -> None:
    """Some ticks as Python, a link taken down among them, then compiled: the fabric is
    where a compiled run leaves it, bit for bit (on RoCE: PFC, ECN and DCQCN too)."""
    fabrics = [Fabric.from_scenario(load_scenario(scenario, profile=profile)) for _ in range(2)]
    down = InjectFault(kind="link_down", target="leaf00->spine01")
    whole = fabrics[0]
    whole.run_ticks(ticks // 2)
    whole.apply(down)
    whole.run_ticks(2 * ticks - ticks // 2)
    half = fabrics[1]
    half.run_ticks(1)  # (its warm-up: none, with the cache filled)
    as_python.run_as_python()
    assert as_python.running_as_python()
    with np.errstate(all="ignore"):
        half.run_ticks(ticks // 2 - 1)
        half.apply(down)
        half.run_ticks(ticks - ticks // 2)
    assert as_python.running_as_python()  # (nothing asked numba to compile)
    as_python.run_compiled()
    half.run_ticks(ticks)
    assert _state(half) == _state(whole)
    assert fabric_digest(half) == fabric_digest(whole)


def test_a_run_recorded_with_ticks_as_python_replays_exactly(compiled_after: None) -> None:
    """A record whose first ticks, and a command among them, ran as Python replays
    compiled with every digest the same: the kernels as Python hand the fabric what the
    compiled ones do, Python's numbers, not numpy's scalars (whose ``repr`` the digests
    would tell apart)."""
    scn = load_scenario("tiny")
    fabric = Fabric.from_scenario(scn)
    rec = Recorder.start(scn, fabric)
    engine = Engine(fabric, on_command=rec.on_command)
    fabric.run_ticks(1)
    as_python.run_as_python()
    with np.errstate(all="ignore"):
        fabric.run_ticks(12)
        engine.apply(InjectFault(kind="link_down", target="leaf00->spine01", id="a1"))
        fabric.run_ticks(7)
    assert isinstance(fabric.delivered_bytes, float) and type(fabric.completed_flows) is int
    as_python.run_compiled()
    fabric.run_ticks(20)
    report = report_of(fabric, fabric.tick, fabric.hop_updates, 0.0)
    record = json.loads(json.dumps(rec.to_dict(report)))  # (as a file reads back)
    result = replay(record)
    assert result.checked == 2 and result.mismatches == [] and result.ok


NOTHING_COMPILED = textwrap.dedent(
    """
    import importlib, json, sys
    import numpy as np
    from numba.core.dispatcher import Dispatcher
    from fabric_core.commands import InjectFault
    from fabric_core.runtime.fabric import Fabric
    from fabric_core.runtime.scenario import load_scenario
    from fabric_core.tick.kernels import as_python
    from fabric_core.tick.lazy import LazyModule

    def named():  # the kernels the core's modules name, and what they name them with
        return [(n, k, v) for n, m in list(sys.modules.items()) if n.startswith("fabric_core")
                for k, v in list(vars(m).items())]

    fabric = Fabric.from_scenario(load_scenario("default", profile=sys.argv[1]))
    fabric._warmed_up = True  # (no warm-up: this process runs them as Python itself)
    for lazy in [v for _, _, v in named() if isinstance(v, LazyModule)]:
        # each reads its kernels once, and keeps them: as a run compiled before would have
        module = importlib.import_module(lazy._name)
        for name, value in list(vars(module).items()):
            if isinstance(value, Dispatcher):
                getattr(lazy, name)
    kernels = {(n, k): v for n, k, v in named() if isinstance(v, Dispatcher)}
    as_python.run_as_python()
    with np.errstate(all="ignore"):
        fabric.run_ticks(2)
        fabric.apply(InjectFault(kind="link_down", target="leaf00->spine01"))
        fabric.run_ticks(2)
    loaded = sorted(f"{n}.{k}" for (n, k), v in kernels.items() if v.overloads)
    left = sorted(f"{n}.{k}" for n, k, v in named() if isinstance(v, Dispatcher))
    as_python.run_compiled()
    back = {(n, k) for n, k, v in named() if isinstance(v, Dispatcher)}
    print(json.dumps({"kernels": len(kernels), "loaded": loaded, "left": left,
                      "back": sorted(f"{n}.{k}" for n, k in kernels.keys() - back)}))
    """
)


@pytest.mark.parametrize("profile", ["native-400g", "roce-400g"])
def test_no_kernel_is_compiled_or_loaded_while_the_ticks_run_as_python(profile: str) -> None:
    """In a fresh process, ticks as Python, and a link taken down among them, call no
    compiled kernel (one would be compiled, or loaded from the cache, where the run
    stands): every kernel the core names is a Python function meanwhile, and each is
    named by its kernel again after."""
    proc = subprocess.run(
        [sys.executable, "-c", NOTHING_COMPILED, profile],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["kernels"] > 50  # (the core's kernels were all imported and named)
    assert got["loaded"] == [] and got["left"] == [] and got["back"] == []


def test_numba_asked_to_compile_meanwhile_puts_the_compiled_kernels_back(
    compiled_after: None,
) -> None:
    """A kernel numba compiles while the kernels run as Python (here one the core does
    not name) is typed from kernels, not Python functions: the compiled ones are put back
    first, and the run goes on compiled."""
    stable_argsort = sorting.stable_argsort

    @numba.njit
    def reversed_order(a: np.ndarray) -> np.ndarray:
        return stable_argsort(a)[::-1]

    as_python.run_as_python()
    assert sorting.stable_argsort is not stable_argsort
    assert as_python.compiled(sorting.stable_argsort) is stable_argsort
    order = reversed_order(np.array([3.0, 1.0, 2.0]))
    assert order.tolist() == [0, 2, 1]
    assert not as_python.running_as_python()
    assert sorting.stable_argsort is stable_argsort


@contextmanager
def _compiling_aside(
    monkeypatch: pytest.MonkeyPatch, helper_s: float
) -> Iterator[tuple[Fabric, subprocess.Popen[bytes]]]:
    """A ``tiny`` fabric (1 µs ticks) whose kernels compile aside for as long as a helper
    runs, ``helper_s`` at most (killed after the block), its ticks as Python meanwhile."""
    monkeypatch.setattr(warmup, "cached", lambda entry: False)
    helper = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({helper_s})"])
    try:
        fabric = Fabric.from_scenario(load_scenario("tiny"))
        fabric._warmed_up = True
        entry = warmup.load_manifest()[0]
        fabric.kernel_warm_up = warmup.WarmUp(
            (), (entry,), (), None, deadline=1e18, awaited=(entry,), helpers=(helper,)
        )
        as_python.run_as_python()
        yield fabric, helper
    finally:
        helper.kill()
        helper.wait()


async def test_the_engine_keeps_its_tick_while_the_ticks_run_as_python(
    monkeypatch: pytest.MonkeyPatch, compiled_after: None
) -> None:
    """Far behind its pace as Python, the live engine does not lengthen its tick (it would
    run coarser for nothing: the compiled ticks keep up); once the helpers are done the
    ticks run compiled, and the engine adapts as before."""
    with _compiling_aside(monkeypatch, helper_s=60) as (fabric, helper):
        engine = Engine(
            fabric, speed=0.5, publish_interval_s=0.01, max_batch_wall_s=0.02, max_tick_s=32e-6
        )
        task = asyncio.create_task(engine.run())
        try:
            # behind its pace for many batches (a tick lengthens after three behind)
            await until(lambda: fabric.python_ticks >= 40, timeout=60.0)
            assert fabric.compiling_aside and as_python.running_as_python()
            assert fabric.dt_s == 1e-6
            helper.kill()
            await until(lambda: not fabric.compiling_aside, timeout=30.0)
            assert not as_python.running_as_python()
            await until(lambda: fabric.dt_s >= 2e-6, timeout=30.0)  # behind, compiled: adapts
        finally:
            engine.stop()
            await task


def test_a_run_says_how_many_ticks_ran_as_python(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], compiled_after: None
) -> None:
    """The report counts them (``run.as_python``) and the summary says so: their speed
    is not the run's."""
    with _compiling_aside(monkeypatch, helper_s=60) as (fabric, _):
        fabric.run_ticks(5)
    report = report_of(fabric, 5, fabric.hop_updates, 1.0)
    assert report["run"]["as_python"]["ticks"] == 5
    assert report["run"]["as_python"]["wall_seconds"] > 0
    print_summary(report)
    assert "the first 5 ticks ran as Python" in capsys.readouterr().out


def test_the_kernels_over_the_cores_wait_for_the_ticks_as_python_to_end(
    monkeypatch: pytest.MonkeyPatch, compiled_after: None
) -> None:
    """A fabric that reaches the entries of the kernels over the cores while its ticks run
    as Python gets the serial ones, as Python, and no third helper competing with the two
    that compile the kernels; after, the helper is started as before."""
    started: list[str] = []
    monkeypatch.setenv(warmup.HELPER_ENV, "1")
    monkeypatch.setattr(warmup, "_parallel_ready", False)
    monkeypatch.setattr(warmup, "_parallel_helper", None)
    monkeypatch.setattr(warmup, "cached", lambda entry: False)
    monkeypatch.setattr(
        warmup, "_start_helper", lambda share, fd, section="kernels": started.append(section)
    )
    as_python.run_as_python()
    assert not warmup.parallel_ready() and started == []
    as_python.run_compiled()
    warmup.parallel_ready()
    assert started == ["parallel"]


def test_after_a_tick_as_python_too_long_the_run_waits_for_the_compiled_kernels(
    monkeypatch: pytest.MonkeyPatch, compiled_after: None
) -> None:
    """A large fabric's tick as Python takes seconds to a minute: after one past
    ``AS_PYTHON_LONGEST_TICK_S`` the run runs no other as Python, it waits for the
    kernels (here: for their helper to end) and runs compiled."""
    monkeypatch.setattr(warmup, "AS_PYTHON_LONGEST_TICK_S", 0.0)
    with _compiling_aside(monkeypatch, helper_s=1) as (fabric, helper):
        fabric.run_ticks(5)
        assert helper.poll() is not None  # (it waited for it)
    assert fabric.python_ticks == 1 and fabric.tick == 5
    assert not as_python.running_as_python() and not fabric.compiling_aside


def test_a_fabric_of_planes_says_when_a_plane_runs_its_ticks_as_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One engine per plane: each plane warms its kernels up in its own process, and the
    coordinator says, batch by batch, whether one of them runs its ticks as Python (for
    the live engine, which keeps its tick meanwhile)."""
    fabric = PlanedFabric(load_scenario("planes-2"), InProcessPool)
    fabric.run_ticks(2)
    assert not fabric.compiling_aside
    monkeypatch.setattr(Fabric, "compiling_aside", property(lambda self: True))
    fabric.run_ticks(2)
    assert fabric.compiling_aside
    monkeypatch.undo()
    fabric.run_ticks(2)
    assert not fabric.compiling_aside
