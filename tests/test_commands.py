"""Commands: one JSON form, specific errors, and hostile input never hurts the engine."""

from __future__ import annotations

import copy
import difflib
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fabric_core.commands as commands_module
from fabric_core.commands import (
    COMMAND_NAMES,
    MAX_COMMAND_BYTES,
    MAX_SHOWN_NAME,
    MAX_SUGGESTION_CHOICES,
    ClearFault,
    CommandError,
    InjectFault,
    Pause,
    Resume,
    SetParam,
    SetSpeed,
    StartWorkload,
    StopWorkload,
    encode_command,
    parse_command,
)
from fabric_core.reports.record import fabric_digest
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario, parse_scenario
from tests.helpers import bulk_leaf_spine

# ------------------------------------------------------------------ the JSON form
ROUND_TRIP = [
    InjectFault(kind="link_down", target="leaf00->spine00", duration_s=0.5, id="c-1"),
    InjectFault(kind="link_degraded", target="leaf00->spine00", params={"ber": 1e-7}),
    ClearFault(fault_id="f3"),
    ClearFault(target="spine00"),
    ClearFault(all=True),
    Pause(),
    Resume(id="r.2"),
    SetSpeed(speed=1e-3),
    SetParam(name="reroute_s", value=1e-3),
    StartWorkload(workload="moe"),
    StopWorkload(workload="moe"),
]


@pytest.mark.parametrize("cmd", ROUND_TRIP, ids=lambda c: type(c).__name__)
def test_every_command_round_trips_through_its_json_form(cmd: Any) -> None:
    text = encode_command(cmd)
    assert json.loads(text)["command"] in COMMAND_NAMES
    assert parse_command(text) == cmd


def test_topic_supplies_the_command_name() -> None:
    assert parse_command(b'{"workload": "moe"}', command="stop") == StopWorkload(workload="moe")
    with pytest.raises(CommandError, match="topic says command 'stop' but the body says 'start'"):
        parse_command(b'{"command": "start", "workload": "moe"}', command="stop")
    with pytest.raises(CommandError, match=r"unknown command 'injct' \(did you mean 'inject'\?\)"):
        parse_command(b"{}", command="injct")


# ------------------------------------------------------------------ specific errors
@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("", "empty command"),
        ('{"command": "inject"', "malformed JSON"),
        ("[1, 2]", "a command must be a JSON object, got an array"),
        ('{"kind": "link_down"}', "missing field 'command'"),
        ('{"command": "injekt"}', "unknown command 'injekt' (did you mean 'inject'?)"),
        ('{"command": 5}', "command must be a string, got 5"),
        (
            '{"command": "inject", "kind": "link_down", "target": "a", "duration_s": 0}',
            "duration_s must be a number > 0.0, got 0",
        ),
        (
            '{"command": "inject", "kind": "link_down", "target": "a", "duration_s": -1}',
            "duration_s must be a number > 0.0, got -1",
        ),
        (
            '{"command": "inject", "kind": "link_down", "target": "a", "duration_s": "5"}',
            'duration_s must be a number or null, got "5"',
        ),
        (
            '{"command": "inject", "kind": "link_down", "target": "a", "duraton_s": 1}',
            "inject has no field 'duraton_s' (did you mean 'duration_s'?)",
        ),
        (
            '{"command": "inject", "kind": "link_down", "target": "a", "duration_s": 1e400}',
            "number out of range",
        ),
        ('{"command": "inject", "target": "a"}', "inject needs a fault 'kind'"),
        ('{"command": "inject", "kind": "link_down"}', "inject needs a 'target'"),
        ('{"command": "speed", "speed": -1}', "speed must be a number >= 0.0, got -1"),
        ('{"command": "speed", "speed": true}', "speed must be a number, got true"),
        ('{"command": "speed", "speed": 1e9}', "speed must be a number <= 1000.0"),
        ('{"command": "clear"}', "clear needs 'fault_id', 'target' or 'all': true"),
        ('{"command": "clear", "all": "yes"}', 'all must be true or false, got "yes"'),
        ('{"command": "pause", "id": "a b"}', "id must be a string matching regex"),
        ('{"command": "pause", "id": "' + "x" * 65 + '"}', "id must be a string of length <= 64"),
        ('{"command": "set", "value": 1}', "set needs a parameter 'name'"),
        ('{"command": "stop"}', "stop needs a 'workload' name"),
        # (session 43: these were applied with a default: flat out, a 1 us tick, 0)
        ('{"command": "speed", "id": "u6"}', "speed needs a 'speed'"),
        ('{"command": "tick"}', "tick needs a 'dt_s'"),
        ('{"command": "set", "name": "reroute_s"}', "set needs a 'value'"),
        ("\ufeff{}", "malformed JSON"),
    ],
)
def test_malformed_commands_get_specific_errors(payload: str, message: str) -> None:
    with pytest.raises(CommandError, match=re.escape(message)):
        parse_command(payload)


