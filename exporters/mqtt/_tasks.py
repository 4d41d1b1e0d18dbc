"""Stopping tasks reliably."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait until every one has finished.

    Cancels again while any is still running: on Python 3.11 ``asyncio.wait_for``
    (used by aiomqtt's publish) can swallow a cancellation that arrives as its
    inner future completes, and a loop would then carry on forever.
    """
    pending = [t for t in tasks if not t.done()]
    while pending:
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=0.2)
        pending = [t for t in pending if not t.done()]
