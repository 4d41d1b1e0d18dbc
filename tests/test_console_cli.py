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
        (("--max-tick", "3y"), "max tick must be a duration (100us) or a multiple"),
        (("--max-tick=-2x",), "max tick must be a duration (100us) or a multiple"),
        (("--max-tick", "1s"), "max tick must be 0 (fixed) or between 1e-09 and 0.01 s"),
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
        "--max-tick",
    ):
        assert option in out


@pytest.mark.parametrize(
    ("text", "dt", "longest"),
    [
        ("2x", 2e-6, 4e-6),
        ("4x", 1e-6, 4e-6),
        ("100us", 2e-6, 1e-4),
        ("1x", 2e-6, None),  # no longer than the tick: fixed
        ("1us", 2e-6, None),
        ("0", 2e-6, None),
        ("1e6x", 1e-6, 1e-2),  # capped at the longest tick a fabric accepts
    ],
)
def test_max_tick_is_a_duration_or_a_multiple_of_the_tick(
    text: str, dt: float, longest: float | None
) -> None:
    from console.cli._common import max_tick

    got = max_tick(text).resolve(dt)
    assert got == (None if longest is None else pytest.approx(longest))
