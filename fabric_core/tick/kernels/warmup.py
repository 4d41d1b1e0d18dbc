"""The first run's compiling over two cores: helper processes compile the kernels into
numba's disk cache while the engine runs its ticks as Python (or compiles half itself).

numba compiles a kernel the first time it is called, in the calling process, one kernel
after another on one core: the first run after an install spent some 18 s so before its
first tick and some 30 s in its first 200 (docs/PERFORMANCE.md, "Start-up"). Which kernels
a run calls, and with what argument types, is known in advance: ``MANIFEST`` lists those
of the default scenario's first ticks with the seconds each took to compile (written by
``python -m fabric_core.runtime.kernel_manifest --write``; ``tests/test_warmup.py`` fails
when a kernel of it is called with other types now, or a first tick compiles one it lacks).

So before its first compiled tick a process calls ``warm_up``: when the cache lacks a
kernel of the manifest, it starts a helper process (``python -m`` this module) with
about half of the compiling (``split``: by the recorded seconds, the helper's start-up
counted), compiles the other half itself (or gives it to a second helper: below), and
waits for the helper's share but the
kernels a run can do without for a while (``DEFERRABLE``), which the helper compiles
last as the run goes on. Each kernel of the manifest is compiled once, by one of the
two (a kernel called inside two of them is compiled inside each), and the run then finds
every one in the cache (numba looks there before it compiles). Kernels a scenario needs beyond the manifest's compile
as they are met, as without a helper; a helper that fails or cannot start leaves its
share to be compiled the same way. One process at a time warms a cache up (a lock
beside it, which its helper keeps until it ends): another that starts meanwhile (the
compare view's second engine) waits for the kernels to land in the cache instead of
compiling them too. The kernels that share a tick over the cores (the solve, the index,
the move, the credits: the manifest's ``parallel`` section), which a fabric first needs when its index reaches ``kernels.tick.PARALLEL_FROM_ENTRIES``
entries, a helper compiles then, the serial ones running meanwhile (``parallel_ready``).
Nothing of this can change a result: the machine code is the same whichever process
compiles it, and the serial and parallel kernels give the same results bit for bit.

**Ticks as Python meanwhile.** Where both halves can go to helpers, they do, one helper
each, and this process does not wait for them: its ticks run the kernels as plain Python
(``kernels.as_python``; the same functions, the same results) until the kernels are in
the cache, then compiled. So the default scenario's first tick comes within a second or
two of the start instead of after the compiling. A tick as Python takes some 300 times
the compiled one there; the run rests after each (``AS_PYTHON_SHARE``) so that the
compiling keeps most of the cores, and after one past ``AS_PYTHON_LONGEST_TICK_S`` (a
large fabric's) it waits for the compiled kernels instead. A follower does the same
while it waits. ``AS_PYTHON_ENV`` set to 0 keeps the half here instead, as before
(``benchmarks/bench_core.py --startup`` times both).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
from numba.core import event as numba_event
from numba.core import types

from fabric_core.tick.kernels import as_python
from fabric_core.tick.kernels._jit import KEEP_CACHE_ENV, SOURCES_DIGEST, WAIT_EVENT

try:  # a lock between processes that warm up one cache (POSIX; elsewhere each alone)
    import fcntl
except ImportError:  # pragma: no cover (Windows)
    fcntl = None  # type: ignore[assignment]

#: The kernels of the default scenario's first ticks (see the module docstring).
MANIFEST = Path(__file__).with_name("warmup.json")
#: Set to 0 to start no helper: the engine compiles every kernel as it meets it
#: (``benchmarks/bench_core.py --startup`` times both ways).
HELPER_ENV = "FABTOP_WARMUP_HELPER"
#: This module, as ``python -m`` runs it (``__name__`` is ``__main__`` there).
MODULE = "fabric_core.tick.kernels.warmup"
#: About what a helper takes to start before it compiles (Python, numba, the core).
HELPER_START_S = 1.0
#: The longest ``warm_up`` waits for the helper once its own share is compiled; past
#: it the run goes on and compiles what is still missing as it meets it.
HELPER_WAIT_S = 120.0
#: How often ``warm_up`` looks whether the helper is done.
POLL_S = 0.05
#: Set to 0 to compile half of the kernels in this process before its first tick instead
#: of running its ticks as Python meanwhile (see the module docstring)
AS_PYTHON_ENV = "FABTOP_WARMUP_AS_PYTHON"
#: The share of a core the ticks run as Python take while the kernels compile aside: after
#: a tick that took t seconds the run rests ``t * (1 / AS_PYTHON_SHARE - 1)``. The
#: compiling, some 35 s of a core, is what the run waits for; the ticks as Python only
#: show it moving meanwhile, and at a quarter of a core the helpers keep about 1.75 of
#: the two cores this machine has (docs/PERFORMANCE.md, "Start-up", session 49).
AS_PYTHON_SHARE = 0.25
#: A tick as Python past this long is the last: the run waits for the compiled kernels
#: instead of running another (a large fabric's tick as Python takes from seconds to a
#: minute, and would only hold the compiled ticks back; the default scenario's take
#: 0.1-0.6 s)
AS_PYTHON_LONGEST_TICK_S = 1.0
#: What a process says it waits for while its ticks run as Python (``WAIT_EVENT``)
AS_PYTHON_NOTE = "kernels, ticks as Python"
#: The parent's ``SOURCES_DIGEST``, handed to its helper
DIGEST_ENV = "FABTOP_KERNEL_DIGEST"
#: The directory this ``fabric_core`` is in, where a helper runs
_ROOT = Path(__file__).resolve().parents[3]
#: Kernels a run can do without for a while, which the helper compiles last while the
#: run goes on: the ticks-at-once kernels (``runtime.uneventful``, ``runtime.busy``:
#: ticks run one by one give the same results) and the one-call start of new flows
#: (``kernels.start.start_routed``: flows started step by step, by the kernels it calls,
#: are the same flows). The run holds them back until the helper is done
#: (``runtime.uneventful.held_back``) instead of compiling them a second time.
DEFERRABLE = frozenset(
    {
        ("fabric_core.tick.kernels.start", "start_routed"),
        ("fabric_core.tick.kernels.uneventful", "uneventful_ticks"),
        ("fabric_core.tick.kernels.busy", "busy_ticks"),
    }
)


@dataclass(frozen=True)
class Entry:
    """One kernel compiled for one list of argument types: ``module.name(*args)``."""

    module: str
    name: str
    args: tuple[str, ...]
    seconds: float

    def dispatcher(self) -> Any:
        """The compiled kernel this names (also while the kernels run as Python)."""
        return as_python.compiled(getattr(importlib.import_module(self.module), self.name))

    def signature(self) -> tuple[types.Type, ...]:
        """The argument types, as numba's."""
        return tuple(type_of(a) for a in self.args)


