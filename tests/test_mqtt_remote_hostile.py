"""Hostile telemetry for the remote console (``fabtop console --mqtt``).

A message that has the schema's types but cannot describe a fabric (columns of
different lengths, a status or a tier out of range, a histogram whose counts do
not match its indices) is refused by the decoding with the field it names; the
``MqttSource`` keeps its last good snapshot, says why, and keeps receiving (the
next telemetry, command replies). A console that crashes does not exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
from collections.abc import Callable
from functools import partial
from typing import Any

import msgspec
import pytest
from textual.app import App

from console.cli import remote_console
from console.viewstate import FabricView
from exporters.mqtt import remote
from exporters.mqtt.decode import InvalidTelemetryError, node_table, snapshot_from
from exporters.mqtt.encode import encode_meta, encode_telemetry
from exporters.mqtt.remote import MqttSource
from exporters.mqtt.schema import LinksMsg, encoder, meta_decoder, telemetry_decoder
from exporters.mqtt.url import parse_broker_url
from fabric_core.commands import InjectFault
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.runtime.snapshot import Snapshot
from fabric_core.tick import histogram as hist
from tests._mosquitto import Mosquitto, mosquitto  # noqa: F401  (fixture)
from tests.helpers import until

Payload = dict[str, Any]

DOWN = "leaf00->spine01"


@pytest.fixture(scope="module")
def served() -> tuple[Payload, Payload]:
    """(meta, telemetry) of a real run, as the JSON objects ``fabtop serve`` sends."""
    fabric = Fabric.from_scenario(load_scenario("tiny"))
    fabric.run_ticks(300)
    fabric.apply(InjectFault(kind="link_down", target=DOWN, id="f1"))
    fabric.run_ticks(300)
    snap = fabric.snapshot(wall_time_s=1.0, target_speed=1e-3, measured_speed=1e-3)
    tm = json.loads(encoder.encode(encode_telemetry(snap, run_id="r", top_k=8)))
    meta = json.loads(encoder.encode(encode_meta(snap, run_id="r")))
    return meta, tm


def decode(meta: Payload, tm: Payload) -> Snapshot:
    """What ``MqttSource`` does with a meta and a telemetry of one run."""
    m = meta_decoder.decode(json.dumps(meta))
    t = telemetry_decoder.decode(json.dumps(tm))
    return snapshot_from(m, t, node_table(m.nodes), ())


def altered(payload: Payload, change: Callable[[Payload], object]) -> Payload:
    out = copy.deepcopy(payload)
    change(out)
    return out


def refused(meta: Payload, tm: Payload) -> str:
    """The reason the decoding gives for refusing this pair."""
    with pytest.raises(InvalidTelemetryError) as info:
        decode(meta, tm)
    return str(info.value)


# ------------------------------------------------------------------ the decoding


def test_the_served_payload_decodes_and_the_console_view_takes_it(
    served: tuple[Payload, Payload],
) -> None:
    meta, tm = served
    snap = decode(meta, tm)
    assert FabricView().ingest(snap)
    assert snap.links.src.min() >= 0 and snap.links.dst.min() >= 0


@pytest.mark.parametrize(
    "field", [f for f in LinksMsg.__struct_fields__ if f not in ("total", "name")]
)
def test_every_link_column_shorter_than_name_is_refused_naming_it(
    served: tuple[Payload, Payload], field: str
) -> None:
    meta, tm = served
    bad = altered(tm, lambda t: t["links"][field].pop())
    assert refused(meta, bad) == f"links.{field} has 7 values for 8 links (links.name)"


def test_a_longer_column_is_refused_too(served: tuple[Payload, Payload]) -> None:
    meta, tm = served
    bad = altered(tm, lambda t: t["links"]["utilisation"].append(0.5))
    assert refused(meta, bad) == "links.utilisation has 9 values for 8 links (links.name)"


@pytest.mark.parametrize("status", [300, 3, -1, 2**70])
def test_a_status_that_is_no_link_status_is_refused(
    served: tuple[Payload, Payload], status: int
) -> None:
    meta, tm = served
    bad = altered(tm, lambda t: t["links"]["status"].__setitem__(2, status))
    assert refused(meta, bad) == (
        f"links.status[2] is {status}: a status is one of 0 up, 1 down, 2 degraded"
    )


def test_queue_vl_rows_of_different_lengths_are_refused(served: tuple[Payload, Payload]) -> None:
    meta, tm = served
    bad = altered(tm, lambda t: t["links"]["queue_vl_bytes"][3].pop())
    assert refused(meta, bad).startswith("links.queue_vl_bytes rows have [3, 4] values")


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("leaf00->nowhere", "links.name[1] 'leaf00->nowhere' is not 'a->b' between two nodes"),
        ("leaf00", "links.name[1] 'leaf00' is not 'a->b'"),
        (DOWN, f"links.name[1] '{DOWN}' appears twice"),  # the first one is DOWN
        ("\x1b[2J" * 40, r"links.name[1] '\x1b[2J\x1b[2J"),  # escaped, cut short
    ],
)
def test_link_names_must_be_unique_and_join_two_nodes(
    served: tuple[Payload, Payload], name: str, why: str
) -> None:
    meta, tm = served
    assert tm["links"]["name"][0] == DOWN
    bad = altered(tm, lambda t: t["links"]["name"].__setitem__(1, name))
    reason = refused(meta, bad)
    assert reason.startswith(why)
    assert "\x1b" not in reason and len(reason) < 160


def test_a_histogram_with_fewer_counts_than_indices_is_refused(
    served: tuple[Payload, Payload],
) -> None:
    meta, tm = served
    cls = next(c for c, h in tm["latency"].items() if len(h["i"]) > 1)
    k = len(tm["latency"][cls]["i"])
    bad = altered(tm, lambda t: t["latency"][cls]["n"].pop())
    assert refused(meta, bad) == (
        f"latency['{cls}'].n has {k - 1} values for {k} bucket indices (latency['{cls}'].i)"
    )


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("i", hist.N_BUCKETS, f"is {hist.N_BUCKETS}: bucket indices are 0..{hist.N_BUCKETS - 1}"),
        ("i", -1, f"is -1: bucket indices are 0..{hist.N_BUCKETS - 1}"),
        ("i", 10**30, f"is {10**30}: bucket indices are 0..{hist.N_BUCKETS - 1}"),
        ("n", -5, "is -5: a count is 0 or more (and fits 64 bits)"),
        ("n", 2**64, f"is {2**64}: a count is 0 or more (and fits 64 bits)"),
    ],
)
def test_histogram_indices_and_counts_out_of_range_are_refused(
    served: tuple[Payload, Payload], key: str, value: int, why: str
) -> None:
    meta, tm = served
    cls = next(iter(tm["latency"]))
    bad = altered(tm, lambda t: t["latency"][cls][key].__setitem__(0, value))
    assert refused(meta, bad) == f"latency['{cls}'].{key}[0] {why}"


def test_histogram_counts_that_add_up_past_64_bits_are_refused(
    served: tuple[Payload, Payload],
) -> None:
    meta, tm = served
    cls = next(c for c, h in tm["latency"].items() if len(h["i"]) > 1)
    big = 2**63 - 1
    bad = altered(tm, lambda t: t["latency"][cls].update(n=[big] * len(t["latency"][cls]["i"])))
    assert refused(meta, bad) == f"latency['{cls}'].n adds up to more than 64 bits can count"


def test_a_workload_histogram_is_checked_and_named(served: tuple[Payload, Payload]) -> None:
    meta, tm = served
    name, w = next((n, w) for n, w in tm["workloads"].items() if w["histograms"])
    key = next(iter(w["histograms"]))
    bad = altered(tm, lambda t: t["workloads"][name]["histograms"][key]["i"].append(3))
    assert refused(meta, bad).startswith(f"workloads['{name}'].histograms['{key}'].n has ")


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda n: n["tier"].__setitem__(0, 1_000_000), "nodes.tier[0] is 1000000: a tier is"),
        (lambda n: n["tier"].__setitem__(4, -1), "nodes.tier[4] is -1: a tier is 0..127"),
        (lambda n: n["plane"].__setitem__(1, 40_000), "nodes.plane[1] is 40000: a plane is"),
        (lambda n: n["kind"].pop(), "nodes.kind has "),
        (lambda n: n["tier"].append(1), "nodes.tier has "),
        (lambda n: n["name"].__setitem__(1, n["name"][0]), "nodes.name[1] "),
    ],
)
def test_a_node_table_the_console_cannot_index_is_refused(
    served: tuple[Payload, Payload], change: Callable[[Payload], object], why: str
) -> None:
    meta, tm = served
    bad = altered(meta, lambda m: change(m["nodes"]))
    assert refused(bad, tm).startswith(why)


# ------------------------------------------------------------------ the source


def source_with(meta: Payload, tm: Payload) -> MqttSource:
    """A source (not connected) that received ``meta`` then ``tm``."""
    src = MqttSource(parse_broker_url("mqtt://127.0.0.1:1"), "h")
    src.connected = True  # as when subscribed: the header names no connection problem
    src._receive(src.topics.meta, json.dumps(meta).encode())
    src._receive(src.topics.telemetry, json.dumps(tm).encode())
    assert src.latest() is not None, src.problem
    return src


def shown(src: MqttSource) -> Snapshot:
    """The source's latest snapshot (there is one)."""
    snap = src.latest()
    assert snap is not None, src.problem
    return snap


