"""Send one command and wait for its result (``fabtop inject``)."""

from __future__ import annotations

import asyncio
import secrets

import msgspec

from exporters.mqtt.client import make_client
from exporters.mqtt.remote import command_name
from exporters.mqtt.topics import Topics
from exporters.mqtt.url import BrokerConfig
from fabric_core.commands import Command, CommandResult, encode_command


class NoAnswerError(Exception):
    """The command was sent but nobody answered (the message says why)."""


async def send_command(
    config: BrokerConfig, cluster: str, command: Command, *, timeout_s: float = 10.0
) -> CommandResult:
    """Publish ``command`` (an id is generated if it has none) and return its result.

    Raises:
        aiomqtt.MqttError: the broker cannot be reached.
        NoAnswerError: the emulator is offline, or no result came within ``timeout_s``.
    """
    if command.id is None:
        command = msgspec.structs.replace(command, id=f"cli-{secrets.token_hex(6)}")
    cid = command.id
    assert cid is not None
    topics = Topics(cluster)
    decoder = msgspec.json.Decoder(CommandResult)
    status: str | None = None
    async with make_client(config, role="inject") as client:
        await client.subscribe(topics.result(cid), qos=1)
        await client.subscribe(topics.status, qos=1)
        await client.publish(topics.cmd(command_name(command)), encode_command(command), qos=1)
        try:
            async with asyncio.timeout(timeout_s):
                async for message in client.messages:
                    payload = message.payload
                    data = payload if isinstance(payload, bytes | bytearray) else b""
                    if str(message.topic) == topics.status:
                        status = bytes(data).decode(errors="replace")
                        if status == "offline":
                            raise NoAnswerError(
                                f"{topics.root} is offline: no emulator is serving it"
                            )
                    elif str(message.topic) == topics.result(cid):
                        return decoder.decode(data)
        except TimeoutError:
            pass
    heard = f"its status is {status!r}" if status else "it has never announced a status"
    raise NoAnswerError(f"no result from {topics.root} within {timeout_s:g} s ({heard})")