def type_name(t: types.Type) -> str:
    """``t`` as the manifest writes it, e.g. ``readonly float64[::1]``, ``int64[:, ::1]``,
    ``int64``, ``omitted(1)``.

    Raises:
        ValueError: a type the manifest has no name for (an array not C-contiguous, say).
    """
    if isinstance(t, types.Array) and t.layout == "C" and t.ndim >= 1:
        dims = ", ".join([":"] * (t.ndim - 1) + ["::1"])
        return f"{'readonly ' if not t.mutable else ''}{t.dtype}[{dims}]"
    if isinstance(t, types.Boolean | types.Integer | types.Float):
        return str(t)
    if isinstance(t, types.NumPyRandomGeneratorType):
        return "numpy.random.Generator"
    if isinstance(t, types.Omitted) and isinstance(t.value, int | float | bool):
        return f"omitted({json.dumps(t.value)})"
    if isinstance(t, types.BaseTuple):  # (a group of arguments: ``kernels.busy``)
        members: tuple[types.Type, ...] = tuple(t.types) if hasattr(t, "types") else ()
        return "tuple(" + "; ".join(type_name(e) for e in members) + ")"
    raise ValueError(f"no name for the argument type {t}")


def type_of(name: str) -> types.Type:
    """The type ``type_name`` wrote as ``name``.

    Raises:
        ValueError: ``name`` is not one ``type_name`` writes.
    """
    if name == "numpy.random.Generator":
        return types.NumPyRandomGeneratorType("NumPyRandomGeneratorType")
    if name.startswith("tuple(") and name.endswith(")"):
        # numba's type of a tuple of these: one type for all (``UniTuple``) or one each
        parts = [type_of(e) for e in _tuple_parts(name[6:-1])]
        return cast(types.Type, types.BaseTuple.from_types(parts))  # type: ignore[no-untyped-call]
    if name.startswith("omitted(") and name.endswith(")"):
        value = json.loads(name[len("omitted(") : -1])
        return types.Omitted(value)  # type: ignore[no-untyped-call]
    readonly = name.startswith("readonly ")
    base = name.removeprefix("readonly ")
    if base.endswith("]") and "[" in base:
        dtype, dims = base[:-1].split("[", 1)
        ndim = dims.count(":") - 1
        if ndim < 1 or dims != ", ".join([":"] * (ndim - 1) + ["::1"]):
            raise ValueError(f"not an argument type of the manifest: {name!r}")
        return types.Array(_scalar(dtype), ndim, "C", readonly=readonly)
    if readonly:
        raise ValueError(f"not an argument type of the manifest: {name!r}")
    return _scalar(base)


