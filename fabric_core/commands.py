"""Typed, validated commands: the one way to change a running emulation.

The console, the CLI and the MQTT bridge all build the same objects, and all
speak the same JSON form (``{"command": "inject", "kind": "link_down", ...}``).
``parse_command`` checks the form (types, ranges, unknown fields) with msgspec;
``Fabric.validate_command`` checks what only the fabric knows (does that link
exist?). Both raise ``CommandError`` with a message meant for the operator.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterable
from typing import Annotated, Any

import msgspec
import numpy as np

#: The characters of a command id: ASCII letters and digits, ``_``, ``.``, ``:``, ``-``.
COMMAND_ID_CHARS = r"[A-Za-z0-9_.:-]"
#: Identifies a command for idempotency (MQTT) and replies; at most 64 characters, the
#: whole string (``\Z``: no trailing newline; ASCII only, no Unicode letters).
CommandId = Annotated[
    str,
    msgspec.Meta(min_length=1, max_length=64, pattern=rf"^{COMMAND_ID_CHARS}+\Z"),
]
#: The longest a fault may last before it clears itself (``duration_s``), simulated seconds:
#: some 11.6 days, past any run's length
MAX_FAULT_DURATION_S = 1e6
Seconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_FAULT_DURATION_S)]
#: The tick lengths a fabric accepts: the model's results are tested to be the same from
#: 100 ns to 1 ms (tests/test_core_timing.py); 1 ns and 10 ms are the outer bounds.
MIN_TICK_S = 1e-9
MAX_TICK_S = 1e-2
#: The speeds (simulated seconds per wall second) the engine accepts besides 0 (flat
#: out). Below 1e-6 one 1 us tick would take more than a wall second; above 1e3 no
#: fabric keeps up (the default scenario runs at ~1e-3 on one core).
MIN_SPEED = 1e-6
MAX_SPEED = 1e3


def speed_problem(speed: float) -> str | None:
    """Why ``speed`` is no speed the engine runs at (None: it is one), in the words every
    interface gives it (``SetSpeed``, ``--speed``, ``Engine``)."""
    if speed == 0 or MIN_SPEED <= speed <= MAX_SPEED:
        return None
    return (
        f"speed must be 0 (flat out) or between {MIN_SPEED:g} and {MAX_SPEED:g} simulated "
        f"seconds per wall second, got {speed!r}"
    )


class CommandError(ValueError):
    """A command that cannot be applied; the message says exactly why."""


class _Command(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="command"):
    id: CommandId | None = None


class InjectFault(_Command, tag="inject", frozen=True):
    """Inject a fault of ``kind`` on ``target`` (a link, switch, GPU or storage target)."""

    kind: str = ""
    target: str = ""
    params: dict[str, float | str] = msgspec.field(default_factory=dict)
    duration_s: Seconds | None = None  # cleared automatically after this long (simulated)


class ClearFault(_Command, tag="clear", frozen=True):
    """Clear one fault (by ``fault_id``, or every fault on ``target``) or all faults."""

    fault_id: str | None = None
    target: str | None = None
    all: bool = False


class Pause(_Command, tag="pause", frozen=True):
    """Stop simulated time (the console and exporters keep serving the last snapshot)."""


class Resume(_Command, tag="resume", frozen=True):
    """Let simulated time run again."""


# (``kw_only``: a required field after the optional ``id``. The speed, the tick and a
# parameter's value have no default: one missing is refused, not taken as 0, 1 us or 0)
class SetSpeed(_Command, tag="speed", frozen=True, kw_only=True):
    """Simulated seconds per wall second; 0 runs flat out."""

    speed: Annotated[float, msgspec.Meta(ge=0, le=MAX_SPEED)]


class SetTick(_Command, tag="tick", frozen=True, kw_only=True):
    """Simulated time per tick, seconds. Results do not depend on it (see docs/MODEL.md,
    "Time scales"); a longer tick lets the engine keep up with a faster speed."""

    dt_s: Annotated[float, msgspec.Meta(ge=MIN_TICK_S, le=MAX_TICK_S)]


class SetParam(_Command, tag="set", frozen=True, kw_only=True):
    """Set a live-tunable profile parameter (e.g. ``ecn_kmin_s``)."""

    name: str = ""
    value: float


class StartWorkload(_Command, tag="start", frozen=True):
    """Start (or restart) a workload defined in the scenario."""

    workload: str = ""


class StopWorkload(_Command, tag="stop", frozen=True):
    """Stop a running workload (its flows in flight finish)."""

    workload: str = ""


Command = (
    InjectFault
    | ClearFault
    | Pause
    | Resume
    | SetSpeed
    | SetTick
    | SetParam
    | StartWorkload
    | StopWorkload
)

COMMAND_NAMES: tuple[str, ...] = (
    "inject",
    "clear",
    "pause",
    "resume",
    "speed",
    "tick",
    "set",
    "start",
    "stop",
)

#: Largest JSON command accepted (bytes); anything bigger is refused unread.
MAX_COMMAND_BYTES = 64 * 1024
#: Deepest nesting of JSON arrays and objects accepted; a command needs 2 (the object
#: and its ``params``). Checked before parsing: a deep payload would exhaust the stack.
MAX_COMMAND_DEPTH = 8

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"?')


def nesting_depth(raw: bytes) -> int:
    """How deep the arrays and objects of a JSON text nest (strings skipped); no parsing."""
    text = np.frombuffer(_STRING.sub(b'""', raw), dtype=np.uint8)
    step = np.isin(text, _OPENERS).astype(np.int64) - np.isin(text, _CLOSERS)
    return int(np.cumsum(step).max(initial=0))


_OPENERS = np.frombuffer(b"[{", dtype=np.uint8)
_CLOSERS = np.frombuffer(b"]}", dtype=np.uint8)


def check_bounds(raw: bytes) -> None:
    """Refuse, before any parsing, a payload too large, too deep or not UTF-8.

    Raises:
        CommandError: naming the limit.
    """
    if len(raw) > MAX_COMMAND_BYTES:
        raise CommandError(f"command is {len(raw)} bytes; the limit is {MAX_COMMAND_BYTES}")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CommandError(f"invalid UTF-8 at byte {exc.start}") from None
    depth = nesting_depth(raw)
    if depth > MAX_COMMAND_DEPTH:
        raise CommandError(
            f"command nests arrays/objects more than {MAX_COMMAND_DEPTH} levels deep;"
            f" the limit is {MAX_COMMAND_DEPTH} (a command needs 2)"
        )


def _decode_error(exc: msgspec.DecodeError, raw: bytes) -> CommandError:
    """A JSON syntax error for an operator (msgspec reports a lone surrogate escape as
    "truncated" or a bad hex escape)."""
    if any(word in str(exc) for word in ("truncated", "hex escape", "surrogate")):
        try:
            json.loads(raw)  # depth is bounded already: the stdlib parser is safe here
        except ValueError:
            pass
        else:
            return CommandError(r"invalid UTF-8: a string holds a lone surrogate (e.g. \ud800)")
    return CommandError(f"malformed JSON: {exc}")


_decoder = msgspec.json.Decoder(Command)
_encoder = msgspec.json.Encoder()


def parse_command(payload: bytes | str, *, command: str | None = None) -> Command:
    """Decode and check a JSON command.

    Args:
        payload: the JSON text.
        command: the command name when it comes from elsewhere (an MQTT topic
            ``cmd/<command>``); it is filled in when the JSON has none and must
            agree with it when it has one.

    Raises:
        CommandError: with a specific message (bad JSON, unknown command, wrong type...).
    """
    try:
        raw = payload.encode() if isinstance(payload, str) else payload
    except UnicodeEncodeError as exc:
        raise CommandError(f"invalid UTF-8 at character {exc.start}") from None
    check_bounds(raw)
    if not raw.strip():
        raise CommandError("empty command: expected a JSON object")
    if command is not None:
        if command not in COMMAND_NAMES:
            raise CommandError(
                f"unknown command {shown(command)}{_suggest(command, COMMAND_NAMES)};"
                f" known: {', '.join(COMMAND_NAMES)}"
            )
        try:
            obj = msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            raise _decode_error(exc, raw) from None
        if not isinstance(obj, dict):
            raise CommandError(f"expected a JSON object, got {type(obj).__name__}")
        given = obj.setdefault("command", command)
        if given != command:
            raise CommandError(f"topic says command {command!r} but the body says {given!r}")
        raw = msgspec.json.encode(obj)
    try:
        cmd = _decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise CommandError(_explain(str(exc), raw)) from None
    except msgspec.DecodeError as exc:
        raise _decode_error(exc, raw) from None
    _check_values(cmd)
    return cmd


def encode_command(cmd: Command) -> bytes:
    """The JSON form of a command (what ``parse_command`` reads back)."""
    return _encoder.encode(cmd)


_TYPE_WORDS = {
    "float": "a number",
    "int": "an integer",
    "str": "a string",
    "bool": "true or false",
    "object": "a JSON object",
    "array": "an array",
    "null": "null",
}
_FIELDS: dict[str, tuple[str, ...]] = {
    tag: tuple(name for name in cls.__struct_fields__)
    for tag, cls in (
        ("inject", InjectFault),
        ("clear", ClearFault),
        ("pause", Pause),
        ("resume", Resume),
        ("speed", SetSpeed),
        ("tick", SetTick),
        ("set", SetParam),
        ("start", StartWorkload),
        ("stop", StopWorkload),
    )
}


def _words(types: str) -> str:
    return " or ".join(_TYPE_WORDS.get(t.strip(), t.strip()) for t in types.split("|"))


def _value_at(obj: Any, path: str) -> tuple[bool, Any]:
    """The value at a msgspec error path like ``$.params.ber`` (False if not found)."""
    node = obj
    for part in path.removeprefix("$").split(".")[1:]:
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _explain(msg: str, raw: bytes) -> str:
    """Turn a msgspec validation message into one for an operator."""
    msg = msg.replace("`", "'")
    try:
        obj = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        if "Number out of range" not in str(exc):
            # the typed decoder stops at the first wrong field; the JSON may break after it
            return f"malformed JSON: {exc}"
        obj = None
    tag = obj.get("command") if isinstance(obj, dict) else None
    if "Object missing required field 'command'" in msg:
        return f"missing field 'command'; expected one of: {', '.join(COMMAND_NAMES)}"
    m = re.fullmatch(r"Object missing required field '(.*)'", msg)
    if m and isinstance(tag, str):
        return f"{tag} needs a {m.group(1)!r}"
    if "Invalid value" in msg and "$.command" in msg and isinstance(tag, str):
        return (
            f"unknown command {shown(tag)}{_suggest(tag, COMMAND_NAMES)}; "
            f"known: {', '.join(COMMAND_NAMES)}"
        )
    m = re.fullmatch(r"Object contains unknown field '(.*)'(?: - at '(.*)')?", msg)
    if m and isinstance(tag, str) and tag in _FIELDS and m.group(2) in (None, "$"):
        fields = [f for f in _FIELDS[tag] if f != "command"]
        return (
            f"{tag} has no field {shown(m.group(1))}{_suggest(m.group(1), fields)}; "
            f"accepted: {', '.join(fields)}"
        )
    m = re.fullmatch(r"Expected '([^']*)'(?:, got '([^']*)')? *(.*?) - at '(\$[^']*)'", msg)
    if m:
        expected, got, constraint, path = m.groups()
        name = path.removeprefix("$.") or "the command"
        found, value = _value_at(obj, path)
        text = msgspec.json.encode(value).decode() if found else ""
        got_text = f", got {text}" if found and len(text) <= 80 else ""
        if got and not got_text:
            got_text = f", got {_words(got)}"
        if constraint:
            return f"{name} must be {_words(expected)} {constraint}{got_text}"
        return f"{name} must be {_words(expected)}{got_text}"
    m = re.fullmatch(r"Expected '([^']*)', got '([^']*)'", msg)
    if m:
        return f"a command must be {_words(m.group(1))}, got {_words(m.group(2))}"
    m = re.fullmatch(r"Number out of range - at '(\$[^']*)'", msg)
    if m:
        return f"{m.group(1).removeprefix('$.')}: number out of range (must be finite)"
    return msg


def _check_values(cmd: Command) -> None:
    if isinstance(cmd, InjectFault):
        if not cmd.kind:
            raise CommandError("inject needs a fault 'kind'")
        if not cmd.target:
            raise CommandError("inject needs a 'target'")
        for key, value in cmd.params.items():
            if isinstance(value, float) and not math.isfinite(value):
                raise CommandError(f"parameter {key!r} must be a finite number")
    elif isinstance(cmd, ClearFault):
        if not cmd.all and cmd.fault_id is None and cmd.target is None:
            raise CommandError("clear needs 'fault_id', 'target' or 'all': true")
    elif isinstance(cmd, SetSpeed):
        problem = speed_problem(cmd.speed)
        if problem is not None:
            raise CommandError(problem)
    elif isinstance(cmd, SetParam):
        if not cmd.name:
            raise CommandError("set needs a parameter 'name'")
        if not math.isfinite(cmd.value):
            raise CommandError(f"value of {cmd.name!r} must be a finite number")
    elif isinstance(cmd, StartWorkload | StopWorkload) and not cmd.workload:
        raise CommandError(f"{cmd.__struct_config__.tag} needs a 'workload' name")


#: The most characters of an unknown name an error repeats (the reply and the log would
#: otherwise carry whatever length a sender wrote)
MAX_SHOWN_NAME = 120


def shown(name: str) -> str:
    """``repr(name)``, cut to its first ``MAX_SHOWN_NAME`` characters if longer."""
    if len(name) <= MAX_SHOWN_NAME:
        return repr(name)
    return f"{name[:MAX_SHOWN_NAME]!r}... ({len(name):,} characters)"


#: The most names a suggestion compares a mistyped one with (difflib takes some 30 µs a
#: name: 9-13 s over a 300,000-link fabric's, on the engine's loop, for one typo)
MAX_SUGGESTION_CHOICES = 2000


def _sharing_a_prefix(word: str, names: list[str]) -> list[str]:
    """At most ``MAX_SUGGESTION_CHOICES`` of ``names``, those that share the longest prefix
    with ``word`` (a binary search on the prefix's length, each step filtering the last
    step's names: a few passes over them). A typo in a name's first characters may then
    get no suggestion, which is better than a frozen engine."""
    lo, hi = 0, len(word)  # ``best`` holds the names that start with ``word[:lo]``
    best = names
    while lo < hi and len(best) > MAX_SUGGESTION_CHOICES:
        mid = (lo + hi + 1) // 2
        prefix = word[:mid]
        sharing = [name for name in best if name.startswith(prefix)]
        if sharing:
            lo, best = mid, sharing
        else:
            hi = mid - 1
    return best[:MAX_SUGGESTION_CHOICES]


#: A name's runs of ASCII digits and of other characters (``leaf0->spine1``: ``leaf``,
#: ``0``, ``->spine``, ``1``)
_RUNS = re.compile(r"[0-9]+|[^0-9]+")


def _is_digits(run: str) -> bool:
    """Whether ``run``, one of ``_RUNS``, is ASCII digits (``str.isdigit`` takes others)."""
    return "0" <= run[0] <= "9"


def _number(run: str) -> str:
    """A pattern for the digit run ``run`` as a number, with any zero-padding (``7``,
    ``07``, ``0007`` for ``7``; ``0``, ``00`` for ``0``): a whole run, since the pattern
    puts a non-digit, or the name's end, on either side of it."""
    digits = run.lstrip("0")
    return f"0*{digits}" if digits else "0+"


def _numbered_patterns(word: str) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
    """Two patterns a whole name is matched against: the first, ``word``'s spelling with
    its letters in any case and its numbers with any zero-padding (``gpu7``, ``GPU0007``
    for ``gpu0007``); the second, only its numbers, in order, the letters around them
    anything (``gpx7`` for ``gpu0007``), or None when ``word`` has no digits."""
    runs = _RUNS.findall(word)
    same = "".join(_number(r) if _is_digits(r) else re.escape(r) for r in runs)
    numbers = [_number(r) for r in runs if _is_digits(r)]
    if not numbers:
        return re.compile(same, re.IGNORECASE), None
    return re.compile(same, re.IGNORECASE), re.compile(
        r"[^0-9]*" + r"[^0-9]+".join(numbers) + r"[^0-9]*"
    )


def closest_names(word: str, choices: Iterable[str], n: int = 1) -> list[str]:
    """At most ``n`` of ``choices`` that ``word`` most likely meant, best first:

    1. the names spelled as ``word`` is, letters compared in any case and numbers as
       numbers (``gpu7``, ``GPU0007``: gpu0007; ``leaf0->spine1``: leaf00->spine01);
    2. else the closest spellings (difflib, against at most ``MAX_SUGGESTION_CHOICES``
       names: those sharing the longest prefix with ``word``);
    3. else the names with ``word``'s numbers, in order, whatever their letters
       (``gpx7``: gpu0007; ``fault3``: f3), the closest spelled first.

    Nothing for a ``word`` longer than ``MAX_SHOWN_NAME``. Linear in the choices: one
    regular-expression match a name for 1 and for 3 (some 40 ms over 300,000 names),
    difflib over a bounded number of them for 2 and 3."""
    if len(word) > MAX_SHOWN_NAME or n < 1:
        return []  # no name is that long: nothing is close
    names = list(choices)
    same, numbers = _numbered_patterns(word)
    spelled = list(filter(same.fullmatch, names))
    if spelled:
        return spelled[:n]
    if len(names) > MAX_SUGGESTION_CHOICES:
        close = difflib.get_close_matches(word, _sharing_a_prefix(word, names), n=n, cutoff=0.6)
    else:
        close = difflib.get_close_matches(word, names, n=n, cutoff=0.6)
    if close or numbers is None:
        return close
    numbered = list(filter(numbers.fullmatch, names))[:MAX_SUGGESTION_CHOICES]
    return difflib.get_close_matches(word, numbered, n=n, cutoff=0.0)


def _suggest(word: str, choices: Iterable[str]) -> str:
    close = closest_names(word, choices)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown(what: str, name: str, choices: Iterable[str]) -> CommandError:
    """An error for an unknown name, with a suggestion when one is close."""
    return CommandError(f"unknown {what} {shown(name)}{_suggest(name, choices)}")


class CommandResult(msgspec.Struct, frozen=True):
    """The reply to a command: ``ok`` or the specific error."""

    id: str | None
    ok: bool
    error: str | None = None
    detail: dict[str, Any] = msgspec.field(default_factory=dict)

    def to_json(self) -> bytes:
        """Compact JSON for MQTT and the CLI."""
        return _encoder.encode(self)
