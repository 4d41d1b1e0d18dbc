"""The kernels run as plain Python for a while: a first run's ticks while other processes
compile the kernels (``kernels.warmup``).

numba compiles a kernel in the process that first calls it, so the first run after an
install showed nothing for some 20 s. Yet every kernel is a plain Python function too
(``py_func``), and ``NUMBA_DISABLE_JIT=1`` runs those with the same results
(``tests/test_cli_solver.py``): some 300 times slower on the default scenario, which is
a first screen in a second or two and a fabric that moves, where compiling showed none.

``run_as_python`` swaps each compiled kernel that the core's modules name (their globals,
and the globals of the kernels' own copies, ``_jit.specialised_kernel``) for its Python
function, wrapped to return what numba returns (``_returning_as_numba``), and makes each
``LazyModule`` read its module again. A kernel looks the kernels it calls up among its
globals at each call, so that the Python functions then call each other, never the
compiled ones. ``run_compiled`` puts the compiled kernels back where it took them from.
Neither changes a result: the same functions run, on the same values.

numba types a kernel from its globals, where a Python function is not a type it knows:
should anything ask numba to compile meanwhile (a kernel kept somewhere else than those
names), the compiled kernels are put back before it types it (a listener on numba's
compile event), and the run goes on compiled. Both swaps hold numba's compiler lock, so
that no compile in another thread is typing a kernel while its globals change.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from numba.core import event as numba_event
from numba.core.compiler_lock import global_compiler_lock
from numba.core.dispatcher import Dispatcher

from fabric_core.tick.lazy import LazyModule

#: The package whose modules' names are swapped
_PACKAGE = "fabric_core"
_KERNELS = "fabric_core.tick.kernels"

_lock = threading.RLock()
#: what stands in each swapped kernel's place, and the kernel, by the stand-in's ``id``
#: (while swapped; by ``id``, since a namespace holds values that cannot be hashed)
_compiled_of: dict[int, tuple[Callable[..., Any], Dispatcher]] = {}
#: where ``run_as_python`` put a Python function: (namespace, name, the kernel)
_swapped: list[tuple[dict[str, Any], str, Dispatcher]] = []
#: the namespaces there were then (by ``id``): a module imported since may have copied a
#: Python function from them
_known: set[int] = set()
_guard_installed = False
#: how deep the calls of kernels as Python are, in this thread (``_returning_as_numba``)
_depth = threading.local()


def running_as_python() -> bool:
    """Whether the kernels run as Python now (``run_as_python``)."""
    return bool(_compiled_of)


def compiled(kernel: Any) -> Any:
    """The compiled kernel of ``kernel``, as a module names it now: itself, or the kernel
    whose Python function ``run_as_python`` put in its place."""
    swapped = _compiled_of.get(id(kernel))
    return swapped[1] if swapped is not None and swapped[0] is kernel else kernel


def run_as_python() -> None:
    """Swap every compiled kernel the core names for its Python function (see the module
    docstring). Every kernel module is imported first, so that none imported later
    names compiled kernels."""
    global _guard_installed
    for info in pkgutil.iter_modules(importlib.import_module(_KERNELS).__path__):
        importlib.import_module(f"{_KERNELS}.{info.name}")
    with global_compiler_lock, _lock:
        if _compiled_of:
            return
        if not _guard_installed:
            # (never removed: numba calls its listeners from a list, and removing one
            # while it calls them would skip the next)
            numba_event.register("numba:compile", _CompileGuard())  # type: ignore[no-untyped-call]
            _guard_installed = True
        spaces = _namespaces()
        stand_in: dict[int, Callable[..., Any]] = {}
        for space in spaces:
            for name, value in list(space.items()):
                if isinstance(value, Dispatcher):
                    python = stand_in.get(id(value))
                    if python is None:
                        python = stand_in[id(value)] = _returning_as_numba(value.py_func)
                        _compiled_of[id(python)] = (python, value)
                    _swapped.append((space, name, value))
                    space[name] = python
        _known.update(id(space) for space in spaces)
        _forget_lazy(spaces)


def run_compiled() -> None:
    """Swap the compiled kernels back in: where ``run_as_python`` put their Python
    functions, and wherever a module imported since copied one of those."""
    with global_compiler_lock, _lock:
        if not _compiled_of:
            return
        for space, name, kernel in _swapped:
            if compiled(space.get(name)) is kernel:
                space[name] = kernel
        spaces = _namespaces()
        for space in spaces:
            if id(space) not in _known:
                for name, value in list(space.items()):
                    kernel = compiled(value)
                    if kernel is not value:
                        space[name] = kernel
        _compiled_of.clear()
        _swapped.clear()
        _known.clear()
        _forget_lazy(spaces)


def _returning_as_numba(python: Callable[..., Any]) -> Callable[..., Any]:
    """``python`` (a kernel's Python function), returning to Python code what the compiled
    kernel returns: numba gives a float64 as a Python ``float``, an integer as an ``int``,
    a tuple of them as a tuple of those, where the Python function gives numpy's scalars
    (whose ``repr`` differs: the record's digests are of ``repr``). A kernel calling it
    gets the numpy scalars, as the Python function gives them: their arithmetic is the
    compiled kernel's (a division by zero is infinite, not an error)."""

    @functools.wraps(python)
    def call(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_depth, "n", 0)
        _depth.n = depth + 1
        try:
            result = python(*args, **kwargs)
        finally:
            _depth.n = depth
        return result if depth else _as_numba_returns(result)

    return call


def _as_numba_returns(value: Any) -> Any:
    """``value`` as numba returns it to Python (see ``_returning_as_numba``)."""
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if type(value) is tuple:
        return tuple(_as_numba_returns(v) for v in value)
    return value


def _namespaces() -> list[dict[str, Any]]:
    """The core's modules' globals and the kernels' own globals (a copy's differ from its
    module's), each once."""
    found: dict[int, dict[str, Any]] = {}
    todo = [
        vars(module)
        for name, module in list(sys.modules.items())
        if module is not None and (name == _PACKAGE or name.startswith(_PACKAGE + "."))
    ]
    while todo:
        space = todo.pop()
        if id(space) in found:
            continue
        found[id(space)] = space
        for value in list(space.values()):
            kernel = compiled(value)  # (a stand-in's kernel; a kernel itself)
            if isinstance(kernel, Dispatcher):
                todo.append(kernel.py_func.__globals__)
    return list(found.values())


def _forget_lazy(spaces: list[dict[str, Any]]) -> None:
    """Make each ``LazyModule`` named in ``spaces`` read its module's names again."""
    for space in spaces:
        for value in list(space.values()):
            if isinstance(value, LazyModule):
                value.forget()


class _CompileGuard(numba_event.Listener):
    """Puts the compiled kernels back as numba starts compiling one (before it types it):
    a kernel's globals must name kernels, not Python functions."""

    def on_start(self, event: numba_event.Event) -> None:
        if _compiled_of:
            run_compiled()

    def on_end(self, event: numba_event.Event) -> None:
        pass
