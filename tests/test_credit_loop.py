"""The credit loop's round trip (docs/MODEL.md, "Credits"): a credit link carries at most
its downstream buffer per round trip, whatever the tick.

A credit comes back over the link after the bytes it stood for have left the buffer, so
the bytes on their way in, those the switch is still forwarding and the credits on their
way back take the buffer's room as much as the bytes it holds. One flow through an empty
buffer then runs at ``buffer / (2 x delay + forwarding)``: a 1 KiB buffer on a 5 µs link
through a switch of 275 ns carries about 1 KiB per 10.3 µs, where until session 45 the
model ran it at line rate (396 Gb/s for any buffer), and until session 46 at 1 KiB per
10 µs (the cable's round trip alone).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fabric_core.commands import SetParam
from fabric_core.net.profiles import NATIVE_400G
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from fabric_core.workloads.traffic import Scripted
from tests.test_kernels import _lockstep

KiB = 1024
ROOT = Path(__file__).resolve().parents[1]
#: the native profile's switch forwarding time, which a credit's round trip passes too
FORWARDING_S = NATIVE_400G.switch_latency_s


def _scenario(
    tmp_path: Path,
    buffer: str,
    delay: str,
    dt: str,
    gpus_per_leaf: int = 1,
    profile: str = "native-400g",
) -> Path:
    """Two leaves under one spine, leaf-spine cables of ``delay`` with ``buffer`` a lane,
    and one 16 MiB flow from the first GPU to the last."""
    path = tmp_path / "loop.toml"
    last = f"gpu{2 * gpus_per_leaf - 1:04d}"
    path.write_text(
        f"""
name = "loop"
profile = "{profile}"
dt = "{dt}"
[topology]
kind = "leaf-spine"
leaves = 2
spines = 1
gpus_per_leaf = {gpus_per_leaf}
[links.leaf_spine]
delay = "{delay}"
buffer = "{buffer}"
[[workload]]
kind = "pairs"
class = "bulk"
pairs = [["gpu0000", "{last}"]]
size = "16MiB"
outstanding = 1
"""
    )
    return path


def _steady_rate(fabric: Fabric, settle_s: float, measure_s: float) -> float:
    """Bytes delivered per second over ``measure_s`` after ``settle_s``."""
    fabric.run_ticks(round(settle_s / fabric.dt_s))
    before, t0 = fabric.delivered_bytes, fabric.sim_time_s
    fabric.run_ticks(round(measure_s / fabric.dt_s))
    return (fabric.delivered_bytes - before) / (fabric.sim_time_s - t0)


@pytest.mark.parametrize(
    ("buffer", "delay_s", "dt"),
    [
        (8 * KiB, 5e-6, "1us"),  # the loop 5 ticks each way
        (8 * KiB, 5e-6, "20us"),  # a quarter of a tick each way
        (32 * KiB, 2e-6, "200ns"),  # 10 ticks each way
    ],
)
def test_a_lane_carries_its_buffer_per_round_trip_whatever_the_tick(
    tmp_path: Path, buffer: int, delay_s: float, dt: str
) -> None:
    scn = load_scenario(str(_scenario(tmp_path, f"{buffer}B", f"{delay_s * 1e9:g}ns", dt)))
    fabric = Fabric.from_scenario(scn)
    rate = _steady_rate(fabric, settle_s=100e-6, measure_s=400e-6)
    assert rate == pytest.approx(buffer / (2 * delay_s + FORWARDING_S), rel=0.01)
    # the sender waited for credits, and nothing was lost
    up = fabric.topo.links.index["leaf00->spine00"]
    assert fabric.paused[up] and fabric.dropped_bytes == 0
    # the spine's buffer is empty (what comes in goes on), and its credits are all in
    # the loop: the console's credit for the link is 0, not the empty buffer's size
    lane = up * fabric.n_vls
    assert fabric.occupancy[lane] == pytest.approx(0.0, abs=1e-6)
    assert fabric.snapshot().link_state.credits_bytes[up] == pytest.approx(0.0, abs=1.0)


def test_a_buffer_of_twice_the_round_trips_bytes_keeps_the_link_at_line_rate(
    tmp_path: Path,
) -> None:
    """The bundled profile's 128 KiB on a 100 m cable (500 ns each way, and 275 ns
    through the switch) lets in 103 GB/s: the 400G link, not its credits, is the
    bound."""
    scn = load_scenario(str(_scenario(tmp_path, "128KiB", "500ns", "1us")))
    fabric = Fabric.from_scenario(scn)
    _steady_rate(fabric, settle_s=20e-6, measure_s=100e-6)
    up = fabric.topo.links.index["leaf00->spine00"]
    line = fabric.topo.links.bandwidth_Bps[up]
    payload = profile_payload_share(fabric)
    assert fabric.link_rate[up] == pytest.approx(line * payload, rel=1e-9)
    assert not fabric.paused[up]


def test_roce_has_no_credit_loop_its_long_link_runs_at_line_rate(tmp_path: Path) -> None:
    """PFC is no credit loop: a sender sends until it is paused, and the receiver's
    headroom takes the round trip's bytes. One flow over 5 µs cables with 8 KiB static
    PFC queues runs at the link's payload rate, where a credit link carries 6.55 Gb/s."""
    path = _scenario(tmp_path, "8KiB", "5us", "1us", profile="roce-400g")
    path.write_text(path.read_text() + '[profile_overrides]\npfc_buffer_mode = "static"\n')
    fabric = Fabric.from_scenario(load_scenario(str(path)))
    _steady_rate(fabric, settle_s=20e-6, measure_s=100e-6)
    up = fabric.topo.links.index["leaf00->spine00"]
    line = fabric.topo.links.bandwidth_Bps[up]
    assert fabric.link_rate[up] == pytest.approx(line * profile_payload_share(fabric), rel=1e-9)
    assert fabric.link_rate[up] > 50 * 8 * KiB / 10e-6


