"""``fabtop console --mqtt``: the console app on a remote emulator, driven by key presses.

The emulator runs in a ``fabtop serve`` subprocess; the app runs here on an
``MqttSource`` (what ``fabtop console --mqtt URL`` builds).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from console.app import FabtopApp
from console.screens.fault_form import FaultFormScreen
from console.widgets.faults_panel import FaultsPanel
from exporters.mqtt.remote import MqttSource
from exporters.mqtt.url import parse_broker_url
from tests._mosquitto import Mosquitto, Served, broker  # noqa: F401  (fixture)
from tests.helpers import until

pytestmark = pytest.mark.integration

LINK = "leaf01->spine01"
SIZE = (140, 44)


@pytest.fixture(scope="module")
def served(broker: Mosquitto) -> Iterator[Served]:  # noqa: F811
    # 1 Hz telemetry: Pilot waits for the app to be idle after each key, and every new
    # snapshot means a redraw; at 10 Hz a key press took ~3 s on a 2-core machine.
    s = Served(broker.url, "con", "--telemetry-hz", "1")
    try:
        s.wait_online(broker.cli())
        yield s
    finally:
        s.stop()


async def test_remote_console_shows_the_served_fabric_and_injects(
    broker: Mosquitto,  # noqa: F811
    served: Served,
) -> None:
    async with MqttSource(parse_broker_url(broker.url), "con") as source:
        app = FabtopApp(source, render_interval_s=0.05)
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: app.view.snapshot is not None, "the first remote snapshot")
            snap = app.view.snapshot
            assert snap.scenario == "tiny" and LINK in snap.links.index

            await pilot.press("i")
            assert isinstance(app.screen, FaultFormScreen)
            await pilot.press(*LINK, "enter")
            await until(lambda: not isinstance(app.screen, FaultFormScreen), "the form to close")

            # The served engine applied it: the broker's telemetry (read independently) shows it.
            _, payload = await asyncio.to_thread(
                broker.cli().wait_for,
                "fabtop/con/telemetry",
                lambda _t, p: any(f["target"] == LINK for f in json.loads(p)["faults"]),
            )
            assert json.loads(payload)["faults"][0]["kind"] == "link_down"
            # and the console shows it in its faults panel
            faults = app.query_one(FaultsPanel)
            await until(lambda: faults.row_count == 1, "the fault in the faults panel")
            assert faults.get_row(next(iter(faults.rows)).value)[2].plain == LINK
            await pilot.press("q")
