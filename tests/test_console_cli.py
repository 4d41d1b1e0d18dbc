"""``fabtop`` (no subcommand) refuses bad options with a clear message before starting anything."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from fabric_core.runtime.scenario import load_scenario


def fabtop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--speed", "-1"), "speed must be 0 (flat out) or between 1e-06 and 1000"),
        # (below the engine's least speed: it crashed the in-process engine)
        (("--in-process", "--speed", "1e-8"), "speed must be 0 (flat out) or between 1e-06"),
        (("--speed", "nan"), "between 1e-06 and 1000 simulated seconds per wall second, got nan"),
        (("--speed", "fast"), "speed must be a number, got 'fast'"),
        (("--metrics", "9464"), "'9464': missing port; expected HOST:PORT"),
        (("--metrics", "localhost:99999"), "port 99999 is out of range 0..65535"),
        (("--metrics", "::1:9464"), "write an IPv6 host in brackets, e.g. [::1]:9464"),
        (("--link-metrics", "every"), "argument --link-metrics: 'every'"),
        (("--dt", "5"), "argument --dt: duration '5' needs a unit"),
        (("--scenario", "no-such-scenario", "--no-metrics"), "no bundled scenario"),
        (("--max-tick", "3y"), "max tick must be a duration (100us) or a multiple"),
        (("--max-tick=-2x",), "max tick must be a duration (100us) or a multiple"),
        (("--max-tick", "1s"), "max tick must be 0 (fixed) or between 1e-09 and 0.01 s"),
        # (session 42: a negative seed blamed default.toml; a compare view of one profile
        # twice started two engines of it)
        (("--seed", "-3"), "argument --seed: must be 0 or more, got '-3'"),
        (("--max-tick", "0.5x"), "max tick must be a multiple of at least 1"),
        # (session 43: said the range, where --dt 5 says it needs a unit)
        (("--max-tick", "5"), "max tick '5' needs a unit (ns, us, ms, s), e.g. 5us, or an x"),
        (
            ("--compare", "native-400g", "--no-metrics"),
            "--compare native-400g: the scenario already runs on native-400g",
        ),
    ],
)
def test_bad_options_say_why(args: tuple[str, ...], message: str) -> None:
    result = fabtop(*args)
    assert result.returncode == 2
    assert message in result.stderr


def test_help_lists_the_console_options() -> None:
    out = fabtop("--help").stdout
    for option in (
        "--scenario",
        "--speed",
        "--metrics",
        "--no-metrics",
        "--link-metrics",
        "--read-only",
        "--compare",
        "--max-tick",
    ):
        assert option in out


@pytest.mark.parametrize(
    ("text", "dt", "longest"),
    [
        ("2x", 2e-6, 4e-6),
        ("4x", 1e-6, 4e-6),
        ("100us", 2e-6, 1e-4),
        ("1x", 2e-6, None),  # no longer than the tick: fixed
        ("1us", 2e-6, None),
        ("0", 2e-6, None),
        ("1e6x", 1e-6, 1e-2),  # capped at the longest tick a fabric accepts
    ],
)
def test_max_tick_is_a_duration_or_a_multiple_of_the_tick(
    text: str, dt: float, longest: float | None
) -> None:
    from console.cli._common import max_tick

    got = max_tick(text).resolve(dt)
    assert got == (None if longest is None else pytest.approx(longest))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--speed", "1e-9"), "speed must be 0 (flat out) or between 1e-06 and 1000"),
        (("--metrics", "localhost"), "'localhost': missing port"),
        (("--link-metrics", "top:x"), "argument --link-metrics: 'top:x'"),
        (("--dt", "0.000001"), "argument --dt: duration '0.000001' needs a unit"),
        (("--dt", "1s"), "argument --dt: the tick must be between 1e-09 and 0.01 s"),
    ],
)
def test_serve_refuses_bad_options_before_starting(args: tuple[str, ...], message: str) -> None:
    """The same checks as the console's, as usage errors (no broker is needed to hear them)."""
    result = fabtop("serve", "tiny", "--mqtt", "mqtt://127.0.0.1:1", *args)
    assert result.returncode == 2
    assert message in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--timeout", "nan"), "argument --timeout: must be a number of seconds above 0"),
        (("--timeout", "-1"), "argument --timeout: must be a number of seconds above 0"),
        (("-p", "ber=nan"), "--param 'ber=nan': ber must be a finite number"),
        (("-p", "ber=inf"), "--param 'ber=inf': ber must be a finite number"),
    ],
)
def test_inject_refuses_what_json_cannot_carry_before_sending(
    args: tuple[str, ...], message: str
) -> None:
    """A NaN parameter went out as JSON's null ("must be a number or a string, got null")."""
    result = fabtop("inject", "link_degraded", "a->b", "--mqtt", "mqtt://127.0.0.1:1", *args)
    assert result.returncode == 2
    assert message in result.stderr


@pytest.mark.parametrize("crashes", [True, False])
def test_an_embedded_console_that_crashes_does_not_exit_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], crashes: bool
) -> None:
    import argparse

    import console.app
    from console.cli import tui
    from tests.test_mqtt_remote_hostile import _CrashingApp, _QuittingApp

    monkeypatch.setattr(console.app, "FabtopApp", _CrashingApp if crashes else _QuittingApp)
    args = argparse.Namespace(no_metrics=True, read_only=False)
    status = tui._run_app(args, None, None, None, load_scenario("tiny"))  # type: ignore[arg-type]
    assert status == (1 if crashes else 0)
    if crashes:
        assert "ValueError: operands could not be broadcast" in capsys.readouterr().err


def test_a_metrics_port_in_use_refuses_to_start_the_console() -> None:
    """The console started without its exporter (header "metrics off") and said so only
    after the operator quit, behind its screen, with the address twice ("cannot serve
    metrics on H:P: cannot serve metrics on H:P: ...") and exit status 0; it now refuses
    before the screen opens, as ``fabtop serve`` does."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "console.cli", "--metrics", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"fabtop: error: cannot serve metrics on 127.0.0.1:{port}: Address already in use "
        "(by another fabtop?); choose another address with --metrics HOST:PORT (port 0: any "
        "free one) or run the console without the exporter with --no-metrics\n"
    )
    assert result.stdout == ""  # no screen drawn


def test_the_default_metrics_port_in_use_refuses_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``fabtop`` with no options (a second console, say) refuses the same way, before any
    engine is built: its exporter would not be where the README says it is."""
    import console.process_source
    from console.cli import _common, main

    def no_engines(*_: object, **__: object) -> None:
        raise AssertionError("the engines started")

    monkeypatch.setattr(console.process_source, "start_engines", no_engines)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setattr(_common, "DEFAULT_METRICS", ("127.0.0.1", port))
        assert main([]) == 2
    err = capsys.readouterr().err
    assert err.count(f"127.0.0.1:{port}") == 1, err
    assert "--metrics HOST:PORT" in err and "--no-metrics" in err