def profile_payload_share(fabric: Fabric) -> float:
    """The share of a link's bytes that are payload: an MTU over an MTU and its headers."""
    p = fabric.profile
    return p.mtu_bytes / (p.mtu_bytes + p.header_bytes)


def test_both_solvers_agree_where_the_credit_loop_binds(tmp_path: Path) -> None:
    """An incast and crossing flows over 2 µs cables with 16 KiB lanes, so that credit
    loops bind on half-full and full buffers alike: the compiled tick and the numpy
    reference step in lockstep (rates, buffers, completions within 1e-9)."""
    scn = load_scenario(str(_scenario(tmp_path, "16KiB", "2us", "1us", gpus_per_leaf=4)))
    topo, profile = scn.build_topology(), scn.profile
    gpus = topo.gpus
    flows = [(int(gpus[i]), int(gpus[4 + (i % 2)]), 200e3, i * 3e-6) for i in range(4)]
    flows += [(int(gpus[5 + i % 3]), int(gpus[i % 4]), 64e3, 10e-6) for i in range(6)]

    def make(solver: str) -> Fabric:
        wl = Scripted(name="w", traffic_class="bulk", flows=flows)
        return Fabric(topo, profile, [wl], dt_s=1e-6, seed=3, solver=solver)  # type: ignore[arg-type]

    ref, comp = make("reference"), make("compiled")
    _lockstep(ref, comp, 400)
    assert ref.completed_flows == len(flows)
    assert ref.paused.any() or ref.counters["transmit_wait_seconds_total"].sum() > 0


