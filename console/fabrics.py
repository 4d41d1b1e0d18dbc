"""The fabric a console, a server or a headless run steps: one ``Fabric``, or, with
``--planes-distributed``, a multi-plane fabric run one engine per plane, each a Ray actor
(``fabric_core.planes``, ``cluster.ray_planes``; docs/OPERATIONS.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fabric_core.runtime.fabric import Fabric, Solver

if TYPE_CHECKING:
    from fabric_core.planes.coordinator import PlanedFabric
    from fabric_core.runtime.scenario import Scenario

#: ``--plane-batch``'s default: ticks the planes run per round trip (docs/OPERATIONS.md)
DEFAULT_PLANE_BATCH = 8


@dataclass(frozen=True)
class PlaneOptions:
    """How to run a fabric one engine per plane (picklable: a child process builds it)."""

    batch_ticks: int = DEFAULT_PLANE_BATCH
    #: the Ray cluster's address; None: ``RAY_ADDRESS``, else a local cluster
    address: str | None = None


def make_fabric(
    scn: Scenario, solver: Solver = "compiled", planes: PlaneOptions | None = None
) -> Fabric | PlanedFabric:
    """The scenario's fabric: one process, or one Ray actor per plane.

    Raises:
        ScenarioError: the scenario does not load, or cannot run one engine per plane.
        ImportError: ``planes`` given and Ray is not installed (the message says how).
        RuntimeError: the Ray cluster could not be reached or started.
    """
    if planes is None:
        return Fabric.from_scenario(scn, solver)
    from cluster.ray_planes import ray_pool_factory
    from fabric_core.planes.coordinator import PlanedFabric

    return PlanedFabric(
        scn, ray_pool_factory(planes.address), batch_ticks=planes.batch_ticks, solver=solver
    )


def close_fabric(fabric: object) -> None:
    """Stop what a fabric started to run on (a plane engine's actors); nothing for one
    ``Fabric``."""
    close = getattr(fabric, "close", None)
    if callable(close):
        close()
