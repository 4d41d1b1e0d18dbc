"""Console logic without a UI: top-N selection, filters, event log, fault form parsing."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from rich.console import Console

from console.eventlog import EventLog
from console.linkview import LinkFilter, LinkRates, top_links
from console.screens.fault_form import build_inject, parse_duration, parse_params
from console.screens.link_detail import counters_table
from console.widgets.scaled_sparkline import scaled_sparkline
from fabric_core.commands import CommandError
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.runtime.snapshot import Event, LinkStatus
from tests.console_synthetic import snapshot


def names(snap, idx) -> list[str]:
    return [snap.links.name[i] for i in idx]


def test_top_links_orders_hottest_first_and_breaks_ties_by_link() -> None:
    snap = snapshot(utilisation=[0.2, 0.9, 0.2, 0.5])
    rates = LinkRates.zeros(len(snap.links))
    idx = top_links(snap, rates, column="util", limit=3)
    assert idx.tolist() == [1, 3, 0]  # 0 and 2 tie: the lower index wins, every time
    coolest = top_links(snap, rates, column="util", reverse=True, limit=2)
    assert all(snap.link_state.utilisation[i] == 0 for i in coolest)


def test_top_links_by_credits_puts_fewest_credits_first() -> None:
    snap = snapshot(utilisation=[0.1, 0.8, 0.3])
    idx = top_links(snap, LinkRates.zeros(len(snap.links)), column="credits", limit=1)
    assert idx.tolist() == [1]


def test_filter_words_match_names_and_states_combine() -> None:
    snap = snapshot(status={"leaf00->spine01": int(LinkStatus.DOWN)})
    ports = LinkFilter("leaf00").mask(snap)
    assert ports is not None
    assert all("leaf00" in n for n in names(snap, np.flatnonzero(ports)))
    assert int(ports.sum()) == 2 * (4 + 2)  # 4 GPUs and 2 spines, both directions
    down = LinkFilter("leaf00 is:down").mask(snap)
    assert down is not None
    assert names(snap, np.flatnonzero(down)) == ["leaf00->spine01"]
    assert LinkFilter("  ").mask(snap) is None


def test_filter_rejects_an_unknown_state_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown state 'broken'.*is:down"):
        LinkFilter("is:broken")


def ev(t: float, kind: str = "rerouted", target: str = "leaf00->spine01") -> Event:
    return Event(time_s=t, severity="info", kind=kind, target=target, message="traffic moved")


def test_event_log_takes_each_event_once_across_overlapping_snapshots() -> None:
    log = EventLog()
    a, b, c = ev(1.0, "fault_injected"), ev(2.0, "fault_detected"), ev(3.0, "rerouted")
    assert log.feed((a, b)) == 2
    assert log.feed((a, b)) == 0
    assert log.feed((b, c)) == 1
    assert [e.event.kind for e in log.entries] == ["fault_injected", "fault_detected", "rerouted"]


def test_event_log_folds_repeats_into_a_count() -> None:
    log = EventLog()
    log.feed(tuple(ev(float(t)) for t in range(40)))
    assert len(log.entries) == 1
    assert log.entries[0].count == 40
    assert log.entries[0].event.time_s == 39.0


def test_event_log_is_bounded() -> None:
    log = EventLog(max_entries=10)
    log.feed(tuple(ev(float(t), target=f"link{t}") for t in range(100)))
    assert len(log.entries) == 10


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-1ms", "duration must be positive"),
        ("0ms", "positive time with a unit"),
        ("0", "duration must be positive, got '0'"),  # (not "needs a unit: e.g. 0ms")
        ("0.05", r"needs a unit \(ns, us, ms, s\): e.g. 0.05ms"),
        ("soon", "positive time with a unit .*got 'soon'"),
        ("inf", "needs a unit"),
        ("2e6s", "at most"),
    ],
)
def test_bad_durations_say_why(text: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        parse_duration(text)


def test_durations_and_params_parse() -> None:
    assert parse_duration("") is None
    assert parse_duration(" 50ms ") == pytest.approx(0.05)  # the CLI's units
    assert parse_duration("250us") == pytest.approx(250e-6)
    assert parse_params("ber=1e-6, mode=soft") == {"ber": 1e-6, "mode": "soft"}
    with pytest.raises(CommandError, match="must look like name=value"):
        parse_params("ber")
    with pytest.raises(CommandError, match="parameter 'ber' is given twice"):
        parse_params("ber=1e-6 ber=1e-3")
    with pytest.raises(CommandError, match=r"got .9{120}.\.\.\. \(404 characters\)"):
        parse_params("ber=" + "9" * 400 + "e999")  # a long value is cut, not echoed whole


def test_form_rejects_unknown_link_with_a_suggestion() -> None:
    snap = snapshot()
    with pytest.raises(CommandError, match=r"unknown link 'leaf00->spine09'.*did you mean"):
        build_inject("link_down", "leaf00->spine09", "", "", snap)


def test_form_accepts_a_link_the_remote_snapshot_does_not_hold() -> None:
    # a remote console's snapshot has the top links only; its source knows every link
    snap = snapshot()
    every_link = [*snap.links.name, "leaf07->spine03"]
    cmd = build_inject("link_down", "leaf07->spine03", "", "", snap, every_link)
    assert cmd.target == "leaf07->spine03"
    with pytest.raises(CommandError, match="unknown link 'leaf07->spine04'"):
        build_inject("link_down", "leaf07->spine04", "", "", snap, every_link)


def test_form_rejects_a_node_where_a_link_is_needed() -> None:
    with pytest.raises(
        CommandError,
        match=re.escape(
            "link_down targets a link; 'leaf00' is a switch: name a link, e.g. 'leaf00->"
        ),
    ):
        build_inject("link_down", "leaf00", "", "", snapshot())
    with pytest.raises(CommandError, match="targets a switch; 'gpu0001' is a GPU"):
        build_inject("switch_down", "gpu0001", "", "", snapshot())
    # and a link where a node is: the form said "unknown gpu 'leaf00->gpu0001'"
    with pytest.raises(
        CommandError,
        match=re.escape(
            "pfc_storm targets a GPU; 'leaf00->gpu0001' is a link: name a GPU, e.g. 'gpu0001'"
        ),
    ):
        build_inject("pfc_storm", "leaf00->gpu0001", "", "", snapshot())


def test_form_builds_the_command() -> None:
    cmd = build_inject("link_degraded", " leaf00->spine01 ", "ber=1e-5", "500ms", snapshot())
    assert (cmd.kind, cmd.target, cmd.params, cmd.duration_s) == (
        "link_degraded",
        "leaf00->spine01",
        {"ber": 1e-5},
        0.5,
    )


def test_scaled_sparkline_uses_a_fixed_scale() -> None:
    full = scaled_sparkline([131e3] * 4, 131e3, rows=2).plain.splitlines()
    empty = scaled_sparkline([0.0] * 4, 131e3, rows=2).plain.splitlines()
    assert full == ["████", "████"]  # all credits left: full bars, not auto-scaled to nothing
    assert empty == ["    ", "    "]
    half = scaled_sparkline([0.5], 1.0, rows=2).plain.splitlines()
    assert half == [" ", "█"]


def test_noise_does_not_reorder_links() -> None:
    rates = LinkRates.zeros(24)
    first = top_links(snapshot(utilisation=[0.501, 0.499]), rates, column="util", limit=2)
    second = top_links(snapshot(utilisation=[0.499, 0.502]), rates, column="util", limit=2)
    assert first.tolist() == second.tolist() == [0, 1]
    moved = top_links(snapshot(utilisation=[0.40, 0.60]), rates, column="util", limit=2)
    assert moved.tolist() == [1, 0]


def test_the_header_says_what_the_engine_compiles_and_since_when() -> None:
    from console.compiling import Compiling, compiling_note
    from console.widgets.status_header import state_label

    compiling = Compiling("solve_tick", since=100.0)
    assert state_label(None, frozen=False, compiling=compiling)[0] == "⧗ compiling"
    assert state_label(None, frozen=True, compiling=compiling)[0] == "❄ frozen view"
    assert state_label(None, frozen=False)[0] == "… starting"
    assert compiling_note(compiling, now=109.4) == (
        "solve_tick · 9 s (the first run after an install: cached after)"
    )


def test_a_narrow_header_keeps_a_stopped_source_and_says_what_compiles() -> None:
    """At 80 columns the header leaves the source out, but not once its engine stopped;
    while a kernel compiles, it leaves out why it happens once before the kernel."""
    from console.compiling import Compiling
    from console.widgets.status_header import HeaderState, fitted

    snap = snapshot()
    said = "engine process default"
    stopped = f"{said} (engine process stopped: killed by SIGKILL)"
    assert said not in fitted(HeaderState(snap, False, None, said, False), 80).plain
    line = fitted(HeaderState(snap, False, None, stopped, False, source_stopped=True), 80)
    assert said in line.plain and snap.cluster in line.plain and snap.profile in line.plain
    compiling = Compiling("solve_tick", since=0.0)
    line = fitted(HeaderState(snap, False, None, said, False, compiling), 140)
    assert "solve_tick" in line.plain and "(the first run after an install)" in line.plain
    line = fitted(HeaderState(snap, False, None, said, False, compiling), 80)
    assert "⧗ compiling" in line.plain and snap.profile in line.plain


def test_an_engine_process_compiling_kernel_after_kernel_is_one_stretch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The child says each kernel as numba starts it and None as it ends: the header's
    seconds count from the first of a stretch, and start again after a pause."""
    import console.process_source as ps
    from console.compiling import Compiling

    clock = [50.0]
    monkeypatch.setattr(ps.time, "monotonic", lambda: clock[0])
    spec = ps.EngineSpec(load_scenario("tiny"), "engine process", speed=1e-3)
    (source,) = ps.ProcessEngines([spec]).sources  # not started: its messages by hand
    events = [(50.0, "start_routed"), (55.0, None), (55.1, "solve_tick"), (56.0, None)]
    for t, kernel in events:
        clock[0] = t
        source._take(("compiling", kernel))
        if kernel is not None:
            assert source.compiling == Compiling(kernel, since=50.0)
    assert source.compiling is None
    clock[0] = 56.0 + ps.COMPILE_GAP_S + 1  # a kernel met much later: a stretch of its own
    source._take(("compiling", "finish_flows"))
    assert source.compiling == Compiling("finish_flows", since=clock[0])


