"""Where the plane engines run: the pool the coordinator calls them through.

A pool calls one ``PlaneEngine`` method on every plane at once and returns the results
by plane. ``InProcessPool`` runs the engines here, one after the other: the reference,
and what a small fabric wants. An adapter outside the core runs them as actors of a
distributed engine (``cluster.ray_planes.RayPool``); a plane whose engine dies raises
``PlaneLostError`` there, naming the plane.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from fabric_core.planes.plane import PlaneEngine, PlaneSpec
from fabric_core.runtime.engine import RunEndedError


class PlaneLostError(RunEndedError):
    """A plane's engine is gone (its process or machine died): the run cannot go on."""

    def __init__(self, plane: int, reason: str) -> None:
        super().__init__(f"plane {plane}'s engine was lost: {reason}")
        self.plane = plane
        self.reason = reason


class PlanePool(Protocol):
    """Plane engines, one per plane, called together."""

    #: what the console and the reports say runs the planes ("in-process", "ray")
    placement: str

    def call(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        """``PlaneEngine.<method>(*args[p])`` on every plane ``p`` at once; the results by
        plane.

        Raises:
            PlaneLostError: a plane's engine died.
        """

    def call_one(self, plane: int, method: str, *args: Any) -> Any:
        """``PlaneEngine.<method>(*args)`` on one plane.

        Raises:
            PlaneLostError: that plane's engine died.
        """

    def close(self) -> None:
        """Stop the engines (and whatever the pool started to run them)."""


class InProcessPool:
    """The plane engines in this process, called one after the other."""

    placement = "in-process"

    def __init__(self, specs: Sequence[PlaneSpec]) -> None:
        self.engines = [PlaneEngine(spec) for spec in specs]

    def call(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        return [getattr(e, method)(*a) for e, a in zip(self.engines, args, strict=True)]

    def call_one(self, plane: int, method: str, *args: Any) -> Any:
        return getattr(self.engines[plane], method)(*args)

    def close(self) -> None:
        self.engines = []
