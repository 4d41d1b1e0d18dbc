"""Parameters that carry their source: dataclass fields with ``source`` (and ``unit``)
in their metadata, which the docs generators and the claims page list; and their
overrides from a scenario, checked against each field's kind."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import field, fields
from typing import Any, TypeVar, cast


def param(default: Any, source: str, unit: str = "") -> Any:
    """A dataclass field with its default and the ``source`` (and ``unit``) of the figure."""
    return field(default=default, metadata={"source": source, "unit": unit})


def parameter_sources(params_cls: type) -> list[tuple[str, str, str, Any]]:
    """(name, unit, source, default) of every field of the dataclass ``params_cls``."""
    d = params_cls()
    return [
        (f.name, f.metadata.get("unit", ""), f.metadata["source"], getattr(d, f.name))
        for f in fields(params_cls)
    ]


#: How a value of each field type is asked for in an error.
_KIND = {str: "text", int: "whole number", float: "number", bool: "flag (true or false)"}

_P = TypeVar("_P")


def with_checked_overrides(
    params: _P,
    overrides: Mapping[str, Any],
    *,
    label: str,
    key: str = "",
    minimum: float | None = None,
) -> _P:
    """A copy of the dataclass ``params`` with ``overrides`` applied, each value checked
    against its field's default: text for text, true or false for a flag, a finite number
    (not a bool) for a number whose default is finite, a whole number for an int, and at
    least ``minimum`` if given.

    Raises:
        ValueError: an unknown name (the accepted ones listed, for ``label`` parameters) or
            a value of the wrong kind or range (named ``key.name``, or ``name`` where the
            caller says the context itself).
    """
    known = {f.name: getattr(params, f.name) for f in fields(cast(Any, params))}
    bad = sorted(set(overrides) - set(known))
    if bad:
        raise ValueError(
            f"unknown {label} parameter(s): {', '.join(bad)}; accepted: {', '.join(known)}"
        )
    at = f"{key}." if key else ""
    clean: dict[str, Any] = {}
    for name, value in overrides.items():
        kind = type(known[name])
        if kind is str:
            ok = isinstance(value, str)
        elif kind is bool:
            ok = isinstance(value, bool)
        else:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            ok = ok and (kind is not int or float(value).is_integer())
        if not ok:
            raise ValueError(
                f"{at}{name}: expected a {_KIND.get(kind, kind.__name__)}, got {value!r}"
            )
        if kind is float and not math.isfinite(value) and math.isfinite(known[name]):
            # an infinite latency or rate never completes anything, and NaN compares false
            # with every bound below: neither is a figure the model can run on
            raise ValueError(f"{at}{name}: expected a finite number, got {value!r}")
        if minimum is not None and kind not in (str, bool) and value < minimum:
            raise ValueError(f"{at}{name}: must be >= {minimum:g}, got {value!r}")
        clean[name] = kind(value)
    return cast(_P, dataclasses.replace(cast(Any, params), **clean))
