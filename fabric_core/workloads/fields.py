"""Numbers read from a workload's scenario table, checked where they are read.

``int(t.get(...))`` took ``true`` for 1 and ``"8"`` for 8, and let a negative rate
through to the random generator, which failed mid-run with numpy's traceback. These
readers say which key is wrong and what it must be; ``build_workload`` adds where the
table is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fabric_core.endpoints.params import EndpointParams
from fabric_core.units import format_bytes, parse_duration, parse_size

#: Work requests a queue pair's send queue holds at most (ConnectX ``max_qp_wr``, as
#: ``ibv_devinfo -v`` reports it): a sender cannot keep more messages outstanding.
MAX_OUTSTANDING = 32768
#: Messages a NIC starts per second at most (the ConnectX-7 product brief, as the endpoint
#: model has it): the fastest a sender's messages can arrive.
MAX_MESSAGE_RATE_PER_S = EndpointParams().nic_msg_rate_per_s
#: The most bytes one message (one RDMA operation) carries: 2^31, the InfiniBand
#: specification's largest message (ConnectX ports report ``max_msg_sz`` 0x80000000 in
#: ``ibv_query_port``). A larger transfer is several messages.
MAX_MESSAGE_BYTES = 1 << 31


def size(
    t: Mapping[str, Any], key: str, default: str, *, maximum: float = MAX_MESSAGE_BYTES
) -> float:
    """``t[key]`` (or ``default``) as a size in bytes (``parse_size``: ``4KiB``), a whole
    number of them (a message, an I/O or a batch carries whole bytes), of at least one and
    at most ``maximum`` (one message's, unless told).

    Raises:
        ValueError: not a size, out of range, or a fraction of a byte.
    """
    text = t.get(key, default)
    try:
        value = parse_size(text, signed=True)  # (-5 B: the range below)
    except ValueError as exc:  # ("size must be ...": named by its key)
        raise ValueError(str(exc).replace("size", key, 1)) from None
    if not 1 <= value <= maximum:
        most = "one message's most" if maximum == MAX_MESSAGE_BYTES else "at most"
        raise ValueError(f"{key}: must be 1 B to {format_bytes(maximum)} ({most}), got {text!r}")
    if value != math.floor(value):
        below = math.floor(value)
        raise ValueError(
            f"{key}: {text!r} is {value:,.12g} bytes, not a whole number of them (a message "
            f"carries whole bytes): write {below}B or {below + 1}B"
        )
    return value


#: The workload keys that are durations (each read with ``duration`` by its kind's builder;
#: tests/test_bare_durations.py holds the two together)
DURATION_KEYS = frozenset(
    {"start", "period", "until", "compute", "first_decode", "expert_compute", "attention_compute"}
)


def duration(
    t: Mapping[str, Any], key: str, default: str | None = None, *, allow_zero: bool = False
) -> float:
    """``t[key]`` (or ``default``) as a duration in seconds (``parse_duration``: ``100us``),
    above 0 (or at least 0 with ``allow_zero``).

    Raises:
        ValueError: not a duration, or out of range, named by its key.
    """
    try:
        return parse_duration(t.get(key, default), allow_zero=allow_zero)
    except ValueError as exc:
        raise ValueError(f"{key}: {exc}") from None


def whole(
    t: Mapping[str, Any], key: str, default: int, *, minimum: int = 0, maximum: int | None = None
) -> int:
    """``t[key]`` (or ``default``) as a whole number of at least ``minimum`` (and at most
    ``maximum``).

    Raises:
        ValueError: not a whole number (a bool is not one), or out of range.
    """
    value = t.get(key, default)
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    ok = ok and math.isfinite(value) and float(value).is_integer() and value >= minimum
    if ok and (maximum is None or value <= maximum):
        return int(value)
    bound = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum}"
    raise ValueError(f"{key}: expected a whole number {bound}, got {value!r}")


def number(
    t: Mapping[str, Any],
    key: str,
    default: float,
    *,
    minimum: float = 0.0,
    maximum: float = math.inf,
    positive: bool = False,
) -> float:
    """``t[key]`` (or ``default``) as a finite number in [``minimum``, ``maximum``]
    (and above 0 if ``positive``).

    Raises:
        ValueError: not a number (a bool is not one), or out of range.
    """
    value = t.get(key, default)
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok and minimum <= value <= maximum and not (positive and value <= 0):
        return float(value)
    if positive:
        bound = "> 0" if maximum == math.inf else f"in (0, {maximum:g}]"
    else:
        bound = f">= {minimum:g}" if maximum == math.inf else f"in [{minimum:g}, {maximum:g}]"
    raise ValueError(f"{key}: expected a number {bound}, got {value!r}")