def tick(tm: Payload, k: int) -> Payload:
    return altered(tm, lambda t: t.update(tick=t["tick"] + k))


def test_refused_telemetry_keeps_the_last_good_snapshot_and_says_why(
    served: tuple[Payload, Payload],
) -> None:
    meta, tm = served
    src = source_with(meta, tm)
    good = src.latest()
    base = src.description

    bad = altered(tick(tm, 1), lambda t: t["links"]["utilisation"].pop())
    src._receive(src.topics.telemetry, json.dumps(bad).encode())
    assert src.latest() is good
    why = "links.utilisation has 7 values for 8 links (links.name)"
    assert src.problem == f"unreadable message on fabtop/h/telemetry: {why}"
    assert src.description == f"{base} (unreadable message on fabtop/h/telemetry: {why})"

    # a meta again (a reconnect): rebuilt from the last *good* telemetry, not the refused one
    src._receive(src.topics.meta, json.dumps(meta).encode())
    assert shown(src).tick == tm["tick"]

    src._receive(src.topics.telemetry, json.dumps(tick(tm, 2)).encode())
    latest = src.latest()
    assert latest is not None and latest.tick == tm["tick"] + 2
    assert src.description == base  # the next good telemetry clears the note


def test_a_refused_meta_keeps_the_run_shown(served: tuple[Payload, Payload]) -> None:
    meta, tm = served
    src = source_with(meta, tm)
    nodes = shown(src).nodes
    bad = altered(meta, lambda m: m["nodes"]["tier"].__setitem__(0, 1_000_000))
    src._receive(src.topics.meta, json.dumps(bad).encode())
    assert src.problem is not None and "nodes.tier[0] is 1000000" in src.problem
    src._receive(src.topics.telemetry, json.dumps(tick(tm, 1)).encode())
    latest = src.latest()
    assert latest is not None and latest.tick == tm["tick"] + 1 and latest.nodes == nodes
    assert "fabtop/h/meta" in src.description  # until a good meta arrives


