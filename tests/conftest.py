"""Settings for the whole test run.

The test workers start no warm-up helper (``fabric_core.tick.kernels.warmup``): two
workers already compile on both cores of a fresh checkout, where a helper each would
only add processes, and hold back the ticks-at-once kernel that tests check. The tests
of the helper ask for it (``tests/test_warmup.py``, the console's first run in
``tests/test_console_processes.py``).
"""

from __future__ import annotations

import os

from fabric_core.tick.kernels.warmup import HELPER_ENV

os.environ.setdefault(HELPER_ENV, "0")
