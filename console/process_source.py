"""Engines in their own processes: one ``FabricSource`` per fabric, one process each.

Why: in one process the engines and the console share one interpreter lock. The tick
is mostly Python around compiled kernels, so two engines (the compare view) and the
UI take turns on one core: on the default scenario at its 8 µs tick each side reached
2.8e-3 x real time where a tick on its own allowed about 9e-3 (session 11; the compare
view's speeds since are in docs/PERFORMANCE.md, "The compare view").
Here each engine runs in a child process (``multiprocessing``, spawned), so on a
2-core machine both fabrics step at once and the UI only reads their snapshots.

What stays the same for the console (``FabricSource``): ``latest()`` is the child's
latest published snapshot, ``submit()`` applies a command at the child engine's next
tick boundary and returns its result. ``ProcessEngines.submit_together`` is
``Engine.submit_together`` across processes: each engine is held at the boundary it
is heading for (it finishes its batch and starts no other), the command goes to all
at the furthest of those boundaries, and each applies it there. The lockstep
(``Engine.lockstep`` in one process) goes through shared memory: every engine writes
its simulated time after each batch and waits while a running peer is behind it
(``SharedClocks``), so both sides show the same simulated moment within a batch.

A child that dies (or cannot build its fabric) is reported, not fatal: its source
keeps the last snapshot, says why in its ``description`` and ``failure``, refuses
commands with that reason, and its clock is marked closed so that the other side
stops waiting for it and keeps running.

Snapshots go to the console only as fast as it reads them: the child sends one, then
the next only once the console has taken the last (``latest()`` returned it; the
console asks with ``("more",)``), keeping meanwhile only the newest unsent one. So the
console takes in (unpickles) about one snapshot per refresh, not every one the engine
publishes (on ``cluster-100k`` each carries 131 MB of link arrays). Messages other
than snapshots (answers to commands, holds) go at once, and a snapshot published before
one of them goes ahead of it, as before. The link arrays (every array of 64 kB or more)
do not go through the pipe: the child writes them into an anonymous shared-memory file
(``memfd``) whose descriptor it passes along the pipe, and the console's arrays are
read-only views of that memory, so taking in a snapshot copies nothing of its size.

The pipe carries pickled tuples. Parent to child: ``("cmd", n, command)``,
``("hold", n)``, ``("due", n, hold_n, command, at_s)``, ``("release", hold_n)``,
``("more",)``, ``("stop",)``. Child to parent: ``("ready",)``, ``("failed", text)``,
``("static", nodes, links)``, ``("snap", snapshot, health, published)``, ``("shm",
pickled, layout)`` (a ``snap`` pickled with its large arrays out of band, followed on the
socket by the memfd that holds them at ``layout``'s offsets), ``("result", n, result)``,
``("held", n, boundary_s)``, ``("compiling", kernel)`` (numba began compiling ``kernel``;
None: it is done). A snapshot refers to the node and link tables sent once in
``static`` (they change only when the fabric is rebuilt).

The first run after an install compiles the tick's kernels (some 20 s, in the child's
first ticks); the child says which one it compiles as it goes (``compiling``), so that
the console can say why the simulated clock stands still.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import faulthandler
import io
import itertools
import math
import mmap
import multiprocessing
import os
import pickle
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from console.compiling import Compiling
from console.fabrics import PlaneOptions, close_fabric, make_fabric
from fabric_core.commands import Command, CommandResult
from fabric_core.runtime.engine import Engine, EngineHealth
from fabric_core.runtime.fabric import Solver
from fabric_core.runtime.scenario import Scenario
from fabric_core.runtime.snapshot import LinkTable, NodeTable, Snapshot

#: Doubles per engine in the shared clock array: simulated time, running, closed, and
#: where the engine is heading (the end of its batch; its time between batches).
SLOT = 4
#: How long a command waits for the child's reply before it is reported as lost.
REPLY_TIMEOUT_S = 30.0
#: How long ``ProcessEngines.wait_ready`` waits for every child to build its fabric.
READY_TIMEOUT_S = 120.0
#: What ``health`` says before the first snapshot arrives.
STARTING = EngineHealth("ok", 0.0, 0, 0)
#: Arrays of at least this many bytes go through shared memory, not the pipe.
OUT_OF_BAND_BYTES = 1 << 16
#: ``latest_fresh``: a snapshot taken in longer ago than this is not fresh ...
FRESH_S = 1.0
#: ... and it waits up to this long for the next one.
FRESH_WAIT_S = 1.0
#: Compiles at most this far apart are one stretch of compiling (``Compiling.since``).
COMPILE_GAP_S = 2.0


@dataclass(frozen=True)
class EngineSpec:
    """What a child needs to build and run one fabric (pickled to it at start)."""

    scenario: Scenario
    description: str
    speed: float
    max_tick_s: float | None = None
    solver: Solver = "compiled"
    publish_interval_s: float = 0.1
    #: run it one engine per plane (``--planes-distributed``); None: one process
    planes: PlaneOptions | None = None


class EngineGoneError(RuntimeError):
    """The child process is not there to answer (it stopped, or never started)."""


# ----------------------------------------------------------------- shared clocks
class SharedClocks:
    """``PeerClocks`` over an array of doubles shared by every engine of a group.

    ``holds`` are the owner's: while any is set the engine starts no batch
    (``submit_together`` keeps it at its boundary until the command arrives)."""

    def __init__(self, array: Any, slot: int, engines: int) -> None:
        self.array = array
        self.slot = slot
        self.engines = engines
        self.holds: set[int] = set()

    def hold(self, sim_time_s: float, slack_s: float) -> bool:
        if self.holds:
            return True
        a = self.array
        for k in range(self.engines):
            if k == self.slot:
                continue
            base = SLOT * k
            running, closed = a[base + 1], a[base + 2]
            if running and not closed and a[base] < sim_time_s - slack_s:
                return True
        return False

    def meet(self, sim_time_s: float, slack_s: float) -> float | None:
        a = self.array
        best: float | None = None
        for k in range(self.engines):
            base = SLOT * k
            if k == self.slot or not a[base + 1] or a[base + 2]:
                continue
            heading = a[base + 3]
            if heading > sim_time_s + slack_s and (best is None or heading < best):
                best = heading
        return best

    def report(self, sim_time_s: float, *, heading_s: float, running: bool, closed: bool) -> None:
        base = SLOT * self.slot
        # heading first: a peer that reads between the two writes sees no time it could
        # run past (the old time is behind the new heading)
        self.array[base + 3] = heading_s
        self.array[base] = sim_time_s
        self.array[base + 1] = 1.0 if running else 0.0
        self.array[base + 2] = 1.0 if closed else 0.0


# ----------------------------------------------------------------- pickling
class _TablesPickler(pickle.Pickler):
    """Pickles a snapshot without the node and link tables the parent already has."""

    def __init__(
        self,
        file: io.BytesIO,
        tables: tuple[NodeTable, LinkTable] | None,
        buffer_callback: Callable[[pickle.PickleBuffer], Any] | None = None,
    ) -> None:
        super().__init__(file, protocol=5, buffer_callback=buffer_callback)
        self.tables = tables

    def persistent_id(self, obj: object) -> str | None:
        tables = self.tables
        if tables is not None:
            if obj is tables[0]:
                return "nodes"
            if obj is tables[1]:
                return "links"
        return None


class _TablesUnpickler(pickle.Unpickler):
    def __init__(
        self,
        data: bytes,
        tables: tuple[NodeTable, LinkTable] | None,
        buffers: Sequence[memoryview] | None = None,
    ) -> None:
        super().__init__(io.BytesIO(data), buffers=buffers)
        self.tables = tables

    def persistent_load(self, pid: object) -> object:
        if self.tables is None:
            raise pickle.UnpicklingError("a snapshot arrived before its node and link tables")
        return self.tables[0] if pid == "nodes" else self.tables[1]


def _fd_socket(conn: Connection) -> socket.socket | None:
    """A socket on ``conn``'s descriptor to pass memfds along, or None where there is
    none (not Linux, or not a Unix socket): snapshots then go whole through the pipe."""
    if not hasattr(os, "memfd_create"):
        return None
    try:
        sock = socket.socket(fileno=os.dup(conn.fileno()))
    except OSError:
        return None
    if sock.family != socket.AF_UNIX:
        sock.close()  # the duplicate only
        return None
    return sock


def _recv_fd(sock: socket.socket) -> int:
    """The descriptor passed with the next byte on ``sock`` (``_Outbox._send_shm``)."""
    size = array.array("i").itemsize
    flags = getattr(socket, "MSG_CMSG_CLOEXEC", 0)
    data, ancillary, _, _ = sock.recvmsg(1, socket.CMSG_SPACE(size), flags)
    if not data:
        raise EOFError
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS and len(payload) >= size:
            fds = array.array("i")
            fds.frombytes(payload[: len(payload) - len(payload) % size])
            for extra in fds[1:]:
                os.close(extra)
            return fds[0]
    raise pickle.UnpicklingError("a snapshot's shared memory did not come with it")


# ----------------------------------------------------------------- the child
class _Outbox:
    """The child's sender thread: messages in order; of the snapshots only the latest
    one not yet sent, and that only once the parent has taken the last one it was sent
    (``grant``), or ahead of a message queued after it (a slow parent skips snapshots,
    never holds the engine up)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._cond = threading.Condition()
        self._queue: deque[tuple[Any, ...]] = deque()
        self._closed = False
        self._credit = True  # the first snapshot goes at once
        self._tables: tuple[NodeTable, LinkTable] | None = None
        self._sock = _fd_socket(conn)
        self._thread = threading.Thread(target=self._run, name="fabtop-outbox", daemon=True)
        self._thread.start()

    def put(self, msg: tuple[Any, ...]) -> None:
        with self._cond:
            self._queue.append(msg)
            self._cond.notify()

    def snapshot(self, snap: Snapshot, health: EngineHealth, published: int) -> None:
        with self._cond:
            for i, queued in enumerate(self._queue):
                if queued[0] == "snap":
                    del self._queue[i]
                    break
            self._queue.append(("snap", snap, health, published))
            self._cond.notify()

    def grant(self) -> None:
        """The parent has taken the last snapshot sent: the next may go."""
        with self._cond:
            self._credit = True
            self._cond.notify()

    def close(self) -> None:
        """Send what is queued (the last snapshot too), then stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout=10)

    def _sendable(self) -> bool:
        queue = self._queue
        if not queue:
            return self._closed
        # a snapshot waits for the parent, unless something queued after it must go
        return queue[0][0] != "snap" or self._credit or len(queue) > 1 or self._closed

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(self._sendable)
                if not self._queue:
                    return
                msg = self._queue.popleft()
                if msg[0] == "snap":
                    self._credit = False
            try:
                self._send(msg)
            except (OSError, EOFError):
                return  # the parent is gone: nobody to tell
            except Exception:  # a message that cannot be sent: say so, send the others
                traceback.print_exc()

    def _send(self, msg: tuple[Any, ...]) -> None:
        if msg[0] == "snap":
            snap: Snapshot = msg[1]
            tables = self._tables
            if tables is None or tables[0] is not snap.nodes or tables[1] is not snap.links:
                self.conn.send_bytes(pickle.dumps(("static", snap.nodes, snap.links), 5))
                self._tables = tables = (snap.nodes, snap.links)
            buf = io.BytesIO()
            large: list[pickle.PickleBuffer] = []

            def out_of_band(pb: pickle.PickleBuffer) -> bool:
                if pb.raw().nbytes < OUT_OF_BAND_BYTES:
                    return True  # in band
                large.append(pb)
                return False

            _TablesPickler(buf, tables, None if self._sock is None else out_of_band).dump(msg)
            if large:
                self._send_shm(buf.getvalue(), large)
            else:
                self.conn.send_bytes(buf.getbuffer())
        else:
            self.conn.send_bytes(pickle.dumps(msg, 5))

    def _send_shm(self, pickled: bytes, large: list[pickle.PickleBuffer]) -> None:
        """The snapshot's large arrays into a memfd, its descriptor along the socket."""
        assert self._sock is not None
        layout: list[tuple[int, int]] = []
        end = 0
        for pb in large:
            n = pb.raw().nbytes
            layout.append((end, n))
            end += (n + 63) // 64 * 64
        fd = os.memfd_create("fabtop-snapshot", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, max(end, 1))
            for pb, (offset, n) in zip(large, layout, strict=True):
                view = pb.raw()
                done = 0
                while done < n:
                    done += os.pwrite(fd, view[done:], offset + done)
            self.conn.send_bytes(pickle.dumps(("shm", pickled, layout), 5))
            fds = array.array("i", [fd])
            self._sock.sendmsg([b"F"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        finally:
            os.close(fd)  # the parent has its own now; the memory goes with the last map


class _Child:
    """The engine side: runs one engine and answers the parent (in the child process)."""

    def __init__(self, conn: Connection, clocks: SharedClocks, spec: EngineSpec) -> None:
        self.conn = conn
        self.clocks = clocks
        self.spec = spec
        self.outbox = _Outbox(conn)
        self.engine: Engine | None = None
        self.published = 0  # snapshots the engine has published
        self._cancelled: set[int] = set()  # holds released before they arrived
        self._tasks: set[asyncio.Task[None]] = set()

    async def serve(self) -> None:
        spec = self.spec
        try:
            fabric = make_fabric(spec.scenario, spec.solver, spec.planes)
            engine = Engine(
                fabric,
                speed=spec.speed,
                publish_interval_s=spec.publish_interval_s,
                max_tick_s=spec.max_tick_s,
                on_publish=self._forward,
            )
        except Exception as exc:  # a scenario the core refuses: say why, then end
            self.clocks.report(0.0, heading_s=0.0, running=False, closed=True)
            self.outbox.put(("failed", f"cannot build the fabric: {exc}"))
            self.outbox.close()
            return
        self.engine = engine
        engine.clocks = self.clocks
        self.outbox.put(("ready",))
        loop = asyncio.get_running_loop()
        loop.add_reader(self.conn.fileno(), self._readable)
        from fabric_core.tick.kernels._jit import compiles_watched  # numba: in the child only

        try:
            # its last snapshot goes out as it ends
            with compiles_watched(lambda kernel: self.outbox.put(("compiling", kernel))):
                await engine.run()
        finally:
            with contextlib.suppress(ValueError, OSError):
                loop.remove_reader(self.conn.fileno())
            self.outbox.close()
            close_fabric(fabric)

    def _forward(self, snap: Snapshot) -> None:
        """Every snapshot the engine publishes (a pause's too: same tick, not running)."""
        assert self.engine is not None
        self.published += 1
        self.outbox.snapshot(snap, self.engine.health, self.published)

    def _readable(self) -> None:
        engine = self.engine
        assert engine is not None
        try:
            msg = self.conn.recv()
        except (EOFError, OSError):  # the console is gone: stop
            asyncio.get_running_loop().remove_reader(self.conn.fileno())
            engine.stop()
            return
        kind = msg[0]
        if kind == "more":
            self.outbox.grant()
        elif kind == "cmd":
            self._answer(msg[1], engine.submit(msg[2]))
        elif kind == "hold":
            n = msg[1]
            if n in self._cancelled:
                self._cancelled.discard(n)
            else:
                # set before anything awaits: no batch starts past the boundary sent
                self.clocks.holds.add(n)
            self.outbox.put(("held", n, engine.boundary_s))
        elif kind == "due":
            _, n, hold_n, command, at_s = msg
            reply = engine.submit_at(command, at_s)  # queued before the hold goes
            self._release(hold_n)
            self._answer(n, reply)
        elif kind == "release":
            self._release(msg[1])
        elif kind == "stop":
            engine.stop()

    def _release(self, hold_n: int) -> None:
        if hold_n in self.clocks.holds:
            self.clocks.holds.discard(hold_n)
        else:
            self._cancelled.add(hold_n)

    def _answer(self, n: int, reply: Any) -> None:
        async def answer() -> None:
            result = await reply
            self.outbox.put(("result", n, result))

        task = asyncio.get_running_loop().create_task(answer())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _child_main(
    conn: Connection, array: Any, slot: int, engines: int, spec: EngineSpec, log: str
) -> None:
    """The child process's entry point."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the console decides when it ends
    # the console owns the terminal: anything printed here goes to the log instead
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a stack dump, for a hang
    from fabric_core.tick.kernels._jit import share_cores  # numba: in the child only

    share_cores(engines)  # engines side by side: each core once, not once per engine
    child = _Child(conn, SharedClocks(array, slot, engines), spec)
    try:
        asyncio.run(child.serve())
        with contextlib.suppress(OSError):  # a clean end with nothing to say
            if os.path.getsize(log) == 0:
                os.unlink(log)
    except BaseException as exc:
        traceback.print_exc()
        with contextlib.suppress(Exception):
            child.clocks.report(0.0, heading_s=0.0, running=False, closed=True)
            child.outbox.put(("failed", f"{type(exc).__name__}: {exc}"))
            child.outbox.close()
        raise SystemExit(1) from None


# ----------------------------------------------------------------- the console side
class ProcessSource:
    """A fabric whose engine runs in a child process (see the module docstring)."""

    def __init__(self, group: ProcessEngines, slot: int, spec: EngineSpec) -> None:
        self.group = group
        self.slot = slot
        self.spec = spec
        self._base = spec.description
        #: Why the engine process is not running, once it is not (None while it runs).
        self.failure: str | None = None
        self._latest: Snapshot | None = None
        self._health: EngineHealth | None = None
        self._tables: tuple[NodeTable, LinkTable] | None = None
        self._taken: Snapshot | None = None  # the last snapshot ``latest`` returned
        self._arrived = threading.Condition()  # a snapshot came in (or the child ended)
        self._received_at = 0.0  # time.monotonic() then
        #: Snapshots taken in (unpickled) from the child so far ...
        self.received = 0
        #: ... and how many its engine had published by the last of them.
        self.published = 0
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()  # the UI's thread and the exporter's send
        self._sock: socket.socket | None = None
        self._answered = threading.Event()  # ready or failed
        self._conn: Connection | None = None
        self.process: BaseProcess | None = None
        self._log: str | None = None
        self._stopping = False
        self._reason: str | None = None  # what the child said before it ended
        self._compiling: Compiling | None = None
        self._compiled_at = -math.inf  # time.monotonic() when the last compile ended
        self._compile_since = 0.0  # and when its stretch of compiles began

    # -------------------------------------------------------------- FabricSource
    @property
    def description(self) -> str:
        """E.g. ``engine process roce-400g``, plus why it stopped when it has."""
        if self.failure is not None:
            return f"{self._base} (engine process stopped: {self.failure})"
        return self._base

    @description.setter
    def description(self, text: str) -> None:
        self._base = text

    @property
    def compiling(self) -> Compiling | None:
        """What the child's numba compiles now (the first run after an install), or None
        (also once the child has stopped, whatever it was compiling then)."""
        return None if self.failure is not None else self._compiling

    def latest(self) -> Snapshot | None:
        """The child's latest snapshot (the last one it sent, once it has stopped).

        The first time a snapshot is returned, the child is asked for the next one (it
        sends nothing new until then: see the module docstring)."""
        snap = self._latest
        if snap is not None and snap is not self._taken:
            self._taken = snap
            self._post(("more",))
        return snap

    def latest_fresh(self) -> Snapshot | None:
        """``latest()`` for a reader other than the view (the exporter, on a scrape, from
        its own thread): when no snapshot has come in for ``FRESH_S`` (the view is
        frozen or not drawing) and the engine runs, wait up to ``FRESH_WAIT_S`` for the
        newest one instead of returning an old one."""
        snap = self.latest()
        if (
            snap is None
            or not snap.running
            or self.failure is not None
            or time.monotonic() - self._received_at <= FRESH_S
        ):
            return snap
        with self._arrived:
            self._arrived.wait_for(
                lambda: self._latest is not snap or self.failure is not None, FRESH_WAIT_S
            )
        return self.latest()

    @property
    def health(self) -> EngineHealth:
        """The child engine's pacing figures, sent with every snapshot."""
        return self._health or STARTING

    async def submit(self, command: Command) -> CommandResult:
        """Apply ``command`` at the child engine's next tick boundary."""
        try:
            _, reply = self._request("cmd", command)
            result: CommandResult = await self._wait(reply)
        except EngineGoneError as exc:
            return CommandResult(id=command.id, ok=False, error=str(exc))
        return result

    # -------------------------------------------------------------- requests
    def _request(self, kind: str, *args: Any) -> tuple[int, asyncio.Future[Any]]:
        """Send ``(kind, n, *args)``; ``n`` and the future its answer resolves."""
        if self.failure is not None or self._conn is None:
            raise EngineGoneError(self._gone_text())
        n = next(self.group.counter)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._pending[n] = future
        try:
            with self._send_lock:
                self._conn.send((kind, n, *args))
        except (OSError, ValueError) as exc:  # the reader thread hears the end too
            with self._lock:
                self._pending.pop(n, None)
            raise EngineGoneError(
                f"{self._base}: cannot reach the engine process ({exc})"
            ) from None
        return n, future

    async def _wait(self, future: asyncio.Future[Any]) -> Any:
        timeout = self.group.reply_timeout_s
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise EngineGoneError(
                f"{self._base}: no reply from the engine process within {timeout:g} s"
            ) from None

    def _post(self, msg: tuple[Any, ...]) -> None:
        """Send a message that gets no answer (ignored once the child is gone)."""
        if self._conn is not None and self.failure is None:
            with contextlib.suppress(OSError, ValueError), self._send_lock:
                self._conn.send(msg)

    def _gone_text(self) -> str:
        return f"{self._base}: the engine process stopped ({self.failure or 'not started'})"

    # -------------------------------------------------------------- the child
    def _start(self, ctx: Any, array: Any) -> None:
        parent, child = ctx.Pipe(duplex=True)
        fd, self._log = tempfile.mkstemp(prefix="fabtop-engine-", suffix=".log")
        os.close(fd)
        self.process = ctx.Process(
            target=_child_main,
            args=(child, array, self.slot, len(self.group.sources), self.spec, self._log),
            name=f"fabtop-engine-{self.slot}",
            daemon=True,
        )
        self.process.start()
        child.close()  # the child holds its end: EOF here once it exits
        self._conn = parent
        self._sock = _fd_socket(parent)
        threading.Thread(
            target=self._read, name=f"fabtop-engine-{self.slot}-reader", daemon=True
        ).start()

    def _read(self) -> None:
        """The reader thread: snapshots straight into ``_latest``, answers to their
        futures; EOF means the child ended."""
        conn = self._conn
        assert conn is not None
        reason = "it exited"
        while True:
            try:
                data = conn.recv_bytes()
            except (EOFError, OSError):
                break
            try:
                self._take(self._load(data))
            except Exception as exc:  # a message this side cannot read: the child is no use
                reason = f"unreadable message from it ({type(exc).__name__}: {exc})"
                with contextlib.suppress(Exception):
                    self.process.kill()  # type: ignore[union-attr]
                break
        self._died(reason if self._reason is None else self._reason)

    def _load(self, data: bytes) -> tuple[Any, ...]:
        """Unpickle a message; a ``shm`` one's arrays are views of the memfd after it."""
        msg: tuple[Any, ...] = _TablesUnpickler(data, self._tables).load()
        if msg[0] != "shm":
            return msg
        _, pickled, layout = msg
        if self._sock is None:
            raise pickle.UnpicklingError("shared memory where none can be passed")
        fd = _recv_fd(self._sock)
        try:
            size = max((offset + n for offset, n in layout), default=0)
            # read-only: the arrays are as immutable as the snapshot's own; the memory is
            # unmapped when the last of them goes
            shared = memoryview(mmap.mmap(fd, max(size, 1), prot=mmap.PROT_READ))
        finally:
            os.close(fd)
        buffers = [shared[offset : offset + n] for offset, n in layout]
        loaded: tuple[Any, ...] = _TablesUnpickler(pickled, self._tables, buffers).load()
        return loaded

    def _take(self, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "snap":
            with self._arrived:
                self._latest, self._health, self.published = msg[1], msg[2], msg[3]
                self.received += 1
                self._received_at = time.monotonic()
                self._arrived.notify_all()
        elif kind == "static":
            self._tables = (msg[1], msg[2])
        elif kind in ("result", "held"):
            with self._lock:
                future = self._pending.pop(msg[1], None)
            if future is not None:
                _resolve(future, msg[2])
        elif kind == "compiling":
            self._compile_news(msg[1])
        elif kind == "ready":
            self._answered.set()
        elif kind == "failed":
            self._reason = msg[1]

    def _compile_news(self, kernel: str | None) -> None:
        now = time.monotonic()
        if kernel is None:
            self._compiling = None
            self._compiled_at = now
            return
        last = self._compiling
        if last is not None:
            since = last.since
        elif now - self._compiled_at <= COMPILE_GAP_S:
            since = self._compile_since
        else:
            since = now
        self._compile_since = since
        self._compiling = Compiling(kernel, since)

    def _died(self, reason: str) -> None:
        """The child is gone: say why, free its peers, fail what waits for it."""
        with self._lock:
            if self.failure is not None:
                return
            process = self.process
            if process is not None:
                process.join(timeout=2)
                code = process.exitcode
                if code is not None and code < 0:
                    with contextlib.suppress(ValueError):
                        reason += f"; killed by {signal.Signals(-code).name}"
                elif code:
                    reason += f"; exit code {code}"
                reason += self._log_tail()
            self.failure = "stopped by the console" if self._stopping else reason
            base = SLOT * self.slot
            self.group.clocks[base + 1] = 0.0
            self.group.clocks[base + 2] = 1.0  # the other side stops waiting for this one
            pending, self._pending = list(self._pending.values()), {}
        self._answered.set()
        with self._arrived:
            self._arrived.notify_all()
        for future in pending:
            _resolve(future, EngineGoneError(self._gone_text()))

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        try:
            lines = Path(self._log).read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return f": {lines[-1]}" if lines else ""

    def _close(self) -> None:
        process = self.process
        if process is None:
            return
        self._stopping = True
        self._post(("stop",))
        process.join(timeout=5)
        if process.is_alive():
            process.terminate()
            process.join(timeout=2)
        if process.is_alive():
            process.kill()
            process.join(timeout=2)
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        if self._log is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._log)


def _resolve(future: asyncio.Future[Any], value: Any) -> None:
    """Resolve ``future`` from any thread (an exception value is raised to its waiter)."""

    def done() -> None:
        if future.done():
            return
        if isinstance(value, BaseException):
            future.set_exception(value)
        else:
            future.set_result(value)

    with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
        future.get_loop().call_soon_threadsafe(done)


class ProcessEngines:
    """A group of engines, each in its own process, in lockstep (see the module docstring).

    Use: ``group = ProcessEngines(specs); group.start()``, optionally
    ``group.wait_ready()`` (errors before the console starts), ``group.sources`` for the
    console, ``group.close()`` at the end.
    """

    def __init__(
        self, specs: Sequence[EngineSpec], *, reply_timeout_s: float = REPLY_TIMEOUT_S
    ) -> None:
        self.ctx = multiprocessing.get_context("spawn")
        self.reply_timeout_s = reply_timeout_s
        self.clocks: Any = self.ctx.RawArray("d", SLOT * len(specs))
        for k in range(len(specs)):
            self.clocks[SLOT * k + 1] = 1.0  # running at 0 until it reports
        self.counter = itertools.count(1)
        self.sources: list[ProcessSource] = []
        self.sources.extend(ProcessSource(self, k, spec) for k, spec in enumerate(specs))
        self._together: asyncio.Lock | None = None

    def start(self) -> None:
        """Spawn every child (they build their fabrics in parallel)."""
        for src in self.sources:
            src._start(self.ctx, self.clocks)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> list[str]:
        """Wait until every child has built its fabric; the errors of those that could
        not (``description: why``), or that did not answer within ``timeout_s``."""
        errors = []
        for src in self.sources:
            if not src._answered.wait(timeout_s):
                errors.append(f"{src._base}: the engine process did not start in {timeout_s:g} s")
            elif src.failure is not None:
                errors.append(f"{src._base}: {src.failure}")
        return errors

    def close(self) -> None:
        """Stop every child (each publishes its last snapshot first)."""
        for src in self.sources:
            src._stopping = True
            src._post(("stop",))  # all at once: they wind down in parallel
        for src in self.sources:
            src._close()

    async def submit_together(
        self, command: Command, sources: Sequence[ProcessSource] | None = None
    ) -> list[CommandResult]:
        """``command`` in every engine of ``sources`` (default: all) at the same simulated
        time: each is held at the boundary it is heading for, then all apply it at the
        furthest of those. Results in the order of ``sources``; a side whose process
        has stopped gets an error result and the others the command."""
        srcs = list(self.sources if sources is None else sources)
        if self._together is None:
            self._together = asyncio.Lock()
        async with self._together:  # one at a time: the holds of two must not interleave
            return await self._together_now(command, srcs)

    async def _together_now(
        self, command: Command, srcs: list[ProcessSource]
    ) -> list[CommandResult]:
        results: dict[int, CommandResult] = {}

        def refused(src: ProcessSource, exc: BaseException) -> None:
            results[src.slot] = CommandResult(id=command.id, ok=False, error=str(exc))

        holds: list[tuple[ProcessSource, int, asyncio.Future[Any]]] = []
        for src in srcs:
            try:
                n, future = src._request("hold")
            except EngineGoneError as exc:
                refused(src, exc)
            else:
                holds.append((src, n, future))
        answers = await asyncio.gather(
            *(src._wait(future) for src, _, future in holds), return_exceptions=True
        )
        held: list[tuple[ProcessSource, int]] = []
        boundaries: list[float] = []
        for (src, n, _), answer in zip(holds, answers, strict=True):
            if isinstance(answer, BaseException):
                src._post(("release", n))  # in case the hold arrives after all
                refused(src, answer)
            else:
                held.append((src, n))
                boundaries.append(float(answer))
        if held:
            at_s = max(boundaries)
            replies: list[tuple[ProcessSource, asyncio.Future[Any] | None]] = []
            for src, n in held:
                try:
                    replies.append((src, src._request("due", n, command, at_s)[1]))
                except EngineGoneError as exc:
                    refused(src, exc)
            outcomes = await asyncio.gather(
                *(src._wait(future) for src, future in replies if future is not None),
                return_exceptions=True,
            )
            for (src, _), outcome in zip(replies, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    refused(src, outcome)
                else:
                    results[src.slot] = outcome
        return [results[src.slot] for src in srcs]


def start_engines(
    specs: Sequence[EngineSpec], meanwhile: Callable[[], object] | None = None
) -> ProcessEngines | None:
    """Start a group and wait until every fabric is built; None, after printing each
    error to stderr, if one could not be. ``meanwhile`` runs while the children start
    (the console imports its UI then)."""
    group = ProcessEngines(specs)
    group.start()
    if meanwhile is not None:
        meanwhile()
    errors = group.wait_ready()
    if errors:
        group.close()
        for error in errors:
            print(f"fabtop: {error}", file=sys.stderr)
        return None
    return group
