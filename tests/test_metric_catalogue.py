"""Every metric family a scrape serves is in docs/METRICS.md, and every one it lists is served.

The catalogue is the doc's tables whose header starts ``| metric | type | labels |``: each
row names one or more families (backticked), their type (``counter``, ``gauge``,
``histogram``, ``info``) and their label names (backticked, outside parentheses). Two
templates stand for families the code builds by rule: ``fabtop_switch_<counter>`` and
``fabtop_tier_<counter>`` (each per-port counter labelled only by ``link``, summed), and
``fabtop_workload_<name>_seconds`` (the ``<name>`` table, with the workload kinds that feed
each histogram).

The scrapes are real: the exporter's HTTP server (``--link-metrics all``, the engine's
health, the server's own counters) over fabrics stepped here, in the OpenMetrics form
Prometheus asks for (it keeps info and counter types apart). Two small scenarios together
produce every family with samples: ``tests/scenarios/catalogue-roce.toml`` (RoCE: the
per-priority PFC counters; the traffic workloads) and ``catalogue-workloads.toml`` (PD,
training, KVCache, checkpoint, storage I/O, MoE); a fault on each gives the fault families.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as text_families

from exporters.mqtt.schema import CommandStatsMsg, EventStatsMsg
from exporters.prometheus import start_metrics_server
from exporters.prometheus.bridge_metrics import BridgeCounters
from fabric_core.commands import InjectFault
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from tests._prometheus import ROOT, scrape

METRICS_MD = ROOT / "docs" / "METRICS.md"
SCENARIOS = ROOT / "tests" / "scenarios"

#: scenario file -> ticks to run: enough for every workload histogram to have a sample
RUNS = {"catalogue-roce.toml": 1000, "catalogue-workloads.toml": 2000}


@dataclass(frozen=True)
class Documented:
    """One documented family: its type and label names (OpenMetrics family name as key)."""

    type: str
    labels: frozenset[str]
    doc_name: str


@dataclass
class Catalogue:
    families: dict[str, Documented] = field(default_factory=dict)
    #: ``fabtop_workload_<name>_seconds``: name -> the workload kinds documented to feed it
    workload_histograms: dict[str, frozenset[str]] = field(default_factory=dict)


@dataclass
class Scraped:
    """One family of a scrape: type, label names seen, samples, and workloads (if any)."""

    type: str
    labels: frozenset[str]
    samples: int
    workloads: frozenset[str]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _ticked(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def _family_name(doc_name: str, kind: str) -> str:
    """The OpenMetrics family name: a counter without ``_total``, an info without ``_info``."""
    suffix = {"counter": "_total", "info": "_info"}.get(kind)
    if suffix is not None:
        assert doc_name.endswith(suffix), f"METRICS.md: the {kind} {doc_name} must end in {suffix}"
        return doc_name[: -len(suffix)]
    return doc_name


def parse_catalogue(text: str) -> Catalogue:
    """The families METRICS.md documents, with the templates expanded."""
    rows: list[tuple[str, str, frozenset[str]]] = []
    cat = Catalogue()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        header = _cells(line) if line.startswith("|") else []
        if header[:3] == ["metric", "type", "labels"]:
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                name_cell, kind, label_cell = _cells(row)[:3]
                assert kind in ("counter", "gauge", "histogram", "info"), row
                labels = frozenset(_ticked(re.sub(r"\([^)]*\)", "", label_cell)))
                names = [n for n in _ticked(name_cell) if n.startswith("fabtop_")]
                assert names, f"METRICS.md: no metric name in {row}"
                rows += [(n, kind, labels) for n in names]
        elif header[:2] == ["`<name>`", "workload kinds"]:
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                names_cell, kinds_cell = _cells(row)[:2]
                for name in _ticked(names_cell):
                    cat.workload_histograms[name] = frozenset(_ticked(kinds_cell))
    port_counters = [
        n.removeprefix("fabtop_port_")
        for n, kind, labels in rows
        if n.startswith("fabtop_port_") and kind == "counter" and labels == {"link"}
    ]
    for name, kind, labels in rows:
        if "<counter>" in name:
            expanded = [name.replace("<counter>", c) for c in port_counters]
        elif "<name>" in name:
            expanded = [name.replace("<name>", w) for w in cat.workload_histograms]
        else:
            assert "<" not in name and "…" not in name, f"METRICS.md: unknown template {name}"
            expanded = [name]
        for doc_name in expanded:
            key = _family_name(doc_name, kind)
            assert key not in cat.families, f"METRICS.md documents {doc_name} twice"
            cat.families[key] = Documented(kind, labels, doc_name)
    return cat


def run_and_scrape(scenario: Path, ticks: int) -> tuple[str, str]:
    """Step ``scenario`` with a fault injected; the exporter's OpenMetrics and text scrapes."""
    fabric = Fabric.from_scenario(load_scenario(scenario))
    engine = Engine(fabric, speed=0)  # not run: its health feeds the engine's families
    result = fabric.apply(InjectFault(kind="link_degraded", target="leaf00->spine00"))
    assert result
    fabric.run_ticks(ticks)
    snap = engine.snapshot()
    # the bridge's counters as ``fabtop serve`` gives them (there from a real bridge:
    # tests/test_mqtt_serve.py); here their families' names, types and labels
    commands = CommandStatsMsg(0, 0, 0, 0, 0, 0, 0, 0, read_only=False, allowed=None)
    counters = BridgeCounters(True, 1, 0, commands, EventStatsMsg(0, 0, 0))
    server = start_metrics_server(
        lambda: snap,
        port=0,
        link_metrics="all",
        health=lambda: engine.health,
        bridge=lambda: counters,
    )
    try:
        return scrape(server.url, openmetrics=True), scrape(server.url)
    finally:
        server.close()


