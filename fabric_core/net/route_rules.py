"""The rules both routers share (``routing`` for generated topologies, ``table_route``
for file ones): the longest path, the flow hash, adaptive routing's cost quantum and
spraying's width. A module of its own so that neither router imports the other's.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

MAX_HOPS = 6

#: A flow's routing key is ``tag * FLOW_KEY_STRIDE + workload``: the flow hash tells apart
#: the flows of two workloads that use the same tags (a prime, so that neither part's
#: pattern repeats in the other; tags stay below 2**43, so the key fits int64)
FLOW_KEY_STRIDE = 1_000_003

#: a routing cost at or above this marks a link that must not be used
UNUSABLE_COST = 1e30

#: Adaptive routing treats candidate paths whose queueing delay differs by less
#: than this as equally good (a model choice: about two 4 KiB packets at 400 Gb/s).
ADAPTIVE_COST_QUANTUM_S = 100e-9

#: Most sub-flows a sprayed flow is split into. Per-packet spraying spreads a flow over
#: every equal-cost path; the fluid model carries one sub-flow per path used, so the
#: flow table grows by this factor. 8 covers every spine of the usual 2-tier fabric and
#: keeps the solve's entry count bounded on wide 3-tier ones (where the 8 paths are
#: spread evenly over the spines, and over cores round-robin).
SPRAY_MAX_WAYS = 8


def flow_hash(*arrays: NDArray[np.int64]) -> NDArray[np.uint64]:
    """A cheap, deterministic 64-bit mix (splitmix64 finaliser) of integer arrays."""
    h = np.zeros(arrays[0].shape, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for a in arrays:
            h ^= a.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15) + (h << np.uint64(6))
            h ^= h >> np.uint64(30)
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(27)
            h *= np.uint64(0x94D049BB133111EB)
            h ^= h >> np.uint64(31)
    return h
