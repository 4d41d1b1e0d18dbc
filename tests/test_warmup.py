"""The first run's compiling over two processes (``fabric_core.tick.kernels.warmup``): the
manifest names what a run compiles, with types that read back exactly, and with an empty
kernel cache a run compiles its share and the helper the rest, after which the run
compiles nothing more."""

from __future__ import annotations

import copy
import errno
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numba
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numba.core import types

from fabric_core.runtime import busy, kernel_manifest, uneventful
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.tick.kernels import as_python, tick, warmup
from fabric_core.tick.kernels._jit import compiles_watched
from fabric_core.tick.kernels.warmup import Entry, split, type_name, type_of
from tests.kernel_cache import cache_lacking

REPO = Path(__file__).resolve().parent.parent


def test_every_argument_type_of_the_manifest_reads_back_as_written() -> None:
    entries = warmup.load_manifest()
    assert entries, "an empty manifest"
    for entry in entries:
        for name in entry.args:
            assert type_name(type_of(name)) == name


def test_the_argument_types_are_numbas_own() -> None:
    assert type_of("readonly float64[::1]") == types.Array(types.float64, 1, "C", readonly=True)
    assert type_of("int32[:, :, ::1]") == types.Array(types.int32, 3, "C")
    assert type_of("bool[::1]") == types.Array(types.boolean, 1, "C")
    assert type_of("int64") == types.int64 and type_of("bool") == types.boolean
    assert type_of("omitted(1)") == types.Omitted(1)
    for bad in ("float64[:]", "float64[::1, :]", "readonly int64", "str", "numpy.ndarray"):
        with pytest.raises(ValueError, match="not an argument type"):
            type_of(bad)
    with pytest.raises(ValueError, match="no name"):
        type_name(types.Array(types.float64, 1, "A"))


@given(st.lists(st.floats(0.0, 10.0), max_size=30), st.floats(0.0, 2.0))
def test_the_two_shares_are_all_the_kernels_once_and_end_about_together(
    seconds: list[float], start_s: float
) -> None:
    entries = [Entry("m", f"k{i}", (), s) for i, s in enumerate(seconds)]
    mine, theirs = split(entries, start_s)
    assert sorted(mine + theirs) == list(range(len(entries)))
    assert mine == sorted(mine) and theirs == sorted(theirs)  # in the order a run meets them
    here = sum(seconds[i] for i in mine)
    there = start_s + sum(seconds[i] for i in theirs)
    # longest first, each to the side that ends sooner: the two ends differ by at most the
    # last kernel placed, so by at most the longest (or the helper's start, if it gets none)
    assert abs(here - there) <= max([start_s, *seconds]) + 1e-9


