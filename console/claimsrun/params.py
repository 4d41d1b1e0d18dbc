"""The sources of the parameters behind a figure, read from the dataclasses that hold them.

``Profile``, ``StorageParams`` and ``EndpointParams`` carry each field's source in
their metadata; the claims page lists the ones each claim depends on, so a reader
can see where a figure came from without the code.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from console.claimsrun.model import Param, Settings
from console.claimsrun.runs import bundled, profile
from fabric_core.reports.storage import STORAGE_KINDS
from fabric_core.storage.model import StorageParams


def _value(v: Any, unit: str) -> str:
    text = f"{v:g}" if isinstance(v, float) else str(v)
    return f"{text} {unit}".strip()


def profile_params(
    settings: Settings, names: tuple[str, ...], *profiles: str, scenario: str | None = None
) -> list[Param]:
    """``Profile`` fields (value on each profile) with their sources; where ``scenario``
    (a bundled one the claim runs) overrides a field (``[profile_overrides]``), the value
    it runs with is shown too, since that is the one behind the figure."""
    out = []
    meta = {f.name: f.metadata for f in fields(profile(profiles[0], settings))}
    overrides = {} if scenario is None else bundled(scenario).get("profile_overrides", {})
    for name in names:
        unit = meta[name]["unit"]
        values = ", ".join(
            f"{p}: {_value(getattr(profile(p, settings), name), unit)}" for p in profiles
        )
        overridden = any(name in settings.profile_overrides.get(p, {}) for p in profiles)
        if name in overrides and not overridden:  # (the settings' value wins in the runs)
            values += f"; {scenario} runs with {_value(overrides[name], unit)}"
        out.append(Param(f"Profile.{name}", values, str(meta[name]["source"])))
    return out


def storage_params(
    settings: Settings, names: tuple[str, ...], scenario: str | None = None
) -> list[Param]:
    """``StorageParams`` fields with their sources: the value a run uses (the settings'
    override, else ``scenario``'s, a bundled scenario whose storage workloads set it in
    their ``storage`` table, else the default), and the default where it differs."""
    p = StorageParams()
    meta = {f.name: f.metadata for f in fields(p)}
    preset: dict[str, Any] = {}
    if scenario is not None:
        for table in bundled(scenario).get("workload", []):
            if table.get("kind") in STORAGE_KINDS:
                preset = {**table.get("storage", {}), **preset}
    out = []
    for n in names:
        unit = meta[n]["unit"]
        default = getattr(p, n)
        value = settings.storage.get(n, preset.get(n, default))
        text = _value(value, unit)
        if value != default:
            by = "these runs set it" if n in settings.storage else f"{scenario} sets it"
            text += f" ({by}; the default is {_value(default, unit)})"
        out.append(Param(f"StorageParams.{n}", text, str(meta[n]["source"])))
    return out
