"""What the tick's flow-control subsystems (``roce``, ``ibcc``) read and write of the
fabric they run on: the flow table, the link book (buffers, counters), the total of
dropped bytes and the event log.

A protocol, so that they name the state they touch instead of taking the whole
``runtime.fabric.Fabric`` (which satisfies it; mypy checks it where the fabric builds
them). The attribute without a property is the one they assign.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.profiles import Profile
from fabric_core.net.topology import Topology
from fabric_core.tick.flows import FlowTable
from fabric_core.tick.links import LinkBook


class FlowControlHost(Protocol):
    """The fabric as RoCE flow control and InfiniBand congestion control see it."""

    #: bytes dropped since the start (PFC overflow)
    dropped_bytes: float

    @property
    def topo(self) -> Topology: ...
    @property
    def profile(self) -> Profile: ...
    @property
    def flows(self) -> FlowTable: ...
    @property
    def link_book(self) -> LinkBook: ...
    @property
    def n_vls(self) -> int: ...
    @property
    def to_endpoint(self) -> NDArray[np.bool_]: ...
    @property
    def rng(self) -> np.random.Generator: ...
    def emit(self, severity: str, kind: str, target: str, message: str) -> None: ...
