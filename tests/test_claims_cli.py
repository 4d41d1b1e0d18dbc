"""``fabtop claims`` end to end, and no emulated figure is a constant (issue 17)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from console.claimsrun import CLAIMS, Settings, run_claims
from console.claimsrun import plots as plotting
from console.claimsrun.runs import bundled, kpi, run_scenario
from console.cli import main
from fabric_core.reports.bringup import check_ibgda
from fabric_core.runtime.scenario import parse_scenario

VERDICTS = {"reproduced", "partly", "not reproduced"}

#: Physical parameters changed at once for the "not a constant" check: each figure of
#: the table depends on at least one of them.
PERTURBED = Settings(
    quick=True,
    seed=2,
    profile_overrides={
        "native-400g": {"switch_latency_s": 300e-9, "link_bandwidth_Bps": 40e9, "reroute_s": 3e-3},
        "roce-400g": {
            "switch_latency_s": 800e-9,
            "link_bandwidth_Bps": 40e9,
            "bfd_interval_s": 0.2,
        },
        "native-800g": {"link_bandwidth_Bps": 80e9},
    },
    endpoint={
        "cpu_post_s": 3e-7,
        "pcie_rtt_s": 8e-7,
        "copy_launch_s": 3e-6,
        "gpu_wqe_post_s": 1.2e-6,
    },
    storage={
        "drive_read_latency_s": 100e-6,
        "rdma_stack_latency_s": 8e-6,
        "tcp_stack_latency_s": 95e-6,
        "client_cores": 0.4,
    },
)

#: Figures that are counts or a saturated fraction by nature (a lossless fabric drops
#: nothing, matched versions complete every message, a GPU cannot be more than 100 %
#: busy): they are traced to the run that produced them instead.
TRACED = {
    ("C3", "check", "claimed_side"),
    ("C3", "check", "baseline"),
    ("C8", "deadlock", "claimed_side"),
    ("C8", "deadlock", "baseline"),
    ("C5", "util", "claimed_side"),
    ("C5", "step", "claimed_side"),
}


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, str]:
    """``fabtop claims --quick`` in a fresh process, as a user runs it."""
    d = tmp_path_factory.mktemp("claims")
    js, md = d / "claims.json", d / "CLAIMS.md"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "console.cli",
            "claims",
            "--quick",
            "--json",
            str(js),
            "--markdown",
            str(md),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(js.read_text()), proc.stdout, md.read_text()


def test_quick_run_produces_every_claim(quick: tuple[dict[str, Any], str, str]) -> None:
    data, out, md = quick
    assert {r["claim"] for r in data["rows"]} == {f"C{i}" for i in range(1, 11)}
    assert len(data["rows"]) == sum(len(c.parts) for c in CLAIMS)
    for r in data["rows"]:
        assert r["verdict"] in VERDICTS
        assert r["sentence"] and r["article"] and r["rule"] and r["conditions"]
        assert r["claimed_side"]["source"] and r["baseline"]["source"]
        assert r["metrics"] and all(v is not None for v in r["metrics"].values()), r
    for cid in ("C2", "C5", "C7", "C8", "C9", "C10"):
        assert data["claims"][cid]["sweeps"], cid
    c7 = {s["key"]: s for s in data["claims"]["C7"]["sweeps"]}
    assert c7["c7_latency_3sw"]["x"][0] == 64 and c7["c7_latency_3sw"]["x"][-1] == 1048576
    # the terminal table names the claims in words, and sums up the verdicts
    assert "over three switches the native" in out
    assert "rows:" in out and "reproduced" in out
    assert "| C7 |" in md and "Parameters these figures come from" in md
    assert "Profile.switch_latency_s" in md


def _figures(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], float]:
    return {
        (r["claim"], r["part"], side): r[side]["value"]
        for r in rows
        for side in ("claimed_side", "baseline")
    }


def test_no_emulated_figure_is_a_constant(quick: tuple[dict[str, Any], str, str]) -> None:
    from console.claimsrun.render import to_json

    base = _figures(quick[0]["rows"])
    moved = _figures(to_json(run_claims(CLAIMS, PERTURBED), "")["rows"])
    assert base.keys() == moved.keys()
    for key, a in base.items():
        if key in TRACED:
            continue
        b = moved[key]
        assert a is not None and b is not None, key
        assert not math.isclose(a, b, rel_tol=1e-6), f"{key} did not move: {a} vs {b}"


def test_the_traced_figures_are_their_runs_fields(quick: tuple[dict[str, Any], str, str]) -> None:
    fig = _figures(quick[0]["rows"])
    s = Settings(quick=True)
    steps = check_ibgda(parse_scenario(bundled("tiny"), "tiny"))
    assert fig[("C3", "check", "claimed_side")] == sum(x.completed for x in steps) / sum(
        x.messages for x in steps
    )
    assert fig[("C3", "check", "baseline")] < 1  # a mismatch loses messages
    rep = run_scenario(bundled("pfc-deadlock"), 10e-3, s, print, label="t", prof="native-400g")
    assert fig[("C8", "deadlock", "claimed_side")] == rep["deadlocks"] == 0
    rep = run_scenario(bundled("pfc-deadlock"), 10e-3, s, print, label="t", prof="roce-400g")
    assert fig[("C8", "deadlock", "baseline")] == rep["deadlocks"] >= 1
    raw = bundled("training-nfs")
    raw["dt"] = "200us"
    rep = run_scenario(raw, 0.2, s, print, label="t")
    assert fig[("C5", "util", "claimed_side")] == pytest.approx(
        kpi(rep, "loader", "gpu_utilisation")
    )
    assert fig[("C5", "step", "claimed_side")] == pytest.approx(
        kpi(rep, "loader", "step_seconds_mean")
    )


def test_bad_only_is_refused_with_the_known_ids(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["claims", "--only", "C7,C42"]) == 2
    err = capsys.readouterr().err
    assert "unknown claim(s) C42" in err and "known: C1, C2" in err


def test_only_runs_the_named_claims_and_plots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    js = tmp_path / "c.json"
    plots = tmp_path / "plots"
    assert (
        main(["claims", "--only", "c7", "--quick", "--json", str(js), "--plots", str(plots)]) == 0
    )
    out = capsys.readouterr()
    assert {r["claim"] for r in json.loads(js.read_text())["rows"]} == {"C7"}
    if plotting.available():
        assert sorted(p.name for p in plots.glob("*.svg")) == [
            "c7_gap_1sw.svg",
            "c7_gap_3sw.svg",
            "c7_latency_1sw.svg",
            "c7_latency_3sw.svg",
            "c7_small_latency_vs_poll.svg",
            "c7_switch_latency_gap.svg",
        ]
    else:
        assert "pip install -e '.[plots]'" in out.err
    # without matplotlib: the table is printed and the user hears how to get plots
    monkeypatch.setattr(plotting, "available", lambda: False)
    assert main(["claims", "--only", "C7", "--quick", "--plots", str(tmp_path / "none")]) == 0
    out = capsys.readouterr()
    assert "needs matplotlib (pip install -e '.[plots]')" in out.err
    assert "over three switches" in out.out
    assert not (tmp_path / "none").exists()


def test_the_committed_claims_page_is_the_commands_output(
    quick: tuple[dict[str, Any], str, str],
) -> None:
    """docs/CLAIMS.md is generated (its header names the command), has every claim's row,
    and every plot it shows is committed beside it."""
    root = Path(__file__).resolve().parent.parent
    doc = (root / "docs" / "CLAIMS.md").read_text()
    assert "<!-- Generated by `fabtop claims --markdown docs/CLAIMS.md --plots docs/claims`" in doc
    for i in range(1, 11):
        assert f"| C{i} |" in doc and f"## C{i}: " in doc
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", doc)
    assert images and all((root / "docs" / p).is_file() for p in images)
    # the same sections as a fresh run renders (the page was not edited by hand)
    fresh = quick[2]
    heads = [ln for ln in fresh.splitlines() if ln.startswith(("## ", "| # |"))]
    assert heads == [ln for ln in doc.splitlines() if ln.startswith(("## ", "| # |"))]
    assert "(docs/CLAIMS.md)" in (root / "README.md").read_text()
