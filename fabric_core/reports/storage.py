"""The storage report: the bundled storage scenarios run on every access path, side by side.

Each case is a bundled scenario and a list of variants (the access path
swapped in every storage workload, a slow target injected, a workload
dropped); each variant is a full emulator run and the table shows KPIs the
workloads measured. ``markdown`` renders the tables for ``docs/STORAGE.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fabric_core.reports.run import run_for
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario, parse_scenario
from fabric_core.storage.model import inject_slow_target
from fabric_core.units import format_duration, format_rate

Fmt = Callable[[float], str]


def _time(x: float) -> str:
    return format_duration(x)


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _rate(x: float) -> str:
    return format_rate(x)


def _num(x: float) -> str:
    return f"{x:.3g}"


def per_second_text(x: float) -> str:
    """A rate of I/Os to 3 significant digits, grouped as the README's counts are
    (``44,800``; it read ``4.48e+04``)."""
    if not math.isfinite(x) or abs(x) < 1000:
        return _num(x)
    return f"{float(f'{x:.3g}'):,.0f}"


@dataclass(frozen=True)
class Column:
    """A table column: a header and where its number is in a run report."""

    header: str
    where: tuple[str, ...]  # keys into the report dict
    fmt: Fmt = _num

    def value(self, report: dict[str, Any]) -> float:
        v: Any = report
        for k in self.where:
            if not isinstance(v, dict) or k not in v:
                return float("nan")
            v = v[k]
        return float("nan") if v is None else float(v)


@dataclass(frozen=True)
class Variant:
    """One run of a case."""

    label: str
    path: str | None = None  # swap into every storage workload
    workload_overrides: dict[str, Any] = field(default_factory=dict)
    slow_targets: tuple[str, ...] = ()
    drop_kinds: tuple[str, ...] = ()
    scenario: str | None = None  # another bundled scenario for this row
    profile: str | None = None  # another fabric profile (e.g. roce-400g)


@dataclass(frozen=True)
class Case:
    """A bundled scenario run in several variants, and the columns to show."""

    scenario: str
    title: str
    duration_s: float
    variants: tuple[Variant, ...]
    columns: tuple[Column, ...]
    dt: str | None = None  # a coarser tick than the scenario's (results do not depend on it)
    row_header: str = "path"


STORAGE_KINDS = ("storage_io", "training", "checkpoint", "kvcache")
ALL_PATHS = ("local-nvme", "nvmeof", "xds", "nfs-rdma", "nvme-tcp", "nfs-tcp")


def _wk(workload: str, kpi: str) -> tuple[str, ...]:
    return ("workloads", workload, "kpis", kpi)


def _cpu_cols(wl: str) -> tuple[Column, ...]:
    return (
        Column("client CPU", _wk(wl, "client_cpu_utilisation"), _pct),
        Column("copy CPU", _wk(wl, "client_copy_cpu_seconds"), _time),
        Column("host bytes/B", _wk(wl, "host_memory_bytes_per_byte")),
    )


CASES: dict[str, Case] = {
    c.scenario: c
    for c in (
        Case(
            "storage-random-read",
            "Small random reads (4 KiB): latency per path, at queue depth 1 and 32 (C4)",
            5e-3,
            (
                *(Variant(p, path=p) for p in ALL_PATHS),
                *(
                    Variant(f"{p}, QD 32", path=p, workload_overrides={"depth": 32})
                    for p in ("nvmeof", "xds", "nvme-tcp")
                ),
            ),
            (
                Column("p50", _wk("probe", "io_latency_p50_seconds"), _time),
                Column("p99", _wk("probe", "io_latency_p99_seconds"), _time),
                Column("mean", _wk("probe", "io_latency_mean_seconds"), _time),
                Column("IOPS", _wk("probe", "iops"), per_second_text),
                *_cpu_cols("probe"),
            ),
        ),
        Case(
            "training-nfs",
            "Training data loading, the default preset (C5, C6)",
            0.4,
            (
                *(Variant(p, path=p) for p in ALL_PATHS),
                Variant("nfs-rdma, stor00 slow", path="nfs-rdma", slow_targets=("stor00",)),
            ),
            (
                Column("GPU util", _wk("loader", "gpu_utilisation"), _pct),
                Column("step", _wk("loader", "step_seconds_mean"), _time),
                Column("data wait", _wk("loader", "data_wait_fraction"), _pct),
                Column("loader", _wk("loader", "loader_bytes_per_second"), _rate),
                *_cpu_cols("loader"),
            ),
            dt="200us",
        ),
        Case(
            "storage-kvcache",
            "KVCache restore instead of prefill (C4, C6, C9)",
            0.2,
            (
                *(Variant(p, path=p) for p in ALL_PATHS),
                Variant("xds, stor00 slow", path="xds", slow_targets=("stor00",)),
            ),
            (
                Column("TTFT hit p50", _wk("kvcache", "ttft_hit_p50_seconds"), _time),
                Column("TTFT miss p50", _wk("kvcache", "ttft_miss_p50_seconds"), _time),
                Column("restore p50", _wk("kvcache", "restore_p50_seconds"), _time),
                Column("restore p99", _wk("kvcache", "restore_p99_seconds"), _time),
                *_cpu_cols("kvcache"),
            ),
            dt="100us",
        ),
        Case(
            "checkpoint-burst",
            "A checkpoint burst and the RPC probes beside it",
            3e-3,
            (
                Variant("no checkpoint", drop_kinds=("checkpoint",)),
                Variant("checkpoint, shared lane"),
                Variant("checkpoint, own lane", scenario="checkpoint-burst-vl"),
                Variant("RoCE: no checkpoint", drop_kinds=("checkpoint",), profile="roce-400g"),
                Variant("RoCE: checkpoint, shared priority", profile="roce-400g"),
                Variant(
                    "RoCE: checkpoint, own priority",
                    scenario="checkpoint-burst-vl",
                    profile="roce-400g",
                ),
            ),
            (
                Column("rpc p50", ("classes", "rpc", "p50_seconds"), _time),
                Column("rpc p99", ("classes", "rpc", "p99_seconds"), _time),
                Column("rpc mean", ("classes", "rpc", "mean_seconds"), _time),
                Column("write", _wk("checkpoint", "storage_bytes_per_second"), _rate),
            ),
            row_header="variant",
        ),
    )
}


def build_variant(case: Case, v: Variant) -> Fabric:
    """The fabric of one variant (fresh, faults injected)."""
    raw = dict(load_scenario(v.scenario or case.scenario).raw)
    if case.dt is not None:
        raw["dt"] = case.dt
    if v.profile is not None:
        raw["profile"] = v.profile
    tables = []
    for t in raw.get("workload", []):
        if t.get("kind") in v.drop_kinds:
            continue
        if t.get("kind") in STORAGE_KINDS:
            t = {**t, **v.workload_overrides}
            if v.path is not None:
                t["path"] = v.path
        tables.append(t)
    raw["workload"] = tables
    fabric = Fabric.from_scenario(parse_scenario(raw, case.scenario))
    for target in v.slow_targets:
        inject_slow_target(fabric, target, latency_factor=10.0, bandwidth_factor=0.25)
    return fabric


@dataclass
class CaseResult:
    """The rows of one case: (variant label, report) per variant."""

    case: Case
    duration_s: float
    rows: list[tuple[str, dict[str, Any]]]


def run_case(case: Case, scale: float = 1.0) -> CaseResult:
    """Run every variant of a case for ``duration_s × scale``."""
    d = case.duration_s * scale
    return CaseResult(
        case, d, [(v.label, run_for(build_variant(case, v), d)) for v in case.variants]
    )


def _cells(res: CaseResult) -> list[list[str]]:
    out = []
    for label, rep in res.rows:
        row = [label]
        for col in res.case.columns:
            x = col.value(rep)
            row.append("—" if not math.isfinite(x) else col.fmt(x))
        out.append(row)
    return out


#: What the CPU columns (``_cpu_cols``) are, said under each table that has them: "copy
#: CPU", a time beside "client CPU"'s share, and "host bytes/B", a ratio, read as neither
CPU_LEGEND = (
    "client CPU: the clients' cores busy, a share; copy CPU: the CPU time spent copying "
    "through host memory, in all; host bytes/B: bytes through host memory per byte delivered"
)


def _legend(res: CaseResult) -> list[str]:
    return [CPU_LEGEND] if any(c.header == "copy CPU" for c in res.case.columns) else []


def text_table(res: CaseResult) -> str:
    """A fixed-width table for a terminal."""
    head = [res.case.row_header, *(c.header for c in res.case.columns)]
    rows = [head, *_cells(res)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    tick = f", dt {res.case.dt}" if res.case.dt else ""
    lines = [f"{res.case.title}  [{res.case.scenario}, {format_duration(res.duration_s)}{tick}]"]
    for r in rows:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
    return "\n".join(lines + _legend(res))


def markdown(results: Sequence[CaseResult], command: str) -> str:
    """Markdown tables (for docs/STORAGE.md), with the command that made them."""
    parts = [f"Generated by `{command}`; every number is measured by a run of the emulator.\n"]
    for res in results:
        head = [res.case.row_header, *(c.header for c in res.case.columns)]
        parts.append(
            f"**{res.case.title}** — scenario `{res.case.scenario}`, "
            f"{format_duration(res.duration_s)} simulated per row"
            + (f", tick {res.case.dt}" if res.case.dt else "")
            + "\n"
        )
        parts.append("| " + " | ".join(head) + " |")
        parts.append("|" + "|".join("---" for _ in head) + "|")
        for row in _cells(res):
            parts.append("| " + " | ".join(row) + " |")
        parts.append("")
        parts += [f"{line}.\n" for line in _legend(res)]
    return "\n".join(parts)


BEGIN = "<!-- storage-report:begin -->"
END = "<!-- storage-report:end -->"


def splice(doc: str, table: str) -> str:
    """Replace the text between the report markers of ``doc`` (append them when missing)."""
    block = f"{BEGIN}\n{table}\n{END}"
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        return head + block + tail
    return doc.rstrip("\n") + "\n\n" + block + "\n"


PARAMS_BEGIN = "<!-- storage-params:begin -->"
PARAMS_END = "<!-- storage-params:end -->"


def params_markdown() -> str:
    """The StorageParams table (value, unit, source) straight from the dataclass."""
    from dataclasses import fields

    from fabric_core.storage.model import StorageParams

    p = StorageParams()
    rows = ["| parameter | value | unit | source |", "|---|---|---|---|"]
    for f in fields(p):
        src = str(f.metadata["source"]).replace("|", "/")
        rows.append(f"| `{f.name}` | {getattr(p, f.name):.4g} | {f.metadata['unit']} | {src} |")
    return "\n".join(rows)


def splice_params(doc: str) -> str:
    """Replace the parameter table between its markers (append them when missing)."""
    block = f"{PARAMS_BEGIN}\n{params_markdown()}\n{PARAMS_END}"
    if PARAMS_BEGIN in doc and PARAMS_END in doc:
        head, rest = doc.split(PARAMS_BEGIN, 1)
        _, tail = rest.split(PARAMS_END, 1)
        return head + block + tail
    return doc.rstrip("\n") + "\n\n" + block + "\n"
