"""Fixtures for the exporter tests: a running engine, scrapes, promtool, a real Prometheus.

Everything listens on 127.0.0.1 on free ports; Prometheus gets its own temporary
config and data directory and is stopped at the end of the module.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from fabric_core.commands import Command, CommandResult
from fabric_core.runtime.snapshot import Snapshot
from tests._ports import PortTakenError, start_on_a_free_port

ROOT = Path(__file__).resolve().parent.parent
GRAFANA_DIR = ROOT / "exporters" / "grafana"
RULES_FILE = GRAFANA_DIR / "fabtop.rules.yml"
DASHBOARD_FILE = GRAFANA_DIR / "fabtop-dashboard.json"


def wait_until(check: Callable[[], Any], timeout_s: float = 20.0, what: str = "") -> Any:
    """Poll ``check`` until it returns something truthy; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what or check}")
        time.sleep(0.2)


# --------------------------------------------------------------------- engine
class EngineThread:
    """An ``Engine`` running flat out on its own event loop in a daemon thread."""

    def __init__(self, scenario: str = "tiny", speed: float = 0.0) -> None:
        """Load ``scenario`` and build the engine (``start`` runs it)."""
        from fabric_core.runtime.engine import Engine
        from fabric_core.runtime.fabric import Fabric
        from fabric_core.runtime.scenario import load_scenario

        self.engine = Engine(Fabric.from_scenario(load_scenario(scenario)), speed=speed)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="engine", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.engine.run())

    def start(self) -> EngineThread:
        """Start the engine and wait for its first snapshot."""
        self._thread.start()
        wait_until(lambda: self.engine.bus.latest is not None, 30, "the first snapshot")
        return self

    def latest(self) -> Snapshot | None:
        """The latest snapshot (what the exporter reads)."""
        return self.engine.bus.latest

    def submit(self, command: Command, timeout_s: float = 30.0) -> CommandResult:
        """Submit a command through the engine's command API and wait for its result."""
        future = asyncio.run_coroutine_threadsafe(self.engine.submit(command), self.loop)
        return future.result(timeout_s)

    def wait_ticks(self, n: int) -> Snapshot:
        """Wait until the published tick has advanced by at least ``n``."""
        snap = self.latest()
        assert snap is not None
        start = snap.tick
        return wait_until(
            lambda: (s := self.latest()) is not None and s.tick >= start + n and s,
            30,
            f"{n} more ticks",
        )

    def stop(self) -> None:
        """Stop the engine and its loop."""
        self.loop.call_soon_threadsafe(self.engine.stop)
        self._thread.join(timeout=30)
        self.loop.close()


# --------------------------------------------------------------------- scrapes
def scrape(url: str, openmetrics: bool = False) -> str:
    """GET ``url`` as Prometheus would (optionally asking for OpenMetrics)."""
    accept = "application/openmetrics-text;version=1.0.0" if openmetrics else "text/plain"
    request = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=30) as response:
        return str(response.read().decode())


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a text-format scrape, keyed by (name, sorted labels)."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[key(s)] = s.value
    return out


def key(s: Sample) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A sample's identity: its name and sorted labels."""
    return s.name, tuple(sorted(s.labels.items()))


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run promtool (Debian package ``prometheus``; ``scripts/test`` installs it)."""
    exe = shutil.which("promtool")
    if exe is None:
        pytest.fail("promtool not found: install Debian's prometheus package (scripts/test does)")
    return subprocess.run(
        [exe, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


# --------------------------------------------------------------------- prometheus
class PrometheusServer:
    """A real Prometheus scraping one target every second and evaluating our rules."""

    def __init__(self, target: str, workdir: Path, rule_files: tuple[Path, ...] = ()) -> None:
        """Write the config for ``target`` (host:port) into ``workdir``."""
        exe = shutil.which("prometheus")
        if exe is None:
            pytest.fail("prometheus not found: install Debian's prometheus package")
        rules = "".join(f"  - {p}\n" for p in rule_files)
        self.config = workdir / "prometheus.yml"
        self.config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
            + (f"rule_files:\n{rules}" if rules else "")
            + "scrape_configs:\n  - job_name: fabtop\n    static_configs:\n"
            + f"      - targets: ['{target}']\n"
        )
        self.exe, self.data = exe, workdir / "data"
        self.log_path = workdir / "prometheus.log"
        self.port = start_on_a_free_port(self._start_on, what="Prometheus")
        self.url = f"http://127.0.0.1:{self.port}"

    def _start_on(self, port: int) -> None:
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [
                self.exe,
                f"--config.file={self.config}",
                f"--storage.tsdb.path={self.data}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        wait_until(lambda: self._ready(port), 30, "Prometheus to be ready")

    def _ready(self, port: int) -> bool:
        if self.process.poll() is not None:
            self._log.close()
            said = self.log_path.read_text()
            if "address already in use" in said:
                raise PortTakenError(port)
            pytest.fail(f"Prometheus exited: {said[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        """GET ``/api/v1/<path>`` and return its ``data`` (fails the test on an error)."""
        query = urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as r:
                body = json.load(r)
        except urllib.error.HTTPError as exc:
            body = json.load(exc)
        if body.get("status") != "success":
            pytest.fail(f"Prometheus {path} {params}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; the result vector (empty = no data)."""
        data = self.api("query", query=expr)
        result = data["result"]
        return result if isinstance(result, list) else [result]

    def stop(self) -> None:
        """Stop Prometheus."""
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()
