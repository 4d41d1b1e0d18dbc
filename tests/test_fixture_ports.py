"""The fixtures' servers survive a port taken between finding it free and binding it.

CI once failed when another process took such a port first (``fabtop serve --metrics``);
the broker and Prometheus fixtures now start again on another port.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests._ports as ports
from tests._mosquitto import Mosquitto, require

pytestmark = pytest.mark.integration


@pytest.fixture
def taken_port(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A port something listens on, handed out by ``free_port`` once, as if it had been
    free a moment ago."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = int(holder.getsockname()[1])
        real = ports.free_port
        handed: list[int] = []

        def first_the_taken_one() -> int:
            if not handed:
                handed.append(port)
                return port
            return real()

        monkeypatch.setattr(ports, "free_port", first_the_taken_one)
        yield port


def test_a_broker_whose_port_was_taken_starts_on_another(taken_port: int, tmp_path: Path) -> None:
    require("mosquitto")
    broker = Mosquitto(tmp_path)
    try:
        broker.start()
        assert broker.port not in (0, taken_port)
        broker.cli().pub("t", "x")  # it serves on the port it reports
        broker.restart()  # and comes back to that port
        broker.cli().pub("t", "y")
    finally:
        broker.stop()
    assert "Address already in use" in broker.log.read_text()


def test_a_broker_given_a_taken_port_says_so(taken_port: int, tmp_path: Path) -> None:
    require("mosquitto")
    with pytest.raises(ports.PortTakenError):
        Mosquitto(tmp_path, taken_port).start()


def test_giving_up_names_the_server() -> None:
    def never(port: int) -> None:
        raise ports.PortTakenError(port)

    with pytest.raises(RuntimeError, match="thing: every one of 5 free ports was taken"):
        ports.start_on_a_free_port(never, what="thing")


def test_prometheus_whose_port_was_taken_starts_on_another(taken_port: int, tmp_path: Path) -> None:
    from tests._prometheus import PrometheusServer

    server = PrometheusServer("127.0.0.1:1", tmp_path)
    try:
        assert server.port != taken_port
        assert server.api("status/buildinfo")["version"]  # it answers on the port it reports
    finally:
        server.stop()
