"""Send one command and wait for its result (``fabtop inject``)."""

from __future__ import annotations

import asyncio
import contextlib
import secrets

import aiomqtt
import msgspec

from exporters.mqtt.client import make_client, payload_bytes
from exporters.mqtt.remote import command_name
from exporters.mqtt.topics import Topics
from exporters.mqtt.url import BrokerConfig
from fabric_core.commands import Command, CommandResult, encode_command

_decoder = msgspec.json.Decoder(CommandResult)


class NoAnswerError(Exception):
    """The emulator is offline (nothing was sent) or did not answer in time (the message
    says which). ``maybe_applied``: the command was sent to a cluster that said it was
    online, so it may have been applied; ``command_id`` is its id, to send it again under."""

    def __init__(
        self, message: str, *, command_id: str | None = None, maybe_applied: bool = False
    ) -> None:
        super().__init__(message)
        self.command_id = command_id
        self.maybe_applied = maybe_applied


async def send_command(
    config: BrokerConfig, cluster: str, command: Command, *, timeout_s: float = 10.0
) -> CommandResult:
    """Publish ``command`` (an id is generated if it has none) and return its result.

    Nothing is sent to a cluster whose retained status says ``offline``. Once sent, the
    command may be applied: its result is awaited up to ``timeout_s`` whatever the status
    says meanwhile (a stale ``offline`` must not turn an applied command into an error
    that a script retries under a new id, applying it twice).

    Raises:
        aiomqtt.MqttError: the broker cannot be reached.
        NoAnswerError: the emulator is offline (nothing sent), or no result came within
            ``timeout_s``.
    """
    if command.id is None:
        command = msgspec.structs.replace(command, id=f"cli-{secrets.token_hex(6)}")
    cid = command.id
    assert cid is not None
    topics = Topics(cluster)
    async with make_client(config, role="inject") as client:
        await client.subscribe(topics.status, qos=1)
        # the retained status comes with (mosquitto: just before) the first SUBACK: by the
        # answer to this second request it is in
        await client.subscribe(topics.result(cid), qos=1)
        status = await _queued_status(client, topics)
        if status == "offline":
            raise NoAnswerError(f"{topics.root} is offline: no emulator is serving it (not sent)")
        await client.publish(topics.cmd(command_name(command)), encode_command(command), qos=1)
        result, status = await _result(client, topics, cid, timeout_s, status)
    if result is not None:
        return result
    heard = f"its status is {status!r}" if status else "it has never announced a status"
    said = f"no result from {topics.root} within {timeout_s:g} s ({heard})"
    if status != "online":
        raise NoAnswerError(f"{said}; command {cid} was sent", command_id=cid)
    raise NoAnswerError(
        f"{said}: command {cid} was sent and may have been applied. To find out, send it"
        f" again under its id (--id {cid}): an id the emulator has answered is answered"
        " again, not applied twice",
        command_id=cid,
        maybe_applied=True,
    )


async def _queued_status(client: aiomqtt.Client, topics: Topics) -> str | None:
    """The cluster's status among the messages received so far (None: none yet)."""
    status = None
    while len(client.messages):
        message = await anext(client.messages)
        if str(message.topic) == topics.status:
            status = payload_bytes(message).decode(errors="replace")
    return status


async def _result(
    client: aiomqtt.Client, topics: Topics, cid: str, timeout_s: float, status: str | None
) -> tuple[CommandResult | None, str | None]:
    """The result of command ``cid`` (None after ``timeout_s``), and the last status heard."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            async for message in client.messages:
                if str(message.topic) == topics.status:
                    status = payload_bytes(message).decode(errors="replace")
                elif str(message.topic) == topics.result(cid):
                    return _decoder.decode(payload_bytes(message)), status
    return None, status