def test_telemetry_of_a_new_run_that_does_not_fit_its_meta_is_dropped_there(
    served: tuple[Payload, Payload],
) -> None:
    meta, tm = served
    src = source_with(meta, tm)
    # the new run's telemetry comes first (not checked: no meta of its run yet) ...
    bad = altered(tick(tm, 1), lambda t: t.update(run_id="r2") or t["links"]["paused"].pop())
    src._receive(src.topics.telemetry, json.dumps(bad).encode())
    assert src.problem is None
    # ... then its meta, which is fine: the telemetry is what gets refused
    src._receive(src.topics.meta, json.dumps(dict(meta, run_id="r2")).encode())
    assert src.problem == (
        "unreadable message on fabtop/h/telemetry: links.paused has 7 values for 8 links "
        "(links.name)"
    )
    assert shown(src).tick == tm["tick"]
    src._receive(src.topics.telemetry, json.dumps(dict(tick(tm, 2), run_id="r2")).encode())
    assert shown(src).tick == tm["tick"] + 2
    assert "refused" not in src.description and "unreadable" not in src.description


def test_an_unexpected_error_on_one_message_is_reported_and_not_raised(
    served: tuple[Payload, Payload], monkeypatch: pytest.MonkeyPatch
) -> None:
    meta, tm = served
    src = source_with(meta, tm)

    def broken(*_args: object) -> Snapshot:
        raise OverflowError("Python integer 300 out of bounds for int8")

    monkeypatch.setattr(remote, "snapshot_from", broken)
    src._receive(src.topics.telemetry, json.dumps(tick(tm, 1)).encode())  # does not raise
    assert src.problem == (
        "message on fabtop/h/telemetry not handled: "
        "OverflowError('Python integer 300 out of bounds for int8')"
    )
    assert shown(src).tick == tm["tick"]
    monkeypatch.undo()
    src._receive(src.topics.telemetry, json.dumps(tick(tm, 2)).encode())
    assert shown(src).tick == tm["tick"] + 2


def test_a_refusal_names_the_topic_escaped() -> None:
    src = MqttSource(parse_broker_url("mqtt://127.0.0.1:1"), "h")
    src.connected = True
    src._receive("fabtop/h/result/\x1b[2J", b"[")
    assert src.problem is not None and src.problem.isprintable()
    assert src.problem.startswith(r"unreadable message on fabtop/h/result/\x1b[2J: ")
    assert src.description == f"mqtt://127.0.0.1:1 fabtop/h ({src.problem})"


