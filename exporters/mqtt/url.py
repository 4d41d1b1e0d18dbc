"""Broker URLs: ``mqtt://[user[:password]@]host[:port][?option=value...]``.

``mqtts://`` turns TLS on (default port 8883). Query options:

* ``ca=PATH`` CA bundle to verify the broker with (default: the system's);
* ``cert=PATH``, ``key=PATH`` a client certificate and its key;
* ``insecure=true`` skip certificate and host name checks (tests only);
* ``client_id=NAME`` the MQTT client identifier (default: generated);
* ``keepalive=SECONDS`` (default 15: a dead broker is noticed within ~1.5×).

A password can stay out of the URL (and out of ``ps``): when the URL has a
user and no password, ``FABTOP_MQTT_PASSWORD`` is used. Without a host the
broker is ``127.0.0.1``: nothing reaches beyond the loopback by default.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

DEFAULT_URL = "mqtt://127.0.0.1:1883"
PASSWORD_ENV = "FABTOP_MQTT_PASSWORD"
_SCHEMES = {"mqtt": (False, 1883), "tcp": (False, 1883), "mqtts": (True, 8883), "ssl": (True, 8883)}
_OPTIONS = ("ca", "cert", "key", "insecure", "client_id", "keepalive")


class BrokerUrlError(ValueError):
    """A broker URL that cannot be used; the message says why."""


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Where the broker is and how to log in."""

    host: str = "127.0.0.1"
    port: int = 1883
    username: str | None = None
    password: str | None = None
    tls: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False
    client_id: str | None = None
    keepalive_s: int = 15

    def display(self) -> str:
        """The URL without the password, for logs and headers."""
        scheme = "mqtts" if self.tls else "mqtt"
        user = f"{self.username}@" if self.username else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{user}{host}:{self.port}"

    def tls_context(self) -> ssl.SSLContext | None:
        """The TLS context for this broker, or None without TLS.

        Raises:
            BrokerUrlError: a certificate file cannot be read.
        """
        if not self.tls:
            return None
        try:
            ctx = ssl.create_default_context(cafile=self.ca_file)
            if self.cert_file:
                ctx.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise BrokerUrlError(f"TLS setup failed: {exc}") from None
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx


def parse_broker_url(url: str, *, environ: dict[str, str] | None = None) -> BrokerConfig:
    """Parse a broker URL (see the module docstring).

    Raises:
        BrokerUrlError: unknown scheme, bad port, unknown option, key without cert...
    """
    env = os.environ if environ is None else environ
    text = url.strip()
    if "://" not in text:
        text = "mqtt://" + text  # "host:port" is accepted as a shorthand
    try:
        parts = urlsplit(text)
        port_given = parts.port
    except ValueError as exc:
        raise BrokerUrlError(f"bad broker URL {url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise BrokerUrlError(
            f"unknown scheme {parts.scheme!r} in {url!r}; use mqtt:// or mqtts:// (TLS)"
        )
    if parts.path not in ("", "/"):
        raise BrokerUrlError(
            f"unexpected path {parts.path!r} in {url!r}; the cluster is chosen with --cluster"
        )
    tls, default_port = _SCHEMES[scheme]
    if port_given == 0:
        raise BrokerUrlError(f"port 0 in {url!r}: give the broker's port")
    options: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key not in _OPTIONS:
            raise BrokerUrlError(f"unknown option {key!r} in {url!r}; known: {', '.join(_OPTIONS)}")
        options[key] = value
    insecure = _flag(options.get("insecure", "false"), "insecure")
    if (options.get("ca") or options.get("cert") or insecure) and not tls:
        raise BrokerUrlError(f"TLS options need an mqtts:// URL: {url!r}")
    if options.get("key") and not options.get("cert"):
        raise BrokerUrlError("option 'key' needs 'cert' (the client certificate)")
    try:
        keepalive = int(options.get("keepalive", "15"))
    except ValueError:
        raise BrokerUrlError(
            f"keepalive must be whole seconds, got {options['keepalive']!r}"
        ) from None
    if not 5 <= keepalive <= 3600:
        raise BrokerUrlError(f"keepalive must be between 5 and 3600 s, got {keepalive}")
    username = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    if password is not None and username is None:
        raise BrokerUrlError("a password needs a user name: mqtt://USER:PASSWORD@HOST")
    if username is not None and password is None:
        password = env.get(PASSWORD_ENV)
    return BrokerConfig(
        host=parts.hostname or "127.0.0.1",
        port=port_given if port_given is not None else default_port,
        username=username,
        password=password,
        tls=tls,
        ca_file=options.get("ca") or None,
        cert_file=options.get("cert") or None,
        key_file=options.get("key") or None,
        insecure=insecure,
        client_id=options.get("client_id") or None,
        keepalive_s=keepalive,
    )


def _flag(value: str, name: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("", "0", "false", "no", "off"):
        return False
    raise BrokerUrlError(f"option {name!r} must be true or false, got {value!r}")
