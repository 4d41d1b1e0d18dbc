"""A duration without a unit: seconds in a scenario or topology file, for every key that
takes one; refused on the command line. docs/SCENARIOS.md, "Workload kinds", states the
rule once (it said "a bare number is seconds: `dt = 5` is five seconds, and refused")."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from console.cli import main
from fabric_core.runtime.scenario import (
    ScenarioError,
    bundled_dir,
    list_scenarios,
    load_scenario,
)
from fabric_core.workloads import build_workload
from fabric_core.workloads.fields import DURATION_KEYS

ROOT = Path(__file__).resolve().parent.parent
TINY = (bundled_dir() / "tiny.toml").read_text()
_TOPOLOGY = '[topology]\nkind = "leaf-spine"\nleaves = 2\nspines = 2\ngpus_per_leaf = 4\n'

#: every workload key that is a duration: (kind, key, the workload's attribute, other keys)
WORKLOAD_DURATIONS = [
    ("incast", "period", "period_s", ""),
    ("incast", "start", "start_s", ""),
    ("alltoall", "period", "period_s", ""),
    ("pairs", "start", "start_s", 'pairs = [["gpu0000", "gpu0005"]]\n'),
    ("pairs", "until", "until_s", 'pairs = [["gpu0000", "gpu0005"]]\n'),
    ("training", "compute", "compute_s", ""),
    ("checkpoint", "start", "start_s", ""),
    ("checkpoint", "period", "period_s", ""),
    ("kvcache", "first_decode", "first_decode_s", ""),
    ("moe", "expert_compute", "expert_compute_s", ""),
    ("moe", "attention_compute", "attention_compute_s", ""),
]
#: how a file may write 50 µs: a number of seconds, text of seconds, text with a unit
SPELLINGS = ["0.00005", '"0.00005"', '"5e-5"', '"50us"', '"0.05 ms"']


def _load(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return load_scenario(path)


def _durations_in_the_workloads() -> set[str]:
    """The keys the workload builders read with ``fields.duration``."""
    keys: set[str] = set()
    for source in (ROOT / "fabric_core" / "workloads").glob("*.py"):
        keys |= set(re.findall(r"\bduration\(\s*t,\s*\"(\w+)\"", source.read_text()))
    return keys


def test_every_workload_duration_key_is_covered_here() -> None:
    assert _durations_in_the_workloads() == {key for _, key, _, _ in WORKLOAD_DURATIONS}
    assert _durations_in_the_workloads() == DURATION_KEYS  # (the keys warned of)


@pytest.mark.parametrize(("kind", "key", "attr", "more"), WORKLOAD_DURATIONS)
def test_a_workload_duration_without_a_unit_is_warned_of_naming_its_key(
    kind: str, key: str, attr: str, more: str, tmp_path: Path
) -> None:
    """``period = 100`` meant as 100 µs loaded as 100 s without a word: the loader now
    names the key, what it was read as and the unit to write."""
    text = (
        f'name = "d"\n{_TOPOLOGY}[[workload]]\nname = "w"\nkind = "{kind}"\nclass = "bulk"\n'
        f"{more}{key} = 100\n"
    )
    assert _load(tmp_path, text).unit_notes == [
        f"workload[0].{key} = 100 has no unit, so it is 100 s (a duration without a unit is "
        f'seconds): write the unit, {key} = "100s" if that is meant, or "100ms", "100us"'
    ]


def test_a_duration_with_its_unit_or_zero_or_a_tick_given_on_the_command_line_is_not_warned_of(
    tmp_path: Path,
) -> None:
    text = TINY + (
        '\n[[fault]]\nat = 0\nkind = "link_down"\ntarget = "leaf00->spine00"\nduration = "5ms"\n'
    )
    assert _load(tmp_path, text).unit_notes == []
    path = tmp_path / "bare-tick.toml"
    path.write_text(TINY.replace('dt = "1us"', "dt = 0.000001"))
    assert load_scenario(path).unit_notes == [
        "dt = 1e-06 has no unit, so it is 1 µs (a duration without a unit is seconds): write "
        'the unit, dt = "1us"'
    ]
    assert load_scenario(path, dt="2us").unit_notes == []  # (the file's tick is not used)


def test_fabtop_run_warns_of_each_duration_without_a_unit_before_the_run(tmp_path: Path) -> None:
    """A fault's ``duration = 5`` meant as 5 ms held the link down for 5 s, unsaid; the
    warnings come before the run, even with --quiet, and the run goes on (the file's rule
    is kept: a number without a unit is seconds)."""
    path = tmp_path / "lab.toml"
    path.write_text(
        TINY + '\n[[fault]]\nat = "1us"\nkind = "link_down"\ntarget = "leaf00->spine00"\n'
        "duration = 5\n" + '[links.leaf_spine]\ndelay = "0.0000005"\n'
    )
    out = subprocess.run(
        [sys.executable, "-m", "console.cli", "run", str(path), "--duration", "2us", "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [
        f"fabtop: warning: {path}: fault[0].duration = 5 has no unit, so it is 5 s (a "
        'duration without a unit is seconds): write the unit, duration = "5s" if that is '
        'meant, or "5ms", "5us"',
        f'fabtop: warning: {path}: links.leaf_spine.delay = "0.0000005" has no unit, so it '
        "is 500 ns (a duration without a unit is seconds): write the unit, "
        'delay = "500ns"',
    ]


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize(("kind", "key", "attr", "more"), WORKLOAD_DURATIONS)
def test_a_workload_duration_without_a_unit_is_seconds(
    kind: str, key: str, attr: str, more: str, spelling: str, tmp_path: Path
) -> None:
    text = (
        f'name = "d"\n{_TOPOLOGY}[[workload]]\nname = "w"\nkind = "{kind}"\nclass = "bulk"\n'
        f"{more}{key} = {spelling}\n"
    )
    scn = _load(tmp_path, text)  # loads: the file's checks passed
    workload = build_workload(scn.raw["workload"][0], "workload[0]")
    assert getattr(workload, attr) == pytest.approx(50e-6, rel=1e-12)


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_the_tick_and_a_scheduled_fault_without_a_unit_are_seconds(
    spelling: str, tmp_path: Path
) -> None:
    text = TINY.replace('dt = "1us"', f"dt = {spelling}") + (
        f'\n[[fault]]\nat = {spelling}\nkind = "link_down"\ntarget = "leaf00->spine00"\n'
        f"duration = {spelling}\n"
    )
    scn = _load(tmp_path, text)
    assert scn.dt_s == pytest.approx(50e-6, rel=1e-12)
    (fault,) = scn.faults
    assert fault.at_s == pytest.approx(50e-6, rel=1e-12)
    assert fault.duration_s == pytest.approx(50e-6, rel=1e-12)


@pytest.mark.parametrize("spelling", ["5", '"5"', "5.0", '" 5 "'])
def test_a_tick_of_seconds_is_refused_naming_the_unit_to_write(
    spelling: str, tmp_path: Path
) -> None:
    """``dt = 5`` is a tick of 5 s: refused by the tick's range, with the fix."""
    with pytest.raises(ScenarioError) as exc:
        _load(tmp_path, TINY.replace('dt = "1us"', f"dt = {spelling}"))
    message = str(exc.value)
    assert "dt: the tick must be between 1e-09 and 0.01 s, got 5 s" in message
    assert "(a duration without a unit is seconds: write the unit, e.g. dt =" in message
    assert re.search(r'dt = "5(\.0)?us"\)', message), message


