"""The coordinator's messages in flight: each sprayed over some planes as parts, complete
when its last part is, or refused when a plane refuses one of its parts (it can never
complete then; its slot is kept until its other parts are done).

Slots are reused once a completed message has been handed to its workload, so the table
holds what is in flight, not every message of the run; a message's id is its slot (handed
to the planes as the parts' tag, unique among the flows in flight).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.flows import Completions, FlowRequests


class MessageTable:
    """Messages in flight (see the module docstring)."""

    def __init__(self, capacity: int = 1024) -> None:
        self.workload = np.zeros(capacity, dtype=np.int64)
        self.tag = np.zeros(capacity, dtype=np.int64)
        self.src = np.zeros(capacity, dtype=np.int64)
        self.dst = np.zeros(capacity, dtype=np.int64)
        self.size = np.zeros(capacity)
        self.start_s = np.zeros(capacity)
        self.finish_s = np.zeros(capacity)
        self.ready_s = np.zeros(capacity)
        self.parts_left = np.zeros(capacity, dtype=np.int64)
        #: whether a plane refused a part of the message (``refuse``)
        self.refused = np.zeros(capacity, dtype=np.bool_)
        #: free slots, the lowest first (a stack read from its end)
        self._free = np.arange(capacity - 1, -1, -1, dtype=np.int64)
        self.in_flight = 0

    def _grow(self, at_least: int) -> None:
        old = self.size.size
        new = max(2 * old, old + at_least)
        for name in (
            "workload", "tag", "src", "dst", "size", "start_s", "finish_s", "ready_s",
            "parts_left", "refused",
        ):  # fmt: skip
            a = getattr(self, name)
            b = np.zeros(new, dtype=a.dtype)
            b[:old] = a
            setattr(self, name, b)
        self._free = np.concatenate([np.arange(new - 1, old - 1, -1, dtype=np.int64), self._free])

    def add(
        self,
        workload: int,
        tag: NDArray[np.int64],
        src: NDArray[np.int64],
        dst: NDArray[np.int64],
        size: NDArray[np.float64],
        ready_s: NDArray[np.float64],
        parts: NDArray[np.int64],
    ) -> NDArray[np.int64]:
        """Messages of one workload, each to be sprayed as ``parts`` parts; their ids."""
        n = size.size
        if n > self._free.size:
            self._grow(n - self._free.size)
        ids = self._free[::-1][:n].copy()  # the lowest free slots, in order
        self._free = self._free[: self._free.size - n]
        self.workload[ids] = workload
        self.tag[ids] = tag
        self.src[ids] = src
        self.dst[ids] = dst
        self.size[ids] = size
        self.start_s[ids] = np.inf
        self.finish_s[ids] = -np.inf
        self.ready_s[ids] = ready_s
        self.parts_left[ids] = parts
        self.refused[ids] = False
        self.in_flight += n
        return ids

    def parts_done(
        self,
        message: NDArray[np.int64],
        start_s: NDArray[np.float64],
        finish_s: NDArray[np.float64],
    ) -> NDArray[np.int64]:
        """Parts that finished; the messages whose last part they are, in the order those
        finished (by time, then id), refused ones among them (``refused``). They stay in
        the table, and in ``in_flight``, until ``release``."""
        np.minimum.at(self.start_s, message, start_s)
        np.maximum.at(self.finish_s, message, finish_s)
        np.subtract.at(self.parts_left, message, 1)
        whole = np.unique(message[self.parts_left[message] == 0])
        return whole[np.lexsort((whole, self.finish_s[whole]))]

    def refuse(self, message: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Parts that a plane refused (``message``: one per part). Returns the messages
        refused now for the first time (ascending), and those that have no part left
        (ascending): refused, they end there, and stay in the table until ``release``."""
        np.subtract.at(self.parts_left, message, 1)
        ids = np.unique(message)
        first = ids[~self.refused[ids]]
        self.refused[ids] = True
        return first, ids[self.parts_left[ids] == 0]

    def requests(self, ids: NDArray[np.int64]) -> FlowRequests:
        """The messages ``ids`` as their workload asked for them (copies)."""
        return FlowRequests(
            self.src[ids], self.dst[ids], self.size[ids], self.tag[ids], self.ready_s[ids]
        )

    def completions(self, ids: NDArray[np.int64]) -> Completions:
        """The completed messages ``ids`` as their workload hears of them (copies)."""
        return Completions(
            tag=self.tag[ids],
            src=self.src[ids],
            dst=self.dst[ids],
            size_bytes=self.size[ids],
            start_s=self.start_s[ids],
            finish_s=self.finish_s[ids],
        )

    def release(self, ids: NDArray[np.int64]) -> None:
        """Free the slots of ended messages (the lowest slots are taken first)."""
        self.in_flight -= int(ids.size)
        self._free = np.sort(np.concatenate([self._free, ids]))[::-1]
