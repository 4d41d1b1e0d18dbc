"""Settings for the whole test run.

Before the workers start, the run's first process fills the kernel cache over both cores
(``warmup.fill_cache``, the manifest's kernels, some two minutes on a fresh checkout): each
worker otherwise compiled the kernels it met, mostly the same ones side by side (a fresh
clone's ``scripts/test``, docs/PERFORMANCE.md "Session 36": 14 min 37 s -> 13 min 27 s).
The workers then start no warm-up helper of their own: it would hold back the
ticks-at-once kernel that tests check. The tests of the helper ask for it
(``tests/test_warmup.py``, the console's first run in ``tests/test_console_processes.py``).
"""

from __future__ import annotations

import os
import time

import pytest

from fabric_core.tick.kernels import warmup

os.environ.setdefault(warmup.HELPER_ENV, "0")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist starts its workers
def pytest_sessionstart(session: pytest.Session) -> None:
    """Fill the kernel cache in the run's first process, not in the workers."""
    if hasattr(session.config, "workerinput"):
        return
    t0 = time.monotonic()
    compiled = warmup.fill_cache()
    if compiled:
        print(f"\ncompiled {len(compiled)} kernels into the cache in {time.monotonic() - t0:.0f} s")
