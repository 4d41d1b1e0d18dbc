"""Soak: the console, the exporter and a running engine for a long time, under faults.

    python benchmarks/soak.py                         # 30 minutes on the default scenario
    python benchmarks/soak.py --minutes 2 --json soak.json
    python benchmarks/soak.py --profile roce-400g --fault-every 3

One process holds what an operator runs (``fabtop --in-process``): the engine at the
console's default speed, the Textual console (headless, ``App.run_test``, rendering at
its normal rate), and the Prometheus exporter on a free loopback port, scraped once a
second by a client thread. Every ``--fault-every`` seconds a random fault from the
catalogue (a random target of its kind; the kinds the profile's fabric has) is injected,
and cleared one interval later, through the engine's command path as the console sends
them. Resident memory is sampled every 5 s.

At the end it checks, and exits 1 if any check fails:

* no error: every command accepted, every scrape answered 200, the engine alive;
* memory flat: the median RSS of the last quarter within 5 % of the second quarter's
  (the first quarter is warm-up: kernels load, histograms and the event log fill);
* the core's invariants on the fabric after the run: every byte injected is delivered,
  in flight or cancelled (to 1e-6); no negative backlog; no buffer over its size.

It compares the run with itself (second quarter against the last, in one run), since
the machine is shared. ``tests/test_soak.py`` runs a short version in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.app import FabtopApp
from console.cli.tui import DEFAULT_SPEED
from console.source import EngineSource
from exporters.prometheus import start_metrics_server
from fabric_core.commands import ClearFault, InjectFault
from fabric_core.faults.book import FAULT_KINDS
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario

RSS_EVERY_S = 5.0
SCRAPE_EVERY_S = 1.0
SCRAPE_TIMEOUT_S = 10.0  # a scrape that takes longer is a finding


@dataclass
class SoakReport:
    """What a soak run measured and found."""

    scenario: str
    profile: str
    wall_s: float
    simulated_s: float
    faults_injected: int = 0
    commands_refused: list[str] = field(default_factory=list)
    scrapes: int = 0
    scrape_errors: list[str] = field(default_factory=list)
    rss_bytes: list[tuple[float, int]] = field(default_factory=list)
    invariant_errors: list[str] = field(default_factory=list)
    engine_error: str = ""

    def rss_growth(self) -> float:
        """Median RSS of the last quarter over the second quarter's, minus 1."""
        n = len(self.rss_bytes)
        if n < 8:
            return 0.0
        q = n // 4
        second = statistics.median(r for _, r in self.rss_bytes[q : 2 * q])
        last = statistics.median(r for _, r in self.rss_bytes[n - q :])
        return last / second - 1

    def failures(self, rss_tolerance: float = 0.05) -> list[str]:
        """Every failed check, in words (empty: the soak passed)."""
        out = [f"command refused: {c}" for c in self.commands_refused]
        out += [f"scrape failed: {e}" for e in self.scrape_errors[:5]]
        out += self.invariant_errors
        if self.engine_error:
            out.append(f"engine stopped: {self.engine_error}")
        growth = self.rss_growth()
        if growth > rss_tolerance:
            out.append(
                f"resident memory grew {growth:.1%} after warm-up (limit {rss_tolerance:.0%})"
            )
        if self.scrapes == 0:
            out.append("no scrape was made")
        return out


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _random_fault(fabric: Fabric, rng: random.Random) -> InjectFault:
    """A catalogue fault the fabric has, on a random target of its kind."""
    family = fabric.profile.flow_control
    kinds = [
        k
        for k in FAULT_KINDS.values()
        if family in k.fabrics and (k.target != "storage" or fabric.topo.storage.size)
    ]
    kind = rng.choice(kinds)
    topo = fabric.topo
    if kind.target == "link":
        target = rng.choice(list(topo.links.name))
    elif kind.target == "storage":
        target = str(topo.nodes.name[rng.choice(topo.storage.tolist())])
    elif kind.target == "switch":
        switches = [
            n for n, k in zip(topo.nodes.name, topo.nodes.kind, strict=True) if k == "switch"
        ]
        target = rng.choice(switches)
    else:
        target = str(topo.nodes.name[rng.choice(topo.gpus.tolist())])
    return InjectFault(kind=kind.name, target=str(target))


def _scraper(url: str, report: SoakReport, stop: threading.Event) -> None:
    while not stop.wait(SCRAPE_EVERY_S):
        try:
            with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as r:
                r.read()
                if r.status != 200:
                    report.scrape_errors.append(f"HTTP {r.status}")
        except Exception as exc:  # any failure of a scrape is a finding
            report.scrape_errors.append(repr(exc))
        report.scrapes += 1