async def test_an_unreadable_reply_fails_its_command_at_once() -> None:
    src = MqttSource(parse_broker_url("mqtt://127.0.0.1:1"), "h")
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    src._pending["op-1"] = future
    src._receive("fabtop/h/result/op-1", b'{"id": "op-1", "ok": "yes"}')
    result = future.result()
    assert not result.ok and result.id == "op-1"
    assert result.error.startswith("unreadable reply on fabtop/h/result/op-1: Expected `bool`")
    assert src.problem is not None and src.problem.startswith("unreadable message on ")


# ------------------------------------------------------------------ through a broker


@pytest.mark.integration
async def test_bad_telemetry_through_a_broker_then_good_telemetry_and_replies_arrive(
    mosquitto: Mosquitto,  # noqa: F811
    served: tuple[Payload, Payload],
) -> None:
    meta, tm = served
    cli = mosquitto.cli()

    async def pub(topic: str, payload: Payload | bytes, retain: bool = False) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        await asyncio.to_thread(cli.pub, f"fabtop/h/{topic}", data, retain=retain)

    await pub("meta", meta, retain=True)
    async with MqttSource(parse_broker_url(mosquitto.url), "h", submit_timeout_s=30) as src:
        assert await src.wait_connected(30)
        await pub("telemetry", tm)
        first = await src.wait_snapshot(30)
        assert first is not None and first.tick == tm["tick"], src.problem

        # each of these killed the receiving task before
        hostile: list[tuple[Payload | bytes, str]] = [
            (
                altered(tick(tm, 1), lambda t: t["links"]["status"].__setitem__(0, 300)),
                "links.status[0] is 300",
            ),
            (
                altered(tick(tm, 2), lambda t: next(iter(t["latency"].values()))["n"].pop()),
                ".n has ",
            ),
            (b"not json", "JSON is malformed: invalid character"),
        ]
        for payload, why in hostile:
            await pub("telemetry", payload)
            await until(partial(lambda w: w in (src.problem or ""), why), f"refusal: {why}")
            assert src.latest() is first
            assert why in src.description

        # replies still arrive: a command waits for its result, which comes after more junk
        cmd = InjectFault(kind="link_down", target=DOWN, id="hostile-1")
        waiting = asyncio.create_task(src.submit(cmd))
        await until(lambda: "hostile-1" in src._pending, "the command to be sent")
        await pub("telemetry", altered(tick(tm, 3), lambda t: t["links"]["name"].pop()))
        await pub("result/hostile-1", {"id": "hostile-1", "ok": True, "detail": {"f": "f9"}})
        result = await waiting
        assert result.ok and result.detail == {"f": "f9"}

        # and the next good telemetry is shown
        await pub("telemetry", tick(tm, 4))
        good = await src.wait_snapshot(30, after_tick=tm["tick"])
        assert good is not None and good.tick == tm["tick"] + 4
        assert src._task is not None and not src._task.done()
        await until(lambda: "unreadable" not in src.description, "the note to clear")


# ------------------------------------------------------------------ the exit status


class _CrashingApp(App[None]):
    """Stands for a console that meets an error it does not survive."""

    def __init__(self, *_args: object, **_kwargs: object) -> None:
        super().__init__()

    def on_mount(self) -> None:
        self.set_timer(0.01, self._boom)

    def _boom(self) -> None:
        raise ValueError("operands could not be broadcast together")

    async def run_async(self, **kwargs: Any) -> None:
        return await super().run_async(headless=True)


class _QuittingApp(_CrashingApp):
    def _boom(self) -> None:
        self.exit()


class _Source:
    async def close(self) -> None:
        pass


@pytest.mark.parametrize(("app", "status"), [(_CrashingApp, 1), (_QuittingApp, 0)])
def test_a_console_that_crashes_does_not_exit_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], app: type, status: int
) -> None:
    import console.app

    async def open_source(_args: argparse.Namespace) -> _Source:
        return _Source()

    monkeypatch.setattr(console.app, "FabtopApp", app)
    monkeypatch.setattr(remote_console, "open_source", open_source)
    assert remote_console.main(argparse.Namespace(read_only=False)) == status
    if status:
        assert "ValueError: operands could not be broadcast" in capsys.readouterr().err


def test_msgspec_still_refuses_floats_json_cannot_hold() -> None:
    """The decoding leaves float ranges to msgspec (no inf/NaN can arrive): check it."""
    with pytest.raises(msgspec.ValidationError, match="Number out of range"):
        msgspec.json.decode(b"[1e999]", type=list[float])
