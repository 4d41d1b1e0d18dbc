"""Loopback ports for the test fixtures' servers.

A port found free can be taken before the server binds it: the other pytest worker's
servers and every outgoing connection draw from the same ephemeral range. So a server
that can report its own port binds port 0 (``fabtop serve --metrics 127.0.0.1:0``), and
one that cannot (mosquitto, Prometheus) is started again on another port when its bind
fails (``start_on_a_free_port``).
"""

from __future__ import annotations

import socket
from collections.abc import Callable

BIND_ATTEMPTS = 5


def free_port() -> int:
    """A TCP port nobody listens on right now (on 127.0.0.1)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PortTakenError(Exception):
    """A server's bind failed because something else holds its port."""


def start_on_a_free_port(start: Callable[[int], None], *, what: str) -> int:
    """Call ``start(port)`` on fresh free ports until it does not raise ``PortTakenError``.

    Returns the port the server listens on. Gives up after ``BIND_ATTEMPTS`` ports.
    """
    for _ in range(BIND_ATTEMPTS):
        port = free_port()
        try:
            start(port)
        except PortTakenError:
            continue
        return port
    raise RuntimeError(f"{what}: every one of {BIND_ATTEMPTS} free ports was taken before it bound")
