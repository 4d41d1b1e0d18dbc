"""The one place the core asks numba to compile: ``kernel`` = ``njit(cache=True)``.

Kernels are plain Python loops over flat arrays and scalars. ``cache=True`` writes
the machine code next to the module (``__pycache__``) so a second start does not
compile again; ``NUMBA_DISABLE_JIT=1`` runs the very same functions as Python
(slow, but steppable in a debugger and visible to coverage).

numba checks a cached kernel against its own file only: a kernel that calls another
module's, or reads another module's constant, would keep the machine code compiled
from the old one after that module changed (an edit, a ``git pull`` into an editable
install). So the cache is kept with a digest of the sources the kernels are compiled
from (``KERNEL_SOURCES``), and dropped whole when they change (``drop_stale_cache``).
"""

from __future__ import annotations

import hashlib
import os
import types
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import numba
from numba import njit
from numba.core import event as numba_event

_F = TypeVar("_F", bound=Callable[..., Any])

_HERE = Path(__file__).resolve().parent
_CORE = _HERE.parent.parent
#: What the kernels are compiled from: their own modules, and those whose constants they
#: read (numba freezes a global into the machine code)
KERNEL_SOURCES = (
    # (not ``warmup.py``, which compiles the kernels, nor ``as_python.py``, which runs them
    # as Python: neither is a kernel, and an edit there keeps them)
    *sorted(p for p in _HERE.glob("*.py") if p.name not in ("warmup.py", "as_python.py")),
    *(
        _CORE / name
        for name in (
            "tick/pfc.py",
            "tick/flows.py",
            "tick/step.py",
            "net/route_rules.py",
            "net/routing.py",
            "net/updown.py",
        )
    ),
)
#: Set (to anything but 0) to keep the cache whatever changed: ``scripts/mutate`` drops the
#: mutated module's callers itself, and would otherwise compile every kernel per mutant
KEEP_CACHE_ENV = "FABTOP_KEEP_KERNEL_CACHE"


def sources_digest(sources: Iterable[Path]) -> str:
    """A digest of the files the kernels are compiled from (their names and bytes)."""
    digest = hashlib.sha1()
    for path in sources:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def drop_stale_cache(sources: Iterable[Path], cache: Path, digest: str | None = None) -> bool:
    """Delete numba's cache files in ``cache`` if ``sources`` changed since they were
    written (the digest in ``cache/kernels.sha1``), and note the new digest. Returns
    whether it dropped them. A cache it cannot write to is left as it is (a read-only
    install, where numba caches under the user's cache directory instead, which this does
    not look after: a package installed anew there has new files anyway). ``digest``:
    ``sources_digest(sources)``, if worked out already."""
    digest = sources_digest(sources) if digest is None else digest
    stamp = cache / "kernels.sha1"
    try:
        if stamp.read_text() == digest:
            return False
    except OSError:
        pass  # no digest yet: a new cache, or one from before the digest
    try:
        for stale in cache.glob("*.nb[ic]"):
            stale.unlink(missing_ok=True)
        cache.mkdir(exist_ok=True)
        stamp.write_text(digest)
    except OSError:
        return False
    return True


#: The kernels' sources as this process imported them (a helper compiling for it checks
#: that it would compile the same: ``kernels.warmup``)
SOURCES_DIGEST = sources_digest(KERNEL_SOURCES)
if os.environ.get(KEEP_CACHE_ENV, "0") == "0":
    drop_stale_cache(KERNEL_SOURCES, _HERE / "__pycache__", SOURCES_DIGEST)


def kernel(fn: _F) -> _F:
    """Compile ``fn`` in nopython mode, cached on disk (typed as ``fn`` for mypy)."""
    return cast(_F, njit(cache=True, nogil=True, error_model="numpy")(fn))


def inline_kernel(fn: _F) -> _F:
    """A small kernel called from other kernels' inner loops: inlined into its callers
    (``inline="always"``) instead of called, which saves a call per link or entry.

    Measured helper by helper, in a running fabric: inlining usually helps, but numba's
    own inlining of ``solve._share`` (three ways out: the share, or plus or minus
    infinity; with two it was fast) made the water-filling's rounds 6 times slower than
    a plain ``kernel``, which LLVM inlines by itself; that one stays plain.
    """
    return cast(_F, njit(cache=True, nogil=True, error_model="numpy", inline="always")(fn))


def parallel_kernel(fn: _F) -> _F:
    """``fn`` compiled with ``parallel=True``: its ``prange`` loops run on all the cores
    numba is given (``numba.set_num_threads``), its other loops as in ``kernel``.

    Compiled from a copy of ``fn`` named ``<name>_parallel``, because numba's disk
    cache keys a function by its name and code, not its options: the serial and the
    parallel machine code of one function would overwrite each other's cache entry.
    """
    clone = types.FunctionType(
        fn.__code__, fn.__globals__, f"{fn.__name__}_parallel", fn.__defaults__, fn.__closure__
    )
    clone.__qualname__ = f"{fn.__qualname__}_parallel"
    clone.__doc__ = fn.__doc__
    clone.__module__ = fn.__module__
    return cast(_F, njit(cache=True, nogil=True, error_model="numpy", parallel=True)(clone))