def _tuple_parts(inner: str) -> list[str]:
    """The names ``type_name`` joined with "; " into a tuple's, split again where no
    inner tuple's parentheses are open."""
    if not inner:
        return []
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        depth += ch == "("
        depth -= ch == ")"
        if ch == ";" and depth == 0:
            parts.append(inner[start:i].strip())
            start = i + 1
    parts.append(inner[start:].strip())
    return parts


def _scalar(name: str) -> types.Type:
    t = types.boolean if name == "bool" else getattr(types, name, None)
    if not isinstance(t, types.Boolean | types.Integer | types.Float):
        raise ValueError(f"not an argument type of the manifest: {name!r}")
    return t


def load_manifest(path: Path = MANIFEST, section: str = "kernels") -> list[Entry]:
    """The manifest's kernels, in the order a run first compiled them: ``kernels``, a
    run's, or ``parallel``, those over the cores (``parallel_ready``)."""
    data = json.loads(path.read_text())
    return [
        Entry(k["module"], k["name"], tuple(k["args"]), float(k["seconds"])) for k in data[section]
    ]


def split(entries: Sequence[Entry], start_s: float = HELPER_START_S) -> tuple[list[int], list[int]]:
    """Which of ``entries`` this process compiles and which the helper does (their
    places in ``entries``, each in order), so that both end about together: the longest
    first, each to the side that would end it sooner, the helper's side starting
    ``start_s`` late (the longest-first rule, within a third of the best split)."""
    ends = [0.0, start_s]
    sides: list[list[int]] = [[], []]
    for i in sorted(range(len(entries)), key=lambda i: -entries[i].seconds):
        side = 0 if ends[0] <= ends[1] else 1
        sides[side].append(i)
        ends[side] += entries[i].seconds
    return sorted(sides[0]), sorted(sides[1])


def compile_entries(entries: Sequence[Entry]) -> None:
    """Compile each of ``entries`` into the cache (or load it, where it is there)."""
    for entry in entries:
        entry.dispatcher().compile(entry.signature())


def cached(entry: Entry) -> bool:
    """Whether numba's cache holds ``entry``'s kernel for its argument types: the key in
    the kernel's index (numba's own, for this source and machine) and the data file it
    names (numba writes the index first). Read through numba's private attributes: True
    where they are not there, so that a numba that keeps its cache otherwise starts no
    helper."""
    try:
        disp = entry.dispatcher()
        cache = disp._cache
        files = cache._cache_file
        key = cache._index_key(entry.signature(), disp.targetctx.codegen())
    except AttributeError:
        return True
    try:
        name = files._load_index().get(key)
    except (OSError, EOFError, ValueError, pickle.UnpicklingError):
        return False
    return name is not None and os.path.exists(files._data_path(name))


