"""MQTT split mode figures: command round trip, reconnection, telemetry size and rate.

Starts its own mosquitto on a free loopback port, runs an engine + bridge on a
scenario in this process and a remote source beside it (as `fabtop console
--mqtt` does). Not a test: prints figures for the README.

    python benchmarks/mqtt_roundtrip.py [--scenario tiny] [--commands 100]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from exporters.mqtt.bridge import MqttBridge
from exporters.mqtt.remote import MqttSource
from exporters.mqtt.url import parse_broker_url
from fabric_core.commands import Pause, Resume
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from tests._mosquitto import Mosquitto


async def main(scenario: str, commands: int) -> None:
    broker = Mosquitto(Path(tempfile.mkdtemp()))
    broker.start()
    config = parse_broker_url(broker.url)
    engine = Engine(Fabric.from_scenario(load_scenario(scenario)))
    bridge = MqttBridge(config, engine.bus, engine.submit, cluster="bench", telemetry_hz=4)
    tasks = [asyncio.create_task(engine.run()), asyncio.create_task(bridge.run())]
    try:
        async with MqttSource(config, "bench") as source:
            snap = await source.wait_snapshot(30)
            assert snap is not None, source.problem
            # telemetry rate seen by the remote source over 5 s
            t0, n0 = time.monotonic(), bridge.telemetry_sent
            await asyncio.sleep(5)
            rate = (bridge.telemetry_sent - n0) / (time.monotonic() - t0)
            print(f"telemetry: {rate:.2f} msg/s asked 4; {len(snap.links)} links per message")
            # command round trip (publish cmd → engine applies at a tick boundary → result)
            rtt = []
            for i in range(commands):
                cmd = Pause() if i % 2 == 0 else Resume()
                t = time.perf_counter()
                result = await source.submit(cmd)
                rtt.append(time.perf_counter() - t)
                assert result.ok, result
            rtt.sort()
            print(
                f"command round trip over {commands}: median {statistics.median(rtt) * 1e3:.1f} ms,"
                f" p95 {rtt[int(0.95 * len(rtt)) - 1] * 1e3:.1f} ms, max {rtt[-1] * 1e3:.1f} ms"
            )
            # reconnection: broker down 2 s, then up; time until telemetry reaches the source again
            await asyncio.to_thread(broker.stop)
            sim_down = engine.fabric.sim_time_s
            await asyncio.sleep(2)
            tick = engine.fabric.tick
            t = time.monotonic()
            await asyncio.to_thread(broker.start)
            again = await source.wait_snapshot(60, after_tick=tick)
            assert again is not None
            print(
                f"reconnect: telemetry back at the remote source {time.monotonic() - t:.2f} s after"
                f" the broker restarted; simulated time advanced"
                f" {(engine.fabric.sim_time_s - sim_down) * 1e3:.3f} ms across the outage"
            )
    finally:
        bridge.stop()
        engine.stop()
        await asyncio.gather(*tasks, return_exceptions=True)
        broker.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="tiny")
    ap.add_argument("--commands", type=int, default=100)
    a = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)  # reconnection warnings are expected here
    asyncio.run(main(a.scenario, a.commands))
