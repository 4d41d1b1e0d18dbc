"""The files a command writes at the end of its work: a bad path is refused before the
work starts (a typo must not cost a long run), and a file is written whole or not at all
(``console/cli/output.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.cli import check as check_cli
from console.cli import compare as compare_cli
from console.cli import main
from console.cli import storage as storage_cli
from console.cli.output import output_problem, write_output


def _no_work(*_: object, **__: object) -> None:
    pytest.fail("the work started before the output path was checked")


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["check", "ibgda", "--json"], "--json"),
        (["compare", "tiny", "--duration", "10us", "--json"], "--json"),
        (["claims", "--quick", "--json"], "--json"),
        (["storage-report", "--write-docs"], "--write-docs"),
        (["run", "tiny", "--duration", "10us", "--json"], "--json"),
    ],
)
def test_an_output_in_a_missing_directory_is_refused_before_the_work(
    argv: list[str],
    option: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import console.claimsrun

    monkeypatch.setattr(check_cli, "check_ibgda", _no_work)
    monkeypatch.setattr(compare_cli, "compare_scenario", _no_work)
    monkeypatch.setattr(storage_cli, "_run_case", _no_work)
    monkeypatch.setattr(console.claimsrun, "run_claims", _no_work)
    missing = tmp_path / "no-such-dir" / "out.json"
    assert main([*argv, str(missing)]) == 2
    err = capsys.readouterr().err
    assert err == f"fabtop: {option} {missing}: no such directory {missing.parent}\n"


def test_an_output_that_is_a_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(compare_cli, "compare_scenario", _no_work)
    assert main(["compare", "tiny", "--json", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"fabtop: --json {tmp_path}: is a directory\n"


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["run", "tiny", "--json"], "--json"),
        (["run", "tiny", "--record"], "--record"),
        (["claims", "--markdown"], "--markdown"),
        (["storage-report", "--write-docs"], "--write-docs"),
        (["replay"], "FILE"),
    ],
)
def test_an_empty_file_name_is_refused_as_one(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--json ''`` was reported as the directory ``.`` (``Path("")``)."""
    with pytest.raises(SystemExit) as exit_:
        main([*argv, ""])
    assert exit_.value.code == 2
    assert f"argument {option}: expected a file name, got ''" in capsys.readouterr().err


def test_a_dash_is_refused_not_written_as_a_file_named_dash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--json -`` wrote a file named "-" where a pipe was meant."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["run", "tiny", "--duration", "1us", "--json", "-"])
    assert exit_.value.code == 2
    assert "argument --json: '-' is no file here" in capsys.readouterr().err
    assert not (tmp_path / "-").exists()


def test_claims_markdown_and_plots_may_name_directories_still_to_be_made(tmp_path: Path) -> None:
    """--markdown and --plots make their directories, so a new one is not refused; a
    --plots that is a file is, since no plot can go in it."""
    assert output_problem(tmp_path / "a" / "b" / "CLAIMS.md", make_parents=True) is None
    assert output_problem(tmp_path / "a" / "b" / "CLAIMS.md") is not None
    a_file = tmp_path / "plots"
    a_file.write_text("")
    assert output_problem(a_file / "x.svg", make_parents=True) == f"{a_file} is not a directory"


def test_claims_plots_into_a_file_is_refused_before_the_claims_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import console.claimsrun

    monkeypatch.setattr(console.claimsrun, "run_claims", _no_work)
    a_file = tmp_path / "plots"
    a_file.write_text("")
    assert main(["claims", "--quick", "--plots", str(a_file)]) == 2
    assert capsys.readouterr().err == f"fabtop: --plots {a_file}: {a_file} is not a directory\n"


def test_compare_writes_its_json_whole_over_the_file_before(tmp_path: Path) -> None:
    """Through the CLI: the comparison replaces what was there (written beside the path
    and renamed over it) and leaves no temporary file."""
    out = tmp_path / "cmp.json"
    out.write_text("x" * 1_000_000)  # longer than the comparison: no tail may remain
    argv = ["compare", "tiny", "--duration", "10us", "--no-sizes", "--json", str(out)]
    assert main(argv) == 0
    assert json.loads(out.read_text())["scenario"] == "tiny"
    assert [p.name for p in tmp_path.iterdir()] == ["cmp.json"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_a_write_that_fails_is_one_line_and_false(capsys: pytest.CaptureFixture[str]) -> None:
    assert not write_output(Path("/dev/full"), "{}\n")
    assert capsys.readouterr().err == "fabtop: cannot write /dev/full: No space left on device\n"


def test_a_write_that_fails_leaves_the_file_before_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.json"
    out.write_text('{"old": 1}\n')

    def full_disk(self: Path, text: str) -> int:
        with self.open("w") as partial:  # part of it, then the disk is full
            partial.write(text[:3])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    assert not write_output(out, '{"new": 2}\n')
    assert out.read_text() == '{"old": 1}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]
    assert "No space left on device" in capsys.readouterr().err


def test_a_directory_where_no_file_can_be_made_is_refused_though_access_allows_it(
    tmp_path: Path,
) -> None:
    """``/proc`` passes ``os.access`` for root, and no file can be made there: ``--json
    /proc/version`` ran the whole run and then failed to write. The check makes a file
    beside the path (and removes it), as the write will."""
    problem = output_problem(Path("/proc/version"))
    assert problem is not None and problem.startswith("cannot create a file in /proc")
    assert output_problem(tmp_path / "report.json") is None
    assert list(tmp_path.iterdir()) == []  # (the probe is gone)
