"""``Fabric.STEPS`` names the methods ``Fabric.step`` calls, in its order: a profiler
(``benchmarks/bench_breakdown.py``) times a tick step by step from it, so a step added,
renamed or moved in ``step`` must be in the list, where ``step`` has it."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable

from fabric_core.runtime.fabric import Fabric


def _calls_on_self(fn: Callable[..., object]) -> list[str]:
    """The methods ``fn`` calls on ``self``, ordered by where each is last called (a step
    called early on a way out, as ``_finish_tick`` is with nothing in flight, is in its
    place at the end)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "self"
    ]
    last: dict[str, tuple[int, int]] = {}
    for c in calls:
        assert isinstance(c.func, ast.Attribute)
        last[c.func.attr] = max(last.get(c.func.attr, (0, 0)), (c.lineno, c.col_offset))
    return sorted(last, key=last.__getitem__)


def test_the_steps_listed_are_those_step_calls_in_its_order() -> None:
    assert tuple(_calls_on_self(Fabric.step)) == Fabric.STEPS


def test_every_step_listed_is_a_method_of_the_fabric() -> None:
    for name in Fabric.STEPS:
        assert callable(getattr(Fabric, name)), name
