"""Fault ``version_mismatch``: IBGDA's driver / CUDA / communication-library versions do not match.

Article C3: with mismatched versions "WQE posting fails or communication hangs"
(DeepEP issues #553/#707: ``timeout (dispatch CPU)`` hangs with a mismatched
NVSHMEM; #139/#303: ``init failed for transport: IBGDA``; NVSHMEM #82: a silent
CQ hang). On a GPU under the fault, WQE posts fail (``hang = 0``: counted, the
message is never sent) or are accepted and never executed (``hang = 1``: the
completion never comes; a bring-up check finds it by timeout). The endpoint
model (``fabric_core.endpoints.model``) applies it through ``fault_masks``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.faults.book import FaultBook, FaultKind, register_fault_kind
from fabric_core.net.tables import NodeTable

VERSION_MISMATCH = FaultKind(
    "version_mismatch",
    "gpu",
    {"hang": (0.0, 0.0, 1.0)},
    "IBGDA driver / CUDA / NVSHMEM versions do not match on a GPU: WQE posts fail "
    "(hang=0, counted) or are accepted and never complete (hang=1, found by timeout)",
)
register_fault_kind(VERSION_MISMATCH)


def fault_masks(nodes: NodeTable, faults: FaultBook) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Per-node masks (post fails, post hangs) from the active ``version_mismatch`` faults."""
    n = len(nodes)
    fail = np.zeros(n, dtype=bool)
    hang = np.zeros(n, dtype=bool)
    for f in faults.active("version_mismatch"):
        ni = nodes.index.get(f.target)
        if ni is None:
            continue
        if float(f.params.get("hang", 0.0)) >= 0.5:
            hang[ni] = True
        else:
            fail[ni] = True
    return fail, hang