def test_oversized_commands_are_refused_unread() -> None:
    big = '{"command": "pause", "id": "' + "x" * MAX_COMMAND_BYTES + '"}'
    with pytest.raises(CommandError, match=f"the limit is {MAX_COMMAND_BYTES}"):
        parse_command(big)


@pytest.mark.parametrize(
    ("cmd", "message"),
    [
        (
            InjectFault(kind="link_down", target="leaf07->spine99"),
            "unknown link 'leaf07->spine99' (did you mean 'leaf07->spine09'?)",
        ),
        (
            InjectFault(kind="swich_down", target="spine01"),
            "unknown fault kind 'swich_down' (did you mean 'switch_down'?)",
        ),
        (InjectFault(kind="switch_down", target="spine1"), "unknown switch 'spine1' (did you mean"),
        (
            SetParam(name="reroute", value=1.0),
            "unknown parameter 'reroute' (did you mean 'reroute_s'?)",
        ),
        (SetParam(name="reroute_s", value=1e9), "reroute_s must be in [1e-06, 60], got 1e+09"),
        # inside the command's range, but a target delay of 0 is one the model cannot run
        (
            SetParam(name="swift_target_delay_s", value=0.0),
            "swift_target_delay_s: must be > 0, got 0.0",
        ),
        (StartWorkload(workload="bgg"), "unknown workload 'bgg' (did you mean 'bg'?)"),
        (ClearFault(fault_id="f0"), "unknown active fault 'f0'"),
        # a name of any length is repeated cut short, in the reply and the log
        (
            InjectFault(kind="link_down", target="x" * 56_000),
            f"unknown link {'x' * MAX_SHOWN_NAME!r}... (56,000 characters)",
        ),
    ],
)
def test_fabric_level_errors_are_specific(cmd: Any, message: str) -> None:
    engine = Engine(bulk_leaf_spine(leaves=8, spines=10, gpus_per_leaf=1))
    before = fabric_digest(engine.fabric)
    result = engine.apply(cmd)
    assert not result.ok
    assert result.error is not None and message in result.error
    assert fabric_digest(engine.fabric) == before


# ------------------------------------------------------------------ hostile input
# one fabric built and stepped once, never changed: each example gets a copy of its own,
# so no example or test sees what another one's valid command did
_PRISTINE = Fabric.from_scenario(load_scenario("tiny"))
_PRISTINE.run_ticks(30)


def _fresh_engine() -> Engine:
    """An engine on a copy of the pristine fabric (a deep copy: under a millisecond)."""
    return Engine(copy.deepcopy(_PRISTINE))


_FIELDS = [
    "kind",
    "target",
    "params",
    "duration_s",
    "id",
    "fault_id",
    "all",
    "speed",
    "dt_s",
    "name",
    "value",
    "workload",
    "command",
]

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
_realish_values = st.one_of(
    _json,
    st.sampled_from(
        [
            "link_down",
            "switch_down",
            "leaf00->spine00",
            "spine00",
            "gpu0000",
            "f0",
            "moe",
            "reroute_s",
        ]
    ),
    st.text(alphabet=st.characters(min_codepoint=0x80, max_codepoint=0x2FFFF), max_size=20),
    st.floats(min_value=1e300, max_value=1e308),
    st.just(1e-300),
)
_commandish = st.fixed_dictionaries(
    {"command": st.one_of(st.sampled_from(COMMAND_NAMES), _json)},
    optional={f: _realish_values for f in _FIELDS if f != "command"},
)


