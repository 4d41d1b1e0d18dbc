"""Issue 20, defect 4: the documented mosquitto ACL (exporters/mqtt/acl/), on a real broker.

The broker runs the example ``mosquitto.conf`` and ``fabtop.acl`` as shipped (only the
paths and the port changed); ``fabtop serve`` logs in as ``fabtop``, an ``operator``
injects a fault and gets the reply, a ``viewer`` sees telemetry but its command is
dropped by the broker: no reply, no fault.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._mosquitto import REPO, Mosquitto, MqttCli, Served, require

pytestmark = pytest.mark.integration

ACL_DIR = REPO / "exporters" / "mqtt" / "acl"
USERS = {"fabtop": "pw-serve", "operator": "pw-op", "viewer": "pw-view"}
CLUSTER = "acl"


@pytest.fixture(scope="module")
def secured() -> Iterator[Mosquitto]:
    require("mosquitto", "mosquitto_passwd")  # fails, not skips, when they are missing
    d = Path(tempfile.mkdtemp(prefix="fabtop-acl-"))
    d.chmod(0o755)  # mosquitto drops to its own user before reading the files
    pwfile, acl = d / "fabtop.passwd", d / "fabtop.acl"
    for i, (user, password) in enumerate(USERS.items()):
        create = ["-c"] if i == 0 else []
        subprocess.run(["mosquitto_passwd", "-b", *create, str(pwfile), user, password], check=True)
    shutil.copy(ACL_DIR / "fabtop.acl", acl)
    conf = (ACL_DIR / "mosquitto.conf").read_text()
    conf = conf.replace("/etc/mosquitto/fabtop.passwd", str(pwfile))
    conf = conf.replace("/etc/mosquitto/fabtop.acl", str(acl))
    _comments, rest = conf.split("listener 1883 127.0.0.1\n")  # Mosquitto adds the listener
    for f in (pwfile, acl):
        f.chmod(0o644)
    broker = Mosquitto(d, listener_config=rest)
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(d, ignore_errors=True)


def _as(user: str, tool: str, *args: str, timeout: int = 20) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [tool, "-h", "127.0.0.1", "-u", user, "-P", USERS[user], *args],
        capture_output=True,
        timeout=timeout,
    )


def _pub(port: int, user: str, topic: str, payload: str) -> None:
    r = _as(user, "mosquitto_pub", "-p", str(port), "-q", "1", "-t", topic, "-m", payload)
    assert r.returncode == 0, r.stderr


def _sub(port: int, user: str, topic: str, *, count: int, wait_s: int) -> list[bytes]:
    r = _as(
        user,
        "mosquitto_sub",
        "-p",
        str(port),
        "-t",
        topic,
        "-C",
        str(count),
        "-W",
        str(wait_s),
        timeout=wait_s + 10,
    )
    return [line for line in r.stdout.splitlines() if line]


def _sub_start(port: int, user: str, topic: str, *, wait_s: int) -> subprocess.Popen[bytes]:
    """A subscriber as ``user``, returned once the broker acknowledged it (SUBACK)."""
    args = ["stdbuf", "-oL", "mosquitto_sub", "-d", "-h", "127.0.0.1", "-p", str(port)]
    args += ["-u", user, "-P", USERS[user], "-t", topic, "-W", str(wait_s), "-C", "1"]
    args += ["-F", "%t\t%x", "-q", "1"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    for line in proc.stdout:
        if b"received SUBACK" in line:
            return proc
    raise RuntimeError(f"mosquitto_sub as {user} ended before subscribing")


def _inject_as(port: int, user: str, cid: str, *, wait_s: int) -> list[tuple[str, bytes]]:
    """Inject link_down as ``user``; the replies an operator sees on result/<cid>."""
    sub = _sub_start(port, "operator", f"fabtop/{CLUSTER}/result/{cid}", wait_s=wait_s)
    body = json.dumps({"id": cid, "kind": "link_down", "target": "leaf00->spine01"})
    _pub(port, user, f"fabtop/{CLUSTER}/cmd/inject", body)
    return MqttCli.sub_collect(sub)


def test_operator_commands_and_viewer_only_watches(secured: Mosquitto) -> None:
    port = secured.port
    url = f"mqtt://fabtop:{USERS['fabtop']}@127.0.0.1:{port}"
    s = Served(url, CLUSTER)
    try:
        status = _sub(port, "viewer", f"fabtop/{CLUSTER}/status", count=1, wait_s=30)
        assert status == [b"online"], s.output()
        # the viewer watches: telemetry reaches it
        (tm,) = _sub(port, "viewer", f"fabtop/{CLUSTER}/telemetry", count=1, wait_s=20)
        assert json.loads(tm)["running"] is True
        # the viewer's command is dropped by the broker: no reply, and no fault
        assert _inject_as(port, "viewer", "v-1", wait_s=4) == []
        # the operator's command is applied and answered
        ((_, reply),) = _inject_as(port, "operator", "o-1", wait_s=20)
        assert json.loads(reply)["ok"] is True, s.output()
        # only the operator's fault exists
        faults: list[dict[str, object]] = []
        for _ in range(20):
            (tm,) = _sub(port, "viewer", f"fabtop/{CLUSTER}/telemetry", count=1, wait_s=20)
            faults = json.loads(tm)["faults"]
            if faults:
                break
        assert [f["id"] for f in faults] == ["f0"]
        # and the viewer cannot forge the status either
        _pub(port, "viewer", f"fabtop/{CLUSTER}/status", "offline")
        assert _sub(port, "viewer", f"fabtop/{CLUSTER}/status", count=1, wait_s=5) == [b"online"]
        # a second emulator on the cluster is refused: the shipped ACL lets the emulator
        # read its status (it granted write only, and the second one saw nothing)
        serve = ["serve", "tiny", "--mqtt", url, "--cluster", CLUSTER, "--no-metrics"]
        second = subprocess.run(
            [sys.executable, "-m", "console.cli", *serve],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode == 1, second.stderr
        assert f"cluster '{CLUSTER}' is served already" in second.stderr
    finally:
        assert s.stop() == 0
