"""Admission limits: how many flows a fault (or the whole fabric) may have in flight.

A fault that generates traffic (``incast``) can ask for far more than a fabric
carries: 4096 senders × 1 GB every 100 ns is 20,000 new flows a tick, and the
flow table (and the tick's cost) would grow without bound. So every round of
generated flows goes through ``admit``:

* **per sender**: at most ``per_sender_flows`` flows of one fault in flight from
  one sender (a NIC's send queue is finite; the rest of the round is refused);
* **per fault**: at most ``fault_flows`` flows and ``fault_bytes`` bytes
  outstanding (injected, not yet delivered);
* **fabric-wide**: at most ``fabric_flows`` flows in flight in the whole fabric
  (``MAX_FLOWS_IN_FLIGHT``), workloads included; past it new flows are refused.

Refused flows are not queued: they are counted (``Admission.refused_flows_total``,
exported as ``fabtop_flows_refused_total`` and in MQTT telemetry; a workload's also
under its name, ``Admission.refused_by_workload``, for a run's report) and an event says
so, once per fault (and once each time the fabric-wide cap is reached).

The limits are design choices, not physics: they bound memory (a flow costs about
300 bytes of table, and 3–5 solver entries) and keep a tick's cost near that of
the largest benchmarked fabric (20,000 flows on 10,240 endpoints).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

#: Fabric-wide cap on flows in flight (about 13 times the 10k-endpoint benchmark's).
MAX_FLOWS_IN_FLIGHT = 262_144


@dataclass(frozen=True, slots=True)
class AdmissionLimits:
    """The limits (see the module docstring); the defaults are documented in docs/MQTT.md, "Limits"."""

    per_sender_flows: int = 16
    fault_flows: int = 4096
    fault_bytes: float = 4 * 2**30
    fabric_flows: int = MAX_FLOWS_IN_FLIGHT


def admit_rounds(
    sender_room: NDArray[np.int64],
    rounds: int,
    size_bytes: float,
    flow_room: int,
    byte_room: float,
) -> NDArray[np.bool_]:
    """Which flows of ``rounds`` rounds (one flow per sender each) to admit.

    Args:
        sender_room: per sender, how many more flows it may have in flight.
        rounds: rounds due; the candidates are round-major (round 0's senders first).
        size_bytes: each flow's size.
        flow_room: more flows the fault (and the fabric) may take in all.
        byte_room: more bytes the fault may have outstanding.

    Returns:
        A mask over ``rounds × senders`` candidates, round-major: a sender's first
        ``sender_room`` rounds, then the first candidates within the totals.
    """
    senders = sender_room.size
    mask = np.arange(rounds)[:, None] < np.maximum(sender_room, 0)[None, :]
    mask = mask.reshape(-1)
    by_bytes = int(max(byte_room, 0.0) // size_bytes) if size_bytes > 0 else rounds * senders
    limit = max(0, min(flow_room, by_bytes))
    mask &= np.cumsum(mask) <= limit
    return np.asarray(mask, dtype=np.bool_)


Emit = Callable[[str, str, str, str], None]


@dataclass
class Admission:
    """The fabric's admission state: its limits and what they refused."""

    limits: AdmissionLimits = AdmissionLimits()
    refused_flows_total: int = 0
    refused_bytes_total: float = 0.0
    #: per workload (by name), the flows and bytes of its own the fabric-wide cap refused
    #: (part of the totals): a run's report names the workloads that did not run whole
    refused_by_workload: dict[str, tuple[int, float]] = field(default_factory=dict)
    #: the fabric-wide cap refused something since it last had room (an event each time)
    capped: bool = False

    def room(self, flows_in_flight: int) -> int:
        """More flows the fabric-wide cap lets in."""
        return max(0, self.limits.fabric_flows - flows_in_flight)

    def fabric_admit(
        self,
        size_bytes: NDArray[np.float64],
        flows_in_flight: int,
        emit: Emit,
        target: str = "fabric",
        workload: str | None = None,
    ) -> int:
        """How many of the new flows (``size_bytes``, one per flow) the fabric-wide cap
        admits, the first ones; counts the rest (under ``workload`` too, when they are
        a workload's), with an event each time the cap is reached after having room."""
        wanted = int(size_bytes.size)
        take = min(wanted, self.room(flows_in_flight))
        if take < wanted:
            refused_bytes = float(size_bytes[take:].sum())
            self.refuse(wanted - take, refused_bytes)
            if workload is not None:
                flows, total_bytes = self.refused_by_workload.get(workload, (0, 0.0))
                self.refused_by_workload[workload] = (
                    flows + wanted - take,
                    total_bytes + refused_bytes,
                )
            if not self.capped:
                emit(
                    "warning",
                    "flows_refused",
                    target,
                    f"{self.limits.fabric_flows} flows in flight: the fabric-wide cap refuses "
                    f"new flows until some finish (counted in fabtop_flows_refused_total)",
                )
            self.capped = True
        else:
            self.capped = False
        return take

    def refuse(self, flows: int, total_bytes: float) -> None:
        """Count refused flows."""
        self.refused_flows_total += int(flows)
        self.refused_bytes_total += float(total_bytes)
