"""``fabtop run --solver``: the compiled tick and the numpy reference give the same run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def _run(tmp_path: Path, solver: str) -> dict[str, object]:
    out = tmp_path / f"{solver}.json"
    proc = subprocess.run(
        [sys.executable, "-m", "console.cli", "run", "tiny", "--profile", "roce-400g",
         "--duration", "40us", "--solver", solver, "--json", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "simulated s per wall s" in proc.stdout
    report: dict[str, object] = json.loads(out.read_text())
    return report


@pytest.mark.slow
def test_run_solvers_agree(tmp_path: Path) -> None:
    comp, ref = _run(tmp_path, "compiled"), _run(tmp_path, "reference")
    assert comp["run"]["solver"] == "compiled" and ref["run"]["solver"] == "reference"  # type: ignore[index]
    assert comp["run"]["sim_seconds_per_wall_second"] > 0  # type: ignore[index, operator]
    for key in ("delivered_bytes", "completed_flows", "dropped_bytes", "in_flight_bytes"):
        a, b = comp["totals"][key], ref["totals"][key]  # type: ignore[index]
        assert a == pytest.approx(b, rel=1e-9), key
    for cls, figures in comp["classes"].items():  # type: ignore[attr-defined]
        assert figures["completed"] > 0, cls
        for key, value in figures.items():
            assert value == pytest.approx(ref["classes"][cls][key], rel=1e-9), (cls, key)  # type: ignore[index]


def test_an_unknown_solver_is_refused() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "console.cli", "run", "tiny", "--solver", "fast"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "invalid choice: 'fast'" in proc.stderr and "compiled" in proc.stderr


@pytest.mark.parametrize(
    ("profile", "duration"),
    [
        ("roce-400g", "20us"),  # PFC, ECN and DCQCN
        ("native-400g", "300us"),  # most ticks busy ones at once (kernels.busy)
    ],
)
def test_the_kernels_run_as_python_with_numba_disabled(
    profile: str, duration: str, tmp_path: Path
) -> None:
    """``NUMBA_DISABLE_JIT=1`` runs the same kernels as plain Python (to step through them
    or measure coverage): the run is the compiled one."""
    reports = []
    for disable in ("0", "1"):
        out = tmp_path / f"jit-{disable}.json"
        proc = subprocess.run(
            [sys.executable, "-m", "console.cli", "run", "tiny", "--profile", profile,
             "--duration", duration, "--json", str(out)],
            capture_output=True, text=True, timeout=300,
            env={**os.environ, "NUMBA_DISABLE_JIT": disable},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        reports.append(json.loads(out.read_text()))
    assert reports[0]["totals"] == reports[1]["totals"]
    assert reports[0]["classes"] == reports[1]["classes"]
