"""Parameters that carry their source: dataclass fields with ``source`` (and ``unit``)
in their metadata, which the docs generators and the claims page list."""

from __future__ import annotations

from dataclasses import fields
from typing import Any


def parameter_sources(params_cls: type) -> list[tuple[str, str, str, Any]]:
    """(name, unit, source, default) of every field of the dataclass ``params_cls``."""
    d = params_cls()
    return [
        (f.name, f.metadata.get("unit", ""), f.metadata["source"], getattr(d, f.name))
        for f in fields(params_cls)
    ]
