"""Commands arriving over MQTT: validate, apply once per id, build the reply.

Pure logic with no broker in it (the bridge feeds it messages and publishes
its replies), so every rule is visible here:

* the command name comes from the topic ``cmd/<command>``; the body is JSON;
* every command needs an ``id``: it names the reply topic ``result/<id>`` and
  makes a retry safe. A command without a usable id is refused, and the
  refusal goes to ``result`` (no id to name a topic after);
* retained messages are refused: a retained command would be applied again by
  every bridge that subscribes later;
* an id that was applied successfully is remembered (the last ``memory`` ids):
  the same command again gets the same result with ``"duplicate": true`` and is
  not applied again; a different command under a used id is refused. Refused
  commands are not remembered, so a corrected retry may reuse its id.
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable

import msgspec

from exporters.mqtt.topics import Topics
from fabric_core.commands import (
    MAX_COMMAND_BYTES,
    Command,
    CommandError,
    CommandResult,
    encode_command,
    parse_command,
)

Submit = Callable[[Command], Awaitable[CommandResult]]

_ID = re.compile(r"^[\w.:-]{1,64}$")
# For a body too big to decode: an id near the start still names the reply topic.
_ID_IN_HEAD = re.compile(rb'"id"\s*:\s*"([\w.:-]{1,64})"')


def lenient_id(payload: bytes) -> str | None:
    """The command id if one can be read, even from an invalid command."""
    if len(payload) > MAX_COMMAND_BYTES:
        match = _ID_IN_HEAD.search(payload[:4096])
        return match.group(1).decode() if match else None
    try:
        obj = msgspec.json.decode(payload)
    except msgspec.DecodeError:
        return None
    cid = obj.get("id") if isinstance(obj, dict) else None
    return cid if isinstance(cid, str) and _ID.match(cid) else None


class CommandInbox:
    """Turns (topic, payload) into (reply topic, result); see the module docstring."""

    def __init__(
        self, topics: Topics, submit: Submit, *, memory: int = 1024, timeout_s: float = 10.0
    ) -> None:
        self.topics = topics
        self.submit = submit
        self.memory = memory
        self.timeout_s = timeout_s
        self._seen: OrderedDict[str, tuple[bytes, asyncio.Future[CommandResult]]] = OrderedDict()
        self.applied = 0
        self.refused = 0
        self.duplicates = 0

    async def handle(
        self, topic: str, payload: bytes, *, retained: bool = False
    ) -> tuple[str, CommandResult]:
        """Process one message from ``cmd/#``; never raises for bad input."""
        cid = lenient_id(payload)
        name = self.topics.command_name(topic) or ""
        if retained:
            return self._refuse(
                cid,
                "retained command refused: publish commands without the retain flag"
                " (and clear this one with an empty retained message)",
            )
        try:
            cmd = parse_command(payload, command=name)
        except CommandError as exc:
            return self._refuse(cid, str(exc))
        if cmd.id is None:
            return self._refuse(
                None, f'{name} command has no \'id\': add one, e.g. {{"id": "op-1", ...}}'
            )
        return self.topics.result(cmd.id), await self._apply_once(cmd.id, cmd)

    def _refuse(self, cid: str | None, error: str) -> tuple[str, CommandResult]:
        self.refused += 1
        return self.topics.result(cid), CommandResult(id=cid, ok=False, error=error)

    async def _apply_once(self, cid: str, cmd: Command) -> CommandResult:
        body = encode_command(cmd)
        seen = self._seen.get(cid)
        if seen is not None:
            if seen[0] != body:
                self.refused += 1
                return CommandResult(
                    id=cid, ok=False, error=f"id {cid!r} was already used for a different command"
                )
            first = await self._wait(seen[1], cid)
            self.duplicates += 1
            return CommandResult(
                id=cid, ok=first.ok, error=first.error, detail={**first.detail, "duplicate": True}
            )
        task = asyncio.ensure_future(self.submit(cmd))
        self._seen[cid] = (body, task)
        while len(self._seen) > self.memory:
            self._seen.popitem(last=False)
        task.add_done_callback(lambda t: self._settled(cid, t))
        return await self._wait(task, cid)

    def _settled(self, cid: str, task: asyncio.Future[CommandResult]) -> None:
        ok = not task.cancelled() and task.exception() is None and task.result().ok
        if ok:
            self.applied += 1
        else:
            self.refused += 1
            entry = self._seen.get(cid)
            if entry is not None and entry[1] is task:
                del self._seen[cid]  # refused: a corrected retry may reuse the id

    async def _wait(self, task: asyncio.Future[CommandResult], cid: str) -> CommandResult:
        # shield: on timeout the engine still owns the command and applies it
        # later (the id stays remembered, so a retry is not applied twice);
        # cancelling its reply future would break the engine's bookkeeping.
        try:
            return await asyncio.wait_for(asyncio.shield(task), self.timeout_s)
        except TimeoutError:
            return CommandResult(
                id=cid,
                ok=False,
                error=f"the emulator did not apply the command within {self.timeout_s:g} s"
                " (it may still apply it: retry with the same id to see the result)",
            )
        except Exception as exc:  # the engine failed: report it, keep serving
            return CommandResult(id=cid, ok=False, error=f"internal error: {exc!r}")