def test_the_faults_panel_lists_the_newest_active_fault_first() -> None:
    """The panel shows a few rows: the fault just injected was listed last, below the fold
    once eight were open (a review of the console)."""
    from console.widgets.faults_panel import faults_to_show
    from fabric_core.commands import ClearFault, InjectFault
    from fabric_core.runtime.fabric import Fabric

    fabric = Fabric.from_scenario(load_scenario("tiny"))
    links = [n for n in fabric.topo.links.name if n.startswith("leaf")][:12]
    for link in links[:11]:
        fabric.apply(InjectFault(kind="link_degraded", target=link))
        fabric.run_ticks(2)
    fabric.apply(ClearFault(fault_id="f0"))
    fabric.run_ticks(2)
    shown = [f.id for f in faults_to_show(fabric.snapshot())]
    assert shown == [f"f{i}" for i in range(10, 0, -1)] + ["f0"]


def test_a_shared_window_of_no_wall_time_says_no_speed() -> None:
    """Two readings at one wall instant measure nothing, even where no least span is
    asked for (it divided by zero); over a second they measure each fabric alike."""
    from dataclasses import replace

    from console.speed import SharedWindow

    wall = [10.0]
    window = SharedWindow(least_s=0.0)
    window.clock = lambda: wall[0]
    a, b = snapshot(), snapshot()
    window.read([a, b])
    window.read([replace(a, sim_time_s=a.sim_time_s + 1e-3), b])
    assert window.speeds() is None
    wall[0] += 1.0
    window.read(
        [replace(a, sim_time_s=a.sim_time_s + 2e-3), replace(b, sim_time_s=b.sim_time_s + 1e-3)]
    )
    assert window.speeds() == pytest.approx((2e-3, 1e-3))


@pytest.mark.parametrize(("profile", "paused_row"), [("native-400g", False), ("roce-400g", True)])
def test_the_link_counters_show_pfcs_paused_time_only_where_there_is_pfc(
    profile: str, paused_row: bool
) -> None:
    """On the credit fabric PFC's paused time (always 0) was shown as "starved for 0 s"
    beside a starved link's 9.53 s of transmit wait."""
    fabric = Fabric.from_scenario(load_scenario("tiny", profile=profile))
    fabric.run_ticks(5)
    console = Console(width=80, file=io.StringIO(), record=True)
    console.print(counters_table(fabric.snapshot(), 0))
    text = console.export_text()
    assert "transmit wait" in text
    assert ("paused for" in text) is paused_row and "starved for" not in text
