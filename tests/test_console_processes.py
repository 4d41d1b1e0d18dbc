"""The compare view with each fabric's engine in its own process (``fabtop --compare``'s
default): through the keys an operator presses, a fault, pause and speed reach both
fabrics at the same simulated time, the two stay in lockstep, and a child that stops
is reported while the other side keeps running."""

from __future__ import annotations

import dataclasses
import mmap
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from console import process_source
from console.app import FabtopApp
from console.process_source import (
    FRESH_S,
    OUT_OF_BAND_BYTES,
    SLOT,
    EngineSpec,
    ProcessEngines,
    ProcessSource,
    start_engines,
)
from console.screens.compare import CompareScreen
from console.screens.fault_form import FaultFormScreen
from fabric_core.commands import Pause
from fabric_core.runtime.scenario import load_scenario
from fabric_core.tick.kernels.warmup import AS_PYTHON_NOTE, HELPER_ENV
from tests.helpers import settle
from tests.kernel_cache import cache_lacking, manifest
from tests.test_console_screens import shown

SIZE = (140, 44)


@pytest.fixture
def group() -> Iterator[ProcessEngines]:
    """``tiny`` on native and on RoCE, one process each, at a fixed tick."""
    specs = [
        EngineSpec(load_scenario("tiny"), "engine process native-400g", speed=2e-4),
        EngineSpec(load_scenario("tiny", profile="roce-400g"), "engine process roce", speed=2e-4),
    ]
    engines = start_engines(specs)
    assert engines is not None
    yield engines
    engines.close()


def sides(group: ProcessEngines) -> tuple[ProcessSource, ProcessSource]:
    left, right = group.sources
    return left, right


def app_for(group: ProcessEngines) -> FabtopApp:
    left, right = sides(group)
    return FabtopApp(left, compare_sources=(left, right), render_interval_s=0.05)


def clock(src: ProcessSource) -> float:
    """Where the child engine is now (the clock it shares with its peer)."""
    return float(src.group.clocks[SLOT * src.slot])


async def open_compare(pilot: Pilot[None], left: ProcessSource, right: ProcessSource) -> None:
    """Wait for both sides' first snapshots, then open the compare view."""
    await settle(pilot, lambda: left.latest() is not None and right.latest() is not None)
    await pilot.press("c")
    await pilot.pause()


async def test_a_fault_from_the_compare_view_reaches_both_at_the_same_time(
    group: ProcessEngines,
) -> None:
    left, right = sides(group)
    app = app_for(group)
    async with app.run_test(size=SIZE) as pilot:
        await open_compare(pilot, left, right)
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        for target in ("leaf00->spine01", "leaf01->spine00"):
            await settle(pilot, lambda: min(clock(left), clock(right)) > 0)
            await pilot.press("i")
            form = app.screen
            assert isinstance(form, FaultFormScreen)
            form.query_one("#target", Input).value = target
            await pilot.press("enter")

            def injected(target: str = target) -> bool:
                return all(
                    any(f.target == target for f in s.latest().faults)  # type: ignore[union-attr]
                    for s in (left, right)
                )

            await settle(pilot, injected)
        at = [[(f.target, f.injected_at_s) for f in s.latest().faults] for s in (left, right)]  # type: ignore[union-attr]
        assert len(at[0]) == 2 and at[0] == at[1], at
        await settle(pilot, lambda: "2 active" in shown(screen.query_one("#right")))
        assert "engine process roce" in shown(screen.query_one("#right"))


async def test_pause_and_speed_from_the_compare_view_reach_both(group: ProcessEngines) -> None:
    left, right = sides(group)
    app = app_for(group)
    async with app.run_test(size=SIZE) as pilot:
        await open_compare(pilot, left, right)
        await pilot.press("plus")
        await settle(
            pilot,
            lambda: all(s.latest().target_speed == 4e-4 for s in (left, right)),  # type: ignore[union-attr]
        )
        await pilot.press("p")
        await settle(pilot, lambda: not any(s.latest().running for s in (left, right)))  # type: ignore[union-attr]
        paused = [s.latest().sim_time_s for s in (left, right)]  # type: ignore[union-attr]
        assert paused[0] == paused[1]  # the same tick boundary on both
        await pilot.press("p")
        await settle(pilot, lambda: all(s.latest().running for s in (left, right)))  # type: ignore[union-attr]
        await settle(pilot, lambda: min(clock(left), clock(right)) > paused[0])
        assert "speed 4e-4× on both" in shown(app.screen.query_one("#speed-line"))


