"""What scraping /metrics costs a live engine: its speed under no load, 4 scrapes/s,
and 4 clients scraping back-to-back, in one run.

The engine runs as in ``fabtop serve`` (its own event loop, ticks in a worker
thread, the exporter's HTTP server in its own threads) on a scenario at a target
speed, with the tick fixed (``--max-tick 0``: an adaptive tick would hide the cost by
lengthening the tick). Each phase warms up, then measures simulated seconds per wall
second over ``--seconds``. The scrapers are separate processes, as Prometheus would
be, each reading whole responses in a loop. Two more phases tell the exporter's
share from the machine's: the same 4 clients on a second exporter of the same
engine with the response pacing off (cache only), and on a static HTTP server in
another process (what the clients alone cost a shared machine).

    python benchmarks/bench_scrape_load.py                      # default scenario, 1e-3
    python benchmarks/bench_scrape_load.py --scenario tiny --seconds 5
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from exporters.prometheus import start_metrics_server
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario

STATIC = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
body = b"x" * int(sys.argv[1])
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""

SCRAPER = """
import sys, time, urllib.request
url, seconds, period = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
end, n, size = time.monotonic() + seconds, 0, 0
while time.monotonic() < end:
    start = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            size += len(r.read())
            n += 1
    except OSError:
        pass
    if period > 0:
        time.sleep(max(0.0, period - (time.monotonic() - start)))
print(n, size)
"""


class Running:
    """An engine on its own event loop in a thread, with the exporter."""

    def __init__(self, scenario: str, speed: float, link_metrics: str) -> None:
        self.engine = Engine(Fabric.from_scenario(load_scenario(scenario)), speed=speed)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.server = start_metrics_server(
            lambda: self.engine.bus.latest,
            port=0,
            link_metrics=link_metrics,
            health=lambda: self.engine.health,
        )
        self.unpaced = start_metrics_server(
            lambda: self.engine.bus.latest, port=0, link_metrics=link_metrics, max_rate=0
        )

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.engine.run())

    def start(self) -> Running:
        self.thread.start()
        while self.engine.bus.latest is None:
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.engine.stop)
        self.thread.join(30)
        self.server.close()
        self.unpaced.close()

    def speed_over(self, seconds: float) -> float:
        """Simulated seconds per wall second over the next ``seconds``."""
        sim0, wall0 = self.engine.fabric.sim_time_s, time.monotonic()
        time.sleep(seconds)
        return (self.engine.fabric.sim_time_s - sim0) / (time.monotonic() - wall0)


def phase(
    run: Running, url: str, clients: int, period_s: float, warmup_s: float, seconds: float
) -> tuple[float, int, int]:
    """(engine speed, scrapes, bytes) with ``clients`` scrapers (period 0: back-to-back)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRAPER, url, str(warmup_s + seconds), str(period_s)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(clients)
    ]
    time.sleep(warmup_s)
    speed = run.speed_over(seconds)
    scrapes = size = 0
    for p in procs:
        out, _ = p.communicate(timeout=120)
        n, b = (int(x) for x in out.split())
        scrapes, size = scrapes + n, size + b
    return speed, scrapes, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="default")
    ap.add_argument("--speed", type=float, default=1e-3)
    ap.add_argument("--link-metrics", default="top:50")
    ap.add_argument("--seconds", type=float, default=10.0, help="measured per phase")
    ap.add_argument("--warmup", type=float, default=3.0)
    args = ap.parse_args()
    run = Running(args.scenario, args.speed, args.link_metrics).start()
    try:
        time.sleep(args.warmup)  # first ticks, caches
        with urllib.request.urlopen(run.server.url) as r:
            scrape_bytes = len(r.read())
        static = subprocess.Popen(
            [sys.executable, "-c", STATIC, str(scrape_bytes)], stdout=subprocess.PIPE, text=True
        )
        assert static.stdout is not None
        static_url = f"http://127.0.0.1:{int(static.stdout.readline())}/metrics"
        rows = []
        for name, url, clients, period in (
            ("none", run.server.url, 0, 0.0),
            ("4 scrapes/s", run.server.url, 1, 0.25),
            ("4 clients back-to-back", run.server.url, 4, 0.0),
            ("  same, pacing off", run.unpaced.url, 4, 0.0),
            ("  same, static server", static_url, 4, 0.0),
        ):
            speed, scrapes, size = phase(run, url, clients, period, args.warmup, args.seconds)
            rows.append((name, speed, scrapes / (args.warmup + args.seconds), size))
        static.terminate()
        cache = run.server.cache
        encodes, hits, refused = cache.encodes, cache.hits, cache.refused
    finally:
        run.stop()
    base = rows[0][1]
    print(
        f"scenario {args.scenario}, target speed {args.speed:g}, --link-metrics "
        f"{args.link_metrics}, {args.seconds:g} s per phase"
    )
    print(f"{'scrape load':<24} {'engine speed':>12} {'vs none':>8} {'scrapes/s':>10}")
    for name, speed, rate, _ in rows:
        print(f"{name:<24} {speed:>12.3g} {speed / base:>8.3f} {rate:>10.1f}")
    print(f"scrape size {scrape_bytes} bytes")
    print(f"paced exporter: encodings {encodes}, cached answers {hits}, refused (503) {refused}")
    print(f"speed ratio, 4 back-to-back scrapers vs none: {rows[2][1] / base:.3f}")


if __name__ == "__main__":
    main()
