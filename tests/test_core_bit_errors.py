"""Bit errors on a credit-fabric link, against hand-computed figures: what the flow keeps,
what the link resends and counts (link-level retry: only the hit packet is resent)."""

from __future__ import annotations

import pytest

from fabric_core.commands import InjectFault
from fabric_core.runtime.fabric import Solver
from tests.helpers import SOLVERS, profile, scripted_fabric, small_leaf_spine

BER = 1e-5
PACKET = 4096 + 30  # IB MTU + header bytes
#: a packet is hit with p = 1 - (1 - ber)^bits: 0.2811 for 4,126-byte packets at 1e-5
P_HIT = 1 - (1 - BER) ** (8 * PACKET)


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_degraded_link_resends_the_hit_packets_and_counts_them(solver: Solver) -> None:
    """A long flow crosses leaf00->spine00 at ber 1e-5. Link-level retry sends each
    packet 1 / (1 - p) times on average, so the flow keeps (1 - p) of the payload rate,
    and per byte of new data the link resends p / (1 - p) bytes (one retry per MTU of
    them), and counts 8 · ber symbol errors per byte carried."""
    prof = profile()
    topo = small_leaf_spine(prof, leaves=2, spines=1, gpus_per_leaf=1)
    fabric, _ = scripted_fabric(
        topo, prof, [("gpu0000", "gpu0001", 1e12, 0.0)], dt_s=1e-6, solver=solver
    )
    fabric.run_ticks(20)
    fault = InjectFault(kind="link_degraded", target="leaf00->spine00", params={"ber": BER})
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
    assert carried == pytest.approx(payload_Bps * (1 - P_HIT) * ticks * 1e-6, rel=1e-6)
    rate = (float(fabric.flows.delivered[0]) - delivered0) / (ticks * 1e-6)
    assert rate == pytest.approx(payload_Bps * (1 - P_HIT), rel=1e-6)
    assert grew("tx_packets_total") == pytest.approx(carried / 4096, rel=1e-9)
    resent = carried * P_HIT / (1 - P_HIT)
    assert grew("retransmitted_bytes_total") == pytest.approx(resent, rel=1e-6)
    assert grew("link_error_recovery_total") == pytest.approx(resent / 4096, rel=1e-6)
    assert grew("symbol_errors_total") == pytest.approx(carried * 8 * BER, rel=1e-9)
