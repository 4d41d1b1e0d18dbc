"""`fabtop compare` as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_compare_prints_both_profiles_and_writes_json(tmp_path: Path) -> None:
    out_file = tmp_path / "cmp.json"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "console.cli",
            "compare",
            "tiny",
            "--duration",
            "100us",
            "--json",
            str(out_file),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "native-400g" in out.stdout and "roce-400g" in out.stdout
    assert "pause frames" in out.stdout and "lower by" in out.stdout
    # the sizes' table is a stock fabric's, and says so (it read as the scenario's own)
    assert "on each profile's stock idle fabric (2 leaves, 1 spine), not this scenario's" in (
        out.stdout
    )
    data = json.loads(out_file.read_text())
    assert set(data["reports"]) == {"native-400g", "roce-400g"}
    assert data["reports"]["native-400g"]["seed"] == data["reports"]["roce-400g"]["seed"]
    rows = {(r["size_bytes"], r["switch_hops"]): r for r in data["latency_by_size"]}
    assert rows[(4096, 3)]["reduction"] > 0
    # both runs got the same workload: the same scenario, seed and workloads, the same
    # MoE rounds and the same closed loop of background flows. (The bytes injected differ:
    # closed-loop workloads start a flow when one ends, so the faster fabric starts more.)
    native, roce = (data["reports"][p] for p in ("native-400g", "roce-400g"))
    for field in ("scenario", "cluster", "seed"):
        assert native[field] == roce[field]
    assert set(native["workloads"]) == set(roce["workloads"]) == {"background", "moe", "probe"}
    kpis = {
        p: {w: v["kpis"] for w, v in r["workloads"].items()} for p, r in data["reports"].items()
    }
    assert (
        kpis["native-400g"]["moe"]["rounds_started"]
        == kpis["roce-400g"]["moe"]["rounds_started"]
        > 0
    )
    # the same closed loop on both: tiny's 4 senders keep 1 flow each in flight (a flow
    # that ended in the last tick is replaced in the next, so the count may be short)
    for p in ("native-400g", "roce-400g"):
        assert 0 < kpis[p]["background"]["flows_in_flight"] <= 4
    # the open-loop probe sends the same messages on both: it draws from a stream of its
    # own (workloads.base.workload_rngs), not from the one RoCE's DCQCN draws from
    assert (
        kpis["native-400g"]["probe"]["messages_sent"]
        == kpis["roce-400g"]["probe"]["messages_sent"]
        > 0
    )


def test_compare_rejects_an_unknown_profile() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "console.cli",
            "compare",
            "tiny",
            "--profiles",
            "native-400g",
            "ib-9000",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "invalid choice: 'ib-9000'" in out.stderr


def test_compare_refuses_one_profile_twice(capsys: pytest.CaptureFixture[str]) -> None:
    """Two identically named columns compared nothing; refused before any run."""
    from console.cli import main

    assert main(["compare", "tiny", "--profiles", "native-400g", "native-400g"]) == 2
    err = capsys.readouterr().err
    assert "the two profiles are both native-400g; give two different ones" in err


def test_the_class_table_puts_each_quantile_over_its_two_profiles() -> None:
    """One header of "native-400g p50  roce-400g p50 native-400g p99 ..." ran its labels
    together, 113 columns wide."""
    from console.cli.compare import class_table

    classes = {
        "bulk": {
            "native-400g": {"p50_seconds": 26.3e-6, "p99_seconds": 27.1e-6, "p999_seconds": 3e-5},
            "roce-400g": {"p50_seconds": 26.5e-6, "p99_seconds": 1.2e-3, "p999_seconds": None},
        }
    }
    quantiles, profiles, bulk = class_table(classes, "native-400g", "roce-400g")
    assert quantiles.split() == ["p50", "p99", "p99.9"]
    assert profiles.split() == ["class", *["native-400g", "roce-400g"] * 3]
    assert bulk.split() == [
        "bulk",
        "26.3",
        "µs",
        "26.5",
        "µs",
        "27.1",
        "µs",
        "1.2",
        "ms",
        "30",
        "µs",
        "—",
    ]
    assert max(len(line) for line in (quantiles, profiles, bulk)) < 100
    # each figure ends under its profile's name, each quantile sits over its pair
    for name in ("native-400g", "roce-400g"):
        ends = [i + len(name) for i in range(len(profiles)) if profiles.startswith(name, i)]
        assert all(bulk[end - 1] in "s—" for end in ends), (ends, bulk)
    starts = [i for i in range(len(profiles)) if profiles.startswith("native-400g", i)]
    for start, q in zip(starts, ("p50", "p99", "p99.9"), strict=True):
        at = quantiles.index(q)
        assert start <= at < start + len("native-400g  roce-400g"), (start, at)


def test_a_duration_that_is_not_whole_ticks_says_what_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--duration 0.5us`` on a 1 µs tick said "500 ns simulated on each profile" (and the
    JSON 5e-07) after one whole tick on each."""
    from console.cli import main

    out_file = tmp_path / "cmp.json"
    argv = ["compare", "tiny", "--duration", "0.5us", "--no-sizes", "--json", str(out_file)]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "fabtop: --duration 500 ns runs as 1 tick of 1 µs, 1 µs (a run is whole ticks)" in err
    assert "1 µs simulated on each profile" in out
    data = json.loads(out_file.read_text())
    assert data["duration_seconds"] == pytest.approx(1e-6)
    assert {r["run"]["ticks"] for r in data["reports"].values()} == {1}


