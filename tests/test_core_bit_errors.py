"""Bit errors on a link, against hand-computed figures: what the flow keeps, what is resent
and where it is counted (link-level retry on the credit fabric: the link resends the hit
packet; go-back-N on RoCE: the flows' sources resend)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from fabric_core.commands import InjectFault
from fabric_core.net.profiles import ROCE_400G
from fabric_core.runtime.fabric import Solver
from tests.helpers import SOLVERS, profile, scripted_fabric, small_leaf_spine

PACKET = 4096 + 30  # IB MTU + header bytes
#: a packet is hit with p = 1 - (1 - ber)^bits: 0.2811 for 4,126-byte packets at 1e-5
BER = 1e-5
#: all but 1.5e-12 of the packets hit, (1 - ber)^(8 · 4,126) = 1.5e-12: the link carries
#: new data 1.5e-12 of the time and resends the rest (the model floors the share at 1e-12)
BER_NEARLY_DEAD = -math.expm1(math.log(1.5e-12) / (8 * PACKET))


@pytest.mark.parametrize("ber", [BER, BER_NEARLY_DEAD])
@pytest.mark.parametrize("solver", SOLVERS)
def test_a_degraded_link_resends_the_hit_packets_and_counts_them(
    solver: Solver, ber: float
) -> None:
    """A long flow crosses leaf00->spine00 at a bit error rate ``ber``. Link-level retry
    sends each packet 1 / (1 - p) times on average, so the flow keeps (1 - p) of the
    payload rate, and per byte of new data the link resends p / (1 - p) bytes (one retry
    per MTU of them), and counts 8 · ber symbol errors per byte carried."""
    p_hit = 1 - (1 - ber) ** (8 * PACKET)
    # nearly dead, the link carries 1e-7 B a tick onto counters of 1e6 B (the first 20
    # ticks at line rate): float64 keeps three digits of such a sum
    rel = 1e-6 if ber == BER else 1e-2
    prof = profile()
    topo = small_leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=1)
    fabric, _ = scripted_fabric(
        topo, prof, [("gpu0000", "gpu0001", 1e12, 0.0)], dt_s=1e-6, solver=solver
    )
    fabric.run_ticks(20)
    fault = InjectFault(kind="link_degraded", target="leaf00->spine00", params={"ber": ber})
    assert fabric.apply(fault)
    fabric.run_ticks(20)  # the new rate is reached
    link = topo.links.index["leaf00->spine00"]
    before, delivered0 = fabric.snapshot().link_state, float(fabric.flows.delivered[0])
    ticks = 100
    fabric.run_ticks(ticks)
    after = fabric.snapshot().link_state

    def grew(field: str) -> float:
        return float(getattr(after, field)[link] - getattr(before, field)[link])

    payload_Bps = 50e9 * 4096 / PACKET
    carried = grew("tx_bytes_total")
    assert carried == pytest.approx(payload_Bps * (1 - p_hit) * ticks * 1e-6, rel=rel)
    rate = (float(fabric.flows.delivered[0]) - delivered0) / (ticks * 1e-6)
    assert rate == pytest.approx(payload_Bps * (1 - p_hit), rel=rel)
    assert grew("tx_packets_total") == pytest.approx(carried / 4096, rel=rel)
    resent = carried * p_hit / (1 - p_hit)
    assert grew("retransmitted_bytes_total") == pytest.approx(resent, rel=rel)
    assert grew("link_error_recovery_total") == pytest.approx(resent / 4096, rel=rel)
    assert grew("symbol_errors_total") == pytest.approx(carried * 8 * ber, rel=rel)


@pytest.mark.parametrize("solver", SOLVERS)
def test_roce_resends_bit_errors_from_the_sources_and_counts_them_there(solver: Solver) -> None:
    """Two long RoCE flows, from gpu0000 and gpu0001, share leaf00->spine00 at a bit
    error rate of 1e-7. Go-back-N resends from each flow's source, which sends the hit
    packet and the round trip of packets after it again over its whole path: each
    source's link counts what it resent, the degraded link (which resends nothing of its
    own) counts none. The degraded link stays busy, so what it did not carry of new data
    is what the sources resent, half each (the code before counted it all on the
    degraded link)."""
    prof = dataclasses.replace(ROCE_400G, congestion_control="none")
    topo = small_leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=2)
    rows = [("gpu0000", "gpu0002", 1e12, 0.0), ("gpu0001", "gpu0003", 1e12, 0.0)]
    fabric, _ = scripted_fabric(topo, prof, rows, dt_s=1e-6, solver=solver)
    fault = InjectFault(kind="link_degraded", target="leaf00->spine00", params={"ber": 1e-7})
    assert fabric.apply(fault)
    fabric.run_ticks(50)  # the queues at leaf00 fill: the degraded link is never idle
    links = topo.links.index
    before = fabric.snapshot().link_state
    ticks = 100
    fabric.run_ticks(ticks)
    after = fabric.snapshot().link_state
    resent = after.retransmitted_bytes_total - before.retransmitted_bytes_total
    carried = after.tx_bytes_total - before.tx_bytes_total
    degraded = links["leaf00->spine00"]
    payload_Bps = 50e9 * prof.mtu_bytes / (prof.mtu_bytes + prof.header_bytes)
    lost = payload_Bps * ticks * 1e-6 - carried[degraded]
    assert lost > 0.01 * carried[degraded]
    sources = [links["gpu0000->leaf00"], links["gpu0001->leaf00"]]
    np.testing.assert_allclose(resent[sources], [lost / 2, lost / 2], rtol=1e-6)
    assert np.count_nonzero(np.delete(resent, sources)) == 0
    # the link's own error counters stay where the errors are
    assert after.symbol_errors_total[degraded] > before.symbol_errors_total[degraded]
    assert (np.delete(after.symbol_errors_total, degraded) == 0).all()
