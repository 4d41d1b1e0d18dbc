"""No module outside ``fabric_core/runtime/fabric.py`` reaches into a ``Fabric``'s private state
(issue 21, item 2): subsystems go through its public attributes and methods, so a change
inside ``Fabric`` cannot silently break them.

A source check: every attribute access ``X._name`` (not a dunder) where ``X`` is a name
or attribute called ``fabric`` (``fabric._x``, ``self.fabric._x``, ``engine.fabric._x``)
in the core, the console, the exporters and the benchmarks.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fabric_core", "console", "exporters", "benchmarks")
OWNER = ROOT / "fabric_core" / "runtime" / "fabric.py"


def _names_fabric(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "fabric"
    return isinstance(node, ast.Attribute) and node.attr == "fabric"


def private_fabric_accesses(path: Path) -> list[str]:
    """``file:line attr`` for each private attribute of a fabric touched in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and _names_fabric(node.value)
        ):
            where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            out.append(f"{where}:{node.lineno} {node.attr}")
    return out


def test_no_module_outside_fabric_py_touches_a_fabrics_private_state() -> None:
    found = [
        hit
        for pkg in PACKAGES
        for path in sorted((ROOT / pkg).rglob("*.py"))
        if path != OWNER
        for hit in private_fabric_accesses(path)
    ]
    assert found == []


def test_the_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def f(fabric, s):\n    fabric._a = 1\n    s.fabric._b()\n    fabric.c\n")
    assert sorted(h.split()[1] for h in private_fabric_accesses(sample)) == ["_a", "_b"]
