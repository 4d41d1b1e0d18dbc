"""Parsing the exporter's command-line options: ``--metrics HOST:PORT``, ``--link-metrics``.

Both parsers raise ``ValueError`` with a message meant for the operator, so the
CLI modules can show it as is (``parser.error(str(exc))``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9464
DEFAULT_LINK_METRICS = "top:50"

_HOST_RE = re.compile(r"^[A-Za-z0-9._-]+$")


class OptionError(ValueError):
    """A bad option value; ``str()`` names the option, ``reason`` is the rest."""

    def __init__(self, option: str, text: str, reason: str) -> None:
        super().__init__(f"{option} {text!r}: {reason}")
        self.option = option
        self.reason = f"{text!r}: {reason}"


def _bad_address(text: str, reason: str) -> OptionError:
    return OptionError("--metrics", text, reason)


def _bad_links(text: str, reason: str) -> OptionError:
    return OptionError("--link-metrics", text, reason)


def parse_metrics_address(text: str) -> tuple[str, int]:
    """Split ``HOST:PORT`` (or ``[IPv6]:PORT``, or ``:PORT`` for the default host).

    Args:
        text: what the operator wrote after ``--metrics``.

    Returns:
        ``(host, port)``; port 0 asks the OS for a free port.

    Raises:
        ValueError: naming what is wrong (missing port, bad port number, bad host).
    """
    raw = text.strip()
    if not raw:
        raise _bad_address(text, "empty address; expected HOST:PORT, e.g. 127.0.0.1:9464")
    if raw.startswith("["):  # [::1]:9464
        end = raw.find("]")
        if end < 0 or not raw[end + 1 :].startswith(":"):
            raise _bad_address(text, "expected [IPv6]:PORT, e.g. [::1]:9464")
        host, port_text = raw[1:end], raw[end + 2 :]
        if not host or not re.fullmatch(r"[0-9A-Fa-f:.%\w]+", host):
            raise _bad_address(text, f"{host!r} is not an IPv6 address")
    else:
        host, sep, port_text = raw.rpartition(":")
        if not sep:
            raise _bad_address(text, "missing port; expected HOST:PORT, e.g. 127.0.0.1:9464")
        if ":" in host:
            raise _bad_address(text, "write an IPv6 host in brackets, e.g. [::1]:9464")
        host = host or DEFAULT_HOST
        if not _HOST_RE.match(host):
            raise _bad_address(text, f"{host!r} is not a host name or address")
    if not port_text.isdigit():
        raise _bad_address(text, f"port {port_text!r} is not a number")
    port = int(port_text)
    if port > 65535:
        raise _bad_address(text, f"port {port} is out of range 0..65535")
    return host, port


@dataclass(frozen=True, slots=True)
class LinkMetrics:
    """How many per-link series to export (see docs/METRICS.md for the counts).

    Attributes:
        mode: ``"all"`` (every link), ``"top"`` (the hottest ``top_n`` plus the
            links with errors), or ``"switch"`` (no per-link series).
        top_n: N for ``"top"``; 0 otherwise.
    """

    mode: str
    top_n: int = 0

    def __str__(self) -> str:
        return f"top:{self.top_n}" if self.mode == "top" else self.mode


def parse_link_metrics(text: str) -> LinkMetrics:
    """Parse ``all``, ``top:N`` (N >= 1) or ``switch``.

    Raises:
        ValueError: naming the accepted forms.
    """
    raw = text.strip().lower()
    if raw in ("all", "switch"):
        return LinkMetrics(raw)
    if raw.startswith("top:"):
        n_text = raw[4:]
        if not n_text.isdigit() or int(n_text) < 1:
            raise _bad_links(text, "N in top:N must be a whole number >= 1, e.g. top:50")
        return LinkMetrics("top", int(n_text))
    hint = " (did you mean top:N, e.g. top:50?)" if raw.startswith("top") else ""
    raise _bad_links(text, f"expected 'all', 'top:N' (e.g. top:50) or 'switch'{hint}")
