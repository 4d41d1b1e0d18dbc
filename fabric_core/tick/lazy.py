"""A module imported when first used: the compiled kernels import numba, which
``fabtop --help`` must not pay for (``tests/test_startup_imports.py``).

The tick's modules used to import their kernels inside the functions that call them.
A function-level ``from ... import`` of a loaded module still costs 2.5-4 µs, and a tick
made several of them; a ``LazyModule`` imports once and then keeps each attribute read.
"""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """Stands for the module ``name``: the first attribute read imports it, and every
    attribute read is kept, so that reading it again is a plain instance lookup."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        # only called when ``attr`` is not yet in the instance's dict
        value = getattr(importlib.import_module(self._name), attr)
        setattr(self, attr, value)
        return value

    def forget(self) -> None:
        """Forget the attributes read so far: the next read of each reads the module again
        (whose names ``kernels.as_python`` swaps)."""
        for attr in [a for a in vars(self) if a != "_name"]:
            delattr(self, attr)

    def __repr__(self) -> str:
        return f"LazyModule({self._name!r})"
