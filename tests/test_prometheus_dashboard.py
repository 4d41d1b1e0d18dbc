"""The shipped Grafana dashboard, rules and configs: checked as files, and every panel and
rule against a real Prometheus on a fabric with every workload kind (none exempt)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from exporters.grafana import build_dashboard
from exporters.prometheus import start_metrics_server
from fabric_core.commands import InjectFault
from tests._prometheus import (
    DASHBOARD_FILE,
    GRAFANA_DIR,
    ROOT,
    RULES_FILE,
    EngineThread,
    PrometheusServer,
    promtool,
    samples,
    scrape,
    wait_until,
)
from tests.test_prometheus_server import (
    FED_BY_OPTIONAL_WORKLOADS,
    dashboard_queries,
    resolve_variables,
    substitute,
)

#: PD, training, KVCache, checkpoint, storage I/O, MoE, bulk and all-to-all on one fabric
EVERY_WORKLOAD = ROOT / "tests" / "scenarios" / "catalogue-workloads.toml"


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


@pytest.mark.integration  # runs promtool
def test_promtool_accepts_the_rules_and_the_example_config() -> None:
    rules = promtool("check", "rules", str(RULES_FILE))
    assert rules.returncode == 0, rules.stdout + rules.stderr
    config = promtool("check", "config", str(GRAFANA_DIR / "prometheus-scrape.yml"))
    assert config.returncode == 0, config.stdout + config.stderr


@pytest.mark.integration
@pytest.mark.slow
def test_every_panel_and_rule_has_data_with_pd_and_training(tmp_path: Path) -> None:
    """test_prometheus_server.py runs the dashboard on ``tiny``, which has neither PD nor
    training: the TTFT and GPU utilisation panels and rules are exempt there. Here the
    fabric has every workload kind, so every query of the dashboard and every recording rule
    must return data, with no exemption."""
    engine = EngineThread(str(EVERY_WORKLOAD)).start()
    exporter = start_metrics_server(engine.latest, port=0)  # the default: top:50
    prom: PrometheusServer | None = None
    try:
        result = engine.submit(InjectFault(kind="link_degraded", target="leaf00->spine00"))
        assert result.ok, result.error  # the fault panels need a fault

        def produced() -> bool:
            names = {n.removesuffix("_bucket") for n, _ in samples(scrape(exporter.url))}
            return set(FED_BY_OPTIONAL_WORKLOADS) <= names

        wait_until(produced, 30, "TTFT and GPU utilisation samples")
        prom = PrometheusServer(exporter.address, tmp_path, (RULES_FILE,))
        variables, exprs = dashboard_queries()
        values = resolve_variables(prom, variables)
        queries = {title + ": " + expr: substitute(expr, values) for title, expr in exprs}
        rules = re.findall(r"^\s*- record: (\S+)$", RULES_FILE.read_text(), flags=re.MULTILINE)
        assert any("ttft" in q for q in queries) and any("gpu_utilisation" in q for q in queries)
        assert len(rules) == RULES_FILE.read_text().count("record:")
        queries.update({f"rule {r}": r for r in rules})
        missing: list[str] = []

        def all_have_data() -> bool:
            assert prom is not None
            missing[:] = [k for k, q in queries.items() if not prom.query(q)]
            return not missing

        try:
            wait_until(all_have_data, 45, "every dashboard query and rule to return data")
        except pytest.fail.Exception:
            pytest.fail("no data for:\n" + "\n".join(missing))
    finally:
        if prom is not None:
            prom.stop()
        exporter.close()
        engine.stop()
