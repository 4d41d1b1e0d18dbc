"""``fabtop run --threads``: how many cores the parallel solve may use; never the results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console.cli", "run", "tiny", "--duration", "20us", *args],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_one_thread_gives_the_same_run(tmp_path: Path) -> None:
    reports = []
    for threads in ("1", None):
        out = tmp_path / f"threads-{threads}.json"
        proc = _run("--json", str(out), *(["--threads", threads] if threads else []))
        assert proc.returncode == 0, proc.stderr
        reports.append(json.loads(out.read_text()))
    assert reports[0]["totals"] == reports[1]["totals"]
    assert reports[0]["classes"] == reports[1]["classes"]


@pytest.mark.parametrize("threads", ["0", "4096"])
def test_threads_out_of_range_are_refused(threads: str) -> None:
    proc = _run("--threads", threads)
    assert proc.returncode == 2
    assert proc.stderr.startswith("fabtop: --threads must be between 1 and "), proc.stderr
    assert f"got {threads}" in proc.stderr


def test_threads_must_be_a_number() -> None:
    proc = _run("--threads", "all")
    assert proc.returncode == 2
    assert "--threads: invalid int value: 'all'" in proc.stderr
