"""A real mosquitto broker for tests, on a free loopback port.

``Mosquitto`` starts the broker with its own config file (loopback listener,
anonymous access, no persistence), and can stop and restart it on the same
port. ``MqttCli`` wraps mosquitto_pub / mosquitto_sub, the tools an operator
would use. Fixtures: ``mosquitto`` (one broker per test).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests._ports import PortTakenError, start_on_a_free_port

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


def _wait_port_closed(port: int, *, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                pass
        except OSError:
            return
        time.sleep(0.05)
    raise TimeoutError(f"port {port} was still open after {timeout_s} s")


class Mosquitto:
    """One broker process; ``url`` is what fabtop's --mqtt takes.

    Given a ``port``, the broker always listens there. Without one it takes a free port,
    and takes another if that one is gone by the time the broker binds it at its first
    start (``tests._ports``); restarts keep the port, so clients can come back to it.
    """

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        *,
        listener_config: str = "allow_anonymous true\n",
        scheme: str = "mqtt",
    ) -> None:
        self.port = port or 0
        self._port_fixed = port is not None
        self.workdir = workdir
        self.scheme = scheme
        self.listener_config = listener_config
        self.config = workdir / "mosquitto.conf"
        self.log = workdir / "mosquitto.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if not self.port:
            raise RuntimeError("the broker has no port until it starts (or pass one)")
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the broker and return once it accepts connections."""
        if self._port_fixed:
            self._start_on(self.port)
            return
        self.port = start_on_a_free_port(self._start_on, what="mosquitto")
        self._port_fixed = True  # restarts come back to it

    def _start_on(self, port: int) -> None:
        self.config.write_text(
            f"listener {port} 127.0.0.1\n"
            + self.listener_config
            + "persistence false\nlog_type error\nlog_type warning\n"
        )
        start = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as log:
            proc = subprocess.Popen(
                [MOSQUITTO, "-c", str(self.config)], stdout=log, stderr=subprocess.STDOUT
            )
        self.proc = proc

        def exited() -> None:
            said = self.log.read_bytes()[start:].decode(errors="replace")
            self.proc = None
            if "Address already in use" in said:
                raise PortTakenError(port)
            raise RuntimeError(f"mosquitto exited ({proc.returncode}) at its start: {said}")

        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                exited()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    pass
            except OSError:
                time.sleep(0.05)
                continue
            # something answers; a broker that lost the bind to it exits at once
            time.sleep(0.1)
            if proc.poll() is not None:
                exited()
            return
        raise TimeoutError(f"mosquitto did not listen on port {port} in 10 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None
        if self.port:
            _wait_port_closed(self.port)

    def restart(self) -> None:
        self.stop()
        self.start()

    def cli(self) -> MqttCli:
        return MqttCli(self.port)


class MqttCli:
    """mosquitto_pub / mosquitto_sub against one broker."""

    def __init__(self, port: int) -> None:
        self.port = port

    def pub(self, topic: str, payload: bytes | str, *, qos: int = 1, retain: bool = False) -> None:
        """Publish one message (the payload goes through stdin: any size, any bytes)."""
        data = payload.encode() if isinstance(payload, str) else payload
        args = ["mosquitto_pub", "-h", "127.0.0.1", "-p", str(self.port), "-t", topic]
        args += ["-q", str(qos), "-s"] + (["-r"] if retain else [])
        if not data:
            args = [a for a in args if a != "-s"] + ["-n"]
        subprocess.run(args, input=data, check=True, timeout=20)

    def sub(self, topic: str, *, count: int = 1, timeout_s: int = 20) -> list[tuple[str, bytes]]:
        """Wait for ``count`` messages on ``topic``; (topic, payload) pairs.

        Retained messages count (a late subscriber's view).
        """
        proc = self.sub_start(topic, count=count, timeout_s=timeout_s)
        return self.sub_collect(proc)

    def sub_start(
        self, topic: str, *, count: int | None = 1, timeout_s: int = 20
    ) -> subprocess.Popen[bytes]:
        """Start a subscriber and return once the broker acknowledged the subscription.

        mosquitto_sub -d prints the SUBACK (line-buffered through stdbuf), so no sleep
        is needed; collect the messages with ``sub_collect``.
        """
        args = ["stdbuf", "-oL", "mosquitto_sub", "-d", "-h", "127.0.0.1", "-p", str(self.port)]
        args += ["-t", topic, "-W", str(timeout_s), "-F", "%t\t%x", "-q", "1"]
        args += [] if count is None else ["-C", str(count)]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert proc.stdout is not None
        while True:
            line = proc.stdout.readline()
            if not line:
                proc.stdout.close()
                raise RuntimeError(f"mosquitto_sub ended before subscribing: {proc.wait()}")
            if b"received SUBACK" in line:
                return proc

    def wait_for(
        self, topic: str, predicate: Callable[[str, bytes], bool], *, timeout_s: int = 30
    ) -> tuple[str, bytes]:
        """The first message on ``topic`` (retained ones included) that ``predicate`` accepts."""
        proc = self.sub_start(topic, count=None, timeout_s=timeout_s)
        assert proc.stdout is not None
        try:
            for raw in proc.stdout:
                name, tab, hexdata = raw.decode().rstrip("\n").partition("\t")
                if tab and predicate(name, bytes.fromhex(hexdata)):
                    return name, bytes.fromhex(hexdata)
            raise TimeoutError(f"no matching message on {topic} within {timeout_s} s")
        finally:
            proc.terminate()
            proc.wait(10)
            proc.stdout.close()

    @staticmethod
    def sub_collect(proc: subprocess.Popen[bytes]) -> list[tuple[str, bytes]]:
        """The (topic, payload) pairs a subscriber received (waits for it to end)."""
        out, _ = proc.communicate(timeout=60)
        messages = []
        for line in out.decode().splitlines():
            topic, tab, hexdata = line.partition("\t")
            if tab:  # -d debug lines have no tab; formatted messages do
                messages.append((topic, bytes.fromhex(hexdata)))
        return messages


def require(*tools: str) -> None:
    """Fail (not skip) when a tool the test needs is missing, as the promtool and Prometheus
    fixtures do: a run without a broker must not pass by leaving the MQTT tests out.
    Deselect them explicitly instead, with ``-m "not integration"``."""
    found = {
        t: Path(MOSQUITTO).exists() if t == "mosquitto" else bool(shutil.which(t)) for t in tools
    }
    missing = [t for t, ok in found.items() if not ok]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} not found: install Debian's mosquitto and mosquitto-clients "
            "(scripts/test does), or deselect these tests with -m 'not integration'"
        )


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[Mosquitto]:
    """A fresh broker for one test, stopped afterwards."""
    require("mosquitto")
    broker = Mosquitto(tmp_path)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mosquitto]:
    """One broker shared by the tests of a module (each test uses its own ids)."""
    require("mosquitto")
    b = Mosquitto(tmp_path_factory.mktemp("mosquitto"))
    b.start()
    try:
        yield b
    finally:
        b.stop()