@dataclass
class WarmUp:
    """What ``warm_up`` did: the kernels it compiled here, those it left to the helpers
    (it waited for all of them but the ``DEFERRABLE`` ones, ``deferred``, unless its ticks
    run as Python meanwhile: ``awaited``), and the helper of the deferred ones (None:
    none started; ``lock``: another process's warm-up was followed instead)."""

    compiled_here: tuple[Entry, ...]
    helper_share: tuple[Entry, ...]
    deferred: tuple[Entry, ...]
    helper: subprocess.Popen[bytes] | None
    deadline: float  # time.monotonic() past which the deferred are not waited for
    lock: Path | None = None
    #: the kernels compiled aside that the ticks run as Python until they are in the cache
    #: (``ticks_as_python``; empty once they are, or when the run never ran as Python)
    awaited: tuple[Entry, ...] = ()
    #: the helpers compiling ``awaited`` (none: a followed lock's holder compiles them)
    helpers: tuple[subprocess.Popen[bytes], ...] = ()
    _asked: tuple[float, bool] = (-math.inf, True)  # the last answer, and when
    _looked: float = -math.inf  # when ``_awaited_done`` last looked at the cache
    _rest_s: float = 0.0  # what the last tick as Python left to rest before the next
    _too_long: bool = False  # a tick as Python took past ``AS_PYTHON_LONGEST_TICK_S``

    def __deepcopy__(self, memo: dict[int, object]) -> WarmUp:
        """Itself: a process warms its cache up once, whichever fabric asked, so a copy of
        that fabric shares it (and its helper process could not be copied)."""
        return self

    def compiling_deferred(self) -> bool:
        """Whether a helper may still be compiling the ``deferred`` kernels: a run holds
        them back meanwhile (``runtime.uneventful.held_back``). Asked every tick, it looks
        at most every ``POLL_S`` (a look at a followed lock costs some 13 µs)."""
        now = time.monotonic()
        if now - self._asked[0] < POLL_S:
            return self._asked[1]
        if not self.deferred or now >= self.deadline:
            answer = False
        elif self.helper is not None:
            answer = self.helper.poll() is None
        elif self.lock is not None:
            answer = not all(cached(e) for e in self.deferred) and not _lock_free(self.lock)
        else:
            answer = False
        self._asked = (now, answer)
        return answer

    def ticks_as_python(self) -> bool:
        """Whether the next tick runs its kernels as Python (``step_as_python``): until the
        ``awaited`` kernels are in the cache, their helpers ended (or a followed lock is
        free) or the deadline passed. Asked before each tick, it first rests what the
        tick before left (``AS_PYTHON_SHARE``), looking every ``POLL_S`` whether they are
        done; after a tick as Python too long to run another (a large fabric's), it waits
        for that instead. Once done it swaps the compiled kernels back in and says False
        from then on."""
        if not self.awaited:
            return False
        if as_python.running_as_python() and not self._rest_unless_done():
            return True
        as_python.run_compiled()  # (already, where numba was asked to compile meanwhile)
        self.awaited = ()
        # the deferred kernels are waited for as long as before, from here
        self.deadline = max(self.deadline, time.monotonic() + HELPER_WAIT_S)
        numba_event.end_event(WAIT_EVENT, data={"kernel": AS_PYTHON_NOTE})  # type: ignore[no-untyped-call]
        return False

    def _rest_unless_done(self) -> bool:
        """Rest what the last tick as Python left (until done, after one too long), in
        slices of ``POLL_S``; whether the ticks may run compiled now."""
        until = math.inf if self._too_long else time.monotonic() + self._rest_s
        self._rest_s = 0.0
        while True:
            now = time.monotonic()
            if now - self._looked >= POLL_S and self._awaited_done(now):
                return True
            if now >= until:
                return False
            time.sleep(min(POLL_S, until - now))

    def _awaited_done(self, now: float) -> bool:
        """Whether the ticks may run compiled now (see ``ticks_as_python``)."""
        self._looked = now
        if now >= self.deadline:
            return True
        self.awaited = tuple(e for e in self.awaited if not cached(e))  # (those left)
        if not self.awaited:
            return True
        if self.lock is not None and not self.helpers:
            return _lock_free(self.lock)
        return all(h.poll() is not None for h in self.helpers)

    def step_as_python(self, step: Callable[[], None]) -> None:
        """Run ``step`` (a tick) with the kernels as Python, and note the rest it leaves
        before the next (``ticks_as_python``). numpy's scalars warn of overflows and
        divisions by zero where the compiled kernels (``error_model="numpy"``) give the
        same values silently: not here either."""
        start = time.monotonic()
        with np.errstate(all="ignore"):
            step()
        took = time.monotonic() - start
        self._rest_s = took * (1 / AS_PYTHON_SHARE - 1)
        self._too_long = took > AS_PYTHON_LONGEST_TICK_S