def families_of(openmetrics: str) -> dict[str, Scraped]:
    out: dict[str, Scraped] = {}
    for fam in text_string_to_metric_families(openmetrics):
        labels = frozenset(k for s in fam.samples for k in s.labels if k != "le")
        workloads = frozenset(s.labels["workload"] for s in fam.samples if "workload" in s.labels)
        out[fam.name] = Scraped(fam.type, labels, len(fam.samples), workloads)
    return out


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return parse_catalogue(METRICS_MD.read_text())


@pytest.fixture(scope="module")
def scrapes() -> dict[str, tuple[dict[str, Scraped], dict[str, str], str]]:
    """Per scenario: its families, its workloads' kinds, and the text-format scrape."""
    out = {}
    for name, ticks in RUNS.items():
        openmetrics, text = run_and_scrape(SCENARIOS / name, ticks)
        fams = families_of(openmetrics)
        kinds = {
            s.labels["workload"]: s.labels["kind"]
            for f in text_string_to_metric_families(openmetrics)
            if f.name == "fabtop_workload"
            for s in f.samples
        }
        out[name] = (fams, kinds, text)
    return out


def test_the_catalogue_parses_into_every_part_of_the_doc(catalogue: Catalogue) -> None:
    # guards the parser itself: a table it silently skipped would shrink both directions
    fams = catalogue.families
    assert len(fams) >= 100
    for probe in (
        "fabtop_fabric",
        "fabtop_port_data_transmitted_bytes",
        "fabtop_switch_cnp_handled",
        "fabtop_tier_ports",
        "fabtop_workload_ttft_seconds",
        "fabtop_fault_time_to_recover_seconds",
        "fabtop_flows_refused",
        "fabtop_exporter_scrapes_refused",
    ):
        assert probe in fams, probe
    assert fams["fabtop_port_pfc_priority_pause_seconds"].labels == {"link", "priority"}
    assert "fabtop_switch_pfc_priority_pause_seconds" not in fams
    assert catalogue.workload_histograms["ttft"] == {"pd", "kvcache"}


def test_every_scraped_family_is_documented_with_its_type_and_labels(
    catalogue: Catalogue, scrapes: dict[str, tuple[dict[str, Scraped], dict[str, str], str]]
) -> None:
    wrong: list[str] = []
    for scenario, (fams, _, _) in scrapes.items():
        for name, got in fams.items():
            doc = catalogue.families.get(name)
            if doc is None:
                wrong.append(f"{scenario}: {name} ({got.type}) is not in METRICS.md")
                continue
            if got.type != doc.type:
                wrong.append(f"{scenario}: {doc.doc_name} is a {got.type}, documented {doc.type}")
            if got.samples and got.labels != doc.labels:
                wrong.append(
                    f"{scenario}: {doc.doc_name} has labels {sorted(got.labels)}, "
                    f"documented {sorted(doc.labels)}"
                )
    assert not wrong, "\n".join(wrong)


def test_every_documented_family_has_samples_in_a_scrape(
    catalogue: Catalogue, scrapes: dict[str, tuple[dict[str, Scraped], dict[str, str], str]]
) -> None:
    with_samples = {n for fams, _, _ in scrapes.values() for n, f in fams.items() if f.samples}
    missing = sorted(d.doc_name for n, d in catalogue.families.items() if n not in with_samples)
    assert not missing, f"documented but in no scrape of {sorted(RUNS)}: {missing}"


def test_workload_histograms_come_from_the_documented_kinds(
    catalogue: Catalogue, scrapes: dict[str, tuple[dict[str, Scraped], dict[str, str], str]]
) -> None:
    seen: dict[str, set[str]] = {}
    for fams, kinds, _ in scrapes.values():
        for name, fam in fams.items():
            m = re.fullmatch(r"fabtop_workload_(\w+)_seconds", name)
            if m and fam.type == "histogram":
                seen.setdefault(m.group(1), set()).update(kinds[w] for w in fam.workloads)
    assert seen == {k: set(v) for k, v in catalogue.workload_histograms.items()}


def test_the_text_format_serves_the_same_families(
    scrapes: dict[str, tuple[dict[str, Scraped], dict[str, str], str]],
) -> None:
    # the classic text format (what promtool checks) has no info type: an info is a gauge
    # named ..._info there, and a counter keeps its name without _total
    for fams, _, text in scrapes.values():
        names = {f.name for f in text_families(text)}
        expected = {n + "_info" if f.type == "info" else n for n, f in fams.items()}
        assert names == expected
