"""The command rules of the MQTT bridge (no broker): ids, idempotency, refusals.

The end-to-end behaviour (mosquitto_pub → result topic) is in test_mqtt_bridge.py;
here the inbox is fed directly so every rule is checked in isolation.
"""

from __future__ import annotations

import asyncio
import json

from exporters.mqtt.inbox import CommandInbox, lenient_id
from exporters.mqtt.topics import Topics
from fabric_core.commands import Command, CommandResult, InjectFault

T = Topics("t")


class Recorder:
    """Stands in for Engine.submit: records what would be applied."""

    def __init__(self) -> None:
        self.applied: list[Command] = []

    async def __call__(self, cmd: Command) -> CommandResult:
        await asyncio.sleep(0)
        self.applied.append(cmd)
        if isinstance(cmd, InjectFault) and cmd.target == "nowhere":
            return CommandResult(id=cmd.id, ok=False, error="unknown link 'nowhere'")
        return CommandResult(id=cmd.id, ok=True)


INJECT = b'{"id": "a1", "kind": "link_down", "target": "leaf00->spine01"}'


async def test_same_id_twice_is_applied_once() -> None:
    rec = Recorder()
    inbox = CommandInbox(T, rec)
    topic1, r1 = await inbox.handle(T.cmd("inject"), INJECT)
    topic2, r2 = await inbox.handle(T.cmd("inject"), INJECT)
    assert topic1 == topic2 == "fabtop/t/result/a1"
    assert r1.ok and r2.ok and r2.detail.get("duplicate") is True
    assert len(rec.applied) == 1


async def test_concurrent_duplicates_wait_for_the_first() -> None:
    rec = Recorder()
    inbox = CommandInbox(T, rec)
    results = await asyncio.gather(*(inbox.handle(T.cmd("inject"), INJECT) for _ in range(5)))
    assert all(r.ok for _, r in results)
    assert len(rec.applied) == 1


async def test_reused_id_for_another_command_is_refused() -> None:
    rec = Recorder()
    inbox = CommandInbox(T, rec)
    await inbox.handle(T.cmd("inject"), INJECT)
    _, r = await inbox.handle(T.cmd("pause"), b'{"id": "a1"}')
    assert not r.ok and "already used for a different command" in (r.error or "")
    assert len(rec.applied) == 1


async def test_refused_command_may_be_retried_under_its_id() -> None:
    rec = Recorder()
    inbox = CommandInbox(T, rec)
    bad = b'{"id": "b", "kind": "link_down", "target": "nowhere"}'
    _, r1 = await inbox.handle(T.cmd("inject"), bad)
    _, r2 = await inbox.handle(T.cmd("inject"), bad.replace(b"nowhere", b"leaf00->spine01"))
    assert not r1.ok and r2.ok and "duplicate" not in r2.detail


async def test_memory_is_bounded() -> None:
    rec = Recorder()
    inbox = CommandInbox(T, rec, memory=3)
    for i in range(10):
        await inbox.handle(T.cmd("pause"), json.dumps({"id": f"p{i}"}).encode())
    assert len(inbox._seen) == 3


async def test_no_id_is_refused_on_the_bare_result_topic() -> None:
    rec = Recorder()
    topic, r = await CommandInbox(T, rec).handle(T.cmd("pause"), b"{}")
    assert topic == "fabtop/t/result" and not r.ok and "has no 'id'" in (r.error or "")
    assert rec.applied == []


async def test_retained_command_is_refused() -> None:
    rec = Recorder()
    topic, r = await CommandInbox(T, rec).handle(T.cmd("inject"), INJECT, retained=True)
    assert topic == "fabtop/t/result/a1" and "retained" in (r.error or "")
    assert rec.applied == []


async def test_engine_timeout_is_reported_and_the_id_kept() -> None:
    gate = asyncio.Event()

    async def slow(cmd: Command) -> CommandResult:
        await gate.wait()
        return CommandResult(id=cmd.id, ok=True)

    inbox = CommandInbox(T, slow, timeout_s=0.05)
    _, r = await inbox.handle(T.cmd("pause"), b'{"id": "s"}')
    assert not r.ok and "did not apply the command" in (r.error or "")
    gate.set()
    _, again = await inbox.handle(T.cmd("pause"), b'{"id": "s"}')
    assert again.ok and again.detail.get("duplicate") is True


def test_lenient_id() -> None:
    assert lenient_id(b'{"id": "x-1", "kind": 3}') == "x-1"
    assert lenient_id(b'{"id": "has space"}') is None
    assert lenient_id(b"not json") is None
    assert lenient_id(b'{"id": "big", "pad": "' + b"x" * 100_000 + b'"}') == "big"


async def test_a_key_given_twice_is_refused_naming_it() -> None:
    """The parser kept the last value: ``"speed": 0.001, "speed": 5`` applied 5."""
    rec = Recorder()
    inbox = CommandInbox(T, rec)
    topic, r = await inbox.handle(T.cmd("speed"), b'{"id": "v3", "speed": 0.001, "speed": 5}')
    assert topic == "fabtop/t/result/v3" and not r.ok
    assert r.error == "duplicate key 'speed': each key may appear once"
    body = b'{"id": "p1", "kind": "link_degraded", "target": "a->b", "params": {"ber": 1e-6, "ber": 1}}'
    _, r = await inbox.handle(T.cmd("inject"), body)
    assert r.error == "duplicate key 'ber': each key may appear once"
    assert rec.applied == [] and inbox.refused == 2


async def test_two_ids_are_answered_on_the_bare_result_topic() -> None:
    """It was answered only on the last id's topic, the first's sender waiting in vain."""
    rec = Recorder()
    inbox = CommandInbox(T, rec)
    topic, r = await inbox.handle(T.cmd("pause"), b'{"id": "w24", "id": "w25"}')
    assert topic == "fabtop/t/result" and r.id is None
    assert r.error == "duplicate key 'id': each key may appear once"
    # the same id twice is one id: the refusal goes to it
    topic, _ = await inbox.handle(T.cmd("pause"), b'{"id": "w26", "id": "w26"}')
    assert topic == "fabtop/t/result/w26"
    assert rec.applied == []
    assert lenient_id(b'{"id": {"x": 1}, "id": "w27"}') is None
