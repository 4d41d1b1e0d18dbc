"""Fault ``version_mismatch``: IBGDA's driver / CUDA / communication-library versions do not match.

Article C3: with mismatched versions "WQE posting fails or communication hangs"
(DeepEP issues #553/#707: ``timeout (dispatch CPU)`` hangs with a mismatched
NVSHMEM; #139/#303: ``init failed for transport: IBGDA``; NVSHMEM #82: a silent
CQ hang). On a GPU under the fault, WQE posts fail (``hang = 0``: counted, the
message is never sent) or are accepted and never executed (``hang = 1``: the
completion never comes; a bring-up check finds it by timeout). The endpoint
model (``fabric_core.endpoint``) applies it through ``fault_masks``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from fabric_core.commands import CommandError, InjectFault, unknown
from fabric_core.faults import FAULT_KINDS, Fault, FaultKind, register_fault_kind
from fabric_core.snapshot import Event

if TYPE_CHECKING:
    from fabric_core.fabric import Fabric

VERSION_MISMATCH = FaultKind(
    "version_mismatch",
    "gpu",
    {"hang": (0.0, 0.0, 1.0)},
    "IBGDA driver / CUDA / NVSHMEM versions do not match on a GPU: WQE posts fail "
    "(hang=0, counted) or are accepted and never complete (hang=1, found by timeout)",
)
register_fault_kind(VERSION_MISMATCH)


def fault_masks(fabric: Fabric) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Per-node masks (post fails, post hangs) from the active ``version_mismatch`` faults."""
    n = len(fabric.topo.nodes)
    fail = np.zeros(n, dtype=bool)
    hang = np.zeros(n, dtype=bool)
    for f in fabric.faults.active("version_mismatch"):
        ni = fabric.topo.nodes.index.get(f.target)
        if ni is None:
            continue
        if float(f.params.get("hang", 0.0)) >= 0.5:
            hang[ni] = True
        else:
            fail[ni] = True
    return fail, hang


def inject_gpu_fault(fabric: Fabric, cmd: InjectFault) -> Fault:
    """Inject a GPU-targeted fault (e.g. ``version_mismatch``).

    Uses ``fabric.faults.inject`` when it accepts GPU targets; until then
    (``FaultBook.check`` knows links and switches only) it validates the command
    here and records the fault in the same book, so snapshots and ``clear`` see it.
    """
    kind = FAULT_KINDS.get(cmd.kind)
    if kind is None or kind.target != "gpu":
        return fabric.faults.inject(cmd, fabric.sim_time_s)
    nodes = fabric.topo.nodes
    ni = nodes.index.get(cmd.target)
    if ni is None or nodes.kind[ni] != "gpu":
        gpus = [n for n, k in zip(nodes.name, nodes.kind, strict=True) if k == "gpu"]
        raise unknown("GPU", cmd.target, gpus)
    try:
        return fabric.faults.inject(cmd, fabric.sim_time_s)
    except CommandError:
        pass  # FaultBook.check does not know GPU targets yet: record the fault here
    params: dict[str, float | str] = {}
    extra = sorted(set(cmd.params) - set(kind.params))
    if extra:
        raise CommandError(f"{cmd.kind} takes no parameter(s) {', '.join(extra)}")
    for name, (default, lo, hi) in kind.params.items():
        value = cmd.params.get(name, default)
        if not isinstance(value, int | float) or isinstance(value, bool) or not lo <= value <= hi:
            raise CommandError(f"{cmd.kind}: {name} must be a number in [{lo:g}, {hi:g}]")
        params[name] = float(value)
    now = fabric.sim_time_s
    book = fabric.faults
    fid = f"f{next(book._ids)}"
    fault = Fault(
        id=fid,
        kind=kind.name,
        target=cmd.target,
        params=params,
        injected_at_s=now,
        links=np.zeros(0, dtype=np.int64),
        clear_at_s=None if cmd.duration_s is None else now + cmd.duration_s,
    )
    book.faults[fid] = fault
    fabric.events.append(
        Event(
            now,
            "warning",
            "fault_injected",
            cmd.target,
            f"{kind.name} injected on {cmd.target} ({fid})",
        )
    )
    return fault
