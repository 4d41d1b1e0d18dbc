"""Scrapes of a running fabric over HTTP: format, invariants, cardinality modes, faults."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from exporters.prometheus import MetricsServer, start_metrics_server
from fabric_core.commands import InjectFault
from fabric_core.runtime.snapshot import LinkStatus
from tests._prometheus import EngineThread, key, promtool, samples, scrape

pytestmark = pytest.mark.integration

MODES = ("all", "top:5", "switch")


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineThread]:
    running = EngineThread("tiny").start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def servers(engine: EngineThread) -> Iterator[dict[str, MetricsServer]]:
    started = {m: start_metrics_server(engine.latest, port=0, link_metrics=m) for m in MODES}
    yield started
    for server in started.values():
        server.close()


def port_series(values: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> set[str]:
    """Links that have per-port series in a scrape."""
    return {
        dict(labels)["link"] for name, labels in values if name == "fabtop_port_link_downed_total"
    }


@pytest.mark.parametrize("mode", MODES)
def test_promtool_check_metrics_reports_nothing(
    engine: EngineThread, servers: dict[str, MetricsServer], mode: str
) -> None:
    engine.wait_ticks(5)
    text = scrape(servers[mode].url)
    lint = promtool("check", "metrics", stdin=text)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert lint.stdout.strip() == "" and lint.stderr.strip() == ""
    # Prometheus asks for OpenMetrics first: that form must parse too
    assert list(openmetrics_families(scrape(servers[mode].url, openmetrics=True)))


@pytest.mark.parametrize("mode", ["all", "top:5"])
def test_counters_never_decrease_and_buckets_are_cumulative(
    engine: EngineThread, servers: dict[str, MetricsServer], mode: str
) -> None:
    previous: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    grew: set[str] = set()
    for _ in range(4):
        engine.wait_ticks(20)
        monotonic: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        for family in text_string_to_metric_families(scrape(servers[mode].url)):
            if family.type == "counter":
                monotonic.update((key(s), s.value) for s in family.samples)
            elif family.type == "histogram":
                check_histogram(family.name, family.samples)
                monotonic.update((key(s), s.value) for s in family.samples)
        for k, value in monotonic.items():
            if k in previous:
                assert value >= previous[k], f"{k} went from {previous[k]} to {value}"
                if value > previous[k]:
                    grew.add(k[0])
        previous = monotonic
    # the check above is not vacuous: traffic moved and time ran
    assert {"fabtop_ticks_total", "fabtop_port_data_transmitted_bytes_total"} <= grew
    assert any(name.startswith("fabtop_message_latency_seconds") for name in grew)


def check_histogram(name: str, family_samples: list) -> None:  # type: ignore[type-arg]
    """Buckets cumulative (non-decreasing in le) and +Inf equal to _count, per series."""
    buckets: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = defaultdict(list)
    counts: dict[tuple[tuple[str, str], ...], float] = {}
    for s in family_samples:
        labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        if s.name == f"{name}_bucket":
            buckets[labels].append((float(s.labels["le"]), s.value))
        elif s.name == f"{name}_count":
            counts[labels] = s.value
    assert buckets, f"{name} has no buckets"
    for labels, points in buckets.items():
        points.sort()
        values = [v for _, v in points]
        assert values == sorted(values), f"{name}{labels} buckets not cumulative: {values}"
        assert points[-1][0] == float("inf") and values[-1] == counts[labels]


def test_series_counts_follow_link_metrics(
    engine: EngineThread, servers: dict[str, MetricsServer]
) -> None:
    snap = engine.wait_ticks(5)
    n_links = len(snap.links)
    everything = samples(scrape(servers["all"].url))
    assert port_series(everything) == set(snap.links.name)
    assert everything[("fabtop_exporter_link_series_truncated", ())] == 0.0

    top = samples(scrape(servers["top:5"].url))
    exported = top[("fabtop_exporter_links_exported", ())]
    assert len(port_series(top)) == exported
    assert top[("fabtop_exporter_link_series_truncated", ())] == float(exported < n_links)

    per_switch = samples(scrape(servers["switch"].url))
    assert port_series(per_switch) == set()
    assert per_switch[("fabtop_exporter_link_series_truncated", ())] == 1.0
    switches = {n for n, k in zip(snap.nodes.name, snap.nodes.kind, strict=True) if k == "switch"}
    got = {dict(lab)["switch"] for name, lab in per_switch if name == "fabtop_switch_ports"}
    assert got == switches


def test_aggregates_and_received_bytes_agree_with_the_ports(
    engine: EngineThread, servers: dict[str, MetricsServer]
) -> None:
    values = samples(scrape(servers["all"].url))  # one scrape = one snapshot
    tx = {
        dict(lab)["link"]: v
        for (n, lab), v in values.items()
        if n == "fabtop_port_data_transmitted_bytes_total"
    }
    rx = {
        dict(lab)["link"]: v
        for (n, lab), v in values.items()
        if n == "fabtop_port_data_received_bytes_total"
    }
    assert sum(tx.values()) > 0
    for link, received in rx.items():
        a, b = link.split("->")
        assert received == tx[f"{b}->{a}"]
    tiers = sum(
        v for (n, _), v in values.items() if n == "fabtop_tier_data_transmitted_bytes_total"
    )
    assert tiers == pytest.approx(sum(tx.values()), rel=1e-12)
    per_switch = sum(
        v for (n, _), v in values.items() if n == "fabtop_switch_data_transmitted_bytes_total"
    )
    snap = engine.wait_ticks(1)  # node and link tables are static
    kind = dict(zip(snap.nodes.name, snap.nodes.kind, strict=True))
    from_switches = sum(v for link, v in tx.items() if kind[link.split("->")[0]] == "switch")
    assert 0 < from_switches < sum(tx.values())
    assert per_switch == pytest.approx(from_switches, rel=1e-12)


def test_exporter_self_metrics(servers: dict[str, MetricsServer]) -> None:
    text = scrape(servers["top:5"].url)
    values = samples(text)
    assert values[("fabtop_exporter_info", (("link_metrics", "top:5"),))] == 1.0
    assert values[("fabtop_exporter_snapshot_available", ())] == 1.0
    assert values[("fabtop_exporter_collect_duration_seconds", ())] > 0
    own = sum(1 for name, _ in values if not name.startswith("fabtop_exporter_"))
    assert values[("fabtop_exporter_series", ())] == own
    (fabric,) = [lab for name, lab in values if name == "fabtop_fabric_info"]
    assert dict(fabric)["scenario"] == "tiny" and dict(fabric)["cluster"]


def test_concurrent_scrapes_each_get_a_whole_consistent_scrape(
    servers: dict[str, MetricsServer],
) -> None:
    url = servers["top:5"].url
    with ThreadPoolExecutor(4) as pool:
        bodies = list(pool.map(lambda _: scrape(url), range(8)))
    for body in bodies:
        values = samples(body)
        own = sum(1 for name, _ in values if not name.startswith("fabtop_exporter_"))
        assert values[("fabtop_exporter_series", ())] == own
        assert len(port_series(values)) == values[("fabtop_exporter_links_exported", ())]


@pytest.fixture
def own_engine() -> Iterator[EngineThread]:
    """An engine of its own, for a test that changes the fabric (the module's is shared)."""
    running = EngineThread("tiny").start()
    yield running
    running.stop()


@pytest.fixture
def own_servers(own_engine: EngineThread) -> Iterator[dict[str, MetricsServer]]:
    started = {m: start_metrics_server(own_engine.latest, port=0, link_metrics=m) for m in MODES}
    yield started
    for server in started.values():
        server.close()


def test_link_down_fault_is_exported_in_every_mode(
    own_engine: EngineThread, own_servers: dict[str, MetricsServer]
) -> None:
    # its own engine: the link it takes down stays down, and no other test sees it
    engine, servers = own_engine, own_servers
    link = next(n for n in engine.wait_ticks(1).links.name if n.startswith("leaf00->spine"))
    result = engine.submit(InjectFault(kind="link_down", target=link))
    assert result.ok, result.error
    snap = engine.wait_ticks(2)
    assert snap.link_state.status[snap.links.index[link]] == LinkStatus.DOWN
    for mode in ("all", "top:5"):
        values = samples(scrape(servers[mode].url))
        labels = (("link", link),)
        assert values[("fabtop_port_link_downed_total", labels)] >= 1
        assert values[("fabtop_port_state_id", labels)] == float(LinkStatus.DOWN)
    values = samples(scrape(servers["switch"].url))
    switch = link.split("->")[0]
    assert values[("fabtop_switch_link_downed_total", (("switch", switch),))] >= 1
    assert values[("fabtop_switch_down_ports", (("switch", switch),))] >= 1
    assert values[("fabtop_faults_active", (("kind", "link_down"),))] >= 1
    states = [
        dict(lab)["state"]
        for (name, lab), v in values.items()
        if name == "fabtop_fault_state" and dict(lab)["target"] == link and v == 1.0
    ]
    assert len(states) == 1


def test_default_scenario_scrapes_clean_in_every_mode() -> None:
    """The bigger bundled scenario: storage targets, four classes, incast, 2:1 leaves."""
    from fabric_core.runtime.fabric import Fabric
    from fabric_core.runtime.scenario import load_scenario

    fabric = Fabric.from_scenario(load_scenario("default"))
    fabric.run_ticks(100)
    snap = fabric.snapshot(wall_time_s=0.0, target_speed=0.0, measured_speed=0.0, running=True)
    for mode in MODES:
        with start_metrics_server(lambda: snap, port=0, link_metrics=mode) as server:
            text = scrape(server.url)
        lint = promtool("check", "metrics", stdin=text)
        assert lint.returncode == 0 and not lint.stdout.strip(), mode + lint.stdout + lint.stderr
        values = samples(text)
        n_samples = sum(len(f.samples) for f in text_string_to_metric_families(text))
        assert n_samples == len(values), "duplicate series"
        tiers = {dict(lab)["tier"] for name, lab in values if name == "fabtop_tier_ports"}
        assert tiers == set(snap.links.tier)
        classes = {
            dict(lab)["traffic_class"]
            for name, lab in values
            if name == "fabtop_message_latency_seconds_count"
        }
        assert classes == set(snap.latency)
        if mode == "all":
            assert port_series(values) == set(snap.links.name)


def test_pfc_counters_per_priority_on_a_roce_fabric() -> None:
    import dataclasses

    from exporters.prometheus import start_metrics_server as start
    from fabric_core.net.profiles import ROCE_400G
    from fabric_core.net.topology import leaf_spine
    from fabric_core.runtime.fabric import Fabric
    from fabric_core.workloads.traffic import Scripted

    # an incast into a shallow lossless buffer: PFC pauses on priority 0
    prof = dataclasses.replace(ROCE_400G, pfc_buffer_mode="static", pfc_buffer_bytes=512 * 1024)
    topo = leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=9)
    idx = topo.nodes.index
    flows = [(idx[f"gpu{k:04d}"], idx["gpu0009"], 8 * 1024**2, 0.0) for k in range(8)]
    fabric = Fabric(
        topo, prof, [Scripted(name="i", traffic_class="bulk", flows=flows)], dt_s=1e-6, seed=1
    )
    fabric.run_ticks(400)
    snap = fabric.snapshot()
    server = start(lambda: snap, port=0, link_metrics="all")
    try:
        text = scrape(server.url)
    finally:
        server.close()
    assert promtool("check", "metrics", stdin=text).stdout.strip() == ""
    values = samples(text)
    per_prio: dict[str, float] = {}
    priorities = set()
    for (name, labels), v in values.items():
        if name == "fabtop_port_pfc_priority_pause_frames_received_total":
            lab = dict(labels)
            per_prio[lab["link"]] = per_prio.get(lab["link"], 0.0) + v
            priorities.add(lab["priority"])
    assert priorities == {str(p) for p in range(fabric.n_vls)}
    total = {
        dict(labels)["link"]: v
        for (name, labels), v in values.items()
        if name == "fabtop_port_pfc_pause_frames_received_total"
    }
    assert sum(total.values()) > 0
    for link, v in total.items():
        assert per_prio[link] == pytest.approx(v)
