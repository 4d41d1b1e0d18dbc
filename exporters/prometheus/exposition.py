"""Encoding a scrape: the bytes prometheus_client's encoders write, the fabric's big
families written from their arrays.

The library formats every sample from scratch: it sorts and escapes the sample's labels,
checks its name and formats its value. A fabric's scrape is some 160,000 samples
(``cluster-100k``, per switch), almost all in counter and gauge families kept as labels
dicts and values (``families.ArrayMetric``), and the labels dicts are a few thousand,
each shared by every family. Those families' lines are put together here: the label
string of each dict once per scrape, the values formatted as an array, each with the
library's own functions and in its own layout; their ``# HELP``/``# TYPE`` lines, and every
other family, are the library's encoder's output. Both formats Prometheus asks for get it:
the text format 0.0.4 (no ``Accept`` header) and OpenMetrics 1.0 (Prometheus' default),
at the default escaping; anything else goes to the library as it is.
``tests/test_prometheus_exposition.py`` holds each to the library's bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import cast

import numpy as np
from prometheus_client.exposition import choose_encoder, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import exposition as om
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from exporters.prometheus.families import ArrayMetric, Labels

Encoder = Callable[[Collector], bytes]

#: the library's value formatting (Go's: an exponent from 1e6 on, ``+Inf``, ``NaN``)
_go_float = cast(Callable[[float], str], floatToGoString)
_OM_END = "# EOF\n"
#: the library's OpenMetrics encoder (untyped there)
_om_generate = cast(Callable[..., bytes], om.generate_latest)


def choose(accept: str) -> tuple[Encoder, str]:
    """(encoder, content type) for a request's ``Accept`` header, as the library's
    ``choose_encoder`` picks them, the encoder made faster where it can be."""
    encoder, content_type = choose_encoder(accept)
    if encoder is generate_latest:
        return partial(encode, openmetrics=None), content_type
    if (
        isinstance(encoder, partial)
        and encoder.func is om.generate_latest
        and encoder.keywords.get("escaping") == om.UNDERSCORES
    ):
        return partial(encode, openmetrics=encoder.keywords.get("version", "1.0.0")), content_type
    return encoder, content_type


def encode(registry: Collector, openmetrics: str | None) -> bytes:
    """The text format (``openmetrics`` None) or OpenMetrics of that version, the bytes
    ``generate_latest`` or ``openmetrics.exposition.generate_latest`` write."""
    lines = _Lines(openmetrics is not None)
    output: list[str] = []
    for metric in registry.collect():
        if isinstance(metric, ArrayMetric) and metric.as_made:
            output.append(_library(_header_of(metric), openmetrics))
            output.extend(lines.of(metric))
        else:
            output.append(_library(metric, openmetrics))
    if openmetrics is not None:
        output.append(_OM_END)
    return "".join(output).encode("utf-8")


class _One(Collector):
    def __init__(self, metric: Metric) -> None:
        self.metric = metric

    def collect(self) -> Iterator[Metric]:
        yield self.metric


def _library(metric: Metric, openmetrics: str | None) -> str:
    """The library's lines for one family."""
    if openmetrics is None:
        return generate_latest(_One(metric)).decode("utf-8")
    text = _om_generate(_One(metric), escaping=om.UNDERSCORES, version=openmetrics)
    return text.decode("utf-8").removesuffix(_OM_END)


def _header_of(metric: ArrayMetric) -> Metric:
    """The family with no samples: the library writes its ``# HELP`` and ``# TYPE``."""
    return Metric(metric.name, metric.documentation, metric.type, metric.unit)


class _Lines:
    """One scrape's sample lines of array families, in one format: the label strings by
    labels dict (the dict kept, so that its id is not reused while the scrape lasts)."""

    def __init__(self, openmetrics: bool) -> None:
        self.openmetrics = openmetrics
        self.labels: dict[int, tuple[Labels, str]] = {}

    def of(self, metric: ArrayMetric) -> list[str]:
        if self.openmetrics:  # (the library escapes a sample name with the label runes)
            name = om._escape(metric.sample_name, om.UNDERSCORES, om._is_legacy_labelname_rune)
        else:
            name = om.escape_metric_name(metric.sample_name, om.UNDERSCORES)
        labelstrs = [self._labels(lab) for lab in metric.label_sets]
        values = _values(metric.values)
        return [f"{name}{lab} {v}\n" for lab, v in zip(labelstrs, values, strict=True)]

    def _labels(self, labels: Labels) -> str:
        if not labels:
            return ""
        kept = self.labels.get(id(labels))
        if kept is None or kept[0] is not labels:
            pairs = [
                f'{om.escape_label_name(k, om.UNDERSCORES)}="{_escape_value(v)}"'
                for k, v in sorted(labels.items())
            ]
            kept = self.labels[id(labels)] = (labels, "{" + ",".join(pairs) + "}")
        return kept[1]


def _escape_value(value: str) -> str:
    """A label value as the library writes it in either format (backslash, newline and
    double quote escaped)."""
    return om._escape(value, om.ALLOWUTF8, om._is_legacy_labelname_rune)


def _values(values: Sequence[float]) -> list[str]:
    """``floatToGoString`` of each value: ``repr`` but for the infinities, NaN and the
    positive values of 7 to 16 digits before the point, which Go writes with an exponent."""
    as_float = np.asarray(values, dtype=np.float64)
    texts = [repr(v) for v in as_float.tolist()]
    odd = ~np.isfinite(as_float) | ((as_float >= 1e6) & (as_float < 1e16))
    for i in np.flatnonzero(odd).tolist():
        texts[i] = _go_float(values[i])
    return texts
