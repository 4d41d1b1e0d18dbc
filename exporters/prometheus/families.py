"""Building metric families fast, straight from arrays.

``CounterMetricFamily.add_metric`` costs a Python call and a labels dict per
sample; at fabric scale the exporter instead keeps a counter's or gauge's labels dicts
and values as lists (``ArrayMetric``: one labels dict per link or switch, reused by every
family, which the exposition code only reads) and makes ``Sample`` tuples only for an
encoder that asks for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import NDArray
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from fabric_core.tick.histogram import BOUNDS_S, HistogramView

Labels = dict[str, str]

#: Every 5th bound of the core's histograms: 4 buckets per decade from 10 ns to
#: 100 s (41 finite ``le`` values). Cumulative counts are exact at these bounds.
LE_STRIDE = 5
LE_INDEX: NDArray[np.intp] = np.arange(0, BOUNDS_S.size, LE_STRIDE)
LE_LABELS: tuple[str, ...] = (*(repr(float(b)) for b in BOUNDS_S[LE_INDEX]), "+Inf")


class ArrayMetric(Metric):
    """A counter or gauge family of one sample name: a labels dict and a value per sample,
    kept as they are. Its ``samples`` are made the first time something reads them (the
    OpenMetrics encoder does); the text encoder (``text.generate_text``) writes the lines
    from the dicts and values without them, which at fabric scale is most of a scrape."""

    def __init__(
        self,
        name: str,
        doc: str,
        typ: str,
        sample_name: str,
        labels: Sequence[Labels],
        values: list[float],
    ) -> None:
        super().__init__(name, doc, typ)
        if len(labels) != len(values):
            raise ValueError(f"{sample_name}: {len(labels)} label sets for {len(values)} values")
        self.sample_name = sample_name
        self.label_sets = labels
        self.values = values
        self._samples: list[Sample] | None = None

    @property
    def samples(self) -> list[Sample]:
        """The samples (made now if they were not yet)."""
        if self._samples is None:
            self._samples = [
                Sample(self.sample_name, lab, v)
                for lab, v in zip(self.label_sets, self.values, strict=True)
            ]
        return self._samples

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        self._samples = value

    @property
    def as_made(self) -> bool:
        """Whether the samples are still the labels and values it was made with (nothing
        has read them and perhaps added to them)."""
        return self._samples is None


def sample_count(metric: Metric) -> int:
    """How many samples ``metric`` has (an ``ArrayMetric``'s, without making them)."""
    if isinstance(metric, ArrayMetric) and metric.as_made:
        return len(metric.values)
    return len(metric.samples)


def counter(name: str, doc: str, labels: Sequence[Labels], values: Iterable[float]) -> Metric:
    """A counter family; ``name`` ends in ``_total``; one sample per labels dict."""
    if not name.endswith("_total"):
        raise ValueError(f"counter {name} must end in _total")
    return ArrayMetric(name[: -len("_total")], doc, "counter", name, labels, list(values))


def gauge(name: str, doc: str, labels: Sequence[Labels], values: Iterable[float]) -> Metric:
    """A gauge family; one sample per labels dict."""
    return ArrayMetric(name, doc, "gauge", name, labels, list(values))


def info(name: str, doc: str, labels: Sequence[Labels]) -> Metric:
    """An info family (``name`` ends in ``_info``): value 1, the facts in the labels."""
    if not name.endswith("_info"):
        raise ValueError(f"info metric {name} must end in _info")
    metric = Metric(name[: -len("_info")], doc, "info")
    metric.samples = [Sample(name, lab, 1.0) for lab in labels]
    return metric


def histogram(name: str, doc: str, items: Iterable[tuple[Labels, HistogramView]]) -> Metric:
    """A histogram family in seconds from the core's log-bucketed histograms.

    Only the ``LE_INDEX`` bounds are exported (plus ``+Inf``), which keeps the
    series count down while the cumulative counts stay exact at those bounds.
    """
    metric = Metric(name, doc, "histogram")
    samples = metric.samples
    bucket = name + "_bucket"
    for lab, view in items:
        cum = view.cumulative()
        kept = [*cum[LE_INDEX].tolist(), int(cum[-1])]
        for le, value in zip(LE_LABELS, kept, strict=True):
            samples.append(Sample(bucket, {**lab, "le": le}, float(value)))
        samples.append(Sample(name + "_count", lab, float(cum[-1])))
        samples.append(Sample(name + "_sum", lab, float(view.sum_s)))
    return metric
