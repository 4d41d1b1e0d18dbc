"""Issue 20's reproducers against ``fabtop serve`` behind a real mosquitto.

Each test sends what broke the emulator (deep nesting, a tiny speed, a huge incast,
retained commands, loose ids, a flood) the way an operator or an attacker would,
with mosquitto_pub or an aiomqtt client, and checks the served process keeps
serving: it answers with the specific error, stays online, and its simulated time
advances.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import aiomqtt
import pytest

from tests._mosquitto import Mosquitto, MqttCli, Served, broker  # noqa: F401  (fixture)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def served(broker: Mosquitto) -> Iterator[Served]:  # noqa: F811
    s = Served(broker.url, "hard")
    try:
        s.wait_online(broker.cli())
        yield s
    finally:
        s.stop()


def telemetry(
    broker: Mosquitto,  # noqa: F811
    cluster: str,
    pred: Callable[[dict[str, Any]], bool] = lambda t: True,
) -> dict[str, Any]:
    _, payload = broker.cli().wait_for(
        f"fabtop/{cluster}/telemetry", lambda _t, p: pred(json.loads(p)), timeout_s=60
    )
    result: dict[str, Any] = json.loads(payload)
    return result


def send(
    broker: Mosquitto,  # noqa: F811
    topic: str,
    payload: bytes | str,
    result_topic: str,
    *,
    retain: bool = False,
    timeout_s: int = 20,
) -> dict[str, Any]:
    cli = broker.cli()
    sub = cli.sub_start(result_topic, count=1, timeout_s=timeout_s)
    cli.pub(topic, payload, retain=retain)
    got = cli.sub_collect(sub)
    assert got, f"no reply on {result_topic}"
    reply: dict[str, Any] = json.loads(got[0][1])
    return reply


def still_serving(broker: Mosquitto, served: Served, cluster: str) -> None:  # noqa: F811
    """The process is alive, says online, and its simulated time advances."""
    assert served.proc.poll() is None, served.output()
    assert broker.cli().sub(f"fabtop/{cluster}/status") == [(f"fabtop/{cluster}/status", b"online")]
    first = telemetry(broker, cluster, lambda t: t["running"])
    telemetry(broker, cluster, lambda t: t["sim_time_s"] > first["sim_time_s"])


def test_deep_nesting_gets_a_specific_error_and_serve_keeps_running(
    broker: Mosquitto,  # noqa: F811
    served: Served,
) -> None:
    reply = send(broker, "fabtop/hard/cmd/inject", b"[" * 2048, "fabtop/hard/result")
    assert reply["ok"] is False and "levels deep" in reply["error"], reply
    deep = b'{"id": "deep-1", "params": ' + b"[" * 1000 + b"]" * 1000 + b"}"
    reply = send(broker, "fabtop/hard/cmd/inject", deep, "fabtop/hard/result/deep-1")
    assert reply["ok"] is False and "nests arrays/objects more than 8" in reply["error"], reply
    huge = b'{"id": "huge-1", "x": "' + b"a" * 70_000 + b'"}'
    reply = send(broker, "fabtop/hard/cmd/inject", huge, "fabtop/hard/result/huge-1")
    assert reply["error"].startswith("command is 70025 bytes; the limit is 65536"), reply
    still_serving(broker, served, "hard")


def test_a_tiny_speed_then_a_corrective_command_applies_at_once(
    broker: Mosquitto,  # noqa: F811
    served: Served,
) -> None:
    # 10 us ticks at 1e-6: one tick, then a 10 s pacing sleep
    r = send(
        broker, "fabtop/hard/cmd/tick", '{"id": "ts-1", "dt_s": 1e-5}', "fabtop/hard/result/ts-1"
    )
    assert r["ok"], r
    r = send(
        broker, "fabtop/hard/cmd/speed", '{"id": "ts-2", "speed": 1e-6}', "fabtop/hard/result/ts-2"
    )
    assert r["ok"], r
    telemetry(broker, "hard", lambda t: t["target_speed"] == 1e-6)
    refused = send(
        broker,
        "fabtop/hard/cmd/speed",
        '{"id": "ts-3", "speed": 1e-320}',
        "fabtop/hard/result/ts-3",
    )
    assert refused["error"].startswith("speed must be 0 (flat out) or between 1e-06"), refused
    # the reply comes from the engine, not from the bridge's 10 s timeout: the command
    # ended the pacing sleep (the subscriber gives up after 8 s)
    fixed = send(
        broker,
        "fabtop/hard/cmd/speed",
        '{"id": "ts-4", "speed": 1e-3}',
        "fabtop/hard/result/ts-4",
        timeout_s=8,
    )
    assert fixed == {"id": "ts-4", "ok": True, "error": None, "detail": {"speed": 1e-3}}
    r = send(
        broker, "fabtop/hard/cmd/tick", '{"id": "ts-5", "dt_s": 1e-6}', "fabtop/hard/result/ts-5"
    )
    assert r["ok"], r
    tm = telemetry(broker, "hard", lambda t: t["target_speed"] == 1e-3 and t["dt_s"] == 1e-6)
    assert tm["health"]["pacing"] in ("ok", "behind", "starved")
    still_serving(broker, served, "hard")


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_a_huge_incast_is_refused_or_bounded(
    broker: Mosquitto,  # noqa: F811
    served: Served,
) -> None:
    reported = {"senders": 4096, "size_bytes": 1e9, "period_s": 1e-7}
    body = json.dumps({"id": "inc-1", "kind": "incast", "target": "gpu0000", "params": reported})
    r = send(broker, "fabtop/hard/cmd/inject", body, "fabtop/hard/result/inc-1")
    assert r["ok"] is False and "senders must be at most" in r["error"], r
    meta = json.loads(broker.cli().sub("fabtop/hard/meta")[0][1])
    others = meta["nodes"]["kind"].count("gpu") - 1
    reported["senders"] = others
    body = json.dumps({"id": "inc-2", "kind": "incast", "target": "gpu0000", "params": reported})
    r = send(broker, "fabtop/hard/cmd/inject", body, "fabtop/hard/result/inc-2")
    assert r["ok"] is False and "more than its NIC's line rate" in r["error"], r
    # in range for every NIC, far beyond what the target's link drains
    rss_before = _rss_bytes(served.proc.pid)
    events = broker.cli().sub_start("fabtop/hard/event", count=None, timeout_s=30)
    flood = {"senders": others, "size_bytes": 4096.0, "period_s": 1e-7}
    body = json.dumps(
        {"id": "inc-3", "kind": "incast", "target": "gpu0000", "params": flood, "duration_s": 1e6}
    )
    r = send(broker, "fabtop/hard/cmd/inject", body, "fabtop/hard/result/inc-3")
    assert r["ok"], r
    fault_id = r["detail"]["fault_id"]
    try:
        tm = telemetry(broker, "hard", lambda t: t["health"]["flows_refused_total"] > 0)
        start = tm["sim_time_s"]
        later = telemetry(broker, "hard", lambda t: t["sim_time_s"] > start + 2e-4)
        assert later["totals"]["active_flows"] <= 4096 + 1000  # the per-fault cap, plus workloads
        assert _rss_bytes(served.proc.pid) < rss_before + 200 * 2**20
    finally:
        cleared = send(
            broker,
            "fabtop/hard/cmd/clear",
            json.dumps({"id": "inc-4", "fault_id": fault_id}),
            "fabtop/hard/result/inc-4",
        )
        events.terminate()
    assert cleared["ok"], cleared
    seen = [json.loads(p) for _, p in MqttCli.sub_collect(events)]
    refused = [e for e in seen if e["kind"] == "flows_refused"]
    assert len(refused) == 1 and "admission limits reached" in refused[0]["message"]
    still_serving(broker, served, "hard")


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        ('{"id": "\\u00e9t\\u00e9"}', "id must be a string matching regex"),
        ('{"id": "op-1\\n"}', "id must be a string matching regex"),
        ('{"id": "\\ud800"}', "invalid UTF-8: a string holds a lone surrogate"),
        (b'{"id": "\xed\xa0\x80"}', "invalid UTF-8 at byte 8"),
    ],
)
def test_loose_ids_are_refused_and_answered_without_an_id(
    broker: Mosquitto,  # noqa: F811
    served: Served,
    payload: str | bytes,
    error: str,
) -> None:
    reply = send(broker, "fabtop/hard/cmd/pause", payload, "fabtop/hard/result")
    assert reply["ok"] is False and reply["id"] is None and reply["error"].startswith(error), reply


def test_retained_commands_are_refused_and_cleared_once(
    broker: Mosquitto,  # noqa: F811
    served: Served,
) -> None:
    cli = broker.cli()
    # while the bridge is subscribed: the broker forwards it with retain=0 under MQTT
    # 3.1.1; the bridge subscribes with "retain as published" and still sees it
    reply = send(
        broker, "fabtop/hard/cmd/pause", '{"id": "ret-1"}', "fabtop/hard/result/ret-1", retain=True
    )
    assert reply["ok"] is False and reply["error"].startswith("retained command refused"), reply
    telemetry(broker, "hard", lambda t: t["running"] and t["commands"]["retained_cleared"] >= 1)
    # the broker holds no retained command any more: nobody subscribing later gets it
    leftover = cli.sub_start("fabtop/hard/cmd/#", count=None, timeout_s=2)
    assert [m for m in cli.sub_collect(leftover) if m[1]] == []
    still_serving(broker, served, "hard")


def test_a_retained_command_published_before_serve_starts_is_refused_and_cleared(
    broker: Mosquitto,  # noqa: F811
) -> None:
    cli = broker.cli()
    cli.pub("fabtop/hardret/cmd/pause", '{"id": "early-1"}', retain=True)
    replies = cli.sub_start("fabtop/hardret/result/#", count=1, timeout_s=60)
    s = Served(broker.url, "hardret")
    try:
        s.wait_online(cli)
        ((topic, payload),) = cli.sub_collect(replies)
        reply = json.loads(payload)
        assert topic == "fabtop/hardret/result/early-1"
        assert reply["error"].startswith("retained command refused"), reply
        tm = telemetry(broker, "hardret", lambda t: t["commands"]["retained_cleared"] == 1)
        assert tm["running"] is True  # not applied
        leftover = cli.sub_start("fabtop/hardret/cmd/#", count=None, timeout_s=2)
        assert [m for m in cli.sub_collect(leftover) if m[1]] == []
    finally:
        assert s.stop() == 0
    # a later bridge on the same cluster hears nothing: the refusal is not sent again
    again = cli.sub_start("fabtop/hardret/result/#", count=None, timeout_s=8)
    s2 = Served(broker.url, "hardret")
    try:
        s2.wait_online(cli)
        telemetry(broker, "hardret", lambda t: t["running"])
    finally:
        s2.stop()
        again.terminate()
    assert cli.sub_collect(again) == []


def test_read_only_serve_answers_read_only_and_keeps_publishing(
    broker: Mosquitto,  # noqa: F811
) -> None:
    s = Served(broker.url, "hardro", "--read-only")
    try:
        s.wait_online(broker.cli())
        for i, (name, body) in enumerate(
            [("pause", "{}"), ("inject", '{"kind": "link_down", "target": "leaf00->spine01"}')]
        ):
            cid = f"ro-{i}"
            payload = json.dumps({**json.loads(body), "id": cid})
            r = send(broker, f"fabtop/hardro/cmd/{name}", payload, f"fabtop/hardro/result/{cid}")
            assert r["ok"] is False and r["error"].startswith("read-only:"), r
        tm = telemetry(broker, "hardro", lambda t: t["commands"]["refused"] >= 2)
        assert tm["commands"]["read_only"] is True and tm["faults"] == [] and tm["running"]
        still_serving(broker, s, "hardro")
    finally:
        assert s.stop() == 0


def test_an_allow_list_accepts_only_its_kinds(broker: Mosquitto) -> None:  # noqa: F811
    s = Served(broker.url, "hardallow", "--allow", "pause,resume")
    try:
        s.wait_online(broker.cli())
        body = json.dumps({"id": "al-1", "kind": "link_down", "target": "leaf00->spine01"})
        r = send(broker, "fabtop/hardallow/cmd/inject", body, "fabtop/hardallow/result/al-1")
        assert (
            r["error"]
            == "command 'inject' is not allowed on this emulator (allowed: pause, resume)"
        )
        r = send(
            broker, "fabtop/hardallow/cmd/pause", '{"id": "al-2"}', "fabtop/hardallow/result/al-2"
        )
        assert r["ok"], r
        r = send(
            broker, "fabtop/hardallow/cmd/resume", '{"id": "al-3"}', "fabtop/hardallow/result/al-3"
        )
        assert r["ok"], r
    finally:
        s.stop()


async def _flood(port: int, cluster: str, n: int) -> dict[str, dict[str, Any]]:
    """``n`` speed commands unpaced, then a pause: the replies by id."""
    replies: dict[str, dict[str, Any]] = {}
    async with aiomqtt.Client("127.0.0.1", port) as client:
        await client.subscribe(f"fabtop/{cluster}/result/#", qos=1)

        async def collect() -> None:
            async for message in client.messages:
                assert isinstance(message.payload, bytes)
                reply = json.loads(message.payload)
                replies[str(reply["id"])] = reply
                if len(replies) == n + 1:
                    return

        reader = asyncio.create_task(collect())
        for i in range(n):
            body = json.dumps({"id": f"fl-{i}", "speed": 1e-3})
            await client.publish(f"fabtop/{cluster}/cmd/speed", body, qos=1)
        await client.publish(f"fabtop/{cluster}/cmd/pause", '{"id": "fl-pause"}', qos=1)
        await asyncio.wait_for(reader, 120)
    return replies


def test_a_flood_is_answered_busy_and_a_pause_still_gets_through(
    broker: Mosquitto,  # noqa: F811
) -> None:
    s = Served(broker.url, "hardflood")
    try:
        s.wait_online(broker.cli())
        n = 3000
        replies = asyncio.run(_flood(broker.port, "hardflood", n))
        assert len(replies) == n + 1  # every command answered, none dropped
        assert replies["fl-pause"]["ok"] is True
        errors = [r["error"] for r in replies.values() if not r["ok"]]
        assert all(e.startswith("busy:") for e in errors), set(errors)
        assert not any("did not apply" in (e or "") for e in errors)
        tm = telemetry(broker, "hardflood", lambda t: t["running"] is False)
        c = tm["commands"]
        assert c["applied"] + c["refused"] + c["duplicates"] + c["internal_errors"] == n + 1
        assert c["busy"] == len(errors) and c["discarded"] == 0
    finally:
        s.stop()
