"""Writes the list of kernels the first run's helper compiles (``kernels.warmup.MANIFEST``).

``python -m fabric_core.runtime.kernel_manifest --write`` runs the default scenario's first
``RECORD_TICKS`` ticks in a new process with an empty kernel cache, notes every kernel it
compiles at the top (not inside another), in order, with its argument types and the
seconds it took, then the same for the kernels over the cores, and writes
them to ``fabric_core/tick/kernels/warmup.json``. Run it when
``tests/test_warmup.py`` says a kernel of the list is called otherwise now (about 30 s).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from numba.core.registry import CPUDispatcher

from fabric_core.runtime import busy, uneventful
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.tick.kernels import tick
from fabric_core.tick.kernels._jit import top_compiles
from fabric_core.tick.kernels.warmup import HELPER_ENV, MANIFEST, type_name

#: The scenario and the ticks recorded: enough for flows to finish and for uneventful
#: ticks to run several at once (``kernels.uneventful``, 10 s of the 30 to compile).
RECORD_SCENARIO = "default"
RECORD_TICKS = 200
#: Ticks then run with busy ticks at once (``runtime.busy``), for its kernel's types.
BUSY_TICKS = 100
#: Ticks then run with the solve over the cores, and the kernels that follow it (their
#: kernels' types).
PARALLEL_TICKS = 5
#: This module, as ``python -m`` runs it (``__name__`` is ``__main__`` there).
MODULE = "fabric_core.runtime.kernel_manifest"


def record(scenario: str = RECORD_SCENARIO, ticks: int = RECORD_TICKS) -> dict[str, Any]:
    """Run ``ticks`` of ``scenario`` (busy ticks one by one) with the deferred kernels
    held back and ``ticks`` more without, then ``BUSY_TICKS`` more (busy ticks at once),
    and note every kernel it compiled at the top, in order, with
    its argument types and seconds (``kernels``); then some ticks more with
    the solve (and the kernels that follow it) over the cores from a few entries on, for theirs
    (``parallel``): the manifest. Meant for an empty cache, where every kernel compiles
    (``write_manifest``)."""
    fabric = Fabric.from_scenario(load_scenario(scenario))
    # ticks one by one and uneventful ones at once first, then the busy ones at once: the
    # second calls the kernels of the first (``kernels.busy``), which are listed apart so
    # that a fabric the busy kernel does not serve finds them in the cache too
    # (first with the deferred kernels held back, as a first run's are while its helper
    # compiles them: new flows start step by step, by the kernels the one-call start calls;
    # then not, for the deferred kernels' own types, as Python calls them)
    saved_busy, saved_held = busy.ENABLED, uneventful.held_back
    busy.ENABLED = False
    try:
        uneventful.held_back = _always
        kernels = _compiled_in(lambda: fabric.run_ticks(ticks))
        uneventful.held_back = None
        kernels += _compiled_in(lambda: fabric.run_ticks(ticks))
    finally:
        busy.ENABLED, uneventful.held_back = saved_busy, saved_held
    kernels += _compiled_in(lambda: fabric.run_ticks(BUSY_TICKS))
    saved = tick.PARALLEL_FROM_ENTRIES, tick.ONLY_WAY
    tick.PARALLEL_FROM_ENTRIES, tick.ONLY_WAY = 1, 1
    try:
        parallel = _compiled_in(lambda: fabric.run_ticks(PARALLEL_TICKS))
    finally:
        tick.PARALLEL_FROM_ENTRIES, tick.ONLY_WAY = saved
    return {
        "written_by": f"python -m {MODULE} --write",
        "scenario": scenario,
        "ticks": ticks,
        "kernels": kernels,
        "parallel": parallel,
    }


def _always() -> bool:
    return True


def _compiled_in(run: Callable[[], None]) -> list[dict[str, Any]]:
    """The kernels ``run()`` compiled at the top, in order: each one's module, name,
    argument types and seconds."""
    kernels = []
    began = 0.0

    def started(data: dict[str, Any]) -> None:
        nonlocal began
        began = time.perf_counter()

    def ended(data: dict[str, Any]) -> None:
        seconds = time.perf_counter() - began
        module, name = _where(data["dispatcher"])
        kernels.append(
            {
                "module": module,
                "name": name,
                "args": [type_name(t) for t in data["args"]],
                "seconds": round(seconds, 2),
            }
        )

    with top_compiles(started, ended, kinds=("numba:compile",)):
        run()
    return kernels


def _where(disp: CPUDispatcher) -> tuple[str, str]:
    """The module and the name under which ``disp`` is found there."""
    module = importlib.import_module(disp.py_func.__module__)
    for name, value in vars(module).items():
        if value is disp:
            return module.__name__, name
    raise ValueError(f"{disp.py_func.__qualname__} is not a name of {module.__name__}")


def write_manifest(path: Path = MANIFEST) -> dict[str, Any]:
    """Record the manifest in a new process with an empty cache, and no helper compiling
    beside it, and write it to ``path``."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, HELPER_ENV: "0"}
        out = subprocess.run(
            [sys.executable, "-m", MODULE, "--record"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
    data: dict[str, Any] = json.loads(out.stdout)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return data


def main(argv: Sequence[str] | None = None) -> int:
    """``--write``: write the manifest anew; ``--record``: print one recorded here."""
    ap = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=main.__doc__)
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--write", action="store_true")
    what.add_argument("--record", action="store_true")
    args = ap.parse_args(argv)
    if args.record:
        print(json.dumps(record()))
        return 0
    data = write_manifest()
    for section in ("kernels", "parallel"):
        total = sum(k["seconds"] for k in data[section])
        print(f"{section}: {len(data[section])} kernels, {total:.1f} s of compiling")
    print(f"wrote {MANIFEST}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
