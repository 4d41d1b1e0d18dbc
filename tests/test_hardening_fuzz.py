"""Issue 20: 2,400 seeded hostile payloads against ``fabtop serve`` over a real mosquitto.

Deep nesting, huge bodies, wrong types, NaN and infinities, extreme values in every
field of every command kind, bad UTF-8, lone surrogates, non-objects, unknown fields,
and real targets with extreme parameters. Then: the process is alive and online,
every payload was answered (or counted as discarded by the bridge), simulated time
advances and a valid command still works.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from typing import Any

import aiomqtt
import msgspec
import pytest

from fabric_core import commands as c
from tests._mosquitto import Mosquitto, Served, broker  # noqa: F401  (fixture)

pytestmark = pytest.mark.integration

N_PAYLOADS = 2400
CLUSTER = "fuzz"
STRUCTS: dict[str, type[msgspec.Struct]] = {
    "inject": c.InjectFault,
    "clear": c.ClearFault,
    "pause": c.Pause,
    "resume": c.Resume,
    "speed": c.SetSpeed,
    "tick": c.SetTick,
    "set": c.SetParam,
    "start": c.StartWorkload,
    "stop": c.StopWorkload,
}
EXTREMES: list[Any] = [
    0,
    -0.0,
    -1,
    1e308,
    -1e308,
    5e-324,
    1e-320,
    2**63,
    -(2**63),
    2**64 + 1,
    1e-9,
    1e-6,
    1e3,
    1e6,
    4096,
    1e9,
]
WEIRD_STRINGS = ["", " ", "é" * 40, "😀", "a\u0000b", "x" * 5000, "leaf00->spine01\n", "../../#"]


def _raw_number(rng: random.Random) -> str:
    return rng.choice(["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1e-999", "01", "+1"])


def _any_value(rng: random.Random, names: dict[str, list[str]]) -> Any:
    pick = rng.randrange(9)
    if pick == 0:
        return rng.choice(EXTREMES)
    if pick == 1:
        return rng.choice(WEIRD_STRINGS)
    if pick == 2:
        return rng.choice([None, True, False, [], {}, [1, 2], {"a": 1}])
    if pick == 3:
        return rng.choice(names["targets"])
    if pick == 4:
        return rng.choice(names["params"])
    if pick == 5:
        return {k: rng.choice(EXTREMES) for k in rng.sample(names["param_keys"], 2)}
    if pick == 6:
        return rng.uniform(-1e6, 1e6)
    if pick == 7:
        return rng.choice(["link_down", "incast", "link_flap", "switch_down", "credit_loss"])
    return rng.getrandbits(70) - 2**69


def _payload(rng: random.Random, i: int, names: dict[str, list[str]]) -> tuple[str, bytes]:
    """(command name, body) of hostile payload ``i``."""
    name = rng.choice([*STRUCTS, *STRUCTS, *STRUCTS, "inject", "inject", "bogus", "speeed"])
    cid = f"hz-{i}"
    fields = [f for f in getattr(STRUCTS.get(name), "__struct_fields__", ()) if f != "id"]
    kind = rng.randrange(11)
    if kind == 0:  # deep nesting, id at the start or none
        depth = rng.choice([9, 50, 1000, 5000])
        head = f'{{"id": "{cid}", "x": ' if rng.random() < 0.5 else ""
        opener, closer = rng.choice([("[", "]"), ('{"a":', "}")])
        tail = closer * depth if rng.random() < 0.5 else ""
        return name, (head + opener * depth + "1" + tail + ("}" if head else "")).encode()
    if kind == 1 and rng.random() < 0.3:  # huge
        return name, (f'{{"id": "{cid}", "pad": "' + "a" * 70_000 + '"}').encode()
    if kind == 2:  # NaN / infinities / bad number literals in a numeric field
        field = rng.choice(fields or ["speed"])
        return name, f'{{"id": "{cid}", "{field}": {_raw_number(rng)}}}'.encode()
    if kind == 3:  # bad bytes and lone surrogates
        return name, rng.choice(
            [
                f'{{"id": "{cid}", "kind": "\\ud800"}}'.encode(),
                f'{{"id": "{cid}", "target": "'.encode() + b"\xff\xfe" + b'"}',
                b'{"id": "\xed\xa0\x80"}',
                f'{{"id": "{cid}\\udfff"}}'.encode(),
            ]
        )
    if kind == 4:  # not an object, or nothing
        return name, rng.choice([b"[]", b'"x"', b"1", b"null", b"true", b"", b"   ", b"{", b"}"])
    if kind == 5:  # unknown fields
        return name, json.dumps({"id": cid, "nope": 1, "params": {"x": 1}}).encode()
    if kind == 6:  # broken ids
        bad: Any = rng.choice([5, None, [], "é", "a b", "x" * 65, "ok\n", "", "\\u0000"])
        return name, json.dumps({"id": bad}).encode()
    # wrong types and extreme values in every field of the command kind
    body: dict[str, Any] = {"id": cid}
    for field in fields:
        if rng.random() < 0.8:
            body[field] = _any_value(rng, names)
    if name == "inject" and rng.random() < 0.5:
        body.update(kind=rng.choice(["incast", "link_flap", "link_degraded", "credit_loss"]))
        body["target"] = rng.choice(names["targets"])
        body["params"] = {
            k: rng.choice(EXTREMES) for k in names["param_keys"] if rng.random() < 0.6
        }
    if rng.random() < 0.3:
        body["command"] = rng.choice([name, "pause", "other", 3])
    return name, json.dumps(body).encode()


@pytest.fixture(scope="module")
def served(broker: Mosquitto) -> Iterator[Served]:  # noqa: F811
    s = Served(broker.url, CLUSTER)
    try:
        s.wait_online(broker.cli())
        yield s
    finally:
        s.stop()


async def _run(port: int, names: dict[str, list[str]]) -> tuple[int, int, dict[str, Any]]:
    rng = random.Random(20)
    sent = 0
    replies: list[dict[str, Any]] = []
    async with aiomqtt.Client("127.0.0.1", port) as client:
        await client.subscribe(f"fabtop/{CLUSTER}/result/#", qos=1)
        await client.subscribe(f"fabtop/{CLUSTER}/telemetry", qos=0)
        latest: dict[str, Any] = {}

        async def read() -> None:
            async for message in client.messages:
                assert isinstance(message.payload, bytes)
                if message.topic.matches(f"fabtop/{CLUSTER}/telemetry"):
                    latest.update(json.loads(message.payload))
                else:
                    replies.append(json.loads(message.payload))

        reader = asyncio.create_task(read())
        for batch in range(N_PAYLOADS // 50):
            for i in range(batch * 50, batch * 50 + 50):
                name, body = _payload(rng, i, names)
                await client.publish(f"fabtop/{CLUSTER}/cmd/{name}", body, qos=1)
                sent += 1
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60
            while len(replies) < sent and loop.time() < deadline:
                await asyncio.sleep(0.01)
        # every hostile command answered before the valid ones go (a loaded machine can take
        # longer than a batch's minute): none of them may apply after the valid ones
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 300

        def unanswered() -> int:
            discarded = int(latest.get("commands", {}).get("discarded", 0))
            return sent - len(replies) - discarded  # discarded ones never apply

        while unanswered() > 0 and loop.time() < deadline:
            await asyncio.sleep(0.05)
        # after the storm: valid commands put the emulator back into a known state
        finals_to_send: list[tuple[str, str, dict[str, Any]]] = [
            ("ok-1", "resume", {}),
            ("ok-2", "speed", {"speed": 1e-3}),
            ("ok-3", "tick", {"dt_s": 1e-6}),
            ("ok-4", "clear", {"all": True}),
            ("ok-5", "inject", {"kind": "link_down", "target": "leaf00->spine01"}),
        ]
        for cid, command, fields in finals_to_send:
            await client.publish(
                f"fabtop/{CLUSTER}/cmd/{command}", json.dumps({"id": cid, **fields}), qos=1
            )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while len(replies) < sent + 5 and loop.time() < deadline:
            await asyncio.sleep(0.01)
        finals = {r["id"]: r for r in replies if str(r["id"]).startswith("ok-")}
        # telemetry is QoS 0 and a few Hz: wait for one sent after the valid commands (it
        # shows their speed), then for simulated time to move on from it
        deadline = loop.time() + 60
        while latest.get("target_speed") != 1e-3:
            assert loop.time() < deadline, (
                f"the speed command never shows: {latest.get('target_speed')}"
            )
            await asyncio.sleep(0.05)
        first = dict(latest)
        while not (latest.get("sim_time_s", 0) > first.get("sim_time_s", 0) + 1e-5):
            assert loop.time() < deadline + 60, "simulated time does not advance"
            await asyncio.sleep(0.05)
        reader.cancel()
        stats = dict(latest)
    return sent, len(replies) - len(finals), {"finals": finals, "telemetry": stats}


def test_hostile_payloads_neither_crash_nor_freeze_the_emulator(
    broker: Mosquitto,  # noqa: F811
    served: Served,
) -> None:
    meta = json.loads(broker.cli().sub(f"fabtop/{CLUSTER}/meta")[0][1])
    gpus = [
        n for n, k in zip(meta["nodes"]["name"], meta["nodes"]["kind"], strict=True) if k == "gpu"
    ]
    names = {
        "targets": meta["link_names"][:20] + gpus[:8] + ["spine00", "nowhere"],
        "params": ["ecn_kmin_s", "ecn_kmax_s", "ecn_pmax", "buffer_per_vl_bytes", "x"],
        "param_keys": [
            "senders",
            "size_bytes",
            "period_s",
            "ber",
            "loss_fraction",
            "down_fraction",
        ],
    }
    sent, answered, out = asyncio.run(_run(broker.port, names))
    assert sent == N_PAYLOADS
    tm = out["telemetry"]
    cmds = tm["commands"]
    # every payload was answered, or counted as discarded by the bridge
    assert answered + cmds["discarded"] >= sent, (answered, cmds)
    assert cmds["internal_errors"] == 0, served.output()[-3000:]
    finals = out["finals"]
    assert all(finals[f"ok-{k}"]["ok"] for k in range(1, 6)), finals
    assert finals["ok-5"]["detail"]["fault_id"]
    assert tm["running"] is True and tm["target_speed"] == 1e-3
    assert served.proc.poll() is None, served.output()[-3000:]
    status = broker.cli().sub(f"fabtop/{CLUSTER}/status")
    assert status == [(f"fabtop/{CLUSTER}/status", b"online")]
