"""User/password and TLS: a served emulator behind a broker that demands both."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._mosquitto import REPO, Mosquitto, Served, require

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secure() -> Iterator[tuple[Mosquitto, Path]]:
    """A broker on TLS (self-signed certificate for 127.0.0.1) with user 'ops' / 'pw-1'."""
    require("mosquitto", "mosquitto_passwd", "openssl")
    # mosquitto (started as root) drops to its own user before reading the password file,
    # so the files live in a directory that user can reach (pytest's tmp_path is 0700).
    d = Path(tempfile.mkdtemp(prefix="fabtop-mqtt-"))
    d.chmod(0o755)
    cert, key, pwfile = d / "cert.pem", d / "key.pem", d / "passwd"
    openssl = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    subject = ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    subprocess.run(
        [*openssl, *subject, "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    subprocess.run(["mosquitto_passwd", "-b", "-c", str(pwfile), "ops", "pw-1"], check=True)
    for f in (cert, key, pwfile):
        f.chmod(0o644)
    broker = Mosquitto(
        d,
        listener_config=(
            f"allow_anonymous false\npassword_file {pwfile}\ncertfile {cert}\nkeyfile {key}\n"
        ),
        scheme="mqtts",
    )
    try:
        broker.start()
        yield broker, cert
    finally:
        broker.stop()
        shutil.rmtree(d, ignore_errors=True)


def fabtop(*args: str, password: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, FABTOP_MQTT_PASSWORD=password)
    return subprocess.run(
        [sys.executable, "-m", "console.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_serve_and_inject_over_tls_with_a_password(secure: tuple[Mosquitto, Path]) -> None:
    broker, cert = secure
    url = f"mqtts://ops@127.0.0.1:{broker.port}?ca={cert}"
    served = Served(url, "sec", env={"FABTOP_MQTT_PASSWORD": "pw-1"})
    try:
        # wait for "online" through the CLI itself: mosquitto_sub would need the same TLS setup
        r = fabtop(
            "watch",
            "--mqtt",
            url,
            "--cluster",
            "sec",
            "--count",
            "1",
            "--timeout",
            "30",
            password="pw-1",
        )
        assert r.stdout.strip() == "status online", (r.stderr, served.output())
        r = fabtop(
            "inject",
            "link_down",
            "leaf00->spine00",
            "--mqtt",
            url,
            "--cluster",
            "sec",
            password="pw-1",
        )
        assert r.returncode == 0 and r.stdout.startswith("ok"), r.stderr

        r = fabtop(
            "inject",
            "link_down",
            "leaf00->spine00",
            "--mqtt",
            url,
            "--cluster",
            "sec",
            password="wrong",
        )
        assert r.returncode == 3 and "refused the login" in r.stderr, r.stderr

        plain = f"mqtts://ops@127.0.0.1:{broker.port}"  # the system CAs do not know this cert
        r = fabtop(
            "inject",
            "link_down",
            "leaf00->spine00",
            "--mqtt",
            plain,
            "--cluster",
            "sec",
            password="pw-1",
        )
        assert r.returncode == 3 and "TLS" in r.stderr and "certificate" in r.stderr, r.stderr
    finally:
        assert served.stop() == 0, served.output()
