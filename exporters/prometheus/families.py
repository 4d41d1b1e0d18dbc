"""Building metric families fast, straight from arrays.

``CounterMetricFamily.add_metric`` costs a Python call and a labels dict per
sample; at fabric scale the exporter instead builds the ``Sample`` tuples in
one comprehension over ``ndarray.tolist()`` and reuses one labels dict per link
for every family (the exposition code only reads them).
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


def counter(name: str, doc: str, labels: Sequence[Labels], values: Iterable[float]) -> Metric:
    """A counter family; ``name`` ends in ``_total``; one sample per labels dict."""
    if not name.endswith("_total"):
        raise ValueError(f"counter {name} must end in _total")
    metric = Metric(name[: -len("_total")], doc, "counter")
    metric.samples = [Sample(name, lab, v) for lab, v in zip(labels, values, strict=True)]
    return metric


def gauge(name: str, doc: str, labels: Sequence[Labels], values: Iterable[float]) -> Metric:
    """A gauge family; one sample per labels dict."""
    metric = Metric(name, doc, "gauge")
    metric.samples = [Sample(name, lab, v) for lab, v in zip(labels, values, strict=True)]
    return metric


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