_done = False
#: this process's warm-up, which every fabric it runs shares (``warm_up``)
_current: WarmUp | None = None


def warm_up(wait_s: float = HELPER_WAIT_S) -> WarmUp | None:
    """Have the manifest's kernels compiled aside if the cache lacks any (see the module
    docstring); before a process's first compiled ticks. None when there was nothing to
    do (the cache has them, or ``HELPER_ENV`` is 0); asked again, from any thread, the
    same answer (a process warms up once, for every fabric it runs).

    One process at a time warms a cache up: it holds a lock beside the cache
    (``warmup.lock``), which its helpers keep until they end. Another process that finds
    the lock held (two engines of the compare view, started together) does not compile
    the same kernels beside it: it waits for them to land in the cache (``_follow``),
    its ticks as Python meanwhile unless ``AS_PYTHON_ENV`` is 0."""
    global _done, _current
    with _warming_up:
        if not _done and _helper_allowed():
            _done = True
            _current = _warm_up_here(wait_s)
        return _current


#: held while a process warms up: another thread asking meanwhile (two engines in one
#: process) waits for its answer
_warming_up = threading.Lock()


def _warm_up_here(wait_s: float) -> WarmUp | None:
    """``warm_up``'s work, once a process (see there)."""
    entries = _manifest("kernels")
    if not entries or all(cached(e) for e in entries):
        return None
    later = [i for i, e in enumerate(entries) if (e.module, e.name) in DEFERRABLE]
    now = [i for i in range(len(entries)) if i not in later]
    deferred = tuple(entries[i] for i in later)
    lock = _lock_path(entries[0])
    held = UNAVAILABLE if lock is None else _try_lock(lock)
    if held == HELD:
        assert lock is not None
        return _follow([entries[i] for i in now], deferred, lock, wait_s)
    try:
        mine, theirs = split([entries[i] for i in now])
        mine, theirs = [now[i] for i in mine], [now[i] for i in theirs]
        fd = held if held >= 0 else None
        helper = _start_helper(theirs + later, fd)
        if helper is None:  # all here, ahead of the first tick (the deferred as met)
            compile_entries([entries[i] for i in now])
            return WarmUp(tuple(entries[i] for i in now), (), (), None, 0.0)
        aside = _start_helper(mine, fd) if _as_python_allowed() else None
        if aside is None:
            compile_entries([entries[i] for i in mine])
            _wait_for(helper, [entries[i] for i in theirs], wait_s)
    finally:
        if held >= 0:
            os.close(held)  # the helpers' copies of the descriptor keep the lock till they end
    deadline = time.monotonic() + wait_s
    if aside is None:
        return WarmUp(
            compiled_here=tuple(entries[i] for i in mine),
            helper_share=tuple(entries[i] for i in theirs + later),
            deferred=deferred,
            helper=helper,
            deadline=deadline,
        )
    done = WarmUp(
        compiled_here=(),
        helper_share=tuple(entries[i] for i in mine + theirs + later),
        deferred=deferred,
        helper=helper,
        deadline=deadline,
        awaited=tuple(entries[i] for i in now),
        helpers=(aside, helper),
    )
    _start_as_python()
    return done


def _start_as_python() -> None:
    """Run the kernels as Python from now on, and say so (``WAIT_EVENT``, which
    ``WarmUp.ticks_as_python`` ends)."""
    as_python.run_as_python()
    numba_event.start_event(WAIT_EVENT, data={"kernel": AS_PYTHON_NOTE})  # type: ignore[no-untyped-call]


_parallel_helper: subprocess.Popen[bytes] | None = None
_parallel_deadline = 0.0
_parallel_ready = False


