"""Durations on the command line need a unit and must be positive; long runs show progress on
a terminal only (issue 16, items 3 and 4)."""

from __future__ import annotations

import io
import sys

import pytest

from console.cli import main


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "tiny", "--duration", "5"],
        ["compare", "tiny", "--duration", "0.5"],
        ["check", "ibgda", "tiny", "--timeout", "1"],
    ],
)
def test_a_duration_without_a_unit_is_refused(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    err = _usage_error(capsys, argv)
    assert "needs a unit (ns, us, ms, s)" in err and "ms or" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "tiny", "--duration", "-1ms"],
        ["run", "tiny", "--duration=-1ms"],
        ["run", "tiny", "--duration", "0s"],
        ["compare", "tiny", "--duration", "-.5ms"],
        # (a bare 0 said it needed a unit, "e.g. 0ms", which was then refused as not positive)
        ["run", "tiny", "--duration", "0"],
        ["check", "ibgda", "tiny", "--timeout", "0.0"],
    ],
)
def test_a_negative_or_zero_duration_must_be_positive(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    err = _usage_error(capsys, argv)
    assert "duration must be positive" in err
    assert "expected one argument" not in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["run", "tiny", "--duration", "1e400s"], "--duration: duration must be a finite number"),
        (["run", "tiny", "--duration", "nan"], "--duration: duration must be a finite number"),
        (["run", "tiny", "--dt", "-1us"], "--dt: duration must be positive"),
        (["storage-report", "--scale", "inf"], "--scale: must be a finite number above 0"),
        (["storage-report", "--scale", "-1"], "--scale: must be a finite number above 0"),
        (["check", "ibgda", "tiny", "--size", "0"], "--size: a message is 1 B to 2 GiB"),
        (["check", "ibgda", "tiny", "--size", "3000000000"], "--size: a message is 1 B to 2 GiB"),
        (["check", "ibgda", "tiny", "--size", "4x"], "--size: bad size '4x'"),
        (["check", "ibgda", "tiny", "--rounds", "0"], "--rounds: must be at least 1"),
        (["check", "ibgda", "tiny", "--rounds", "-2"], "--rounds: must be at least 1"),
    ],
)
def test_out_of_range_numbers_are_usage_errors_that_say_why(
    capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    """Each is refused before any work (a traceback, a run with no end, a check of nothing
    that passed, or a hang before session 41)."""
    err = _usage_error(capsys, argv)
    assert says in err, err
    assert "Traceback" not in err


def test_run_shows_progress_on_a_terminal_and_nothing_in_a_pipe(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["run", "tiny", "--duration", "200us"]) == 0
    piped = capsys.readouterr()
    assert piped.err == "" and "scenario tiny" in piped.out
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main(["run", "tiny", "--duration", "200us"]) == 0
    shown = term.getvalue()
    assert "run tiny [####################] 100%" in shown
    assert "sim 200 µs / 200 µs" in shown and "wall" in shown and "speed" in shown
    assert shown.endswith("\r")  # the line is cleared before the summary


def test_compare_and_storage_report_show_progress_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main(["compare", "tiny", "--duration", "100us", "--no-sizes"]) == 0
    shown = term.getvalue()
    assert "native-400g [" in shown and "roce-400g [" in shown
    term.seek(0)
    term.truncate()
    assert main(["storage-report", "storage-random-read", "--scale", "0.02"]) == 0
    assert "storage-random-read nvmeof [" in term.getvalue()
    # (a scaled run's empty figures came with no word of why)
    assert "note: --scale 0.02 ran 100 µs of the case's 5 ms: " in capsys.readouterr().out


def test_a_one_tick_run_says_one_tick(capsys: pytest.CaptureFixture[str]) -> None:
    from console.cli import main

    assert main(["run", "tiny", "--duration", "1us"]) == 0
    out = capsys.readouterr().out
    assert "simulated 1 µs in 1 tick of 1 µs" in out
    assert "1 ticks" not in out
