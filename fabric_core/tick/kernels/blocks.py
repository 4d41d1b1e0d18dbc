"""Work split between threads: contiguous blocks of a range, one per thread."""

from __future__ import annotations

from fabric_core.tick.kernels._jit import kernel


@kernel
def block(lo: int, hi: int, t: int, parts: int) -> tuple[int, int]:
    """The ``t``-th of ``parts`` contiguous blocks of ``range(lo, hi)``: (start, end)."""
    return lo + (hi - lo) * t // parts, lo + (hi - lo) * (t + 1) // parts