def _check_error(exc: CommandError) -> None:
    msg = str(exc)
    assert msg and msg.strip() == msg and "Traceback" not in msg
    assert len(msg) >= 10  # says what is wrong, not just "invalid"


@settings(max_examples=300, deadline=None)
@given(payload=st.one_of(st.text(max_size=200), st.binary(max_size=200)))
def test_arbitrary_bytes_and_text_get_a_command_error_or_a_command(payload: str | bytes) -> None:
    try:
        parse_command(payload)
    except CommandError as exc:
        _check_error(exc)


@settings(max_examples=100, deadline=None)
@given(cmd=_commandish, cut=st.integers(min_value=0, max_value=400))
def test_truncated_json_is_malformed(cmd: dict[str, Any], cut: int) -> None:
    text = json.dumps(cmd)
    cut = min(cut, len(text) - 1)
    with pytest.raises(CommandError) as info:
        parse_command(text[:cut])
    _check_error(info.value)
    assert "malformed JSON" in str(info.value) or "empty command" in str(info.value)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cmd=_commandish)
def test_hostile_commands_leave_the_engine_running_and_unchanged(cmd: dict[str, Any]) -> None:
    engine = _fresh_engine()
    before = fabric_digest(engine.fabric)
    running, speed = engine.running, engine.speed
    try:
        parsed = parse_command(json.dumps(cmd))
    except CommandError as exc:
        _check_error(exc)
        return
    result = engine.apply(parsed)
    if result.ok:  # a valid command: it may change the fabric (this example's copy only)
        return
    assert result.error is not None
    _check_error(CommandError(result.error))
    assert fabric_digest(engine.fabric) == before
    assert (engine.running, engine.speed) == (running, speed)
    engine.fabric.run_ticks(1)  # and it keeps running


@settings(max_examples=150, deadline=None)
@given(
    kind=st.one_of(
        st.sampled_from(["link_down", "switch_down", "incast", "credit_loss"]), st.text(max_size=20)
    ),
    target=st.text(max_size=40),
    params=st.dictionaries(
        st.text(max_size=12), st.one_of(st.floats(allow_nan=False), st.text(max_size=8)), max_size=3
    ),
)
def test_unknown_targets_and_parameters_are_named_in_the_error(
    kind: str, target: str, params: dict[str, Any]
) -> None:
    engine = _fresh_engine()
    fabric = engine.fabric
    if target in fabric.topo.links.index or target in fabric.topo.nodes.index:
        return
    try:
        cmd = parse_command(
            json.dumps({"command": "inject", "kind": kind, "target": target, "params": params})
        )
    except CommandError as exc:
        _check_error(exc)
        return
    result = engine.apply(cmd)
    assert not result.ok and result.error is not None
    assert "unknown" in result.error
    assert repr(kind) in result.error or repr(target) in result.error


def test_a_suggestion_compares_a_bounded_number_of_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a fabric of more links than ``MAX_SUGGESTION_CHOICES``, a mistyped link is
    compared with those sharing the longest prefix, not with every one (difflib over a
    300,000-link fabric's names froze the engine for seconds a typo)."""
    scn = parse_scenario(
        {
            "name": "many-links",
            "topology": {"kind": "leaf-spine", "leaves": 48, "spines": 32, "gpus_per_leaf": 1},
            "workload": [{"name": "bg", "kind": "bulk", "class": "bulk", "size": "64KiB"}],
        }
    )
    engine = Engine(Fabric.from_scenario(scn))
    assert len(engine.fabric.topo.links) > MAX_SUGGESTION_CHOICES
    compared: list[int] = []
    close_matches = difflib.get_close_matches

    def counting(word: str, names: list[str], n: int, cutoff: float) -> list[str]:
        compared.append(len(names))
        return close_matches(word, names, n=n, cutoff=cutoff)

    monkeypatch.setattr(commands_module.difflib, "get_close_matches", counting)
    result = engine.apply(InjectFault(kind="link_down", target="leaf47->spine3l"))
    assert result.error is not None
    assert "unknown link 'leaf47->spine3l' (did you mean 'leaf47->spine31'?)" in result.error
    assert compared and max(compared) <= MAX_SUGGESTION_CHOICES
