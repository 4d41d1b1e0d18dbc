"""The exporter's encoders (``exporters.prometheus.exposition``) write the bytes
prometheus_client's write, in the text format and in OpenMetrics: on a running fabric's
families in every link mode, and on families made to be awkward (escapes, odd floats,
timestamps, OpenMetrics-only samples, a name outside the legacy character set); and they
are the ones chosen for the ``Accept`` headers that ask for those formats."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import exposition as om
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from exporters.prometheus import families as fam
from exporters.prometheus.collector import FabtopCollector
from exporters.prometheus.exposition import choose, encode
from exporters.prometheus.options import parse_link_metrics
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario


class _Fabric(Collector):
    """A fabric's families for one snapshot, made afresh for each encoder, without the
    exporter's own (its collect time differs from one collect to the next)."""

    def __init__(self, mode: str) -> None:
        fabric = Fabric.from_scenario(load_scenario("default"))
        fabric.run_ticks(300)
        snap = fabric.snapshot(wall_time_s=0.0, target_speed=0.0, measured_speed=0.0)
        self.inner = FabtopCollector(lambda: snap, parse_link_metrics(mode))

    def collect(self) -> Iterator[Metric]:
        for m in self.inner.collect():
            if not m.name.startswith("fabtop_exporter_"):
                yield m


def library(registry: CollectorRegistry, openmetrics: str | None) -> bytes:
    if openmetrics is None:
        return generate_latest(registry)
    return bytes(om.generate_latest(registry, escaping=om.UNDERSCORES, version=openmetrics))


FORMATS = [None, "1.0.0"]


@pytest.mark.parametrize("openmetrics", FORMATS, ids=["text", "openmetrics"])
@pytest.mark.parametrize("mode", ["all", "top:20", "switch"])
def test_a_fabric_scrape_is_the_same_bytes_as_the_library_writes(
    mode: str, openmetrics: str | None
) -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fabric(mode))
    ours = encode(registry, openmetrics)
    assert ours == library(registry, openmetrics)
    assert ours.count(b"\n") > 1000  # (a real scrape: per-link or per-switch series)


ODD_VALUES = [
    0.0, -0.0, 1.0, 3, -2.5, 999_999.0, 999_999.999_999_9, 1e6, 1_234_567.0, 123_456_789.125,
    9.999_999_999_999_998e15, 1e16, 1.5e16, 1e300, 1e-7, 5e-324, -1e6, -123_456_789.0,
    float("inf"), float("-inf"), float("nan"), 2**53, 0.1 + 0.2,
]  # fmt: skip


class _Odd(Collector):
    def collect(self) -> Iterator[Metric]:
        shared = {"link": 'a"b\\c\nd', "node": "n1"}  # one dict for many samples
        yield fam.counter(
            "fabtop_odd_total", "A\\doc\nwith escapes", [shared] * len(ODD_VALUES), ODD_VALUES
        )
        yield fam.gauge(
            "fabtop_odd_gauge",
            "Labels in every order, and none.",
            [{"z": "1", "a": "2"}, {}, shared, {"a": "ü", "b": ""}],
            [1.0, 2.0, 3.0, 4.0],
        )
        read = fam.gauge("fabtop_read", "Its samples read, then added to.", [shared], [1.0])
        read.samples.append(Sample("fabtop_read", {"x": "y"}, 2.0))
        yield read
        plain = Metric("fabtop_plain", "Samples with timestamps and OpenMetrics extras.", "counter")
        plain.samples = [
            Sample("fabtop_plain_total", {"k": "v"}, 7.0, 1234.5678),
            Sample("fabtop_plain_created", {"k": "v"}, 1.7e9),
            Sample("fabtop_plain_total", {}, 8.0),
            Sample("fabtop_plain_total", {"k": "0"}, 0.0),  # then -0.0, written "-0.0"
            Sample("fabtop_plain_total", {"k": "-0"}, -0.0),
            Sample("fabtop_plain_total", {"k": "big"}, 12_345_678.0),
            Sample("fabtop_plain_total", {"k": "big again"}, 12_345_678.0),
        ]
        yield plain
        yield fam.info("fabtop_thing_info", "Facts.", [{"version": "1.2", "who": 'x"y'}])


