"""Keep the memory a tick frees mapped, instead of handing it back to the OS every tick.

Every tick allocates and frees the same arrays again: the entry index, the
solver's scratch, the moved bytes, a few hundred kB to tens of MB each on a large
fabric. glibc's ``malloc`` serves a block above its *mmap threshold* with fresh
pages from ``mmap`` and returns it with ``munmap`` on ``free``; the top of the heap
is given back with ``brk`` once more than the *trim threshold* is free there. Both
start at 128 kB, so each such array costs a page fault per 4 kB page touched, every
tick: on the 10k-GPU fat-tree, allocating the solver's six per-entry and
per-buffer arrays took 1.6 ms of a 13 ms solve, their use 0.05 ms once the pages
stay mapped (``benchmarks/bench_core.py --allocator`` measures a whole tick both
ways).

:func:`keep_freed_memory` raises the mmap threshold to glibc's ceiling (32 MiB on
64-bit: ``DEFAULT_MMAP_THRESHOLD_MAX``, mallopt(3)) and the trim threshold to
:data:`TRIM_THRESHOLD_BYTES`, so those blocks come from the heap and the heap keeps
what a tick freed for the next. The cost is memory: up to that much freed heap
stays with the process. Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
from functools import cache

#: mallopt(3) parameter numbers (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: glibc's ceiling for the mmap threshold on 64-bit (4 MiB * sizeof(long)).
MMAP_THRESHOLD_MAX_BYTES = 32 * 1024**2
#: Free heap top kept: more than a 100k-endpoint tick frees (its largest arrays are a
#: few tens of MB), small beside the fabric's own state.
TRIM_THRESHOLD_BYTES = 256 * 1024**2
#: glibc's starting values of both thresholds (what :func:`keep_freed_memory` undoes).
GLIBC_DEFAULT_BYTES = 128 * 1024


@cache
def _libc() -> ctypes.CDLL | None:
    """glibc, or None on another C library (musl, macOS, Windows)."""
    if platform.libc_ver()[0] != "glibc":
        return None
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def keep_freed_memory(keep: bool = True) -> bool:
    """Raise (``keep``) or restore glibc's mmap and trim thresholds, for the whole process.

    Returns whether the allocator took the setting (False off glibc). Restoring
    sets glibc's starting values, which also stops glibc raising the mmap
    threshold by itself: the benchmark's baseline is then the same in every run.
    """
    libc = _libc()
    if libc is None:
        return False
    mmap_bytes = MMAP_THRESHOLD_MAX_BYTES if keep else GLIBC_DEFAULT_BYTES
    trim_bytes = TRIM_THRESHOLD_BYTES if keep else GLIBC_DEFAULT_BYTES
    took_mmap = libc.mallopt(M_MMAP_THRESHOLD, mmap_bytes) == 1
    took_trim = libc.mallopt(M_TRIM_THRESHOLD, trim_bytes) == 1
    return bool(took_mmap and took_trim)
