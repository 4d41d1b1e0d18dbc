"""``fabtop watch`` against hostile messages: nothing reaches the terminal raw.

Control characters in any printed text are escaped (``\\x1b``, ``\\n``), times
and counters print in a bounded width, and a payload that Python's JSON parser
cannot take (deep nesting, NaN) gives a line, not a crash.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from console.cli.watch import format_line, integer, json_line, seconds
from exporters.mqtt.client import printable
from exporters.mqtt.encode import encode_telemetry
from exporters.mqtt.schema import encoder
from exporters.mqtt.topics import Topics
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from tests._mosquitto import REPO, Mosquitto, mosquitto  # noqa: F401  (fixture)

T = Topics("c")
ESC = "\x1b[2J"


def event(**fields: object) -> bytes:
    base: dict[str, object] = {
        "v": 1,
        "run_id": "r",
        "time_s": 0.00201,
        "severity": "warning",
        "kind": "fault_detected",
        "target": "leaf00->spine01",
        "message": "down",
    }
    return json.dumps({**base, **fields}).encode()


def assert_safe(line: str | None) -> str:
    """One printable line: no ESC, no newline, no other control character."""
    assert line is not None
    assert line.isprintable(), repr(line)
    return line


@pytest.mark.parametrize("field", ["severity", "kind", "target", "message"])
def test_an_escape_sequence_in_any_event_field_is_shown_escaped(field: str) -> None:
    line = assert_safe(format_line(T, "fabtop/c/event", event(**{field: f"a{ESC}b"})))
    assert r"a\x1b[2Jb" in line


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("two\nlines", r"two\nlines"),  # cannot forge a second line for a script
        ("cr\rover", r"cr\rover"),
        ("bell\x07", r"bell\x07"),
        ("del\x7f", r"del\x7f"),
        ("c1 csi\x9b31m", r"c1 csi\x9b31m"),  # an 8-bit CSI some terminals obey
        ("bidi\u202eevil", r"bidi\u202eevil"),
        ("tab\there", r"tab\there"),
    ],
)
def test_every_control_character_is_escaped(raw: str, shown: str) -> None:
    line = assert_safe(format_line(T, "fabtop/c/event", event(message=raw)))
    assert line.endswith(": " + shown)


def test_printable_text_is_left_alone() -> None:
    assert printable("leaf00->spine01: débit réduit → 50 % \\x1b") == (
        "leaf00->spine01: débit réduit → 50 % \\x1b"
    )
    assert format_line(T, "fabtop/c/event", event()) == (
        "event 0.002010s warning fault_detected leaf00->spine01: down"
    )


def test_status_result_and_topic_text_are_escaped_too() -> None:
    assert format_line(T, "fabtop/c/status", f"online{ESC}".encode()) == r"status online\x1b[2J"
    reply = json.dumps({"id": f"x{ESC}", "ok": False, "error": f"no\n{ESC}"}).encode()
    assert format_line(T, "fabtop/c/result/x", reply) == r"result x\x1b[2J error: no\n\x1b[2J"
    ok = json.dumps({"id": f"y{ESC}", "ok": True}).encode()
    assert format_line(T, "fabtop/c/result/y", ok) == r"result y\x1b[2J ok"
    line = assert_safe(format_line(T, f"fabtop/c/result/{ESC}", b"[1"))
    assert line.startswith(r"unreadable fabtop/c/result/\x1b[2J: ")


@pytest.mark.parametrize(
    ("time_s", "shown"),
    [(1e308, "1e+308s"), (-1e308, "-1e+308s"), (1e9, "1e+09s"), (123.25, "123.250000s")],
)
def test_event_times_print_in_a_bounded_width(time_s: float, shown: str) -> None:
    line = assert_safe(format_line(T, "fabtop/c/event", event(time_s=time_s)))
    assert line.split()[1] == shown


def test_bounded_helpers() -> None:
    assert seconds(0.0) == "0.000000" and seconds(999_999_999.5) == "999999999.500000"
    assert integer(1200) == "1200" and integer(-7) == "-7"
    assert integer(10**15) == "1e+15"
    assert integer(10**400) == "2^1328+" and integer(-(10**400)) == "-2^1328+"


@pytest.fixture(scope="module")
def telemetry() -> dict[str, object]:
    fabric = Fabric.from_scenario(load_scenario("tiny"))
    fabric.run_ticks(50)
    snap = fabric.snapshot(wall_time_s=1.0, target_speed=1e-3, measured_speed=1e-3)
    out: dict[str, object] = json.loads(encoder.encode(encode_telemetry(snap, run_id="r")))
    return out


def test_telemetry_lines_are_bounded_too(telemetry: dict[str, object]) -> None:
    normal = format_line(T, "fabtop/c/telemetry", json.dumps(telemetry).encode())
    assert normal is not None and normal.startswith("telemetry tick=50 t=0.")
    # JSON carries any integer: 10**400 has 401 digits
    hostile = json.loads(json.dumps(telemetry))
    hostile["sim_time_s"] = 1e308
    hostile["totals"]["throughput_Bps"] = 1.7e308
    raw = json.dumps(hostile, separators=(",", ":"))
    assert '"tick":50,' in raw
    raw = raw.replace('"tick":50,', f'"tick":{10**400},', 1)
    line = assert_safe(format_line(T, "fabtop/c/telemetry", raw.encode()))
    assert line.startswith("telemetry tick=2^1328+ t=1e+308s running faults=0 throughput=1.7e+308")
    assert len(line) < 100


def test_json_lines_escape_controls_and_stay_strict_json() -> None:
    line = json_line("fabtop/c/event", event(message=ESC))
    assert line.isprintable() and "\\u001b[2J" in line
    assert json.loads(line)["payload"]["message"] == ESC
    # Python would parse NaN and print it back: not JSON for a strict reader (jq)
    nan = json_line("fabtop/c/result/x", b'{"id": "x", "error": NaN}')

    def strict(name: str) -> object:
        raise AssertionError(f"{name} in a JSON line")

    assert json.loads(nan, parse_constant=strict)["payload"] == '{"id": "x", "error": NaN}'
    raw = json_line("fabtop/c/status", b"\xff\x1b[2J")
    assert raw.isprintable() and json.loads(raw)["payload"] == "\ufffd" + ESC


def test_deep_nesting_gives_a_line_not_a_crash() -> None:
    deep = b"[" * 100_000
    line = assert_safe(format_line(T, "fabtop/c/result/x", deep))
    assert line.startswith("unreadable fabtop/c/result/x: maximum recursion depth")
    assert json.loads(json_line("fabtop/c/result/x", deep))["payload"] == deep.decode()


@pytest.mark.integration
def test_watch_prints_no_escape_sequence_from_the_broker(mosquitto: Mosquitto) -> None:  # noqa: F811
    cli = mosquitto.cli()
    # retained, so that watch receives them however late it subscribes
    cli.pub("fabtop/w/status", "online", retain=True)
    cli.pub("fabtop/w/event", event(message=f"{ESC}forged\nevent", time_s=1e308), retain=True)
    watch = ["watch", "--mqtt", mosquitto.url, "--cluster", "w", "--count", "2"]
    run = subprocess.run(
        [sys.executable, "-m", "console.cli", *watch, "--timeout", "60"],
        cwd=REPO,
        capture_output=True,
        timeout=90,
    )
    assert run.returncode == 0, run.stderr
    assert b"\x1b" not in run.stdout
    lines = run.stdout.decode().splitlines()
    assert sorted(lines) == [
        r"event 1e+308s warning fault_detected leaf00->spine01: \x1b[2Jforged\nevent",
        "status online",
    ]
