"""The remote console (``fabtop console --mqtt``) when the broker or the emulator is gone,
and its compare key.

The header said ``▶ running`` with frozen figures for as long as the broker or the
emulator was away: the note saying so sat at the end of the line, cut off below some 190
columns. The state itself now says it at any width, the figures it still shows are
marked stale, and a console on a stopped emulator says so instead of ``… starting``.
The compare key said to start with ``--compare``, which neither ``fabtop console`` nor
``fabtop serve`` has: a remote console leaves it out of its footer and says why.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from functools import partial

import pytest
from textual.widgets import Footer

from console.app import FabtopApp
from console.screens.help import HelpScreen
from console.source import link_loss_of, served_elsewhere
from console.widgets.status_header import HeaderState, fitted
from exporters.mqtt.client import make_client
from exporters.mqtt.remote import NO_BROKER, OFFLINE, SILENT, UNHEARD, LinkLoss, MqttSource
from exporters.mqtt.url import parse_broker_url
from fabric_core.runtime.snapshot import Snapshot
from tests._mosquitto import Mosquitto, mosquitto  # noqa: F401  (fixture)
from tests.console_synthetic import StubSource, snapshot
from tests.helpers import settle, until

LOSSES = {
    NO_BROKER: ("✕ no broker", LinkLoss(NO_BROKER, "no broker at mqtt://127.0.0.1:1883")),
    OFFLINE: ("⏹ offline", LinkLoss(OFFLINE, "emulator tiny offline (its status)")),
    UNHEARD: ("✕ not heard", LinkLoss(UNHEARD, "nothing heard from emulator tiny")),
    SILENT: ("✕ silent", LinkLoss(SILENT, "no telemetry from emulator tiny for 6 s")),
}
WHERE = "mqtt://127.0.0.1:1883 fabtop/tiny"


def measured(snap: Snapshot) -> Snapshot:
    """``snap`` as a running engine reports it: with the speed it measured."""
    return replace(snap, measured_speed=2e-3, target_speed=2e-3)


# ------------------------------------------------------------------ the header


@pytest.mark.parametrize("state", LOSSES)
@pytest.mark.parametrize("width", [80, 100, 200])
def test_a_lost_link_is_the_headers_state_at_any_width(state: str, width: int) -> None:
    label, loss = LOSSES[state]
    snap = measured(snapshot())
    line = fitted(HeaderState(snap, False, "on the server", WHERE, False, link_loss=loss), width)
    assert line.plain.startswith((f" {label} ", f" fabtop  {label} ")), line.plain
    assert "running" not in line.plain and len(line.plain) <= width
    # the figures stopped changing: marked stale, and no speed measured "now"
    assert " stale: faults 0 │ sim " in line.plain and "(now " not in line.plain
    sim = line.plain.index("sim ")
    assert any(s.start <= sim < s.end and "dim" in str(s.style) for s in line.spans)
    assert snap.cluster in line.plain and snap.profile in line.plain


def test_the_header_is_back_to_normal_when_the_link_is() -> None:
    line = fitted(HeaderState(measured(snapshot()), False, None, WHERE, False), 100)
    assert line.plain.startswith(" ▶ running ") and "stale" not in line.plain
    assert "(now 2e-3×)" in line.plain


@pytest.mark.parametrize("state", [OFFLINE, UNHEARD])
def test_without_a_snapshot_the_header_names_the_cluster_not_starting(state: str) -> None:
    label, loss = LOSSES[state]
    line = fitted(HeaderState(None, False, "on the server", WHERE, False, link_loss=loss), 80)
    assert line.plain.startswith(f" fabtop  {label}  {loss.note} "), line.plain
    assert "starting" not in line.plain and "tiny" in line.plain


# ------------------------------------------------------------------ the source


async def status(url: str, cluster: str, said: bytes) -> None:
    """Publish ``said`` as the retained status of ``cluster`` (as ``fabtop serve`` does)."""
    async with make_client(parse_broker_url(url), role="test") as client:
        await client.publish(f"fabtop/{cluster}/status", said, qos=1, retain=True)


@pytest.mark.integration
async def test_the_source_says_offline_no_broker_and_unheard_and_back(
    mosquitto: Mosquitto,  # noqa: F811
) -> None:
    config = parse_broker_url(mosquitto.url)
    source = MqttSource(config, "gone", unheard_after_s=0.5)
    assert source.link_loss is None  # connecting: not yet a loss
    async with source:
        assert await source.wait_connected(30)
        await until(lambda: source.link_loss is not None, "nothing heard from the emulator")
        assert source.link_loss == (UNHEARD, "nothing heard from emulator gone")
        assert "nothing heard from the emulator" in source.description

        await status(mosquitto.url, "gone", b"online")
        await until(lambda: source.link_loss is None, "online")
        assert source.description == f"{config.display()} fabtop/gone"
        await status(mosquitto.url, "gone", b"offline")
        await until(lambda: source.link_loss is not None, "offline")
        assert source.link_loss == (OFFLINE, "emulator gone offline (its status)")

        await asyncio.to_thread(mosquitto.stop)
        await until(lambda: not source.connected, "the broker to be gone")
        assert source.link_loss == (NO_BROKER, f"no broker at {config.display()}")
        assert "broker unreachable" in source.description

        # a restarted broker forgot the retained status: the one of before is not taken
        # for the emulator's word, nothing is heard from it
        await asyncio.to_thread(mosquitto.start)
        assert await source.wait_connected(30)
        assert source.link_loss in (None, (UNHEARD, "nothing heard from emulator gone"))
        await until(lambda: source.link_loss is not None, "nothing heard after the restart")
        assert source.link_loss == (UNHEARD, "nothing heard from emulator gone")


@pytest.mark.integration
async def test_an_online_emulator_whose_telemetry_stops_is_called_silent(
    mosquitto: Mosquitto,  # noqa: F811
) -> None:
    """A stopped or hung `fabtop serve` (SIGSTOP) keeps its status online until the broker
    gives up on its connection and sends its will, some 15 s: the header said running,
    over figures that did not move. Its telemetry, at least one message a second, stops."""
    from tests.test_mqtt_bridge import serving

    async with serving(mosquitto.url, "frozen", telemetry_hz=10) as served:
        source = MqttSource(parse_broker_url(mosquitto.url), "frozen", silent_after_s=1.0)
        async with source:
            await until(lambda: source.latest() is not None, "the first telemetry", 60)
            assert source.link_loss is None
            served.bridge.stop()  # (its status stays online: a clean stop says offline,
            await until(lambda: not served.bridge.connected, "the bridge to stop", 60)
            await status(mosquitto.url, "frozen", b"online")  # put back, as a hung one)
            await until(lambda: source.link_loss is not None, "the telemetry to stop", 60)
            loss = source.link_loss
            assert loss is not None and loss.state == SILENT, loss
            assert loss.note.startswith("no telemetry from emulator frozen for ")


def test_only_a_remote_source_is_served_elsewhere() -> None:
    local = StubSource(snapshot())
    remote = MqttSource(parse_broker_url("mqtt://127.0.0.1:1"), "h")
    assert not served_elsewhere(local) and link_loss_of(local) is None
    assert served_elsewhere(remote) and link_loss_of(remote) is None  # (not started)


# ------------------------------------------------------------------ the app


class RemoteStub(StubSource):
    """A remote source whose link the test breaks (``MqttSource``'s, without a broker)."""

    description = WHERE

    def __init__(self, snap: Snapshot) -> None:
        super().__init__(snap)
        self.link_loss: LinkLoss | None = None

    def lose(self, loss: LinkLoss | None) -> None:
        """Break the link (None: restore it); the description changes as ``MqttSource``'s
        does, which is what makes the app redraw."""
        self.link_loss = loss
        self.description = WHERE if loss is None else f"{WHERE} ({loss.note})"


def header_line(app: FabtopApp) -> str:
    """The header as the terminal shows it."""
    return app.header_bar.render_line(0).text


def shows_state(app: FabtopApp, label: str) -> bool:
    """Whether the header's state reads ``label`` (after the fabtop badge, if there is
    room for it)."""
    return header_line(app).removeprefix(" fabtop ").startswith(f" {label} ")


def footer_actions(app: FabtopApp) -> set[str]:
    """The actions of the keys the footer shows."""
    footer = app.query_one(Footer)
    return {key.action for key in footer.query("FooterKey")}  # type: ignore[attr-defined]


async def test_the_console_says_at_once_when_the_link_is_lost_and_when_it_is_back() -> None:
    src = RemoteStub(measured(snapshot()))
    app = FabtopApp(src, render_interval_s=0.05, metrics_address="on the server")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, partial(shows_state, app, "▶ running"))
        for label, loss in LOSSES.values():
            src.lose(loss)
            await settle(pilot, partial(shows_state, app, label))
            assert " stale: " in header_line(app), label
        src.lose(None)
        await settle(pilot, partial(shows_state, app, "▶ running"))
        assert "stale" not in header_line(app)


async def test_a_remote_console_has_no_compare_key_and_says_why() -> None:
    app = FabtopApp(RemoteStub(snapshot()), render_interval_s=0.05)
    async with app.run_test(size=(120, 30)) as pilot:
        # (the footer's keys come with its first layout: on a busy machine after more than
        # one pause, as in session 45's CI check)
        await settle(pilot, lambda: "inject" in footer_actions(app))
        assert "compare" not in footer_actions(app)
        await pilot.press("c")
        await pilot.pause()
        said = [n.message for n in app._notifications]
        assert any("needs a local run (`fabtop --compare PROFILE`)" in m for m in said), said
        assert not any("start fabtop with --compare" in m for m in said)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "Compare" not in dict(app.screen.app_bindings).values()


async def test_a_local_console_keeps_its_compare_key_listed_once() -> None:
    app = FabtopApp(StubSource(snapshot()), render_interval_s=0.05)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert "compare" in footer_actions(app)
        await pilot.press("c")
        await pilot.pause()
        assert any("--compare roce-400g" in n.message for n in app._notifications)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert [d for _, d in app.screen.app_bindings].count("Compare") == 1
