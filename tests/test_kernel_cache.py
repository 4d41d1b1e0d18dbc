"""The kernels' disk cache is dropped when what they are compiled from changes
(``fabric_core.tick.kernels._jit``): numba checks a cached kernel against its own file only."""

from __future__ import annotations

import ast
from pathlib import Path

from fabric_core.tick.kernels._jit import KERNEL_SOURCES, drop_stale_cache

CORE = Path(__file__).resolve().parent.parent / "fabric_core"


def test_the_cache_is_dropped_when_a_source_changes_and_only_then(tmp_path: Path) -> None:
    src = [tmp_path / "route.py", tmp_path / "start.py"]
    src[0].write_text("A = 1\n")
    src[1].write_text("from route import A\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    old = [cache / "start.start_routed-28.py311.nbi", cache / "start.start_routed-28.py311.1.nbc"]
    for f in old:
        f.write_bytes(b"machine code")
    other = cache / "route.cpython-311.pyc"
    other.write_bytes(b"bytecode")
    # a cache from before the digest: dropped, and the digest written
    assert drop_stale_cache(src, cache)
    assert not any(f.exists() for f in old) and other.exists()
    for f in old:
        f.write_bytes(b"machine code")
    # nothing changed: kept
    assert not drop_stale_cache(src, cache)
    assert all(f.exists() for f in old)
    # the callee's module edited (the caller's file is not): dropped
    src[0].write_text("A = 2\n")
    assert drop_stale_cache(src, cache)
    assert not any(f.exists() for f in old) and other.exists()


def test_every_module_whose_constants_the_kernels_read_is_a_source() -> None:
    """A kernel module that imports a constant (an UPPER_CASE name) from elsewhere in the
    core has the machine code of its value: that module's file must be digested too."""
    sources = {p.resolve() for p in KERNEL_SOURCES}
    for module in sorted((CORE / "tick" / "kernels").glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            if not node.module.startswith("fabric_core."):
                continue
            if not any(a.name.isupper() for a in node.names):
                continue
            path = CORE.parent / (node.module.replace(".", "/") + ".py")
            assert path.resolve() in sources, f"{module.name} reads constants of {node.module}"