@pytest.mark.parametrize(
    ("spelling", "hint"),
    [
        ('"1s"', False),  # it has its unit: no word of one
        ('"20ms"', False),
        ("1e-12", True),  # 1e-12 ms is no tick either: the rule, without an example
    ],
)
def test_the_unit_is_suggested_only_for_a_tick_without_one(
    spelling: str, hint: bool, tmp_path: Path
) -> None:
    with pytest.raises(ScenarioError) as exc:
        _load(tmp_path, TINY.replace('dt = "1us"', f"dt = {spelling}"))
    message = str(exc.value)
    assert "dt: the tick must be between" in message
    assert ("without a unit is seconds" in message) is hint
    assert "e.g." not in message


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('dt = "5 parsecs"', "dt: bad duration '5 parsecs'"),
        ("dt = 0", "dt: duration must be > 0, got 0"),
        ("dt = -1", "dt: duration must be > 0, got -1"),
        (
            '[[fault]]\nat = -1\nkind = "link_down"\ntarget = "leaf00->spine00"',
            "fault[0].at: duration must be >= 0, got -1",
        ),
        (
            '[[fault]]\nat = true\nkind = "link_down"\ntarget = "leaf00->spine00"',
            "fault[0].at: bad duration True",
        ),
        (
            '[[fault]]\nat = 0\nkind = "link_down"\ntarget = "leaf00->spine00"\nduration = 0',
            "fault[0].duration: duration must be > 0, got 0",
        ),
        (
            '[[workload]]\nname = "w"\nkind = "alltoall"\nclass = "bulk"\nperiod = 0',
            "workload[3]: period: duration must be > 0, got 0",
        ),
        (
            '[[workload]]\nname = "w"\nkind = "incast"\nclass = "bulk"\nstart = nan',
            "workload[3]: start: duration must be a finite number, got nan",
        ),
    ],
)
def test_a_refused_duration_names_its_key_and_what_it_must_be(
    table: str, message: str, tmp_path: Path
) -> None:
    top = "\n".join(line for line in TINY.splitlines() if not line.startswith("dt ="))
    text = f"{table}\n{top}\n" if table.startswith("dt") else f"{top}\n{table}\n"
    with pytest.raises(ScenarioError, match=re.escape(message)):
        _load(tmp_path, text)