def parallel_ready() -> bool:
    """Whether the kernels over the cores (the manifest's ``parallel``) may be called: a
    fabric's first index of ``kernels.tick.PARALLEL_FROM_ENTRIES`` entries would compile
    them where it stands, some 22 s (docs/PERFORMANCE.md, "Start-up"). Asked then, and
    if the cache lacks them, it starts a helper that compiles them, and says False until
    the helper is done: the serial kernels give the same results meanwhile. Quick once
    True (a module flag). While the ticks run as Python (a first run's warm-up) it starts
    no helper yet and says False."""
    global _parallel_helper, _parallel_deadline, _parallel_ready
    if _parallel_ready:
        return True
    helper = _parallel_helper
    if helper is None and as_python.running_as_python():
        return False  # (the serial ones as Python meanwhile: the cores go to the compiling)
    if helper is None:
        entries = _manifest("parallel") if _helper_allowed() else []
        if not entries or all(cached(e) for e in entries):
            _parallel_ready = True
            return True
        _parallel_helper = helper = _start_helper(range(len(entries)), None, "parallel")
        _parallel_deadline = time.monotonic() + HELPER_WAIT_S
        if helper is None:
            _parallel_ready = True
            return True
    if helper.poll() is None and time.monotonic() < _parallel_deadline:
        return False
    _parallel_ready = True
    return True


def fill_cache() -> list[Entry]:
    """Compile every kernel of the manifest (both sections) that the cache lacks, over
    two processes, this one and a helper, section by section, and wait for both; the
    kernels compiled. For a test run's start (``tests/conftest.py``): its workers would
    otherwise each compile what they meet, the same kernels side by side on both cores.
    A kernel that fails to compile (a manifest older than the kernels, which
    ``tests/test_warmup.py`` reports) and a helper that fails leave theirs to be compiled
    as they are met."""
    compiled: list[Entry] = []
    for section in ("kernels", "parallel"):
        entries = _manifest(section)
        missing = [i for i, e in enumerate(entries) if not cached(e)]
        if not missing:
            continue
        mine, theirs = split([entries[i] for i in missing])
        helper = _start_helper([missing[i] for i in theirs], None, section)
        for i in mine if helper is not None else mine + theirs:
            try:
                compile_entries([entries[missing[i]]])
            except Exception:  # (numba's typing and lowering errors have no common base)
                continue
        if helper is not None:
            helper.wait()
        compiled += [entries[i] for i in missing if cached(entries[i])]
    return compiled


def _helper_allowed() -> bool:
    """Whether a helper may be started (``HELPER_ENV`` is not 0)."""
    return os.environ.get(HELPER_ENV, "1") != "0"


def _as_python_allowed() -> bool:
    """Whether the ticks may run as Python while the kernels compile aside
    (``AS_PYTHON_ENV`` is not 0)."""
    return os.environ.get(AS_PYTHON_ENV, "1") != "0"


def _manifest(section: str) -> list[Entry]:
    """The manifest's kernels of ``section``; none if it cannot be read (the run then
    compiles each kernel as it meets it)."""
    try:
        return load_manifest(section=section)
    except (OSError, ValueError, KeyError):
        return []


def _follow(now: Sequence[Entry], deferred: tuple[Entry, ...], lock: Path, wait_s: float) -> WarmUp:
    """Another process warms the cache up: the ticks run as Python until ``now`` is in it
    (or the lock is free: the other ended without; the run compiles what is missing as it
    meets it). With ``AS_PYTHON_ENV`` 0, wait for that instead, saying which kernel it
    waits for."""
    deadline = time.monotonic() + wait_s
    if not _as_python_allowed():
        _wait_until(lambda: _lock_free(lock), now, deadline)
        return WarmUp((), (), deferred, None, deadline, lock)
    _start_as_python()
    return WarmUp((), (), deferred, None, deadline, lock, awaited=tuple(now))


def _lock_path(entry: Entry) -> Path | None:
    """The warm-up's lock file, beside the cache's files (None: no lock here)."""
    try:
        cache = Path(entry.dispatcher()._cache._cache_file._index_path).parent
    except AttributeError:
        return None
    return cache / "warmup.lock" if fcntl is not None else None


#: ``_try_lock``'s answers besides a descriptor: another process holds the lock, or
#: there is no lock to be had here (a file that cannot be made, a file system without
#: ``flock``): then this process warms up alone, as without the lock
HELD = -1
UNAVAILABLE = -2
#: How long ``_try_lock`` tries before it takes the lock for held: a process that looks
#: whether the lock is free (``_lock_free``) holds it for microseconds, one that warms up
#: for seconds
LOCK_TRIES_S = 0.2


