"""``fabtop`` (no subcommand) refuses bad options with a clear message before starting anything."""

from __future__ import annotations

import subprocess
import sys

import pytest


def fabtop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--speed", "-1"), "speed must be between 0 (flat out) and 1000"),
        (("--speed", "fast"), "speed must be a number, got 'fast'"),
        (("--metrics", "9464"), "expected HOST:PORT"),
        (("--metrics", "localhost:99999"), "expected HOST:PORT"),
        (("--scenario", "no-such-scenario", "--no-metrics"), "no bundled scenario"),
    ],
)
def test_bad_options_say_why(args: tuple[str, ...], message: str) -> None:
    result = fabtop(*args)
    assert result.returncode == 2
    assert message in result.stderr


def test_help_lists_the_console_options() -> None:
    out = fabtop("--help").stdout
    for option in (
        "--scenario",
        "--speed",
        "--metrics",
        "--no-metrics",
        "--read-only",
        "--compare",
    ):
        assert option in out