def test_fabtop_run_reports_a_long_link_held_to_its_buffer_per_round_trip(
    tmp_path: Path,
) -> None:
    path = _scenario(tmp_path, "8KiB", "5us", "1us")
    out = subprocess.run(
        [sys.executable, "-m", "console.cli", "run", str(path), "--duration", "500us",
         "--json", str(tmp_path / "r.json"), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    # the buffer's 8 KiB at once (the idle loop's credits, spent at line rate), then 8 KiB
    # per 10.275 µs round trip (797 MB/s: 6.38 Gb/s, where the link is 400G)
    expected = (8 * KiB + 8 * KiB / (10e-6 + FORWARDING_S) * 500e-6) / 500e-6
    assert report["totals"]["throughput_bytes_per_second"] == pytest.approx(expected, rel=0.01)
    assert report["totals"]["dropped_bytes"] == 0


def _one_flow_time(tmp_path: Path, buffer: str, dt: str, size: float) -> float:
    """Seconds from start to finish of one flow of ``size`` across the 5 µs cables."""
    scn = load_scenario(str(_scenario(tmp_path, buffer, "5us", dt)))
    topo = scn.build_topology()
    gpus = topo.gpus
    wl = Scripted(name="w", traffic_class="bulk", flows=[(int(gpus[0]), int(gpus[1]), size, 0.0)])
    fabric = Fabric(topo, scn.profile, [wl], dt_s=scn.dt_s, seed=1)
    while not wl.finished:
        fabric.step()
    _, start, finish = wl.finished[0]
    return float(finish - start)


@pytest.mark.parametrize("dt", ["100ns", "1us"])
def test_an_idle_loop_lets_its_buffer_out_at_line_rate_first(tmp_path: Path, dt: str) -> None:
    """A sender holding a whole buffer's credits spends them at line rate and waits only
    for those it lacks: a 4 KiB message over an idle 8 KiB lane on a 5 µs cable takes
    what it takes with a 64 MiB buffer (to a tick: the model's resolution), not a round
    trip more (17.7 µs against 12.8 µs while the loop's bytes were charged at the tick's
    rate, session 45's first model); a 64 KiB flow sends its first 8 KiB so, then 8 KiB a
    round trip."""
    tick = 1e-7 if dt == "100ns" else 1e-6
    for size in (4 * KiB, 8 * KiB):
        small = _one_flow_time(tmp_path, "8KiB", dt, size)
        large = _one_flow_time(tmp_path, "64MiB", dt, size)
        assert large <= small <= large + tick
    rest = (64 * KiB - 8 * KiB) / (8 * KiB / (10e-6 + FORWARDING_S))  # 72 µs at the loop's rate
    small = _one_flow_time(tmp_path, "8KiB", dt, 64 * KiB)
    large = _one_flow_time(tmp_path, "64MiB", dt, 64 * KiB)
    assert small - large == pytest.approx(rest, rel=0.03)


@pytest.mark.parametrize("dt", [1e-8, 1e-7, 1e-6])
def test_a_drain_that_speeds_up_does_not_slow_its_sender(tmp_path: Path, dt: float) -> None:
    """Two flows into gpu0003 over 2 µs cables and 128 KiB lanes; when the short one
    ends, the long one's buffer at the far leaf drains at the whole downlink. Its loop
    fills over a round trip, so its sender over the spine speeds up at once and never
    dips below the rate it had (charged the loop at the tick's rate, it fell from 24.8 to
    2.5 GB/s for a microsecond at a 100 ns tick: a session-45 review)."""
    scn = load_scenario(str(_scenario(tmp_path, "128KiB", "2us", "1us", gpus_per_leaf=2)))
    topo = scn.build_topology()
    g = topo.gpus
    flows = [(int(g[0]), int(g[3]), 1e12, 0.0), (int(g[2]), int(g[3]), 1e6, 0.0)]
    wl = Scripted(name="w", traffic_class="bulk", flows=flows)
    fabric = Fabric(topo, scn.profile, [wl], dt_s=dt, seed=1)
    link = topo.links.index["spine00->leaf01"]
    before = rate = 0.0
    while not wl.finished:  # (the tick that finishes it already speeds the drain up)
        before = rate
        fabric.step()
        rate = fabric.link_rate[link]
    after = [rate]
    while fabric.sim_time_s < 80e-6:
        fabric.step()
        after.append(fabric.link_rate[link])
    assert min(after) >= before * (1 - 1e-9)
    # and it settles at its buffer per round trip: 128 KiB / 4.275 µs
    assert after[-1] == pytest.approx(128 * KiB / (4e-6 + FORWARDING_S), rel=1e-6)


def test_the_switchs_forwarding_time_is_part_of_the_round_trip(tmp_path: Path) -> None:
    """On a short cable the switch's pipeline, not the cable, makes most of the loop: a
    byte waits its forwarding time in the buffer before it can leave, and its credit
    goes back only then. A 2 KiB lane on a 2 m cable (10 ns each way) through a switch
    of 275 ns carries 2 KiB per 295 ns, 6.9 GB/s (the cable's round trip alone would
    have let in 205 GB/s, past the link). Set to 1 µs at run time (the ``set`` command),
    the same lane carries 2 KiB per 1.02 µs."""
    scn = load_scenario(str(_scenario(tmp_path, "2KiB", "10ns", "1us")))
    fabric = Fabric.from_scenario(scn)
    rate = _steady_rate(fabric, settle_s=20e-6, measure_s=100e-6)
    assert rate == pytest.approx(2 * KiB / (20e-9 + FORWARDING_S), rel=0.01)
    fabric.apply(SetParam(name="switch_latency_s", value=1e-6))
    rate = _steady_rate(fabric, settle_s=20e-6, measure_s=100e-6)
    assert rate == pytest.approx(2 * KiB / (20e-9 + 1e-6), rel=0.01)


def test_a_full_buffer_keeps_the_bytes_its_switch_is_forwarding_free(tmp_path: Path) -> None:
    """Two senders into one downlink, one over the spine: the far leaf's buffer of the
    spine's link fills and keeps free what its loop holds in a steady state,
    ``2·y·t + y·s`` for a drain ``y``: the cable's bytes both ways and those the switch
    is forwarding. Both solvers."""
    for solver in ("compiled", "reference"):
        scn = load_scenario(str(_scenario(tmp_path, "64KiB", "10ns", "100ns", gpus_per_leaf=2)))
        topo = scn.build_topology()
        g = topo.gpus
        flows = [(int(g[0]), int(g[3]), 1e12, 0.0), (int(g[2]), int(g[3]), 1e12, 0.0)]
        wl = Scripted(name="w", traffic_class="bulk", flows=flows)
        fabric = Fabric(topo, scn.profile, [wl], dt_s=1e-7, seed=1, solver=solver)  # type: ignore[arg-type]
        fabric.run_ticks(400)
        lane = topo.links.index["spine00->leaf01"] * fabric.n_vls
        y = fabric.buffer_drain[lane]
        loop = 2 * y * 10e-9 + y * FORWARDING_S
        assert loop > 6 * KiB  # (the cable's alone: under 1 KiB)
        assert fabric.occupancy[lane] == pytest.approx(64 * KiB - loop, rel=1e-6), solver