def test_the_manifest_names_the_types_the_default_scenario_calls_its_kernels_with(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each entry is a kernel the default scenario's first ticks call, with the very
    argument types: a kernel renamed or an argument changed since the manifest was
    written fails here (``python -m fabric_core.runtime.kernel_manifest --write`` writes it
    anew)."""
    monkeypatch.setenv(warmup.HELPER_ENV, "0")
    fabric = Fabric.from_scenario(load_scenario(kernel_manifest.RECORD_SCENARIO))
    # as the manifest was recorded (``record``): busy ticks one by one with the deferred
    # kernels held back (new flows started step by step) and then not (even if a helper
    # of this process's first run compiles them still), then busy ticks at once
    monkeypatch.setattr(busy, "ENABLED", False)
    monkeypatch.setattr(uneventful, "held_back", lambda: True)
    fabric.run_ticks(kernel_manifest.RECORD_TICKS)
    monkeypatch.setattr(uneventful, "held_back", None)
    fabric.run_ticks(kernel_manifest.RECORD_TICKS)
    monkeypatch.setattr(busy, "ENABLED", True)
    fabric.run_ticks(kernel_manifest.BUSY_TICKS)
    for entry in warmup.load_manifest():
        kernel = entry.dispatcher()
        assert entry.signature() in kernel.signatures, (
            f"{entry.module}.{entry.name} is not called with {entry.args} any more: "
            "write the manifest anew (python -m fabric_core.runtime.kernel_manifest --write)"
        )


def test_the_compiles_reported_are_those_asked_for_not_those_inside_them() -> None:
    @numba.njit
    def inner(x: float) -> float:
        return x * 2

    @numba.njit
    def outer(x: float) -> float:
        return inner(x) + 1

    seen: list[str | None] = []
    with compiles_watched(seen.append):
        outer(1.0)  # compiles outer, and inner inside it
        outer(2.0)  # compiled already: nothing
        outer(1)  # another argument type: compiles again
    outer(3.5)  # not watched
    assert seen == ["outer", None, "outer", None]


def test_the_lock_is_held_by_one_descriptor_and_missing_where_it_cannot_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cache" / "warmup.lock"
    fd = warmup._try_lock(path)
    assert fd >= 0 and path.exists()
    try:
        assert warmup._try_lock(path) == warmup.HELD
        assert not warmup._lock_free(path)
    finally:
        os.close(fd)
    assert warmup._lock_free(path)
    # a file that cannot be made, a file system without flock: no lock, not someone's
    (tmp_path / "file").write_text("")
    assert warmup._try_lock(tmp_path / "file" / "warmup.lock") == warmup.UNAVAILABLE

    def no_flock(fd: int, op: int) -> None:
        raise OSError(errno.ENOSYS, "flock not implemented")

    monkeypatch.setattr(warmup.fcntl, "flock", no_flock)
    assert warmup._try_lock(path) == warmup.UNAVAILABLE
    assert warmup._lock_free(path)


@pytest.mark.parametrize("lock", [warmup.UNAVAILABLE, warmup.HELD])
def test_a_cold_cache_is_warmed_here_unless_another_process_does(
    lock: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no lock to be had the process warms up as if alone (its share, and all of it
    when no helper starts); with the lock held elsewhere it compiles nothing and waits."""
    compiled: list[list[str]] = []
    monkeypatch.setattr(warmup, "_done", False)
    monkeypatch.setattr(warmup, "_current", None)
    monkeypatch.setenv(warmup.HELPER_ENV, "1")
    monkeypatch.setattr(warmup, "cached", lambda entry: False)
    monkeypatch.setattr(warmup, "_try_lock", lambda path: lock)
    monkeypatch.setattr(warmup, "_start_helper", lambda share, fd: None)
    monkeypatch.setattr(warmup, "compile_entries", lambda es: compiled.append([e.name for e in es]))
    monkeypatch.setattr(warmup, "_wait_until", lambda stop, share, deadline: None)
    try:
        done = warmup.warm_up()
        running_as_python = as_python.running_as_python()
    finally:
        as_python.run_compiled()
    assert done is not None
    assert warmup.warm_up() is done  # (once a process: every fabric shares it)
    entries = warmup.load_manifest()
    if lock == warmup.HELD:
        # it waits for them as Python
        assert compiled == [] and done.compiled_here == () and done.lock is not None
        assert running_as_python and done.awaited
    else:
        deferred = {name for _, name in warmup.DEFERRABLE}
        assert compiled == [[e.name for e in entries if e.name not in deferred]]
        assert done.lock is None


def test_two_threads_warming_up_at_once_share_one_warm_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two engines in one process (the compare view's, ``--in-process``) that reach their
    first tick together: one warms up, the other waits for it and gets the same answer,
    not None (which would leave its fabric compiling beside the helpers)."""
    monkeypatch.setattr(warmup, "_done", False)
    monkeypatch.setattr(warmup, "_current", None)
    monkeypatch.setenv(warmup.HELPER_ENV, "1")
    monkeypatch.setattr(warmup, "cached", lambda entry: False)
    monkeypatch.setattr(warmup, "_try_lock", lambda path: warmup.UNAVAILABLE)
    monkeypatch.setattr(warmup, "_start_helper", lambda share, fd: None)
    monkeypatch.setattr(warmup, "compile_entries", lambda entries: time.sleep(0.3))
    answers: list[warmup.WarmUp | None] = []
    threads = [threading.Thread(target=lambda: answers.append(warmup.warm_up())) for _ in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 2 and answers[0] is not None and answers[0] is answers[1]


CACHED_CHECK = textwrap.dedent(
    """
    import numpy as np
    from fabric_core.tick.kernels import traffic, warmup

    entry = next(e for e in warmup.load_manifest() if e.name == "count_finished")
    answers = [warmup.cached(entry)]
    traffic.count_finished(np.zeros(3, dtype=np.int32), np.zeros(2, dtype=np.int64))
    answers.append(warmup.cached(entry))  # another signature: not this one
    warmup.compile_entries([entry])
    answers.append(warmup.cached(entry))
    disp = entry.dispatcher()
    files = disp._cache._cache_file
    key = disp._cache._index_key(entry.signature(), disp.targetctx.codegen())
    import os
    os.unlink(files._data_path(files._load_index()[key]))
    answers.append(warmup.cached(entry))  # an index whose data is not (yet) there
    print(answers)
    """
)


def test_cached_means_this_signature_with_its_machine_code(tmp_path: Path) -> None:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", CACHED_CHECK], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-4:] == ["[False,", "False,", "True,", "False]"]


FILL_CHECK = textwrap.dedent(
    """
    import json
    from fabric_core.tick.kernels import warmup

    # the manifest's first five kernels (a few seconds of compiling), a prefix, so that the
    # helper, which reads the whole manifest, finds its share at the same places
    first = warmup.load_manifest()[:5]
    warmup._manifest = lambda section: first if section == "kernels" else []
    compiled = warmup.fill_cache()
    print(json.dumps({
        "compiled": [e.name for e in compiled],
        "cached": [warmup.cached(e) for e in first],
        "again": [e.name for e in warmup.fill_cache()],
    }))
    """
)


def test_a_test_run_fills_the_cache_once_over_two_processes(tmp_path: Path) -> None:
    """``fill_cache`` (a test run's start, ``tests/conftest.py``) compiles what the cache
    lacks, its share here and the rest in a helper, and then nothing."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", FILL_CHECK], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    first = warmup.load_manifest()[:5]
    assert got["compiled"] == [e.name for e in first]
    assert got["cached"] == [True] * 5
    assert got["again"] == []
    mine, theirs = split(first)
    assert mine and theirs, "the split gives both processes a share"


def test_the_manifest_names_the_types_of_the_kernels_over_the_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(warmup.HELPER_ENV, "0")
    monkeypatch.setattr(tick, "PARALLEL_FROM_ENTRIES", 1)
    monkeypatch.setattr(tick, "ONLY_WAY", 1)
    fabric = Fabric.from_scenario(load_scenario(kernel_manifest.RECORD_SCENARIO))
    fabric.run_ticks(kernel_manifest.PARALLEL_TICKS)
    entries = warmup.load_manifest(section="parallel")
    assert {e.name for e in entries} == {
        "solve_tick_parallel",
        "entry_index_parallel",
        "move_step_parallel",
        "credit_wait_parallel",
        "credit_room_parallel",
        "flow_values_parallel",
    }
    for entry in entries:
        assert entry.signature() in entry.dispatcher().signatures, entry.name


COLD_RUN = textwrap.dedent(
    """
    import json, time
    from fabric_core.runtime import uneventful
    from fabric_core.runtime.fabric import Fabric
    from fabric_core.runtime.kernel_manifest import RECORD_SCENARIO, RECORD_TICKS
    from fabric_core.runtime.scenario import load_scenario
    from fabric_core.tick.kernels import as_python, solve, tick, warmup
    from fabric_core.tick.kernels._jit import compiles_watched

    fabric = Fabric.from_scenario(load_scenario(RECORD_SCENARIO))
    first = []  # the first call compiles them all, here and in the helper
    with compiles_watched(lambda kernel: kernel and first.append(kernel)):
        fabric.run_ticks(1)
    done = fabric.kernel_warm_up
    first_as_python = fabric.python_ticks == 1
    # (however slow the machine: a run stops holding the deferred kernels back at this
    # deadline, against a stuck helper, which is not what is tested here)
    done.deadline = time.monotonic() + 900
    later = []
    serial_meanwhile = parallel_ran = None
    with compiles_watched(lambda kernel: kernel and later.append(kernel)):
        fabric.run_ticks(RECORD_TICKS)
        held = uneventful.held_back is not None
        while done.compiling_deferred():
            time.sleep(0.05)
        code = None if done.helper is None else done.helper.wait()
        fabric.run_ticks(RECORD_TICKS)  # ticks at once again, from the cache
        state = [fabric.tick, fabric.delivered_bytes, fabric.completed_flows,
                 fabric.hop_updates, float(fabric.link_book.occupancy.sum())]
        if PARALLEL:  # the solve over the cores from a few entries on: compiled aside
            tick.PARALLEL_FROM_ENTRIES = 1
            fabric.run_ticks(3)
            serial_meanwhile = not warmup.parallel_ready()
            while not warmup.parallel_ready():
                fabric.run_ticks(1)
                time.sleep(0.05)
            fabric.run_ticks(30)
            parallel_ran = bool(solve.solve_tick_parallel.signatures)
    print(json.dumps({
        "here": [e.name for e in done.compiled_here],
        "helper": [e.name for e in done.helper_share],
        "followed": done.lock is not None,
        "held": held,
        "helper_exit": code,
        "compiled_first": first,
        "compiled_later": later,
        "released": uneventful.held_back is None,
        "serial_meanwhile": serial_meanwhile,
        "parallel_ran": parallel_ran,
        "first_as_python": first_as_python,
        "python_ticks": fabric.python_ticks,
        "python_now": as_python.running_as_python(),
        "state": state,
    }))
    """
)


def _run(script: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def _cold_run_lacks() -> tuple[Entry, Entry, list[Entry]]:
    """What the cold run's cache lacks: the cheapest kernel of each process's share (so
    that each compiles one), the deferred ``uneventful_ticks`` and the cheapest kernel over
    the cores (so that a helper compiles them while the run goes on)."""
    deferred = {name for _, name in warmup.DEFERRABLE}
    now = [e for e in warmup.load_manifest() if e.name not in deferred]
    mine, theirs = split(now)
    here = min((now[i] for i in mine), key=lambda e: e.seconds)
    helper = min((now[i] for i in theirs), key=lambda e: e.seconds)
    later = next(e for e in warmup.load_manifest() if e.name == "uneventful_ticks")
    over_cores = min(warmup.load_manifest(section="parallel"), key=lambda e: e.seconds)
    return here, helper, [here, helper, later, over_cores]


def _warm_state() -> list[float]:
    """What ``COLD_RUN``'s fabric holds after its ticks, run here from a filled cache."""
    fabric = Fabric.from_scenario(load_scenario(kernel_manifest.RECORD_SCENARIO))
    for n in (1, kernel_manifest.RECORD_TICKS, kernel_manifest.RECORD_TICKS):
        fabric.run_ticks(n)
    return [
        fabric.tick, fabric.delivered_bytes, fabric.completed_flows,
        fabric.hop_updates, float(fabric.link_book.occupancy.sum()),
    ]  # fmt: skip


@pytest.mark.parametrize("as_python", ["1", "0"])
def test_a_first_run_compiles_aside_and_then_nothing(as_python: str, tmp_path: Path) -> None:
    """With a cache that lacks kernels, ``warm_up`` has them compiled aside: by two
    helpers while the run's ticks run as Python (or, with ``AS_PYTHON_ENV`` 0, its share
    here and the rest by a helper); the run then meets every kernel in the cache (nothing
    is reported compiling), the ticks-at-once kernel held back until the helper is done
    with it, and the solve over the cores until a helper has compiled the kernel over the
    cores it lacks (the serial one meanwhile). The fabric ends where a run from a filled
    cache does. A second process started meanwhile on the same cache (the compare view's
    other engine) compiles none of them: it waits for them to land in the cache, its
    ticks as Python meanwhile. The cache holds the manifest's other kernels
    (``tests/kernel_cache.py``): empty, the processes would take two minutes of both
    cores to compile the same way; any kernel the run calls that the manifest lacks is
    not there either."""
    here, helper, lacking = _cold_run_lacks()
    cache_lacking(tmp_path, lacking)
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": str(tmp_path),
        warmup.HELPER_ENV: "1",
        warmup.AS_PYTHON_ENV: as_python,
    }
    over_cores = numba.config.NUMBA_NUM_THREADS > 1  # type: ignore[attr-defined]
    first = _run(f"PARALLEL = {over_cores}\n{COLD_RUN}", env)
    for _ in range(1200):  # until the first holds the warm-up's lock (a bound on a hang)
        if _locked(tmp_path):
            break
        assert first.poll() is None, first.communicate()[1][-3000:]
        time.sleep(0.05)
    second = _run(f"PARALLEL = False\n{COLD_RUN}", env)
    got, followed = _result(first), _result(second)
    names = [e.name for e in warmup.load_manifest()]
    assert sorted(got["here"] + got["helper"]) == sorted(names)
    # what the first tick compiled or waited for is the manifest's: a kernel added to the
    # tick and not to the manifest would compile here, under a name not in it
    kernels = {warmup._kernel_name(e) for e in warmup.load_manifest()}
    if as_python == "1":
        # nothing compiled here: the first tick ran as Python, and said so
        assert got["compiled_first"] == [warmup.AS_PYTHON_NOTE] and got["here"] == []
        assert got["first_as_python"] and not got["python_now"]
    else:
        assert set(got["compiled_first"]) <= kernels, set(got["compiled_first"]) - kernels
        # each compiled the kernel of its share that the cache lacked: the run this one,
        # and it waited for the helper's (the run's first tick reports both)
        assert here.name in got["here"] and helper.name in got["helper"]
        assert {warmup._kernel_name(here), warmup._kernel_name(helper)} <= set(
            got["compiled_first"]
        )
        assert got["python_ticks"] == 0
    assert "uneventful_ticks" in got["helper"] and got["held"]
    assert got["helper_exit"] == 0
    assert got["compiled_later"] == []
    assert got["released"]
    assert got["state"] == followed["state"] == _warm_state()
    if over_cores:  # the kernels over the cores came from a helper, the serial ran meanwhile
        assert got["serial_meanwhile"] and got["parallel_ran"]
    assert followed["followed"] and followed["here"] == [] and followed["helper"] == []
    assert set(followed["compiled_first"]) <= kernels | {warmup.AS_PYTHON_NOTE}
    assert followed["compiled_later"] == []
    assert followed["released"] and not followed["python_now"]


def _locked(cache: Path) -> bool:
    """Whether a process holds the warm-up's lock under ``cache`` (read from the kernel's
    table of locks, ``/proc/locks``, not by trying it: a try takes it for an instant)."""
    locks = list(cache.rglob("warmup.lock"))
    if not locks:
        return False
    inode = locks[0].stat().st_ino
    return any(
        line.split()[5].endswith(f":{inode}")
        for line in Path("/proc/locks").read_text().splitlines()
        if "FLOCK" in line
    )


def test_a_fabric_copied_after_its_warm_up_shares_it() -> None:
    """A fabric whose first run started a helper can be copied (``bench_core --threads``
    copies a warmed fabric): the copy shares the process's one warm-up, helper and all."""
    helper = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        done = warmup.WarmUp((), (), (), helper, deadline=0.0)
        fabric = Fabric.from_scenario(load_scenario("tiny"))
        fabric.kernel_warm_up = done
        assert copy.deepcopy(fabric).kernel_warm_up is done
    finally:
        helper.wait()
