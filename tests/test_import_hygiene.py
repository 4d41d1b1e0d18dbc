"""The core is reachable without any UI, MQTT, Prometheus or distributed-engine code
(checked in a fresh interpreter): Ray is the ``cluster`` adapter's, outside the core."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import fabric_core

FORBIDDEN = (
    "textual",
    "rich",
    "aiomqtt",
    "paho",
    "prometheus_client",
    "console",
    "exporters",
    "ray",
    "cluster",
)
ROOT = Path(__file__).resolve().parents[1]


def core_modules() -> list[str]:
    return sorted(
        m.name for m in pkgutil.walk_packages(fabric_core.__path__, prefix="fabric_core.")
    )


def test_every_core_module_imports_without_ui_mqtt_or_prometheus() -> None:
    modules = core_modules()
    assert "fabric_core.tick.step" in modules and "fabric_core.runtime.engine" in modules
    code = (
        "import importlib, sys, json\n"
        f"mods = {modules!r}\n"
        f"bad = {FORBIDDEN!r}\n"
        "found = {}\n"
        "for m in mods:\n"
        "    importlib.import_module(m)\n"
        "    hit = sorted({n.split('.')[0] for n in sys.modules} & set(bad))\n"
        "    if hit: found[m] = hit\n"
        "print(json.dumps(found))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "{}", out.stdout
