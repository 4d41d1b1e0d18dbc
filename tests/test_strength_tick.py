"""The tick's physics, held to figures derived by hand (both solvers, several ticks).

Written against behaviour (``Fabric`` with scripted flows, its public state after whole
ticks), not against the kernels' lines, so that they hold whatever the tick looks like
inside: the compiled kernels (``fabric_core/kernels``) and the numpy reference
(``fabric_core/tick/step.py``) alike. They are the mutation subsets' first files
(``scripts/mutate``): each fails on a one-line bug that the broader tests let through.
"""

from __future__ import annotations

import pytest

from fabric_core.runtime.fabric import Fabric, Solver
from tests.helpers import SOLVERS, credit_loop_bytes, profile, scripted_fabric, small_leaf_spine

BUFFER = 64 * 1024
BIG = 1e12  # bytes: flows that outlast the test


def payload_rate(prof) -> float:  # type: ignore[no-untyped-def]
    """What a link carries of data: its bandwidth less the per-packet headers."""
    return float(prof.link_bandwidth_Bps * prof.mtu_bytes / (prof.mtu_bytes + prof.header_bytes))


def incast(solver: Solver, dt: float, sizes: tuple[float, float] = (BIG, BIG)) -> Fabric:
    """gpu0001 and gpu0002 send to gpu0000 on one leaf; 64 KiB buffers per lane."""
    prof = profile(buffer_per_vl_bytes=BUFFER)
    topo = small_leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=4)
    flows = [("gpu0001", "gpu0000", sizes[0], 0.0), ("gpu0002", "gpu0000", sizes[1], 0.0)]
    fabric, _ = scripted_fabric(topo, prof, flows, dt_s=dt, solver=solver)
    return fabric


def queue(fabric: Fabric, link: str, lane: int = 0) -> int:
    """The buffer index of ``link``'s lane at its downstream end."""
    return int(fabric.topo.links.index[link]) * fabric.n_vls + lane


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("dt", [1e-7, 1e-6, 1e-5])
def test_a_two_to_one_incast_shares_the_downlink_exactly_and_fills_the_buffers_exactly(
    solver: Solver, dt: float
) -> None:
    """Steady state: the downlink carries its payload rate R, half to each sender; each
    sender's ingress buffer at the leaf is exactly full but for its credit loop's bytes
    (credits give each sender what drains, not a byte more or less; the credits of the
    bytes on the cable and of those on their way back, R/2 each way over 3 m, are the
    sender's no more), drains at R/2, and the downlink's own buffer at the NIC is
    empty. The credit factor that keeps a buffer exactly full is the one
    Newton's method must find; a factor a hair too small empties it, too large
    overfills it."""
    fabric = incast(solver, dt)
    r = payload_rate(fabric.profile)
    fabric.run_ticks(round(100e-6 / dt))  # full after ~2.6 us
    delivered = fabric.flows.delivered[:2].copy()
    tx = fabric.counters["tx_bytes_total"].copy()
    ticks = 20
    fabric.run_ticks(ticks)
    rate = (fabric.flows.delivered[:2] - delivered) / (ticks * dt)
    assert rate == pytest.approx([r / 2, r / 2], rel=1e-9)
    ingress = [queue(fabric, "gpu0001->leaf00"), queue(fabric, "gpu0002->leaf00")]
    full = BUFFER - credit_loop_bytes(fabric, "gpu0001->leaf00", r / 2)
    assert full < BUFFER - 500  # (some 750 B in the loop)
    assert fabric.occupancy[ingress] == pytest.approx([full, full], rel=1e-9)
    assert fabric.buffer_drain[ingress] == pytest.approx([r / 2, r / 2], rel=1e-9)
    down = queue(fabric, "leaf00->gpu0000")
    assert fabric.occupancy[down] == pytest.approx(0, abs=1e-6)
    # every byte each link carried, counted on it: the downlink R, each uplink R/2
    links = fabric.topo.links.index
    carried = (fabric.counters["tx_bytes_total"] - tx) / (ticks * dt)
    assert carried[links["leaf00->gpu0000"]] == pytest.approx(r, rel=1e-9)
    assert carried[links["gpu0001->leaf00"]] == pytest.approx(r / 2, rel=1e-9)
    snap = fabric.snapshot().link_state
    assert snap.credits_bytes[links["gpu0001->leaf00"]] == pytest.approx(0, abs=1e-6)
    assert snap.queue_bytes[links["gpu0001->leaf00"]] == pytest.approx(full, rel=1e-9)


