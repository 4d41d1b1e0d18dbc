"""Issue 20: payload bounds, ids, speed range, the inbox's access rules and busy answer.

Pure logic (no broker): ``parse_command``, ``lenient_id`` and ``CommandInbox`` with
a fake ``submit``. The same rules are exercised over a real mosquitto in
``test_hardening_mqtt.py``.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from exporters.mqtt.inbox import CommandInbox, lenient_id
from exporters.mqtt.topics import TopicError, Topics, check_cluster
from fabric_core.commands import (
    MAX_COMMAND_DEPTH,
    Command,
    CommandError,
    CommandResult,
    SetSpeed,
    nesting_depth,
    parse_command,
)
from tests.helpers import until

TOPICS = Topics("t")


def test_deep_nesting_is_refused_before_parsing_with_a_specific_error() -> None:
    deep = b'{"id": "d-1", "params": ' + b"[" * 2048 + b"]" * 2048 + b"}"
    with pytest.raises(CommandError, match=r"nests arrays/objects more than 8 levels deep"):
        parse_command(deep, command="inject")
    unbalanced = b"[" * 100_000  # bigger than the limit too: the size is checked first
    with pytest.raises(CommandError, match=r"the limit is 65536"):
        parse_command(unbalanced, command="inject")
    # the id near the start still names the reply topic, without parsing
    assert lenient_id(deep) == "d-1"
    assert lenient_id(b"[" * 5000) is None


def test_nesting_depth_skips_brackets_inside_strings() -> None:
    assert nesting_depth(b'{"id": "[[[[[[[[[[[[[[[[[[[[", "params": {"a": 1}}') == 2
    assert nesting_depth(b'{"a": "\\"[[[[[[[[[[[[[[[[[[[[[["}') == 1
    ok = b'{"command": "inject", "id": "x", "kind": "k", "target": "t", "params": {}}'
    assert parse_command(ok).id == "x"
    at_limit = b'{"id": "a", "all": true, "x": ' + b"[" * (MAX_COMMAND_DEPTH - 1)
    at_limit += b"]" * (MAX_COMMAND_DEPTH - 1) + b"}"
    with pytest.raises(CommandError, match="clear has no field 'x'"):  # parsed, not refused
        parse_command(at_limit, command="clear")


@pytest.mark.parametrize(
    "payload",
    [
        b'{"id": "\xed\xa0\x80"}',  # a surrogate encoded in "UTF-8"
        b'{"id": "\xff"}',
    ],
)
def test_bytes_that_are_not_utf8_say_invalid_utf8(payload: bytes) -> None:
    with pytest.raises(CommandError, match=r"^invalid UTF-8 at byte 8$"):
        parse_command(payload, command="pause")


@pytest.mark.parametrize(
    "payload", [rb'{"id": "\ud800"}', rb'{"id": "x", "x": "a\udfffb"}', rb'{"id": "\ud800x"}']
)
def test_a_lone_surrogate_escape_says_invalid_utf8_not_truncated(payload: bytes) -> None:
    with pytest.raises(CommandError) as err:
        parse_command(payload, command="pause")
    assert str(err.value).startswith("invalid UTF-8: a string holds a lone surrogate")
    assert "truncated" not in str(err.value)


@pytest.mark.parametrize("cid", ["été", "op-1\n", "ｏｐ", "a b", "٣", "x" * 65, ""])
def test_ids_are_ascii_and_the_whole_string(cid: str) -> None:
    body = json.dumps({"id": cid}).encode()
    with pytest.raises(CommandError, match="id must be a string"):
        parse_command(body, command="pause")
    assert lenient_id(body) is None


@pytest.mark.parametrize(
    "payload",
    [
        b'{"id": "a5", "kind": "link_degraded", "params": {"ber": NaN}}',
        b'{"id": "a5", "params": {"ber": 1e999}}',
        b'{"id": "a5", "kind": "link_do',  # truncated
    ],
)
def test_an_id_in_json_that_does_not_parse_still_names_the_reply(payload: bytes) -> None:
    """The refusal goes to ``result/a5``, where the sender waits, not to ``result``."""
    with pytest.raises(CommandError, match="malformed JSON"):
        parse_command(payload, command="inject")
    assert lenient_id(payload) == "a5"


def test_good_ids_pass() -> None:
    for cid in ("op-1", "A_b.c:d-9", "x" * 64):
        assert parse_command(json.dumps({"id": cid}), command="pause").id == cid
        assert lenient_id(json.dumps({"id": cid}).encode()) == cid


def test_cluster_names_are_the_whole_string() -> None:
    with pytest.raises(TopicError):
        check_cluster("lab\n")
    with pytest.raises(TopicError):
        check_cluster("läb")
    assert check_cluster("lab-1.a_b") == "lab-1.a_b"


@pytest.mark.parametrize("speed", [1e-320, 5e-324, 1e-7, 9.99e-7])
def test_a_speed_below_the_range_is_refused_naming_the_field(speed: float) -> None:
    with pytest.raises(CommandError, match=r"^speed must be 0 \(flat out\) or between 1e-06"):
        parse_command(json.dumps({"speed": speed}), command="speed")


def test_speed_range_ends_are_accepted() -> None:
    for speed in (0.0, 1e-6, 1e3):
        cmd = parse_command(json.dumps({"speed": speed}), command="speed")
        assert isinstance(cmd, SetSpeed) and cmd.speed == speed
    with pytest.raises(CommandError, match=r"^speed must be a number <= 1000"):
        parse_command(json.dumps({"speed": 1001}), command="speed")


class FakeEngine:
    """Holds every command until ``release``; counts what it was given."""

    def __init__(self) -> None:
        self.got: list[Command] = []
        self.gate = asyncio.Event()

    async def submit(self, cmd: Command) -> CommandResult:
        self.got.append(cmd)
        await self.gate.wait()
        return CommandResult(id=cmd.id, ok=True)


async def test_read_only_refuses_every_command_and_applies_none() -> None:
    engine = FakeEngine()
    inbox = CommandInbox(TOPICS, engine.submit, read_only=True)
    for name in ("pause", "inject", "speed"):
        topic, result = await inbox.handle(f"fabtop/t/cmd/{name}", b'{"id": "r-1"}')
        assert topic == "fabtop/t/result/r-1"
        assert not result.ok and result.error is not None
        assert result.error.startswith("read-only:")
    assert engine.got == [] and inbox.refused == 3


async def test_the_allow_list_accepts_only_its_kinds() -> None:
    engine = FakeEngine()
    engine.gate.set()
    inbox = CommandInbox(TOPICS, engine.submit, allowed=frozenset({"pause", "resume"}))
    _, refused = await inbox.handle("fabtop/t/cmd/inject", b'{"id": "a-1", "kind": "x"}')
    assert (
        refused.error == "command 'inject' is not allowed on this emulator (allowed: pause, resume)"
    )
    _, ok = await inbox.handle("fabtop/t/cmd/pause", b'{"id": "a-2"}')
    assert ok.ok and [c.id for c in engine.got] == ["a-2"]
    with pytest.raises(ValueError, match="unknown command kind"):
        CommandInbox(TOPICS, engine.submit, allowed=frozenset({"pasue"}))


async def test_past_the_limit_commands_are_busy_at_once_but_operator_ones_still_go() -> None:
    engine = FakeEngine()
    inbox = CommandInbox(TOPICS, engine.submit, max_in_flight=3)
    waiting = [
        asyncio.create_task(
            inbox.handle("fabtop/t/cmd/speed", json.dumps({"id": f"s-{i}", "speed": 1e-3}).encode())
        )
        for i in range(3)
    ]
    await asyncio.sleep(0)
    _, busy = await inbox.handle("fabtop/t/cmd/speed", b'{"id": "s-9", "speed": 0.001}')
    assert not busy.ok and busy.error is not None and busy.error.startswith("busy: 3 commands")
    assert inbox.busy == 1
    pause = asyncio.create_task(inbox.handle("fabtop/t/cmd/pause", b'{"id": "p-1"}'))
    await until(lambda: len(engine.got) == 4)
    assert [c.id for c in engine.got] == ["s-0", "s-1", "s-2", "p-1"]  # the pause got in
    engine.gate.set()
    results = [r for _, r in await asyncio.gather(*waiting, pause)]
    assert all(r.ok for r in results)
    # a place is free again: the refused one can be retried under its id
    _, retried = await inbox.handle("fabtop/t/cmd/speed", b'{"id": "s-9", "speed": 0.001}')
    assert retried.ok


@pytest.mark.parametrize(
    ("payload", "command", "start"),
    [
        (b'{"id": "a"}', "x" * 5000, "unknown command 'xxx"),
        (b'{"command": "' + b"y" * 3000 + b'"}', None, "unknown command 'yyy"),
        (b'{"command": "pause", "' + b"z" * 3000 + b'": 1}', None, "pause has no field 'zzz"),
    ],
)
def test_a_long_unknown_name_is_repeated_cut_short(
    payload: bytes, command: str | None, start: str
) -> None:
    """The reply and the log repeat at most 120 characters of it, and say how long it was."""
    with pytest.raises(CommandError) as err:
        parse_command(payload, command=command)
    message = str(err.value)
    assert message.startswith(start) and "characters)" in message and len(message) < 300
