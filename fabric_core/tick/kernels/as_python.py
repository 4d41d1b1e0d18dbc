"""The kernels run as plain Python for a while: a first run's ticks while other processes
compile the kernels (``kernels.warmup``).

numba compiles a kernel in the process that first calls it, so the first run after an
install showed nothing for some 20 s. Yet every kernel is a plain Python function too
(``py_func``), and ``NUMBA_DISABLE_JIT=1`` runs those with the same results
(``tests/test_cli_solver.py``): only some 300 times slower, which is a first screen in
a second or two and a fabric that moves, where compiling showed none.

``run_as_python`` swaps each compiled kernel that the core's modules name for its Python
function: in the modules' globals, in the globals of the kernels' own copies
(``_jit.specialised_kernel``), and among a ``LazyModule``'s kept attributes. A kernel
looks the kernels it calls up among its globals at each call, so that the Python
functions then call each other, never the compiled ones. ``run_compiled`` swaps them
back. Neither changes a result: the same functions run, on the same values.

numba types a kernel from its globals, where a Python function is not a type it knows:
should anything ask numba to compile meanwhile (a kernel kept somewhere else than those
names), the compiled kernels are put back before it types it (a listener on numba's
compile event), and the run goes on compiled.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import threading
from typing import Any

from numba.core import event as numba_event
from numba.core.dispatcher import Dispatcher

from fabric_core.tick.lazy import LazyModule

#: The package whose modules' names are swapped
_PACKAGE = "fabric_core"
_KERNELS = "fabric_core.tick.kernels"

_lock = threading.RLock()
#: each swapped kernel's Python function, by its ``id``, and the kernel (while swapped)
_compiled_of: dict[int, Dispatcher] = {}
#: the namespaces swapped in (to swap back in, with any met since)
_swapped_in: list[dict[str, Any]] = []
_guard_installed = False


def running_as_python() -> bool:
    """Whether the kernels run as Python now (``run_as_python``)."""
    return bool(_compiled_of)


def compiled(kernel: Any) -> Any:
    """The compiled kernel of ``kernel``, as a module names it now: itself, or the kernel
    whose Python function ``run_as_python`` put in its place."""
    swapped = _compiled_of.get(id(kernel))
    return swapped if swapped is not None and swapped.py_func is kernel else kernel


def run_as_python() -> None:
    """Swap every compiled kernel the core names for its Python function (see the module
    docstring). Every kernel module is imported first, so that none imported later
    names compiled kernels."""
    global _guard_installed
    with _lock:
        if _compiled_of:
            return
        for info in pkgutil.iter_modules(importlib.import_module(_KERNELS).__path__):
            importlib.import_module(f"{_KERNELS}.{info.name}")
        if not _guard_installed:
            # (never removed: numba calls its listeners from a list, and removing one
            # while it calls them would skip the next)
            numba_event.register("numba:compile", _CompileGuard())  # type: ignore[no-untyped-call]
            _guard_installed = True
        spaces = _namespaces()
        for space in spaces:
            for name, value in list(space.items()):
                if isinstance(value, Dispatcher):
                    _compiled_of[id(value.py_func)] = value
                    space[name] = value.py_func
        _swapped_in.extend(spaces)  # (empty: cleared by ``run_compiled``)


def run_compiled() -> None:
    """Swap the compiled kernels back in (where ``run_as_python`` put their Python
    functions, and wherever one of those was copied to since)."""
    with _lock:
        if not _compiled_of:
            return
        seen = {id(s) for s in _swapped_in}
        spaces = _swapped_in + [s for s in _namespaces() if id(s) not in seen]
        for space in spaces:
            for name, value in list(space.items()):
                kernel = _compiled_of.get(id(value))
                if kernel is not None and value is kernel.py_func:
                    space[name] = kernel
        _compiled_of.clear()
        _swapped_in.clear()


def _namespaces() -> list[dict[str, Any]]:
    """The core's modules' globals, the kernels' own globals (a copy's differ from its
    module's) and the ``LazyModule``s' kept attributes, each once."""
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
            if isinstance(value, Dispatcher):
                todo.append(value.py_func.__globals__)
            elif isinstance(value, LazyModule):
                todo.append(vars(value))
            elif id(value) in _compiled_of:
                todo.append(value.__globals__)
    return list(found.values())


class _CompileGuard(numba_event.Listener):
    """Puts the compiled kernels back as numba starts compiling one (before it types it):
    a kernel's globals must name kernels, not Python functions."""

    def on_start(self, event: numba_event.Event) -> None:
        if _compiled_of:
            run_compiled()

    def on_end(self, event: numba_event.Event) -> None:
        pass
