"""Commands arriving over MQTT: validate, apply once per id, build the reply.

Pure logic with no broker in it (the bridge feeds it messages and publishes
its replies), so every rule is visible here:

* the command name comes from the topic ``cmd/<command>``; the body is JSON, with
  each key once per object (a parser keeps one of two values silently: which one
  the sender meant is unknown, so such a command is refused, naming the key);
* every command needs an ``id``: it names the reply topic ``result/<id>`` and
  makes a retry safe. A command without a usable id (or with two different
  ones) is refused, and the refusal goes to ``result`` (no id to name a topic after);
* retained messages are refused: a retained command would be applied again by
  every bridge that subscribes later (the bridge then clears it, see ``bridge``);
* ``read_only`` refuses every command ("read-only"); ``allowed`` names the only
  command kinds accepted (an allow-list; None: all);
* at most ``max_in_flight`` commands wait for the engine at once; one more is
  answered "busy" at once rather than queued (pause, resume and clear, the
  operator's way out of a flood, have ``max_in_flight`` places of their own);
* an id that was applied successfully is remembered (the last ``memory`` ids):
  the same command again gets the same result with ``"duplicate": true`` and is
  not applied again; a different command under a used id is refused. Refused
  commands are not remembered, so a corrected retry may reuse its id.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable

import msgspec

from exporters.mqtt.topics import Topics
from fabric_core.commands import (
    COMMAND_ID_CHARS,
    COMMAND_NAMES,
    Command,
    CommandError,
    CommandResult,
    check_bounds,
    encode_command,
    parse_command,
    shown,
)

Submit = Callable[[Command], Awaitable[CommandResult]]

#: Command kinds never answered "busy" (they get places of their own).
OPERATOR_COMMANDS = frozenset({"pause", "resume", "clear"})

_ID = re.compile(rf"{COMMAND_ID_CHARS}{{1,64}}")  # with fullmatch: the whole string, ASCII
# For a body refused unread (too big, too deep) or not valid JSON (truncated, NaN): an
# id near the start still names the reply topic.
_ID_IN_HEAD = re.compile(rb'"id"\s*:\s*"(' + COMMAND_ID_CHARS.encode() + rb'{1,64})"')


def lenient_id(payload: bytes) -> str | None:
    """The command id if one can be read, even from an invalid command (None when the
    body gives two different ones)."""
    try:
        check_bounds(payload)  # size, depth, UTF-8: before any parsing
        obj = msgspec.json.decode(payload)
    except (CommandError, msgspec.DecodeError):
        match = _ID_IN_HEAD.search(payload[:4096])
        return match.group(1).decode() if match else None
    cid = obj.get("id") if isinstance(obj, dict) else None
    if not (isinstance(cid, str) and _ID.fullmatch(cid)):
        return None
    # msgspec keeps the last of two "id"s: the first may have been meant
    return cid if all(given == cid for given in _top_level_ids(payload)) else None


def _top_level_ids(payload: bytes) -> list[object]:
    """The value of every top-level ``"id"`` key, in order (none when the standard parser
    cannot read the text). Call after ``check_bounds``."""
    try:
        pairs = json.loads(payload, object_pairs_hook=list)
    except (ValueError, RecursionError):
        return []
    if not isinstance(pairs, list):
        return []
    return [pair[1] for pair in pairs if isinstance(pair, tuple) and pair[0] == "id"]


class _DuplicateKeyError(ValueError):
    """An object of the JSON text holds a key twice (``args[0]``: the key)."""


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    obj: dict[str, object] = {}
    for key, value in pairs:
        if key in obj:
            raise _DuplicateKeyError(key)
        obj[key] = value
    return obj


def duplicate_key(payload: bytes) -> str | None:
    """The first key an object of the JSON text holds twice, or None (also for a text
    too big, too deep or not JSON: ``parse_command`` says what is wrong with it)."""
    try:
        check_bounds(payload)  # the standard parser recurses once per level of nesting
        json.loads(payload, object_pairs_hook=_unique_keys)
    except _DuplicateKeyError as exc:
        return str(exc.args[0])
    except (ValueError, RecursionError):  # CommandError is a ValueError
        return None
    return None


def check_allowed(names: frozenset[str]) -> frozenset[str]:
    """An allow-list of command kinds, each checked against the known ones.

    Raises:
        ValueError: naming the unknown kinds.
    """
    bad = sorted(names - set(COMMAND_NAMES))
    if bad:
        raise ValueError(
            f"unknown command kind(s) {', '.join(bad)}; known: {', '.join(COMMAND_NAMES)}"
        )
    return names


class CommandInbox:
    """Turns (topic, payload) into (reply topic, result); see the module docstring."""

    def __init__(
        self,
        topics: Topics,
        submit: Submit,
        *,
        memory: int = 1024,
        timeout_s: float = 10.0,
        read_only: bool = False,
        allowed: frozenset[str] | None = None,
        max_in_flight: int = 64,
    ) -> None:
        self.topics = topics
        self.submit = submit
        self.memory = memory
        self.timeout_s = timeout_s
        self.read_only = read_only
        self.allowed = None if allowed is None else check_allowed(frozenset(allowed))
        self.max_in_flight = max_in_flight
        self._seen: OrderedDict[str, tuple[bytes, asyncio.Future[CommandResult]]] = OrderedDict()
        self._in_flight = {False: 0, True: 0}  # waiting for the engine: (others, operator)
        self.applied = 0
        self.refused = 0
        self.duplicates = 0
        self.busy = 0  # refused because too many commands were waiting (counted in refused)

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
                " (the emulator clears this retained message)",
            )
        if self.read_only:
            return self._refuse(
                cid,
                f"read-only: this emulator serves telemetry and metrics only"
                f" (fabtop serve --read-only); {name or 'the'} command refused",
            )
        if self.allowed is not None and name not in self.allowed:
            accepted = ", ".join(sorted(self.allowed)) or "none"
            return self._refuse(
                cid, f"command {name!r} is not allowed on this emulator (allowed: {accepted})"
            )
        key = duplicate_key(payload)
        if key is not None:
            return self._refuse(cid, f"duplicate key {shown(key)}: each key may appear once")
        try:
            cmd = parse_command(payload, command=name)
        except CommandError as exc:
            return self._refuse(cid, str(exc))
        if cmd.id is None:
            return self._refuse(
                None, f'{name} command has no \'id\': add one, e.g. {{"id": "op-1", ...}}'
            )
        lane = name in OPERATOR_COMMANDS
        if self._in_flight[lane] >= self.max_in_flight and cmd.id not in self._seen:
            self.busy += 1
            return self._refuse(
                cmd.id,
                f"busy: {self._in_flight[lane]} commands are waiting for the emulator;"
                " retry later (pause, resume and clear have places of their own)",
            )
        self._in_flight[lane] += 1
        try:
            return self.topics.result(cmd.id), await self._apply_once(cmd.id, cmd)
        finally:
            self._in_flight[lane] -= 1

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