async def test_the_engine_ahead_waits_for_a_stalled_peer(group: ProcessEngines) -> None:
    """README: the one that gets ahead waits for the other (here: a child stopped by a
    signal, as a busy machine might hold it up), so both show the same moment."""
    left, right = sides(group)
    app = app_for(group)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, lambda: min(clock(left), clock(right)) > 0)
        assert right.process is not None and right.process.pid is not None
        os.kill(right.process.pid, signal.SIGSTOP)
        try:
            stalled_at = clock(right)
            # the left engine runs at most one batch past the stalled one, then waits
            await settle(pilot, lambda: clock(left) >= stalled_at)
            await pilot.pause(0.5)
            waiting_at = clock(left)
            await pilot.pause(0.5)
            assert clock(left) == waiting_at
        finally:
            os.kill(right.process.pid, signal.SIGCONT)
        await settle(pilot, lambda: clock(left) > waiting_at and clock(right) > waiting_at)


async def test_a_dead_engine_process_is_reported_and_the_other_side_keeps_running(
    group: ProcessEngines,
) -> None:
    left, right = sides(group)
    app = app_for(group)
    async with app.run_test(size=SIZE) as pilot:
        await open_compare(pilot, left, right)
        assert right.process is not None
        right.process.kill()
        await settle(pilot, lambda: right.failure is not None)
        assert "SIGKILL" in (right.failure or "")
        await settle(pilot, lambda: any(n.title == "engine stopped" for n in app._notifications))
        told = next(n.message for n in app._notifications if n.title == "engine stopped")
        assert "engine process roce" in told and "SIGKILL" in told
        await settle(
            pilot, lambda: "engine process stopped" in shown(app.screen.query_one("#right"))
        )
        # the other side keeps running ...
        now = clock(left)
        await settle(pilot, lambda: clock(left) > now + 1e-6)
        # ... and still takes commands: the fault goes to the live side, the dead one says why
        await pilot.press("i")
        form = app.screen
        assert isinstance(form, FaultFormScreen)
        form.query_one("#target", Input).value = "leaf00->spine01"
        await pilot.press("enter")
        await settle(pilot, lambda: bool(left.latest().active_faults))  # type: ignore[union-attr]
        assert right.latest() is not None  # the last snapshot stays on screen
        result = await right.submit(Pause())
        assert not result.ok and "engine process stopped" in (result.error or "")


def test_a_fabric_that_cannot_be_built_is_refused_before_the_console_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    broken = dataclasses.replace(load_scenario("tiny"), topology={"kind": "moebius"})
    group = start_engines([EngineSpec(broken, "engine process broken", speed=1e-3)])
    assert group is None
    err = capsys.readouterr().err
    assert "fabtop: engine process broken: cannot build the fabric" in err


def test_the_console_can_still_run_its_engines_in_process() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "console.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    ).stdout
    assert "--in-process" in out


def test_the_console_takes_in_only_the_snapshots_it_reads() -> None:
    """The child sends a snapshot only once the console has read the last one: an engine
    publishing tens a second to a console that reads none sends one, not all of them; each
    read lets one more through (docs/PERFORMANCE.md, "The console's own cost")."""
    spec = EngineSpec(load_scenario("tiny"), "engine process tiny", speed=0.0)
    group = start_engines([dataclasses.replace(spec, publish_interval_s=0.01)])
    assert group is not None
    try:
        (src,) = group.sources
        deadline = time.monotonic() + 30
        while src.received == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.5)  # the engine publishes; the console reads none
        assert src.received == 1
        for k in range(2, 6):
            src.latest()  # read: the child may send the next one
            while src.received < k:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            time.sleep(0.1)  # more published: none sent before the next read
            assert src.received == k
        # unread for a while, however busy the machine: still the one snapshot
        while src.published < src.received + 10:
            assert time.monotonic() < deadline
            time.sleep(0.5)
            assert src.received == k
            k += 1
            src.latest()
            while src.received < k:
                assert time.monotonic() < deadline
                time.sleep(0.01)
        # every one published would have been taken in before
        assert src.published >= src.received + 10, (src.published, src.received)
    finally:
        group.close()