def test_compare_says_each_profiles_faults_as_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``run`` said the faults and the scheduled ones the core refused; ``compare`` on the
    same file said neither."""
    from console.cli import main

    scenario = tmp_path / "dup.toml"
    down = '[[fault]]\nat = "{}"\nkind = "link_down"\ntarget = "leaf00->spine01"\n'
    scenario.write_text(
        'name = "dup"\ndt = "1us"\n[topology]\nkind = "leaf-spine"\nleaves = 2\n'
        "spines = 2\ngpus_per_leaf = 2\n" + down.format("5us") + down.format("10us")
    )
    assert main(["compare", str(scenario), "--duration", "20us", "--no-sizes"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("scenario dup, 20 µs simulated on each profile")  # (not its path)
    for profile in ("native-400g", "roce-400g"):
        # (the line `fabtop run` prints: console.cli.run.fault_line)
        assert f"{profile}: fault f0 link_down on leaf00->spine01: injected at 5 µs, " in out
        assert f"{profile}: scheduled fault skipped, the core refused it: leaf00->spine01: " in out


def test_compare_warns_of_each_profiles_refused_flows_as_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An incast past its per-sender limit of 16 flows in flight has the rest of its
    rounds refused: ``run`` warns of them, and ``compare`` now does for each profile (a
    profile that ran less than asked is no fair side of a comparison)."""
    from console.cli import main

    scenario = tmp_path / "inc.toml"
    scenario.write_text(
        'name = "inc"\ndt = "1us"\n[topology]\nkind = "leaf-spine"\nleaves = 2\nspines = 1\n'
        'gpus_per_leaf = 4\n[[fault]]\nat = "5us"\nkind = "incast"\ntarget = "gpu0000"\n'
        "params = {senders = 7, size_bytes = 4096, period_s = 1e-7}\n"
    )
    assert main(["compare", str(scenario), "--duration", "20us", "--no-sizes"]) == 0
    out = capsys.readouterr().out
    for profile in ("native-400g", "roce-400g"):
        (line,) = [ln for ln in out.splitlines() if ln.startswith(f"{profile}: warning: ")]
        assert line.endswith('refused at admission: not queued or retried, they never ran '
                             '(docs/MQTT.md, "Limits")')  # fmt: skip


def test_the_lower_by_column_names_its_profile_and_has_no_negative_zero() -> None:
    """``lower by`` said neither which profile is lower nor what -80% meant, and printed -0%
    for a reduction that rounds to nothing."""
    args = ["compare", "tiny", "--duration", "20us", "--profiles", "roce-400g", "native-800g"]
    out = subprocess.run(
        [sys.executable, "-m", "console.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("message"))
    assert header.split()[-3:] == ["roce-400g", "lower", "by"]
    rows = lines[lines.index(header) + 1 :]
    big = next(r for r in rows if r.split()[:3] == ["1", "MiB", "3"])
    # roce-400g's 24.4 µs is 80% of native-800g's 13.6 µs above it, and the table says how
    # to read the sign
    assert big.endswith(" -80%")
    assert "(negative: roce-400g is higher, by that share of native-800g's latency)" in lines
    assert "-0%" not in out.stdout and rows[0].endswith(" 0%")