@pytest.mark.parametrize("solver", SOLVERS)
def test_the_ingress_buffers_fill_at_line_rate_less_the_drain(solver: Solver) -> None:
    """Before the buffers are full each sender sends at the payload rate R and the leaf
    forwards R/2 of it: each ingress buffer grows by R/2 per second, exactly, until it
    holds 64 KiB less its credit loop's bytes (at 2 * 64 KiB / R, about 2.7 us); nobody
    waits for credit until then."""
    dt = 1e-7
    fabric = incast(solver, dt)
    r = payload_rate(fabric.profile)
    ingress = [queue(fabric, "gpu0001->leaf00"), queue(fabric, "gpu0002->leaf00")]
    loop = credit_loop_bytes(fabric, "gpu0001->leaf00", r, r / 2)  # R in, R/2 out
    full_at = (BUFFER - loop) / (r / 2)
    for tick in range(1, int(full_at / dt)):
        fabric.step()
        t = tick * dt
        assert fabric.occupancy[ingress] == pytest.approx([r / 2 * t] * 2, rel=1e-6), tick
        assert not fabric.snapshot().link_state.paused.any(), tick
    # (the sender's rate falls from R to R/2 as the buffer fills, and the loop's bytes
    # with it: the room they held comes back by a factor of about 0.8 a tick here, the
    # loop's 305 ns round trip against a 100 ns tick)
    fabric.run_ticks(120)
    full = BUFFER - credit_loop_bytes(fabric, "gpu0001->leaf00", r / 2)  # R/2 in and out
    assert fabric.occupancy[ingress] == pytest.approx([full, full], rel=1e-9)
    links = fabric.topo.links.index
    assert fabric.snapshot().link_state.paused[links["gpu0001->leaf00"]]


@pytest.mark.parametrize("solver", SOLVERS)
def test_when_one_incast_flow_ends_the_other_takes_the_whole_downlink(solver: Solver) -> None:
    """The 2-to-1 incast with a short flow (1 MiB) and a long one: once the short one has
    delivered its last byte, the long one's rate is the downlink's full payload rate and
    its sender, sending at that same rate, keeps its buffer exactly full without waiting
    for credit (what drains each tick is what arrives), but for the credits of its loop,
    now twice as many as at R/2."""
    dt = 1e-6
    size = 1024**2
    fabric = incast(solver, dt, sizes=(size, BIG))
    r = payload_rate(fabric.profile)
    for _ in range(400):
        fabric.step()
        if fabric.flows.delivered[0] >= size * (1 - 1e-9) or not fabric.flows.active[0]:
            break
    else:
        pytest.fail("the short flow never finished")
    fabric.run_ticks(20)
    before = fabric.flows.delivered[1]
    fabric.run_ticks(10)
    assert (fabric.flows.delivered[1] - before) / (10 * dt) == pytest.approx(r, rel=1e-9)
    assert fabric.occupancy[queue(fabric, "gpu0001->leaf00")] == pytest.approx(0, abs=1e-6)
    full = BUFFER - credit_loop_bytes(fabric, "gpu0002->leaf00", r)
    assert fabric.occupancy[queue(fabric, "gpu0002->leaf00")] == pytest.approx(full, rel=1e-9)
    assert not fabric.snapshot().link_state.paused.any()


@pytest.mark.parametrize("solver", SOLVERS)
def test_what_credits_take_from_the_very_first_entry_is_offered_to_its_link_again(
    solver: Solver,
) -> None:
    """Three senders share one downlink (R/3 each, R the payload rate), and the first of
    them, in the first flow slot, also sends on another lane to an idle GPU. Fair
    sharing first splits its uplink R/2 : R/2; credits then cut the incast flow to what
    drains of its full buffer, R/3, and the second pass offers the rest of the uplink
    to the other lane's flow: 2R/3. The incast flow's first hop is the index's very
    first entry (rank 0, lane 0, flow slot 0), where a solver that only re-offers after
    cuts "past the first entry" would leave the other lane at R/2."""
    dt = 1e-6
    prof = profile(buffer_per_vl_bytes=BUFFER)
    topo = small_leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=5)
    incast_flows = [(f"gpu000{i}", "gpu0000", BIG, 0.0) for i in (1, 2, 3)]
    fabric, _ = scripted_fabric(
        topo,
        prof,
        incast_flows,
        dt_s=dt,
        extra=[("side", "other", [("gpu0001", "gpu0004", BIG, 0.0)])],
        class_vl={"bulk": 0, "other": 1},
        solver=solver,
    )
    r = payload_rate(fabric.profile)
    fabric.run_ticks(100)  # the ingress buffers are full after a few microseconds
    assert fabric.flows.src[0] == topo.nodes.index["gpu0001"]  # the first slot's flow
    delivered = fabric.flows.delivered[:4].copy()
    ticks = 20
    fabric.run_ticks(ticks)
    rate = (fabric.flows.delivered[:4] - delivered) / (ticks * dt)
    assert rate[:3] == pytest.approx([r / 3] * 3, rel=1e-9)
    assert rate[3] == pytest.approx(2 * r / 3, rel=1e-9)