def test_a_link_delay_is_text_its_number_without_a_unit_seconds(tmp_path: Path) -> None:
    """``[links]`` takes text only (a bandwidth without a unit could be bits or bytes);
    a topology file's ``delay=0.00005``, and ``[links]``'s ``"0.0005"``, are seconds; a
    ``"5"`` is 5 s of cable, refused (at most 1 ms) with the unit to write."""
    base = f'name = "d"\n{_TOPOLOGY}[[workload]]\nname = "w"\nkind = "bulk"\nclass = "bulk"\n'
    with pytest.raises(ScenarioError, match=r"links\.leaf_spine\.delay: must be text with a unit"):
        _load(tmp_path, base + "[links.leaf_spine]\ndelay = 5\n")
    with pytest.raises(ScenarioError, match=r"delay: '5' is 1,000,000 km .* e\.g\. '5ns'"):
        _load(tmp_path, base + '[links.leaf_spine]\ndelay = "5"\n')
    scn = _load(tmp_path, base + '[links.leaf_spine]\ndelay = "0.0005"\n')
    assert scn.build_topology().links.prop_delay_s.max() == 0.0005
    (tmp_path / "lab.topo").write_text(
        "node gpu00 gpu\nnode gpu01 gpu\nnode leaf00 leaf\nnode spine00 spine\n"
        "link gpu00 leaf00\nlink gpu01 leaf00 delay=0.00005\nlink leaf00 spine00 delay=50us\n"
    )
    scn = _load(
        tmp_path,
        'name = "f"\n[topology]\nkind = "file"\npath = "lab.topo"\n'
        '[[workload]]\nname = "w"\nkind = "bulk"\nclass = "bulk"\n',
    )
    links = scn.build_topology().links
    delays = {links.name[i]: links.prop_delay_s[i] for i in range(len(links.name))}
    assert delays["gpu01->leaf00"] == pytest.approx(delays["leaf00->spine00"], rel=1e-12)


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "tiny", "--dt", "5"],
        ["run", "tiny", "--duration", "10us", "--dt", "0.000001"],
        ["inject", "link_down", "leaf00->spine00", "--duration", "5"],
        ["check", "ibgda", "tiny", "--timeout", "5"],
    ],
)
def test_the_command_line_refuses_a_duration_without_a_unit(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "needs a unit (ns, us, ms, s)" in capsys.readouterr().err


@pytest.mark.parametrize("name", [n for n, _ in list_scenarios()])
def test_the_bundled_scenarios_write_their_units(name: str) -> None:
    """Every bundled scenario loads, and gives each duration its unit (so none relies on
    a number being seconds)."""
    assert load_scenario(name).unit_notes == []
    raw = tomllib.loads((bundled_dir() / f"{name}.toml").read_text())
    keys = {"dt", "at", "duration"} | {key for _, key, _, _ in WORKLOAD_DURATIONS}

    def check(table: Any, where: str) -> None:
        if isinstance(table, list):
            for i, item in enumerate(table):
                check(item, f"{where}[{i}]")
        elif isinstance(table, dict):
            for key, value in table.items():
                if key in keys and not isinstance(value, dict | list):
                    assert isinstance(value, str) and re.search(r"[a-zµ]\s*$", value), (
                        f"{name}: {where}.{key} = {value!r} has no unit"
                    )
                check(value, f"{where}.{key}")

    check(raw, name)


def test_the_docs_state_the_rule_once_with_every_key() -> None:
    text = (ROOT / "docs" / "SCENARIOS.md").read_text()
    start = text.index("**Durations** take")
    rule = " ".join(text[start : text.index("\n\n", start)].split())
    doc = " ".join(text.split())
    assert "is five seconds, and refused" not in doc  # (the sentence that confused)
    # the rule, its error and its warning, all in one place
    assert doc.count("a duration without a unit is seconds") == 3
    assert rule.count("a duration without a unit is seconds") == 3
    for key in ["dt", "at", "duration", "delay", *_durations_in_the_workloads()]:
        assert f"`{key}`" in rule, key