def _try_lock(path: Path) -> int:
    """A descriptor holding ``path``'s lock, or ``HELD`` or ``UNAVAILABLE``."""
    assert fcntl is not None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return UNAVAILABLE
    until = time.monotonic() + LOCK_TRIES_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= until:
                os.close(fd)
                return HELD
            time.sleep(0.01)
        except OSError:  # no flock here (ENOLCK, ENOSYS, ...)
            os.close(fd)
            return UNAVAILABLE


def _lock_free(path: Path) -> bool:
    """Whether no process holds the warm-up's lock now (taking it for an instant)."""
    assert fcntl is not None
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        os.close(fd)
    return True


def _start_helper(
    share: Sequence[int], lock: int | None, section: str = "kernels"
) -> subprocess.Popen[bytes] | None:
    """The helper compiling ``share`` (places in the manifest's ``section``), handed the
    lock's descriptor, which it keeps open (so locked) until it ends.

    It runs from the directory this ``fabric_core`` is in (``python -m`` puts the working
    directory first on the path: from another checkout it would compile that one's
    kernels) and compiles only if its sources are this process's (``SOURCES_DIGEST``). A
    thread waits for it, so that it leaves no zombie. It may outlive this process: it
    then finishes filling the cache for the next run."""
    if not share:
        return None
    only = ",".join(str(i) for i in share)
    cmd = [sys.executable, "-m", MODULE, "--section", section, "--only", only]
    env = {**os.environ, DIGEST_ENV: SOURCES_DIGEST, KEEP_CACHE_ENV: "1"}
    try:
        helper = subprocess.Popen(
            cmd,
            cwd=_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=() if lock is None else (lock,),
        )
    except OSError:
        return None
    threading.Thread(target=helper.wait, name="fabtop-warmup-reaper", daemon=True).start()
    return helper


def _wait_for(helper: subprocess.Popen[bytes], share: Sequence[Entry], wait_s: float) -> None:
    """Wait until ``share`` is in the cache, the helper ended or ``wait_s`` passed."""
    _wait_until(lambda: helper.poll() is not None, share, time.monotonic() + wait_s)


def _wait_until(stop: Callable[[], bool], share: Sequence[Entry], deadline: float) -> None:
    """Wait until ``share`` is in the cache, ``stop()`` or ``deadline``, saying which kernel
    it waits for (``WAIT_EVENT``, which ``_jit.compiles_watched`` reports)."""
    waiting: str | None = None
    try:
        while not stop() and time.monotonic() < deadline:
            left = next((_kernel_name(e) for e in share if not cached(e)), None)
            if left != waiting:
                if waiting is not None:
                    numba_event.end_event(WAIT_EVENT, data={"kernel": waiting})  # type: ignore[no-untyped-call]
                waiting = left
                if waiting is not None:
                    numba_event.start_event(WAIT_EVENT, data={"kernel": waiting})  # type: ignore[no-untyped-call]
            if left is None:
                return
            time.sleep(POLL_S)
    finally:
        if waiting is not None:
            numba_event.end_event(WAIT_EVENT, data={"kernel": waiting})  # type: ignore[no-untyped-call]


def _kernel_name(entry: Entry) -> str:
    """The name numba's compile events give ``entry``'s kernel (its function's)."""
    return str(getattr(entry.dispatcher().py_func, "__name__", entry.name))


def main(argv: Sequence[str] | None = None) -> int:
    """The helper: compile the kernels ``I,J,...`` of the manifest's ``--section`` into
    the cache."""
    ap = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=main.__doc__)
    ap.add_argument("--section", choices=("kernels", "parallel"), default="kernels")
    ap.add_argument("--only", metavar="I,J,...", required=True)
    args = ap.parse_args(argv)
    # (an engine process ignores SIGINT, which its children inherit: a helper stops with
    # the terminal's Ctrl-C like any other process)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if os.environ.get(DIGEST_ENV, SOURCES_DIGEST) != SOURCES_DIGEST:
        return 3  # the sources changed since the parent imported them: its code is not these
    entries = load_manifest(section=args.section)
    compile_entries([entries[int(i)] for i in args.only.split(",")])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