def check_invariants(fabric: Fabric) -> list[str]:
    """The core's invariants on a fabric after a run, as sentences (empty: all hold)."""
    errors = []
    t = fabric.snapshot().totals
    balance = t.delivered_bytes_total + t.in_flight_bytes + t.cancelled_bytes_total
    if abs(t.injected_bytes_total - balance) > 1e-6 * max(t.injected_bytes_total, 1.0) + 1.0:
        errors.append(
            f"bytes do not balance: injected {t.injected_bytes_total:.6g}, delivered + in "
            f"flight + cancelled {balance:.6g}"
        )
    fl = fabric.flows
    if (fl.backlog < -1e-6).any():
        errors.append(f"negative backlog: {float(fl.backlog.min()):.3g} B")
    if fabric.pfc is None:  # credits: nothing is held past a buffer
        over = fabric.occupancy - fabric.buffer_bytes
        if (over > 1e-3 * fabric.buffer_bytes + 1.0).any():
            errors.append(f"a buffer holds {float(over.max()):.3g} B past its size")
    return errors


async def soak(
    minutes: float,
    scenario: str = "default",
    profile: str | None = None,
    fault_every_s: float = 5.0,
    speed: float = DEFAULT_SPEED,
    seed: int = 1,
) -> SoakReport:
    """Run the soak; see the module docstring."""
    fabric = Fabric.from_scenario(load_scenario(scenario, profile=profile))
    engine = Engine(fabric, speed=speed, max_tick_s=4 * fabric.dt_s)
    server = start_metrics_server(
        lambda: engine.bus.latest, host="127.0.0.1", port=0, health=lambda: engine.health
    )
    report = SoakReport(scenario, fabric.profile.name, 0.0, 0.0)
    stop = threading.Event()
    scraper = threading.Thread(
        target=_scraper, args=(f"http://{server.address}/metrics", report, stop), daemon=True
    )
    app = FabtopApp(EngineSource(engine), metrics_address=str(server.address))
    rng = random.Random(seed)
    start = time.monotonic()
    end = start + 60 * minutes
    try:
        # the console runs its embedded engine as a worker (``FabtopApp._start_engines``)
        async with app.run_test(size=(200, 60)) as pilot:
            scraper.start()
            next_rss = next_fault = start
            open_fault: str | None = None
            while time.monotonic() < end:
                now = time.monotonic()
                failed = [w for w in app.workers if w.group == "engines" and w.is_finished]
                if failed:
                    report.engine_error = repr(failed[0].error) or "the engine returned"
                    break
                if now >= next_rss:
                    report.rss_bytes.append((now - start, _rss_bytes()))
                    next_rss += RSS_EVERY_S
                if now >= next_fault:
                    next_fault += fault_every_s
                    if open_fault is None:
                        cmd = _random_fault(engine.fabric, rng)
                        res = await engine.submit(cmd)
                        if res.ok:
                            open_fault = str(res.detail.get("fault_id"))
                            report.faults_injected += 1
                        else:
                            report.commands_refused.append(f"{cmd.kind} {cmd.target}: {res.error}")
                    else:
                        res = await engine.submit(ClearFault(fault_id=open_fault))
                        if not res.ok:
                            report.commands_refused.append(f"clear {open_fault}: {res.error}")
                        open_fault = None
                await pilot.pause(0.2)
            engine.stop()
            await asyncio.wait_for(app.workers.wait_for_complete(), 30)
    finally:
        # the scraper stops before the server: a scrape that connected while the server
        # shut down would be reset (the listening socket closes with it still unaccepted),
        # a failure of this teardown, not of the exporter
        stop.set()
        if scraper.is_alive():
            scraper.join(timeout=SCRAPE_TIMEOUT_S + 5)
        server.close()
    report.wall_s = time.monotonic() - start
    report.simulated_s = engine.fabric.sim_time_s
    report.invariant_errors = check_invariants(engine.fabric)
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0, help="wall time (default 30)")
    ap.add_argument("--scenario", default="default")
    ap.add_argument("--profile", help="override the scenario's profile")
    ap.add_argument("--fault-every", type=float, default=5.0, help="seconds between faults")
    ap.add_argument("--speed", type=float, default=DEFAULT_SPEED, help="engine speed")
    ap.add_argument("--json", help="also write the report here")
    a = ap.parse_args()
    rep = asyncio.run(soak(a.minutes, a.scenario, a.profile, a.fault_every, a.speed))
    rss = [r for _, r in rep.rss_bytes]
    print(
        f"{rep.scenario} on {rep.profile}: {rep.wall_s / 60:.1f} min wall, "
        f"{rep.simulated_s * 1e3:.3g} ms simulated, {rep.faults_injected} faults injected and "
        f"cleared, {rep.scrapes} scrapes"
    )
    if rss:
        print(
            f"resident memory: {min(rss) / 2**20:.0f}-{max(rss) / 2**20:.0f} MiB, growth after "
            f"warm-up {rep.rss_growth():+.1%} (last quarter's median over the second's)"
        )
    failed = rep.failures()
    print("PASS" if not failed else "FAIL:\n  " + "\n  ".join(failed))
    if a.json:
        Path(a.json).write_text(json.dumps(asdict(rep), indent=2))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