def test_a_large_snapshot_arrives_as_read_only_shared_memory() -> None:
    """Arrays of 64 kB or more are views of memory the child passed, not copies through
    the pipe; they are read-only like the snapshot's own and the same values."""
    topology = {"kind": "leaf-spine", "leaves": 64, "spines": 16, "gpus_per_leaf": 64}
    scn = dataclasses.replace(load_scenario("tiny"), topology=topology)
    group = start_engines([EngineSpec(scn, "engine process big", speed=0.0)])
    assert group is not None
    try:
        (src,) = group.sources
        deadline = time.monotonic() + 60
        while src.latest() is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        snap = src.latest()
        assert snap is not None
        util = snap.link_state.utilisation
        assert util.nbytes >= OUT_OF_BAND_BYTES
        base: object = util
        while isinstance(base, np.ndarray):
            base = base.base
        assert isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)
        assert not util.flags.writeable
        assert len(util) == len(snap.links) and np.isfinite(util).all()
        assert (snap.link_state.tx_bytes_total >= 0).all()
    finally:
        group.close()


def test_the_exporter_gets_a_fresh_snapshot_while_the_view_reads_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The exporter reads on its own (``latest_fresh``): with the view frozen, a scrape
    does not get the snapshot sent after the view's last read but waits for a new one.
    (The wait is the product's 1 s; here it is a bound against a hang, not a timing
    assertion: on a CI machine with both cores busy the engine took longer to send the
    next one, twice in session 42, and the scrape got the old snapshot.)"""
    monkeypatch.setattr(process_source, "FRESH_WAIT_S", 60.0)
    spec = EngineSpec(load_scenario("tiny"), "engine process tiny", speed=0.0)
    group = start_engines([dataclasses.replace(spec, publish_interval_s=0.01)])
    assert group is not None
    try:
        (src,) = group.sources
        # past its first ticks, whose kernels an engine in a fresh checkout may still be
        # compiling (for longer than FRESH_WAIT_S, with no snapshot sent meanwhile)
        deadline = time.monotonic() + 120
        while (snap := src.latest()) is None or snap.tick < 100:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        # the one the engine sends after a read (it then waits), waited for under the lock
        # the receiver holds while it records one: read without it, a busy machine could
        # show the new snapshot before its count and time were written, and the time
        # written after the sleep below made it look fresh (session 45, under load)
        with src._arrived:
            assert src._arrived.wait_for(lambda: src._latest is not snap, timeout=120)
            seen = src.received
        time.sleep(FRESH_S + 0.2)  # the view is frozen: the one sent since is old now
        old = src._latest
        assert old is not None and src.received == seen
        fresh = src.latest_fresh()
        assert fresh is not None and fresh is not old and src.received == seen + 1
        assert fresh.sim_time_s > old.sim_time_s
    finally:
        group.close()


async def test_a_first_run_says_in_the_header_what_it_compiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first run after an install (an empty kernel cache) compiles for seconds, in
    helpers, while its ticks run as Python: the header says so, and the simulated time
    moves meanwhile, then it runs. (Its cache lacks three kernels of some seconds each
    and whatever the manifest lacks, ``tests/kernel_cache.py``: empty, it took 40 s of
    both cores to show the same.)"""
    lacking = [e for e in manifest() if e.name in ("entry_index", "finish_flows", "move_step")]
    assert len(lacking) == 3, "a kernel named here is gone from the manifest"
    cache_lacking(tmp_path, lacking)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))  # the child compiles what it lacks
    monkeypatch.setenv(HELPER_ENV, "1")  # with the helper, as a user's first run does
    engines = start_engines([EngineSpec(load_scenario("tiny"), "engine process", speed=1e-3)])
    assert engines is not None
    (source,) = engines.sources
    app = FabtopApp(source, render_interval_s=0.05)
    seen: set[str] = set()
    try:
        async with app.run_test(size=SIZE) as pilot:

            def header() -> str:
                text = app.header_bar.text.plain
                if "⧗ compiling" in text:
                    seen.add(text.split("⧗ compiling")[1].split("·")[0].strip())
                return text

            await settle(pilot, lambda: "⧗ compiling" in header(), limit=1200)
            assert "the first run after an install" in header()
            # the fabric moves while the kernels compile aside
            await settle(
                pilot,
                lambda: "⧗ compiling" in header() and "sim 0 s" not in header(),
                limit=1200,
            )
            await settle(pilot, lambda: "▶ running" in header(), limit=2400)
    finally:
        engines.close()
    assert source.compiling is None
    assert seen == {AS_PYTHON_NOTE}, seen  # (nothing compiled in the engine's process)
