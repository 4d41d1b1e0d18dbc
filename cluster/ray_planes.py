"""One engine per plane on Ray: each plane of a multi-plane fabric a Ray actor (issue 19).

``RayPool(specs)`` is a ``fabric_core.planes.pool.PlanePool`` (placement ``"ray"``): one
actor per plane, each a ``PlaneEngine`` in its own worker process. ``call`` submits the
method to every actor, then waits for all of them; an actor that died (its process was
killed, its machine went away) raises ``PlaneLostError`` naming its plane, which the
coordinator turns into a ``plane_lost`` event and the end of the run.

Where the actors run: the Ray cluster this process is already connected to, else the one
at ``address`` or ``RAY_ADDRESS`` (Ray's own setting), else a local cluster started here,
on this machine only (every Ray server on the loopback interface, no dashboard, no usage
statistics, the workers' output not relayed to this terminal). A pool stops the local
cluster it started when it closes, and only disconnects from one it connected to.

Each actor reserves ``threads_per_plane`` of the cluster's CPUs and gives numba as many
threads (1 by default: two planes on two cores run side by side, one core each).

Needs the ``cluster`` extra (``pip install -e '.[cluster]'``). The core never imports
Ray; this module imports it only when a pool is made or a cluster started.
docs/OPERATIONS.md, "One engine per plane", says why Ray and what the batch costs.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from fabric_core.planes.plane import PlaneEngine, PlaneSpec
from fabric_core.planes.pool import PlaneLostError

#: what to install when Ray is missing
INSTALL_HINT = "one engine per plane on Ray needs the cluster extra: pip install -e '.[cluster]'"
#: the object store of a local cluster: a plane's snapshot is about 220 bytes a link
#: (0.3 MB at 512 GPUs, of the order of 100 MB at 100k)
LOCAL_OBJECT_STORE_BYTES = 512 * 1024**2
#: calls whose timings an actor keeps until asked (``RayPool.timings``)
TIMINGS_KEPT = 10_000
#: results and arguments up to this size go inline with a call instead of through the
#: object store (Ray's default: 100 KiB): a batch's parts and completions are 0.1-1 MB a
#: plane at 2,048 GPUs, and a round trip with 800 KiB takes 4.9 ms inline, 8.2 ms stored
INLINE_BYTES = 4 * 1024**2
#: how long the cluster may take to place and build every plane's engine
START_TIMEOUT_S = 300.0


class ClusterExtraMissingError(ImportError):
    """Ray is not installed (the ``cluster`` extra)."""


class ClusterError(RuntimeError):
    """The Ray cluster could not be reached or started, or did not start the planes."""


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ClusterExtraMissingError(INSTALL_HINT) from exc
    return ray


@contextlib.contextmanager
def _loopback_only() -> Iterator[None]:
    """While a local cluster starts: every Ray server on 127.0.0.1, no usage statistics,
    and the workers at the niceness of this process (Ray's default is 15).

    Ray binds its servers to the address it finds for this node, which is the machine's
    routable one unless Ray clusters are switched off (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER
    = 0``: then the loopback one). Ray reads that setting when it is imported, so it is
    also set on an already imported Ray for the while; the processes the cluster starts
    inherit the environment of the start.
    """
    saved = {k: os.environ.get(k) for k in _LOCAL_ENV}
    os.environ.update(_LOCAL_ENV)
    _ray()
    # Ray's own constant (ray._private), read when Ray finds this node's address
    from ray._private import ray_constants as constants

    was = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if was is None:
            del constants.ENABLE_RAY_CLUSTER
        else:
            constants.ENABLE_RAY_CLUSTER = was
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


#: Ray starts its workers at niceness 15: a plane engine is the run's main work, and
#: would wait behind any other process of the machine (its driver's included)
_LOCAL_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_worker_niceness": "0",
}


def start_local_cluster(
    num_cpus: int | None = None, object_store_bytes: int = LOCAL_OBJECT_STORE_BYTES
) -> None:
    """Start a Ray cluster on this machine, on the loopback interface only, and connect
    this process to it (``ray.shutdown()`` stops it).

    Raises:
        ClusterExtraMissingError: Ray is not installed.
    """
    with _loopback_only():
        _ray().init(
            num_cpus=num_cpus or os.cpu_count() or 1,
            include_dashboard=False,
            object_store_memory=object_store_bytes,
            _system_config={"max_direct_call_object_size": INLINE_BYTES},
            logging_level=logging.ERROR,
            log_to_driver=False,
        )


#: how long a cluster's head may take to accept a connection before the run gives up
#: (Ray itself retries a wrong address for minutes)
REACH_TIMEOUT_S = 5.0


def check_reachable(address: str, timeout_s: float = REACH_TIMEOUT_S) -> None:
    """Fail fast when ``address`` (``HOST:PORT``, a Ray cluster's head) takes no TCP
    connection; other forms (``auto``, ``ray://...``) are left to Ray.

    Raises:
        ClusterError: nothing listens there, or the host does not resolve.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or "://" in address:
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise ClusterError(
            f"could not connect to the Ray cluster at {address} (RAY_ADDRESS): "
            f"{exc.strerror or exc}; start one there with `ray start --head`, or unset "
            "RAY_ADDRESS for a local cluster"
        ) from None


def connect(address: str | None = None, planes: int = 1) -> bool:
    """Connect this process to a Ray cluster unless it is: the one at ``address`` or
    ``RAY_ADDRESS``, else a local one started here (enough CPUs for ``planes`` actors).
    Returns whether this call connected it (and so should disconnect it).

    Raises:
        ClusterExtraMissingError: Ray is not installed.
        ClusterError: the cluster could not be reached or started (Ray's error says why).
    """
    ray = _ray()
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is not None:
        check_reachable(address)
    try:
        if address is None:
            start_local_cluster(num_cpus=max(os.cpu_count() or 1, planes))
        else:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    except Exception as exc:
        where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
        raise ClusterError(f"could not connect to {where}: {exc}") from exc
    return True


def disconnect() -> None:
    """Disconnect this process from its Ray cluster (a local one started here stops)."""
    _ray().shutdown()


class PlaneActor:
    """What runs in a plane's Ray actor: the plane's engine, and the process it is in."""

    def __init__(self, spec: PlaneSpec, threads: int) -> None:
        from fabric_core.tick.kernels._jit import MOST_THREADS, use_threads

        use_threads(max(1, min(threads, MOST_THREADS)))
        self.engine = PlaneEngine(spec)
        #: the latest calls: (method, wall seconds in the engine, CPU seconds of the process)
        self._timings: deque[tuple[str, float, float]] = deque(maxlen=TIMINGS_KEPT)

    def call(self, method: str, *args: Any) -> Any:
        """``PlaneEngine.<method>(*args)``."""
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return getattr(self.engine, method)(*args)
        finally:
            self._timings.append((method, time.perf_counter() - t0, time.process_time() - c0))

    def timings(self) -> list[tuple[str, float, float]]:
        """The calls since the last time asked (the latest ``TIMINGS_KEPT``): each one's
        method, wall seconds in the engine and CPU seconds of the actor's process then."""
        out = list(self._timings)
        self._timings.clear()
        return out

    def pid(self) -> int:
        """The actor's process id."""
        return os.getpid()

    def niceness(self) -> int:
        """The actor's process's niceness."""
        return os.nice(0)


class RayPool:
    """The plane engines as Ray actors, one per plane (see the module docstring)."""

    placement = "ray"

    def __init__(
        self,
        specs: Sequence[PlaneSpec],
        *,
        address: str | None = None,
        threads_per_plane: int = 1,
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        """Start an actor per plane of ``specs`` (in their order) and wait until each has
        built its engine.

        Raises:
            ClusterExtraMissingError: Ray is not installed.
            ClusterError: the cluster could not be reached or started, or did not start
                every plane's engine within ``start_timeout_s``.
            PlaneLostError: a plane's engine died while it was built.
        """
        self._ray = ray = _ray()
        self._owns = connect(address, len(specs) * threads_per_plane)
        self.address: str = ray.get_runtime_context().gcs_address
        self.planes = [spec.plane for spec in specs]
        actor = ray.remote(PlaneActor).options(
            num_cpus=threads_per_plane, max_restarts=0, max_task_retries=0
        )
        self.actors: list[Any] = [actor.remote(spec, threads_per_plane) for spec in specs]
        try:
            self.pids: list[int] = self._get(
                [a.pid.remote() for a in self.actors], timeout=start_timeout_s
            )
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise ClusterError(
                f"the Ray cluster at {self.address} has not started the {len(specs)} plane "
                f"engines in {start_timeout_s:g} s: each needs {threads_per_plane} CPU"
            ) from None
        except BaseException:
            self.close()
            raise

    def _get(self, refs: Sequence[Any], timeout: float | None = None) -> list[Any]:
        """The results of ``refs`` (one per plane, in plane order); a dead actor raises
        ``PlaneLostError`` naming its plane."""
        ray = self._ray
        lost = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError)
        try:
            return list(ray.get(list(refs), timeout=timeout))
        except lost as exc:
            first: BaseException = exc
        # which plane: the first whose result is an actor's death
        for i, ref in enumerate(refs):
            try:
                ray.get(ref, timeout=timeout)
            except lost as exc:
                raise PlaneLostError(self.planes[i], _reason(exc, self._pid_of(i))) from exc
        raise PlaneLostError(self.planes[0], _reason(first, None)) from first

    def _pid_of(self, i: int) -> int | None:
        """The process id of the ``i``-th plane's actor, once known."""
        pids = getattr(self, "pids", None)
        return pids[i] if pids is not None else None

    def call(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        if len(args) != len(self.actors):
            raise ValueError(f"{len(args)} argument lists for {len(self.actors)} planes")
        return self._get(
            [a.call.remote(method, *x) for a, x in zip(self.actors, args, strict=True)]
        )

    def call_one(self, plane: int, method: str, *args: Any) -> Any:
        i = self.planes.index(plane)
        ref = self.actors[i].call.remote(method, *args)
        try:
            return self._ray.get(ref)
        except (self._ray.exceptions.RayActorError, self._ray.exceptions.WorkerCrashedError) as exc:
            raise PlaneLostError(plane, _reason(exc, self._pid_of(i))) from exc

    def timings(self) -> list[list[tuple[str, float, float]]]:
        """Per plane, its engine's calls since the last time asked (the latest
        ``TIMINGS_KEPT``): method, wall seconds in the engine and CPU seconds of the
        actor's process meanwhile (less than the wall: the machine was busy). The rest of a call's
        wall is Ray's, and the wait for the slower plane (``benchmarks/bench_planes.py``).

        Raises:
            PlaneLostError: a plane's engine died.
        """
        return self._get([a.timings.remote() for a in self.actors])

    def close(self) -> None:
        """Kill the actors; stop the local cluster this pool started (or disconnect from
        the cluster it connected to). Safe to call twice."""
        ray = self._ray
        for a in self.actors if hasattr(self, "actors") else []:
            with contextlib.suppress(Exception):
                ray.kill(a, no_restart=True)
        self.actors = []
        if self._owns:
            self._owns = False
            ray.shutdown()


def _reason(exc: BaseException, pid: int | None) -> str:
    """Why an actor is gone, in a line: Ray's message is a page."""
    ray = _ray()
    where = f" (pid {pid})" if pid is not None else ""
    if isinstance(exc, ray.exceptions.ActorDiedError):
        what = "its process died" if "worker process has died" in str(exc) else "it died"
    elif isinstance(exc, ray.exceptions.WorkerCrashedError):
        what = "its process crashed"
    else:
        what = "it is unreachable"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"its Ray actor{where} is gone, {what}: {type(exc).__name__}: {first}"


def ray_pool_factory(
    address: str | None = None, *, threads_per_plane: int = 1
) -> Callable[[Sequence[PlaneSpec]], RayPool]:
    """What ``PlanedFabric`` takes to run its planes as Ray actors on the cluster at
    ``address`` (None: ``RAY_ADDRESS``, else a local cluster)."""
    return functools.partial(RayPool, address=address, threads_per_plane=threads_per_plane)
