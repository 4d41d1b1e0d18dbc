"""What starting the CLI costs: ``fabtop --help`` must not load numba (the compiled tick is
imported only by the fabrics that use it)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import contextlib, io, sys
from console.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(["--help"])
    except SystemExit:
        pass
print("numba" in sys.modules, "fabric_core.tick.kernels.tick" in sys.modules)
"""


def test_help_does_not_import_numba() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]
