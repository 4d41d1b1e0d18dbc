"""Settings for the whole test run.

Before the workers start, the run's first process fills the kernel cache over both cores
(``warmup.fill_cache``, the manifest's kernels, then a few fabrics' runs for the kernels
beyond the default scenario's; some two minutes on a fresh checkout, a second once
filled): each worker otherwise compiled the kernels it met, mostly the same ones side by
side (a fresh clone's ``scripts/test``, docs/PERFORMANCE.md "Session 36").
The workers then start no warm-up helper of their own: it would hold back the
ticks-at-once kernel that tests check. The tests of the helper ask for it
(``tests/test_warmup.py``, the console's first run in ``tests/test_console_processes.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabric_core.tick.kernels import warmup

os.environ.setdefault(warmup.HELPER_ENV, "0")

#: Fabrics run for some ticks once the manifest's kernels are in the cache, one group per
#: process, the two side by side: they compile the kernels that tests meet beyond the
#: default scenario's (PFC and DCQCN, spraying, a black hole at a dead link, scale-up,
#: a topology file's routes), each once. ``scenario:profile:ticks``.
WARM_RUNS = (
    ("default:roce-400g:300", "chaos-bfd::600"),
    ("default:native-800g:100", "moe-ep64-nvlink::50", "express-lab::50"),
)
WARM_RUN = """
import sys
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
for run in sys.argv[1:]:
    name, profile, ticks = run.split(":")
    Fabric.from_scenario(load_scenario(name, profile=profile or None)).run_ticks(int(ticks))
"""


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist starts its workers
def pytest_sessionstart(session: pytest.Session) -> None:
    """Fill the kernel cache in the run's first process, not in the workers: the
    manifest's kernels, then, if any was missing (a fresh checkout, an edited kernel),
    those of ``WARM_RUNS``."""
    if hasattr(session.config, "workerinput"):
        return
    t0 = time.monotonic()
    compiled = warmup.fill_cache()
    if not compiled:
        return
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", WARM_RUN, *group],
            cwd=Path(__file__).resolve().parents[1],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for group in WARM_RUNS
    ]
    failed = [group for group, run in zip(WARM_RUNS, runs, strict=True) if run.wait() != 0]
    print(
        f"\ncompiled {len(compiled)} kernels and ran {len(WARM_RUNS)} groups of fabrics "
        f"into the cache in {time.monotonic() - t0:.0f} s"
        + (f" (failed, compiled as met: {failed})" if failed else "")
    )
