"""The core's module graph points one way (issue 21, item 4), for the parts laid out so far.

A source check: every import in a core module (at the top, inside a function or under
``TYPE_CHECKING``: each is a dependency a reader must follow), resolved to the core
module it names.

* ``fabric_core.reports`` is the top of the core: no core module outside it imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "fabric_core"


def module_name(path: Path) -> str:
    """``fabric_core/reports/run.py`` -> ``fabric_core.reports.run`` (a package: its name)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_in(source: str, module: str, *, is_package: bool = False) -> set[str]:
    """The core modules (or packages) the source of ``module`` imports, absolute and
    relative alike; ``from X import y`` counts ``X`` and ``X.y`` (``y`` may be a module)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            name = ".".join(p for p in (base, node.module or "") if p)
            out |= {name} | {f"{name}.{a.name}" for a in node.names}
    return {n for n in out if n == "fabric_core" or n.startswith("fabric_core.")}


def _inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_no_core_module_outside_reports_imports_a_report() -> None:
    found = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted(CORE.rglob("*.py"))
        if not _inside(module_name(path), "fabric_core.reports")
        for name in sorted(
            imports_in(path.read_text(), module_name(path), is_package=path.name == "__init__.py")
        )
        if _inside(name, "fabric_core.reports")
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "from fabric_core.reports.run import run_for",
        "from fabric_core import reports",
        "import fabric_core.reports.compare",
        "def f():\n    from ..reports import run",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import reports",
    ],
)
def test_the_check_sees_every_form_of_import(source: str) -> None:
    seen = imports_in(source, "fabric_core.tick.x")
    assert any(_inside(name, "fabric_core.reports") for name in seen), seen


def test_a_relative_import_resolves_from_its_package() -> None:
    assert "fabric_core.reports.run" in imports_in("from . import run", "fabric_core.reports.x")
    up = "from ..flows import FlowTable"
    assert "fabric_core.flows" in imports_in(up, "fabric_core.kernels.tick")
    assert "fabric_core.flows" in imports_in(up, "fabric_core.kernels", is_package=True)
