"""Every value of the default scenario corrupted in turn: a clear error or a clean run.

A broken scenario file must get a ``ScenarioError`` naming the key, never a traceback
from deep inside (numba's typing, numpy's random generator) and never a run that asks
for terabytes or freezes. This walks every value of the bundled ``default.toml`` and
puts in its place text, a negative number, a huge one and a list: the scenario must
either be refused with a ``ScenarioError`` or build and run a few ticks. (Found this
way: a string switch latency reached the kernels; a negative RPC rate, numpy's Poisson
draw; 10^12 outstanding flows, a 14.6 TiB allocation; a list where a size belongs, an
AttributeError.)
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Iterator
from typing import Any

import pytest

from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import ScenarioError, bundled_dir, parse_scenario

BASE = tomllib.loads((bundled_dir() / "default.toml").read_text())
HOSTILE: list[Any] = ["x", -1, 1e12, [1]]


def _leaves(table: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(table, dict):
        for key, value in table.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(table, list) and table and all(isinstance(t, dict) for t in table):
        for i, value in enumerate(table):
            yield from _leaves(value, (*path, i))
    else:
        yield path


def _with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    at: Any = data
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    return data


CASES = [(p, v) for p in _leaves(BASE) if p[-1] not in ("name", "description") for v in HOSTILE]


@pytest.mark.parametrize(
    ("path", "value"), CASES, ids=[f"{'.'.join(map(str, p))}={v!r}" for p, v in CASES]
)
def test_a_corrupted_value_is_refused_by_name_or_runs(path: tuple[Any, ...], value: Any) -> None:
    try:
        scenario = parse_scenario(_with(path, value), "default")
    except ScenarioError:
        return
    try:
        fabric = Fabric.from_scenario(scenario)
    except ScenarioError:  # checked when the workloads meet the fabric (a target's range)
        return
    fabric.run_ticks(3)
