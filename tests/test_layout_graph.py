"""The core's module graph points one way (issue 21, item 4; docs/ARCHITECTURE.md).

A source check: every import in a core module (at the top, inside a function or under
``TYPE_CHECKING``: each is a dependency a reader must follow), resolved to the core
module it names.

The packages, bottom to top (a module may import from its own package and from those
below it; the top-level modules ``commands``, ``units``, ``sourced`` and ``textfile`` are
the vocabulary everyone may use)::

    net -> tick -> faults -> storage -> endpoints -> workloads -> runtime -> reports

No subsystem below ``runtime`` imports ``Fabric``: each declares what it reads of the
fabric (a protocol such as ``tick.host.FlowControlHost``) or takes the containers
themselves (issue 21, item 2).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "fabric_core"

#: The core's packages, bottom first; "" is the top-level vocabulary modules.
LAYERS = (
    "",
    "net",
    "tick",
    "faults",
    "storage",
    "endpoints",
    "workloads",
    "runtime",
    "planes",
    "reports",
)


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


def core_graph() -> dict[str, set[str]]:
    """Every core module and the core modules it imports (``from X import name``
    counts ``X.name`` only where that is a module)."""
    sources = {module_name(p): p for p in sorted(CORE.rglob("*.py"))}
    graph = {}
    for name, path in sources.items():
        seen = imports_in(path.read_text(), name, is_package=path.name == "__init__.py")
        graph[name] = {d for d in seen if d in sources and d != name}
    return graph


def layer(module: str) -> int:
    """The rank of a core module's package in ``LAYERS``."""
    parts = module.split(".")
    package = parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else ""
    return LAYERS.index(package)


def test_every_core_module_is_in_a_layer() -> None:
    for module in core_graph():
        assert layer(module) >= 0, module


def test_imports_point_down_the_layers() -> None:
    upward = {
        (module, dep)
        for module, deps in core_graph().items()
        for dep in deps
        if dep != "fabric_core" and layer(dep) > layer(module)
    }
    assert upward == set()


def test_the_core_has_no_circles() -> None:
    """No module depends on itself, through any chain of imports."""
    graph = core_graph()
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        if module in path:
            raise AssertionError(" -> ".join([*path[path.index(module) :], module]))
        if module in done:
            return
        for dep in sorted(graph[module]):
            visit(dep, (*path, module))
        done.add(module)

    for module in sorted(graph):
        visit(module, ())


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
    assert "fabric_core.tick.flows" in imports_in(up, "fabric_core.tick.kernels.tick")
    assert "fabric_core.tick.flows" in imports_in(up, "fabric_core.tick.kernels", is_package=True)
