"""The sources of the parameters behind a figure, read from the dataclasses that hold them.

``Profile``, ``StorageParams`` and ``EndpointParams`` carry each field's source in
their metadata; the claims page lists the ones each claim depends on, so a reader
can see where a figure came from without the code.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from console.claimsrun.model import Param, Settings
from console.claimsrun.runs import profile
from fabric_core.storage.model import StorageParams


def _value(v: Any, unit: str) -> str:
    text = f"{v:g}" if isinstance(v, float) else str(v)
    return f"{text} {unit}".strip()


def profile_params(settings: Settings, names: tuple[str, ...], *profiles: str) -> list[Param]:
    """``Profile`` fields (value on each profile) with their sources."""
    out = []
    meta = {f.name: f.metadata for f in fields(profile(profiles[0], settings))}
    for name in names:
        values = ", ".join(
            f"{p}: {_value(getattr(profile(p, settings), name), meta[name]['unit'])}"
            for p in profiles
        )
        out.append(Param(f"Profile.{name}", values, str(meta[name]["source"])))
    return out


def storage_params(settings: Settings, names: tuple[str, ...]) -> list[Param]:
    """``StorageParams`` fields with their sources (settings' overrides applied)."""
    p = StorageParams()
    meta = {f.name: f.metadata for f in fields(p)}
    return [
        Param(
            f"StorageParams.{n}",
            _value(settings.storage.get(n, getattr(p, n)), meta[n]["unit"]),
            str(meta[n]["source"]),
        )
        for n in names
    ]