def specialised_kernel(fn: _F, name: str, *, parallel: bool = False, **constants: object) -> _F:
    """The kernel ``fn`` compiled again as ``name`` with some of its module's constants
    set otherwise: numba reads a global as a constant when it compiles, and leaves out a
    branch whose condition is a constant False, with the kernels only it calls. A copy of
    ``fn`` (its Python function, if ``fn`` is compiled) with its own name, so that the two
    keep their own entries in numba's disk cache (``parallel_kernel``); with ``parallel``,
    compiled as ``parallel_kernel`` compiles."""
    py = getattr(fn, "py_func", fn)
    unknown = sorted(set(constants) - set(py.__globals__))
    if unknown:
        raise NameError(f"{py.__qualname__} has no module constant {', '.join(unknown)}")
    clone = types.FunctionType(
        py.__code__, {**py.__globals__, **constants}, name, py.__defaults__, py.__closure__
    )
    clone.__qualname__ = name
    clone.__doc__ = py.__doc__
    clone.__module__ = py.__module__
    return cast(_F, njit(cache=True, nogil=True, error_model="numpy", parallel=parallel)(clone))


#: The most threads numba may use: the cores it found, or ``NUMBA_NUM_THREADS``
#: (read once, when numba is imported; numba.config is filled in at run time)
MOST_THREADS = int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]


def use_threads(n: int | None = None) -> int:
    """Give the parallel kernels ``n`` threads (None: as many as numba found cores, or
    ``NUMBA_NUM_THREADS``); returns the number given.

    Raises:
        ValueError: ``n`` is not between 1 and that number.
    """
    n = MOST_THREADS if n is None else n
    if not 1 <= n <= MOST_THREADS:
        raise ValueError(
            f"threads must be between 1 and {MOST_THREADS} (the cores numba may use), got {n}"
        )
    numba.set_num_threads(n)
    return n


def share_cores(engines: int) -> int:
    """Threads for one of ``engines`` engines that run at once, each in its own process,
    so that together they use each core once (at least one each); sets and returns it."""
    return use_threads(max(1, MOST_THREADS // max(engines, 1)))


#: An event kind of our own, beside numba's ``numba:compile``: a process waits for another
#: to compile a kernel into the cache (``kernels.warmup``); data: ``{"kernel": name}``
WAIT_EVENT = "fabtop:compile-wait"


class _TopCompiles(numba_event.Listener):
    """Calls ``started(data)`` as a compile at the top begins (one a call from Python asked
    for, not a kernel compiled inside it) and ``ended(data)`` as it ends; ``data`` is the
    event's: numba's (``dispatcher``, ``args``) or ``WAIT_EVENT``'s (``kernel``)."""

    def __init__(
        self, started: Callable[[dict[str, Any]], None], ended: Callable[[dict[str, Any]], None]
    ) -> None:
        self.started = started
        self.ended = ended
        self.depth = 0

    def on_start(self, event: numba_event.Event) -> None:
        if self.depth == 0:
            self.started(event.data or {})
        self.depth += 1

    def on_end(self, event: numba_event.Event) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.ended(event.data or {})


@contextmanager
def top_compiles(
    started: Callable[[dict[str, Any]], None],
    ended: Callable[[dict[str, Any]], None],
    kinds: tuple[str, ...] = ("numba:compile", WAIT_EVENT),
) -> Iterator[None]:
    """Within this block, call ``started`` and ``ended`` (``_TopCompiles``) around each
    compile at the top, and each wait of ``WAIT_EVENT`` unless ``kinds`` leaves it out."""
    listener = _TopCompiles(started, ended)
    for kind in kinds:
        numba_event.register(kind, listener)  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        for kind in kinds:
            numba_event.unregister(kind, listener)  # type: ignore[no-untyped-call]


def compiles_watched(report: Callable[[str | None], None]) -> AbstractContextManager[None]:
    """Within this block, call ``report(name)`` when numba starts compiling the kernel
    ``name`` (or this process starts waiting for another to compile it: ``WAIT_EVENT``)
    and ``report(None)`` when it is done. A kernel is compiled once per install and then
    loaded from the cache (in about 0.4 s for a whole tick's), so this reports the first
    run's wait (docs/PERFORMANCE.md, "Start-up") as it happens; a load from the cache
    reports nothing. ``report`` runs on the compiling thread, inside numba's compile: it
    must be quick and must not compile."""

    def started(data: dict[str, Any]) -> None:
        py_func = getattr(data.get("dispatcher"), "py_func", None)
        report(getattr(py_func, "__name__", None) or data.get("kernel") or "a kernel")

    return top_compiles(started, lambda data: report(None))