REPO = Path(__file__).resolve().parents[1]


class Served:
    """``python -m console.cli serve`` in a subprocess (so it can be killed uncleanly)."""

    def __init__(
        self,
        url: str,
        cluster: str,
        *extra: str,
        scenario: str = "tiny",
        env: dict[str, str] | None = None,
    ) -> None:
        self.cluster = cluster
        self.log = REPO / ".pytest_cache" / f"serve-{cluster}.log"
        self.log.parent.mkdir(exist_ok=True)
        args = [sys.executable, "-m", "console.cli", "serve", scenario, "--mqtt", url]
        metrics = [] if "--metrics" in extra else ["--no-metrics"]
        args += ["--cluster", cluster, *metrics, "--telemetry-hz", "10", *extra]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                args,
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_online(self, cli: MqttCli, *, timeout_s: int = 60) -> None:
        """Return once the served emulator said ``online`` (its retained status); the
        bound is against a hang, wide for a loaded machine (a start loads the kernels)."""
        try:
            cli.wait_for(
                f"fabtop/{self.cluster}/status", lambda _t, p: p == b"online", timeout_s=timeout_s
            )
        except TimeoutError:
            raise TimeoutError(f"fabtop serve never said online:\n{self.output()}") from None

    def stop(self) -> int:
        """SIGTERM and wait: the exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(30)

    def kill(self) -> None:
        """SIGKILL: no chance to say goodbye (the broker sends the will)."""
        self.proc.kill()
        self.proc.wait(30)
