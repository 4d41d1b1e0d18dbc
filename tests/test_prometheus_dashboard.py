"""The shipped Grafana dashboard, rules and configs, checked as files (no server)."""

from __future__ import annotations

import json
from typing import Any

from exporters.grafana import build_dashboard
from tests._prometheus import DASHBOARD_FILE, GRAFANA_DIR, RULES_FILE, promtool


def load() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD_FILE.read_text()))


def test_committed_json_is_what_the_builder_writes() -> None:
    assert DASHBOARD_FILE.read_text() == build_dashboard.render(), (
        "run: python -m exporters.grafana.build_dashboard"
    )


def test_provisioning_form_fixed_uid_and_datasource_variable() -> None:
    dash = load()
    assert dash["uid"] == "fabtop-fabric"
    assert "id" not in dash  # provisioning assigns ids; a fixed one would clash
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("cluster", "switch", "link"):
        assert variables[name]["query"]["query"].startswith("label_values(")
    panels = [p for p in dash["panels"] if p["type"] != "row"]
    assert all(p["datasource"]["uid"] == "${datasource}" for p in panels)
    assert all(t["datasource"]["uid"] == "${datasource}" for p in panels for t in p["targets"])


def test_has_topk_heatmap_flow_control_and_faults() -> None:
    dash = load()
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert any(e.startswith("topk($topn,") for e in exprs)
    heatmaps = [p for p in dash["panels"] if p["type"] == "heatmap"]
    assert heatmaps and "_bucket" in heatmaps[0]["targets"][0]["expr"]
    assert heatmaps[0]["targets"][0]["format"] == "heatmap"
    for metric in ("pfc_pause", "ecn_marked", "credits_available", "fault_state"):
        assert any(metric in e for e in exprs), metric
    rows = [p["title"] for p in dash["panels"] if p["type"] == "row"]
    assert "Faults" in rows


def test_panels_do_not_overlap() -> None:
    cells: set[tuple[int, int]] = set()
    for p in load()["panels"]:
        g = p["gridPos"]
        mine = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not cells & mine, p["title"]
        assert g["x"] + g["w"] <= 24
        cells |= mine


def test_promtool_accepts_the_rules_and_the_example_config() -> None:
    rules = promtool("check", "rules", str(RULES_FILE))
    assert rules.returncode == 0, rules.stdout + rules.stderr
    config = promtool("check", "config", str(GRAFANA_DIR / "prometheus-scrape.yml"))
    assert config.returncode == 0, config.stdout + config.stderr