class _Quoted(Collector):
    def collect(self) -> Iterator[Metric]:
        yield from _Odd().collect()
        yield fam.gauge("fabtop.dotted", "A name the legacy format quotes.", [{}], [1.0])


@pytest.mark.parametrize("openmetrics", FORMATS, ids=["text", "openmetrics"])
@pytest.mark.parametrize("collector", [_Odd, _Quoted], ids=["odd", "odd-name"])
def test_awkward_families_are_the_same_bytes_as_the_library_writes(
    collector: type[Collector], openmetrics: str | None
) -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector())
    assert encode(registry, openmetrics) == library(registry, openmetrics)


PROMETHEUS_ACCEPT = (  # what Prometheus 2.x and 3.x send by default
    "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;"
    "version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
)


@pytest.mark.parametrize(
    ("accept", "openmetrics"),
    [("", None), ("text/plain", None), (PROMETHEUS_ACCEPT, "1.0.0")],
    ids=["none", "text", "prometheus"],
)
def test_the_fast_encoders_serve_the_formats_prometheus_asks_for(
    accept: str, openmetrics: str | None
) -> None:
    encoder, _ = choose(accept)
    assert encoder.func is encode and encoder.keywords == {"openmetrics": openmetrics}  # type: ignore[attr-defined]


def test_other_escapings_go_to_the_library() -> None:
    encoder, content_type = choose("text/plain;version=1.0.0;escaping=allow-utf-8")
    assert getattr(encoder, "func", None) is generate_latest
    assert "escaping=allow-utf-8" in content_type


def test_an_array_family_counts_its_samples_without_making_them() -> None:
    metric = fam.gauge("fabtop_g", "g", [{"a": "1"}, {"a": "2"}], [1.0, 2.0])
    assert fam.sample_count(metric) == 2
    assert isinstance(metric, fam.ArrayMetric) and metric.as_made
    assert metric.samples == [
        Sample("fabtop_g", {"a": "1"}, 1.0),
        Sample("fabtop_g", {"a": "2"}, 2.0),
    ]
    assert not metric.as_made
    with pytest.raises(ValueError, match="2 label sets for 1 values"):
        fam.gauge("fabtop_g", "g", [{"a": "1"}, {"a": "2"}], [1.0])


def _families(scenario: str, ticks: int) -> dict[str, Metric]:
    fabric = Fabric.from_scenario(load_scenario(scenario))
    fabric.run_ticks(ticks)
    snap = fabric.snapshot(wall_time_s=0.0, target_speed=0.0, measured_speed=0.0)
    return {m.name: m for m in FabtopCollector(lambda: snap, parse_link_metrics("top:5")).collect()}


def test_a_kpi_not_measured_yet_has_no_sample_rather_than_nan() -> None:
    """A training workload's GPU utilisation is NaN until its first step ends: no sample
    then (as ``fabtop_workload_kpi`` leaves it out), not ``NaN``, which a dashboard draws as
    a gap or a zero."""
    families = _families("training-nfs", 5)
    snap_kpis = [s for s in families["fabtop_workload_kpi"].samples]
    util = families["fabtop_workload_gpu_utilisation_ratio"].samples
    assert all(s.value == s.value for s in [*util, *snap_kpis])  # no NaN
    assert "gpu_utilisation" not in {s.labels["kpi"] for s in snap_kpis}
    assert util == []


def test_a_workload_histogram_says_its_unit_once() -> None:
    families = _families("default", 300)
    histograms = [
        m
        for m in families.values()
        if m.name.startswith("fabtop_workload_") and m.type == "histogram"
    ]
    assert histograms
    for m in histograms:
        assert m.documentation.count("seconds") == 1, m.documentation
