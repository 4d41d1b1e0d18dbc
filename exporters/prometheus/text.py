"""The Prometheus text format (0.0.4) as ``prometheus_client.generate_latest`` writes it,
byte for byte, in a fifth of the time at fabric scale.

The library formats every sample from scratch: it sorts and escapes each sample's labels,
checks its name against a regular expression and formats its value. A fabric's scrape is
some 160,000 samples (``cluster-100k``, per switch) whose labels are a few thousand dicts,
each shared by every family (``families``), and whose names are a few hundred. So the
label string of each labels dict, each name's check and each value's text are worked out
once per scrape, with the library's own functions, and the lines are put together as it
puts them together. A name outside the legacy character set (which the library quotes),
or an escaping other than its default, goes to the library (``generate_latest``).
``tests/test_prometheus_text.py`` holds the two to the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics import exposition as om
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from prometheus_client.validation import _is_valid_legacy_metric_name

from exporters.prometheus.families import ArrayMetric, Labels

#: the library's value formatting (Go's: an exponent from 1e6 on, ``+Inf``, ``NaN``)
_go_float = cast(Callable[[float], str], floatToGoString)


def _value_escape(value: str) -> str:
    """A label value as the library writes it in the text format."""
    return om._escape(value, om.ALLOWUTF8, False)  # type: ignore[arg-type]  # (as it calls it)


#: the OpenMetrics-only samples the library moves to a gauge family of their own
_OM_SUFFIXES = ("_created", "_gsum", "_gcount")


class _QuotedNameError(Exception):
    """A metric name the legacy format cannot hold unquoted: the library writes it."""


def generate_text(registry: Collector) -> bytes:
    """``generate_latest(registry)``, the same bytes."""
    try:
        return _Encoder().encode(registry)
    except _QuotedNameError:
        return generate_latest(registry)


class _Encoder:
    """One scrape's caches: label strings by labels dict (the dict kept, so its id is
    not reused while the scrape lasts), names, and values' texts."""

    def __init__(self) -> None:
        self.labels: dict[int, tuple[dict[str, str], str]] = {}
        self.names: dict[str, str] = {}
        self.values: dict[float, str] = {}

    def encode(self, registry: Collector) -> bytes:
        output: list[str] = []
        for metric in registry.collect():
            try:
                self._family(metric, output)
            except _QuotedNameError:
                raise
            except Exception as exception:
                exception.args = (exception.args or ("",)) + (metric,)
                raise
        return "".join(output).encode("utf-8")

    def _family(self, metric: Any, output: list[str]) -> None:
        mname, mtype = metric.name, metric.type
        # the library's munging from OpenMetrics into the Prometheus format
        if mtype == "counter":
            mname = mname + "_total"
        elif mtype == "info":
            mname = mname + "_info"
            mtype = "gauge"
        elif mtype == "stateset":
            mtype = "gauge"
        elif mtype == "gaugehistogram":
            mtype = "histogram"
        elif mtype == "unknown":
            mtype = "untyped"
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        name = self._name(mname)
        output.append(f"# HELP {name} {doc}\n")
        output.append(f"# TYPE {name} {mtype}\n")
        specials = {metric.name + suffix: suffix for suffix in _OM_SUFFIXES}
        if (
            isinstance(metric, ArrayMetric)
            and metric.as_made
            and metric.sample_name not in specials
        ):  # the lines straight from its labels and values
            name = self._name(metric.sample_name)
            labelstrs = [self._labels(lab) for lab in metric.label_sets]
            texts = self._values(metric.values)
            output.extend([f"{name}{lab} {v}\n" for lab, v in zip(labelstrs, texts, strict=True)])
            return
        om_samples: dict[str, list[str]] = {}
        line = self._line
        for s in metric.samples:
            suffix = specials.get(s.name)
            if suffix is None:
                output.append(line(s))
            else:
                om_samples.setdefault(suffix, []).append(line(s))
        for suffix, lines in sorted(om_samples.items()):
            name = self._name(metric.name + suffix)
            output.append(f"# HELP {name} {doc}\n")
            output.append(f"# TYPE {name} gauge\n")
            output.extend(lines)

    def _line(self, s: Any) -> str:
        timestamp = "" if s.timestamp is None else f" {int(float(s.timestamp) * 1000):d}"
        return f"{self._name(s.name)}{self._labels(s.labels)} {self._value(s.value)}{timestamp}\n"

    def _labels(self, labels: Labels) -> str:
        if not labels:
            return ""
        kept = self.labels.get(id(labels))
        if kept is None or kept[0] is not labels:
            text = ",".join(
                [
                    f'{om.escape_label_name(k, om.UNDERSCORES)}="{_value_escape(v)}"'
                    for k, v in sorted(labels.items())
                ]
            )
            kept = self.labels[id(labels)] = (labels, "{" + text + "}")
        return kept[1]

    def _name(self, name: str) -> str:
        text = self.names.get(name)
        if text is None:
            if not _is_valid_legacy_metric_name(name):
                raise _QuotedNameError(name)
            text = self.names[name] = om.escape_metric_name(name, om.UNDERSCORES)
        return text

    @staticmethod
    def _values(values: Sequence[float]) -> list[str]:
        """``floatToGoString`` of each value: ``repr`` but for the infinities, NaN and the
        positive values of 7 to 16 digits before the point, which Go writes with an
        exponent."""
        as_float = np.asarray(values, dtype=np.float64)
        texts = [repr(v) for v in as_float.tolist()]
        odd = ~np.isfinite(as_float) | ((as_float >= 1e6) & (as_float < 1e16))
        for i in np.flatnonzero(odd).tolist():
            texts[i] = _go_float(values[i])
        return texts

    def _value(self, value: float) -> str:
        text = self.values.get(value)
        if text is None:
            text = _go_float(value)
            if value != 0:  # (0.0 and -0.0 are one key, with two texts)
                self.values[value] = text
        return text
