"""Odd texts a new operator met on the command line (issue 16 item 11)."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.cli import build_parser, main
from console.cli.tui import DEFAULT_SPEED


def test_top_level_help_puts_the_console_options_under_their_own_heading() -> None:
    text = build_parser().format_help()
    subcommands, _, rest = text.partition("console options (fabtop with no subcommand):")
    assert rest, text
    assert "--speed" in rest and "--speed SPEED " not in subcommands.split("subcommands:", 1)[1]
    assert "positional arguments" not in text
    assert f"(default {DEFAULT_SPEED:g})" in rest


def test_replay_says_what_its_digests_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = tmp_path / "run.json"
    assert main(["run", "tiny", "--duration", "30us", "--quiet", "--record", str(rec)]) == 0
    assert main(["replay", str(rec), "--quiet"]) == 0
    out = capsys.readouterr().out
    # (it said "0 commands; 1 state digest (one after each command, one at the end)")
    assert (
        out
        == "replay OK: 30 ticks, no commands; 1 state digest (one at the end) and the report match\n"
    )
    assert "digests match" not in out


def _error_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The last line ``fabtop argv`` writes to stderr as it exits with 2."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_a_mistyped_option_is_named_by_its_subcommand_with_the_one_meant(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # (it was "fabtop: error: unrecognized arguments: --durtion", under the top-level usage)
    assert _error_of(["run", "--durtion", "5ms"], capsys) == (
        "fabtop run: error: unknown option --durtion (did you mean --duration?); "
        "see `fabtop run --help`"
    )
    err = _error_of(["scenarios", "--verbose"], capsys)
    assert err == "fabtop scenarios: error: unknown option --verbose; see `fabtop scenarios --help`"


def test_a_mistyped_console_option_is_not_read_as_a_subcommand(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # (it was "argument SUBCOMMAND: invalid choice: '2' (choose from 'run', ...)")
    assert _error_of(["--sped", "2"], capsys) == (
        "fabtop: error: unknown option --sped (did you mean --speed?); see `fabtop --help`"
    )


def test_a_console_option_after_a_subcommand_is_said_to_be_the_consoles(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _error_of(["compare", "--no-metrics"], capsys) == (
        "fabtop compare: error: --no-metrics is an option of the console (fabtop "
        "--no-metrics ..., with no subcommand), not of `fabtop compare`; "
        "see `fabtop compare --help`"
    )


def test_a_stray_argument_is_reported_by_its_subcommand(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _error_of(["run", "tiny", "extra"], capsys) == (
        "fabtop run: error: unexpected argument extra: `fabtop run --help` lists what it takes"
    )


def test_abbreviated_options_still_parse(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    args = parser.parse(["run", "--dur", "2ms", "tiny"])
    assert (args.subcommand, args.duration, args.scenario) == ("run", 2e-3, "tiny")
    assert parser.parse(["--no-metric", "--spe", "0.5"]).speed == 0.5
    # a name too far from every option gets no guess
    assert _error_of(["inject", "link_down", "leaf00->spine00", "--at", "0s"], capsys).startswith(
        "fabtop inject: error: unknown option --at; see"
    )
