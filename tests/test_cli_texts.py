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
