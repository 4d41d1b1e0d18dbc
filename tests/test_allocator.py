"""Freed memory stays mapped: an array freed and allocated again costs no page faults.

Counted in page faults (``getrusage``), not time, in a fresh interpreter each, since
the setting is process-wide and a ``Fabric`` built by another test already set it.
"""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="mallopt(3) is glibc's: elsewhere a no-op"
)

#: A tick's pattern: six 8 MiB arrays live at once, then freed, 20 times over; the
#: minor page faults of the last 19 rounds (the first maps its pages either way).
#: Six at once, because glibc raises its thresholds by itself after freeing one block
#: (to its size, and trims above twice that), which a single array would satisfy.
_ROUNDS = """
import resource
import numpy as np
def rounds():
    arrays = [np.ones(1 << 20) for _ in range(6)]
    del arrays
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(19):
        arrays = [np.ones(1 << 20) for _ in range(6)]
        del arrays
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
"""
_CHURN = (
    _ROUNDS
    + """
from fabric_core.runtime.allocator import keep_freed_memory
took = keep_freed_memory({keep})
print(took, rounds())
"""
)

PAGES_PER_ARRAY = (8 << 20) // 4096


def _faults(keep: bool) -> tuple[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", _CHURN.format(keep=keep)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    return out[0], int(out[1])


def test_kept_memory_is_reused_without_faulting_its_pages_again() -> None:
    took, faults = _faults(keep=True)
    assert took == "True"
    assert faults < PAGES_PER_ARRAY  # 19 x 6 arrays would fault 19 x 6 x 2,048 pages


def test_with_glibcs_default_thresholds_every_large_array_faults_again() -> None:
    """Each array is mapped anew: at least one fault per array, and many more than kept
    (fewer than its 2,048 small pages where the kernel backs it with huge pages)."""
    took, faults = _faults(keep=False)
    _, kept_faults = _faults(keep=True)
    assert took == "True"
    assert faults >= 19
    assert faults > 10 * max(kept_faults, 1)


def test_every_fabric_keeps_freed_memory() -> None:
    """Building a Fabric sets it: the engine, console and exporter all build one."""
    code = _ROUNDS + (
        "from fabric_core.runtime.scenario import load_scenario\n"
        "from fabric_core.runtime.fabric import Fabric\n"
        "Fabric.from_scenario(load_scenario('incast-100g'))\n"
        "print(rounds())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    assert int(out.stdout) < PAGES_PER_ARRAY
