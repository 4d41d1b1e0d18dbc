"""``benchmarks/profile_kernels.py`` names numba's machine code for perf: its map of JIT
code lists the kernels a run compiled or loaded, under their own symbols, and its names
read as ``module.function#version``. (perf itself is a developer's tool that CI lacks:
the sampling is not run here.)"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "profile_kernels.py"


@pytest.fixture(scope="module")
def profiler() -> ModuleType:
    spec = importlib.util.spec_from_file_location("profile_kernels", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["profile_kernels"] = module
    spec.loader.exec_module(module)
    return module


def test_numba_symbols_read_as_module_function_and_version(profiler: ModuleType) -> None:
    symbol = (
        "_ZN11fabric_core4tick7kernels5index11entry_indexB3v92B56c8tJTIeFIjxB2IKSgI4Crv"
        "E5ArrayIiLi2E1C7mutable7alignedE"
    )
    assert profiler.demangle(symbol) == "index.entry_index#92"
    assert profiler.demangle("cfunc." + symbol) == "(wrapper) index.entry_index#92"
    assert profiler.demangle("_ZN7cpython" + symbol[3:]) == "(wrapper) index.entry_index#92"
    assert (
        profiler.demangle("_ZN5numba2np9arraymath14np_flatnonzeroB4v121B5xxxxxE")
        == "numba.np.arraymath.np_flatnonzero#121"
    )
    assert profiler.demangle("_PyEval_EvalFrameDefault") == "_PyEval_EvalFrameDefault"


def test_the_perf_map_names_the_kernels_a_run_called(profiler: ModuleType) -> None:
    fabric = Fabric.from_scenario(load_scenario("tiny"), "compiled")
    fabric.run_ticks(20)
    functions = profiler.compiled_functions({})
    names = {profiler.demangle(symbol) for symbol, _ in functions.values()}
    assert any(re.fullmatch(r"solve\.solve_tick#\d+", n) for n in names), sorted(names)
    assert any(re.fullmatch(r"index\.entry_index#\d+", n) for n in names)
    path = profiler.write_perf_map(functions)
    try:
        rows = [line.split(" ", 2) for line in path.read_text().splitlines()]
    finally:
        path.unlink()
    starts = [int(start, 16) for start, _, _ in rows]
    assert starts == sorted(starts) and len(rows) == len(functions)
    # each function runs to the next one's start at most: perf attributes no sample twice
    for (start, size, _), following in zip(rows, starts[1:], strict=False):
        assert int(start, 16) + int(size, 16) <= following
