"""The one place the core asks numba to compile: ``kernel`` = ``njit(cache=True)``.

Kernels are plain Python loops over flat arrays and scalars. ``cache=True`` writes
the machine code next to the module (``__pycache__``) so a second start does not
compile again; ``NUMBA_DISABLE_JIT=1`` runs the very same functions as Python
(slow, but steppable in a debugger and visible to coverage).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from numba import njit

_F = TypeVar("_F", bound=Callable[..., Any])


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
