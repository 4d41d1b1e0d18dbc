"""The JSON payloads of the MQTT topics, as msgspec structs (see docs/MQTT.md).

Units are SI, as in the snapshot: seconds, bytes, bytes/second; utilisation is
a 0..1 fraction. Arrays are columnar (one list per field, the same order for
every list) to keep telemetry compact. A number JSON cannot carry (NaN: an
empty histogram's quantile, a KPI not measured yet) is ``null``.

Every payload carries ``v`` (the schema version) and ``run_id`` (random per
``fabtop serve`` process), so a reader never mixes two runs.
"""

from __future__ import annotations

import msgspec

SCHEMA_VERSION = 1


class HistogramMsg(msgspec.Struct, frozen=True):
    """A latency histogram: sparse bucket counts plus ready-made quantiles.

    ``i`` are bucket indices into ``fabric_core.tick.histogram.BOUNDS_S`` (the
    layout is in ``meta.histogram``), ``n`` their counts (not cumulative).
    """

    count: int
    sum_s: float
    p50_s: float | None
    p99_s: float | None
    p999_s: float | None
    i: list[int]
    n: list[int]


class LinksMsg(msgspec.Struct, frozen=True):
    """The top links of this tick (``total`` is how many links the fabric has)."""

    total: int
    name: list[str]
    tier: list[str]
    bandwidth_Bps: list[float]
    prop_delay_s: list[float]
    buffer_bytes: list[float]
    status: list[int]  # 0 up, 1 down, 2 degraded
    utilisation: list[float]
    queue_bytes: list[float]
    queue_vl_bytes: list[list[float]]
    credits_bytes: list[float]
    paused: list[bool]
    tx_bytes_total: list[float]
    tx_packets_total: list[float]
    transmit_wait_seconds_total: list[float]
    pause_frames_total: list[float]
    pause_seconds_total: list[float]
    ecn_marked_packets_total: list[float]
    cnp_handled_total: list[float]
    discards_bytes_total: list[float]
    retransmitted_bytes_total: list[float]
    link_downed_total: list[float]
    link_error_recovery_total: list[float]
    symbol_errors_total: list[float]


class TotalsMsg(msgspec.Struct, frozen=True):
    """Fabric-wide figures (as ``fabric_core.runtime.snapshot.Totals``)."""

    injected_bytes_total: float
    delivered_bytes_total: float
    dropped_bytes_total: float
    in_flight_bytes: float
    throughput_Bps: float
    active_flows: int
    completed_flows_total: int
    cancelled_bytes_total: float = 0.0  # absent in telemetry from an older serve
    waiting_flows: int = 0  # absent in telemetry from an older serve


class FaultMsg(msgspec.Struct, frozen=True):
    """A fault and its timeline (simulated seconds; null = not reached yet)."""

    id: str
    kind: str
    target: str
    params: dict[str, float | str]
    state: str
    injected_at_s: float
    detected_at_s: float | None = None
    mitigated_at_s: float | None = None
    recovered_at_s: float | None = None
    cleared_at_s: float | None = None


class WorkloadMsg(msgspec.Struct, frozen=True):
    """A workload's KPIs and histograms."""

    kind: str
    traffic_class: str
    kpis: dict[str, float | None]
    histograms: dict[str, HistogramMsg]


class HealthMsg(msgspec.Struct, frozen=True):
    """Whether the engine keeps pace (``fabric_core.runtime.engine.EngineHealth``)."""

    pacing: str  # ok | behind | starved | paused | flat-out
    busy_fraction: float
    queued_commands: int
    flows_refused_total: int


class CommandStatsMsg(msgspec.Struct, frozen=True):
    """What the bridge did with the commands it received (counters since it started).

    Every message on ``cmd/#`` lands in one of applied, refused (``busy`` is part of
    it), duplicates, internal_errors or discarded (the incoming queue was full).
    """

    applied: int
    refused: int
    busy: int
    duplicates: int
    internal_errors: int
    discarded: int
    replies_lost: int
    retained_cleared: int
    read_only: bool
    allowed: list[str] | None


class EventStatsMsg(msgspec.Struct, frozen=True):
    """What became of the events the bridge read (counters since it started).

    ``dropped``: taken from snapshots but discarded, the bridge's queue of events to
    publish being full (the broker slow or away). ``gaps``: times more events happened
    between two snapshots the bridge read than a snapshot carries (100), so that some,
    an unknown number (events carry no sequence number), were never seen.
    """

    sent: int
    dropped: int
    gaps: int


class TelemetryMsg(msgspec.Struct, frozen=True):
    """``fabtop/<cluster>/telemetry``: one consistent tick, a few times a second."""

    v: int
    run_id: str
    cluster: str
    scenario: str
    profile: str
    flow_control: str
    seed: int
    tick: int
    sim_time_s: float
    dt_s: float
    wall_time_s: float
    target_speed: float
    measured_speed: float
    running: bool
    totals: TotalsMsg
    links: LinksMsg
    latency: dict[str, HistogramMsg]
    workloads: dict[str, WorkloadMsg]
    faults: list[FaultMsg]
    params: dict[str, float | None]
    health: HealthMsg | None = None  # absent from emulators older than this field
    commands: CommandStatsMsg | None = None
    events: EventStatsMsg | None = None  # absent from emulators older than this field


class NodesMsg(msgspec.Struct, frozen=True):
    """The node table, columnar."""

    name: list[str]
    kind: list[str]
    tier: list[int]
    plane: list[int]


class HistogramLayoutMsg(msgspec.Struct, frozen=True):
    """How to read a histogram's bucket indices."""

    buckets_per_decade: int
    lowest_bound_s: float
    highest_bound_s: float
    n_buckets: int


class MetaMsg(msgspec.Struct, frozen=True):
    """``fabtop/<cluster>/meta`` (retained): what is running and its nodes."""

    v: int
    run_id: str
    cluster: str
    scenario: str
    profile: str
    flow_control: str
    seed: int
    links_total: int
    nodes: NodesMsg
    histogram: HistogramLayoutMsg
    link_names: list[str] = []  # every link of the fabric (telemetry carries the top ones)


class EventMsg(msgspec.Struct, frozen=True):
    """``fabtop/<cluster>/event``: one event (``time_s`` is simulated time)."""

    v: int
    run_id: str
    time_s: float
    severity: str
    kind: str
    target: str
    message: str


encoder = msgspec.json.Encoder()
telemetry_decoder = msgspec.json.Decoder(TelemetryMsg)
meta_decoder = msgspec.json.Decoder(MetaMsg)
event_decoder = msgspec.json.Decoder(EventMsg)
