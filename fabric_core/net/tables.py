"""The fabric's static tables: its nodes and its directed links, and a link's status.

Built with the topology (``net.topology``) and shared, unchanged, by every snapshot of a
run (``runtime.snapshot`` re-exports them for the interfaces).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
from numpy.typing import NDArray


class LinkStatus(IntEnum):
    """Operational state of a directed link (values are stable: exported as numbers)."""

    UP = 0
    DOWN = 1
    DEGRADED = 2


@dataclass(frozen=True, slots=True)
class NodeTable:
    """Static description of the nodes: GPUs (endpoints), switches, storage targets."""

    name: tuple[str, ...]
    kind: tuple[str, ...]  # "gpu" | "switch" | "storage"
    tier: NDArray[np.int8]  # 0 = endpoint, 1 = leaf, 2 = spine, 3 = core
    plane: NDArray[np.int16]  # network plane (multi-plane topologies); 0 otherwise
    index: Mapping[str, int] = field(repr=False)

    def __len__(self) -> int:
        return len(self.name)


@dataclass(frozen=True, slots=True)
class LinkTable:
    """Static description of the directed links ``src->dst`` (a cable is a pair)."""

    name: tuple[str, ...]  # "leaf07->spine03"
    src: NDArray[np.int32]  # node index
    dst: NDArray[np.int32]  # node index
    tier: tuple[str, ...]  # "gpu-leaf", "leaf-spine", "spine-leaf", ... (src kind-dst kind)
    bandwidth_Bps: NDArray[np.float64]
    prop_delay_s: NDArray[np.float64]
    buffer_bytes: NDArray[np.float64]  # downstream ingress buffer per lane (credits or PFC)
    reverse: NDArray[np.int32]  # index of the other direction of the same cable
    index: Mapping[str, int] = field(repr=False)

    def __len__(self) -> int:
        return len(self.name)
