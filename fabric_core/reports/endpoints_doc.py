"""Generate ``docs/ENDPOINTS.md``: the endpoint model, its parameters' sources, measured tables.

Run ``python -m fabric_core.reports.endpoints_doc [OUT]`` (default ``docs/ENDPOINTS.md``). Every
table is measured by running the emulator (the fabric core plus the endpoint model); nothing
in the tables is typed in. It takes a few minutes on one core.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from fabric_core.commands import InjectFault
from fabric_core.endpoints.model import EndpointParams
from fabric_core.net.profiles import Profile, get_profile
from fabric_core.net.scaleup import GPUS_PER_NODE_SOURCE, ScaleUpParams
from fabric_core.net.topology import leaf_spine
from fabric_core.reports.bringup import ProbeAllToAll, check_ibgda
from fabric_core.reports.run import run_for
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario, parse_scenario
from fabric_core.workloads.moe import MAX_ROUTER_DRAWS, MoEAllToAll
from fabric_core.workloads.pd import GPU_FLOPS, MFU, MODELS, prefill_s
from fabric_core.workloads.pd_presets import GPUS, HBM_UTILISATION

MODES = (("ibgda", "gdr"), ("proxy", "gdr"), ("proxy", "bounce"))


def _us(x: float) -> str:
    return f"{x * 1e6:.2f}" if np.isfinite(x) else "—"


def probe(
    params: EndpointParams, size: float, burst: int, prof: Profile | None = None
) -> ProbeAllToAll:
    """Two GPUs on one leaf send ``burst`` messages of ``size`` to each other (on
    ``native-400g`` unless ``prof`` is given)."""
    prof = get_profile("native-400g") if prof is None else prof
    topo = leaf_spine(prof, leaves=1, spines=1, gpus_per_leaf=2)
    p = ProbeAllToAll(
        name="p",
        traffic_class="p",
        ranks=topo.gpus.astype(np.int64),
        size_bytes=size,
        rounds=1,
        burst=burst,
        endpoint=params,
    )
    fabric = Fabric(topo, prof, [p], dt_s=1e-6, seed=1)
    while not p.done and fabric.sim_time_s < 0.05:
        fabric.step()
    return p


def table_isolated() -> list[str]:
    out = [
        "| size | " + " | ".join(f"{c}/{d} latency µs" for c, d in MODES) + " | "
        "bounce − gdr µs | modelled 2 × (copy launch + size / copy bw) µs | "
        "CPU µs/msg proxy gdr | CPU µs/msg bounce |",
        "|---|" + "---|" * (len(MODES) + 4),
    ]
    for size in (64.0, 4096.0, 7408.0, 65536.0, 1048576.0):
        lat = []
        for c, d in MODES:
            pr = probe(EndpointParams(control=c, data_path=d), size, 1)
            lat.append(pr.end_s - pr.start_s)
        b = EndpointParams(control="proxy", data_path="bounce")
        model = 2 * (b.copy_launch_s + size / b.host_copy_Bps)
        g = EndpointParams(control="proxy", data_path="gdr")
        out.append(
            f"| {size:,.0f} B | "
            + " | ".join(_us(x) for x in lat)
            + f" | {_us(lat[2] - lat[1])} | {_us(model)} | {_us(g.cpu_s_per_message(size))} | "
            f"{_us(b.cpu_s_per_message(size))} |"
        )
    return out


def table_rate() -> list[str]:
    out = [
        "| messages each way (4 KiB) | ibgda time µs | proxy time µs | ibgda M msg/s per GPU | "
        "proxy M msg/s per GPU | proxy max post-queue wait µs | ibgda max post-queue wait µs |",
        "|---|---|---|---|---|---|---|",
    ]
    for n in (1, 8, 64, 512, 2048):
        r = {}
        for c in ("ibgda", "proxy"):
            pr = probe(EndpointParams(control=c), 4096.0, n)
            assert pr.ep is not None
            r[c] = (
                pr.end_s - pr.start_s,
                pr.received / (pr.end_s - pr.start_s) / 2,
                float(pr.ep.max_post_wait_s.max()),
            )
        out.append(
            f"| {n} | {_us(r['ibgda'][0])} | {_us(r['proxy'][0])} | {r['ibgda'][1] / 1e6:.2f} | "
            f"{r['proxy'][1] / 1e6:.2f} | {_us(r['proxy'][2])} | {_us(r['ibgda'][2])} |"
        )
    return out


def moe_layer(
    control: str,
    hidden: int,
    tokens: int,
    dt: str,
    seed: int = 1,
    *,
    ranks: int = 8,
    routing: str | None = None,
    endpoint: dict[str, Any] | None = None,
    duration_s: float = 900e-6,
    gpus_per_node: int = 1,
    scaleup: dict[str, float] | None = None,
    experts: int = 0,
) -> tuple[Fabric, MoEAllToAll]:
    """One MoE layer (top-8) on ``ranks`` GPUs, 4 per leaf, 4 spines (``gpus_per_node``
    consecutive GPUs to a node, over NVLink), run for ``duration_s``: the fabric and the
    workload."""
    topology: dict[str, Any] = {
        "kind": "leaf-spine",
        "leaves": max(1, ranks // 4),
        "spines": 4,
        "gpus_per_leaf": min(ranks, 4),
    }
    if gpus_per_node > 1:
        topology["gpus_per_node"] = gpus_per_node
    if scaleup:
        topology["scaleup"] = scaleup
    data: dict[str, Any] = {
        "name": "moe",
        "dt": dt,
        "seed": seed,
        "topology": topology,
        "workload": [
            {
                "name": "moe",
                "kind": "moe",
                "ranks": ranks,
                "tokens_per_rank": tokens,
                "top_k": 8,
                "hidden": hidden,
                "layers": 1,
                "control": control,
                **({"experts": experts} if experts else {}),
                **({"endpoint": endpoint} if endpoint else {}),
            }
        ],
    }
    if routing is not None:
        data["profile_overrides"] = {"routing": routing}
    fabric = Fabric.from_scenario(parse_scenario(data))
    wl = fabric.workloads[0]
    assert isinstance(wl, MoEAllToAll)
    run_for(fabric, duration_s)
    return fabric, wl


def moe_run(
    control: str,
    hidden: int,
    tokens: int,
    dt: str,
    seed: int = 1,
    *,
    ranks: int = 8,
    routing: str | None = None,
    endpoint: dict[str, Any] | None = None,
    duration_s: float = 900e-6,
    gpus_per_node: int = 1,
    scaleup: dict[str, float] | None = None,
    experts: int = 0,
) -> dict[str, Any]:
    """``moe_layer``'s KPIs with the busiest-NIC bounds (``dispatch_bound_seconds``,
    ``combine_bound_seconds``) and, with ``gpus_per_node`` > 1, the busiest NVLink port's
    (``dispatch_scaleup_bound_seconds``, ``combine_scaleup_bound_seconds``)."""
    fabric, wl = moe_layer(
        control,
        hidden,
        tokens,
        dt,
        seed,
        ranks=ranks,
        routing=routing,
        endpoint=endpoint,
        duration_s=duration_s,
        gpus_per_node=gpus_per_node,
        scaleup=scaleup,
        experts=experts,
    )
    k = dict(wl.kpis(fabric.sim_time_s))
    k["dispatch_bound_seconds"], k["combine_bound_seconds"] = wl.nic_bounds_s()
    k["dispatch_scaleup_bound_seconds"], k["combine_scaleup_bound_seconds"] = wl.scaleup_bounds_s()
    k["fabric_bytes"] = fabric.injected_bytes
    return k


def table_moe() -> list[str]:
    out = [
        "| hidden | tokens × top-k | dt | control | dispatch µs (busiest-NIC bound) | combine µs "
        "(bound) | RDMA GB/s per rank | msg/s per rank (M) | max post-queue wait µs | host CPU busy s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for hidden, tokens, dt in ((7168, 128, "250ns"), (7168, 128, "1us"), (2048, 64, "1us")):
        for c in ("ibgda", "proxy"):
            k = moe_run(c, hidden, tokens, dt)
            out.append(
                f"| {hidden} | {tokens} × 8 | {dt} | {c} | {_us(k['dispatch_last_seconds'])} "
                f"({_us(k['dispatch_bound_seconds'])}) | {_us(k['combine_last_seconds'])} "
                f"({_us(k['combine_bound_seconds'])}) | {k['rdma_bytes_per_second_per_rank'] / 1e9:.1f} | "
                f"{k['message_rate_per_second_per_rank'] / 1e6:.2f} | "
                f"{_us(k['post_queue_wait_max_seconds'])} | {k['host_cpu_busy_seconds']:.2e} |"
            )
    return out


def experts_at(ranks: int) -> int:
    """Experts for an EP of ``ranks``: the workload's 32 a rank, or as many a rank as its
    router may draw for 128 tokens a rank (``moe.MAX_ROUTER_DRAWS``: 16 a rank at EP 256)."""
    per_rank = 32
    while per_rank > 1 and ranks * 128 * ranks * per_rank > MAX_ROUTER_DRAWS:
        per_rank //= 2
    return ranks * per_rank


def table_moe_scale() -> list[str]:
    """The issue-15 cases: EP 64 / 256 on adaptive routing against ECMP, two ticks, a small
    send queue (hidden 7168, 128 tokens × top-8, IBGDA)."""
    out = [
        "| EP | routing | dt | sq_depth | dispatch µs (busiest-NIC bound) | combine µs (bound) "
        "| dispatch / bound | combine / bound | send-queue full waits |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    cases = (
        (64, "adaptive", "1us", 1024),
        (64, "ecmp", "1us", 1024),
        (64, "adaptive", "1us", 64),
        (256, "adaptive", "1us", 1024),
        (256, "adaptive", "2us", 1024),
    )
    for ranks, routing, dt, sq in cases:
        k = moe_run(
            "ibgda",
            7168,
            128,
            dt,
            ranks=ranks,
            routing=routing,
            endpoint={"sq_depth": sq},
            experts=experts_at(ranks),
        )
        d, db = k["dispatch_last_seconds"], k["dispatch_bound_seconds"]
        c, cb = k["combine_last_seconds"], k["combine_bound_seconds"]
        out.append(
            f"| {ranks} | {routing} | {dt} | {sq} | {_us(d)} ({_us(db)}) | {_us(c)} ({_us(cb)}) "
            f"| {d / db:.3f} | {c / cb:.3f} | {k['send_queue_full_waits_total']:,.0f} |"
        )
    return out


#: DeepEP PR #173 (deepseek-ai/DeepEP, "LL nvlink p2p"), H20, 128 tokens x top-8, hidden
#: 7168: low-latency dispatch / combine µs without -> with NVLink for same-node peers
DEEPEP_NVLINK_H20 = {8: (172, 37, 319, 59), 16: (193, 119, 335, 199), 64: (203, 176, 351, 318)}


def table_moe_scaleup() -> list[str]:
    """EP 8 .. 256 with one GPU per node (every peer over the NIC) and with 8-GPU nodes
    (same-node peers over NVLink), hidden 7168, 128 tokens x top-8, IBGDA, seed 1."""
    out = [
        "| EP | GPUs per node | dispatch µs (NIC bound) | combine µs (NIC bound) | NVLink part "
        "of dispatch / combine µs (port bound) | bytes over NVLink | with / without NVLink: "
        "dispatch, combine | DeepEP H20: dispatch, combine µs (with / without) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for ranks in (8, 16, 64, 256):
        base: dict[str, Any] = {}
        for g in (1, 8):
            k = moe_run(
                "ibgda", 7168, 128, "1us", ranks=ranks, gpus_per_node=g, experts=experts_at(ranks)
            )
            d, c = k["dispatch_last_seconds"], k["combine_last_seconds"]
            if g == 1:
                base = k
                nvl, ratio = "—", "—"
            else:
                nvl = (
                    f"{_us(k['dispatch_scaleup_last_seconds'])} / "
                    f"{_us(k['combine_scaleup_last_seconds'])} "
                    f"({_us(k['dispatch_scaleup_bound_seconds'])} / "
                    f"{_us(k['combine_scaleup_bound_seconds'])})"
                )
                ratio = (
                    f"{d / base['dispatch_last_seconds']:.3f}, "
                    f"{c / base['combine_last_seconds']:.3f}"
                )
            ref = DEEPEP_NVLINK_H20.get(ranks)
            deepep = "—"
            if ref is not None and g == 8:
                deepep = (
                    f"{ref[1]} / {ref[0]} ({ref[1] / ref[0]:.3f}), "
                    f"{ref[3]} / {ref[2]} ({ref[3] / ref[2]:.3f})"
                )
            out.append(
                f"| {ranks} | {g} | {_us(d)} ({_us(k['dispatch_bound_seconds'])}) | {_us(c)} "
                f"({_us(k['combine_bound_seconds'])}) | {nvl} | "
                f"{k['scaleup_byte_fraction'] * 100:.1f} % | {ratio} | {deepep} |"
            )
    return out


def table_scaleup_sensitivity() -> list[str]:
    """The NVLink-only EP 8 layer (one 8-GPU node) over the assumption's ranges."""
    p = ScaleUpParams()
    out = [
        "| scale-up parameters | dispatch µs | combine µs | dispatch − latency, × port rate "
        "(bytes through the busiest port) |",
        "|---|---|---|---|",
    ]
    for label, over in (
        ("defaults", {}),
        ("latency_s = 0.6 µs (NCCL LL)", {"latency_s": 0.6e-6}),
        ("latency_s = 3.4 µs (NCCL Simple)", {"latency_s": 3.4e-6}),
        ("efficiency = 0.80", {"efficiency": 0.80}),
        ("link_Bps = 200 GB/s (H800: 8 links)", {"link_Bps": 200e9}),
    ):
        q = p.with_overrides(**over)
        k = moe_run("ibgda", 7168, 128, "1us", ranks=8, gpus_per_node=8, scaleup=over)
        d, c = k["dispatch_last_seconds"], k["combine_last_seconds"]
        moved = (d - q.latency_s) * q.payload_Bps
        out.append(f"| {label} | {_us(d)} | {_us(c)} | {moved / 1e6:.3f} MB |")
    return out


def scaleup_params_table() -> list[str]:
    out = ["| parameter | default | unit | source |", "|---|---|---|---|"]
    out.append(f"| `gpus_per_node` | 1 |  | {GPUS_PER_NODE_SOURCE} |")
    for name, unit, source, default in ScaleUpParams.parameter_sources():
        out.append(f"| `{name}` | {default:g} | {unit} | {source} |")
    return out


def pd_run(model: str, ctx: int) -> dict[str, Any]:
    """Fixed context; arrivals at a quarter of the prefill pool's capacity (little queueing)."""
    pre = float(prefill_s(MODELS[model], np.array([float(ctx)]), 8, GPU_FLOPS, MFU)[0])
    dt = min(max(pre / 2000, 100e-6), 2e-3)
    data = {
        "name": "pd",
        "dt": dt,
        "seed": 3,
        "topology": {"kind": "leaf-spine", "leaves": 2, "spines": 2, "gpus_per_leaf": 4},
        "workload": [
            {
                "name": "pd",
                "kind": "pd",
                "prefill": 4,
                "rate_per_s": 1.0 / pre,
                "context_tokens": ctx,
                "model": model,
            }
        ],
    }
    fabric = Fabric.from_scenario(parse_scenario(data))
    wl = fabric.workloads[0]
    run_for(fabric, 12 * pre + 0.2)
    return dict(wl.kpis(fabric.sim_time_s))


def table_pd() -> list[str]:
    out = [
        "| model | context tokens | requests | TTFT ms | queue ms | prefill ms | transfer ms "
        "| decode ms | transfer share |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for model in MODELS:
        for ctx in (256, 1024, 4096, 16384, 65536, 131072):
            k = pd_run(model, ctx)

            def ms(key: str, k: dict[str, Any] = k) -> str:
                return f"{k[key] * 1e3:.2f}"

            out.append(
                f"| {model} | {ctx} | {k['requests_completed']:.0f} | {ms('ttft_mean_seconds')} | "
                f"{ms('queue_mean_seconds')} | {ms('prefill_mean_seconds')} | "
                f"{ms('transfer_mean_seconds')} | {ms('decode_mean_seconds')} | "
                f"{k['transfer_share_of_ttft']:.3f} |"
            )
    return out


def table_check() -> list[str]:
    scn = load_scenario("tiny")
    out = [
        "| case | step | result | messages | M msg/s per GPU | p50 µs | diagnosis |",
        "|---|---|---|---|---|---|---|",
    ]
    cases: tuple[tuple[str, list[InjectFault]], ...] = (
        ("healthy", []),
        (
            "version_mismatch on gpu0005 (posts fail)",
            [InjectFault(kind="version_mismatch", target="gpu0005")],
        ),
        (
            "version_mismatch on gpu0000 (hang)",
            [InjectFault(kind="version_mismatch", target="gpu0000", params={"hang": 1.0})],
        ),
    )
    for name, faults in cases:
        for st in check_ibgda(scn, faults=faults):
            out.append(
                f"| {name} | {st.name} | {'PASS' if st.passed else 'FAIL: ' + st.failure} | "
                f"{st.completed}/{st.messages} | {st.message_rate_per_s / 1e6:.2f} | "
                f"{_us(st.latency_p50_s)} | {'; '.join(st.diagnosis)} |"
            )
    return out


def params_table() -> list[str]:
    out = ["| parameter | default | unit | source |", "|---|---|---|---|"]
    for name, unit, source, default in EndpointParams.parameter_sources():
        out.append(
            f"| `{name}` | {default:g} | {unit} | {source} |"
            if isinstance(default, float)
            else f"| `{name}` | {default} | {unit} | {source} |"
        )
    return out


def models_table() -> list[str]:
    out = [
        "| model | active params | layers | KV B/token | weights read per decode step | "
        "weights resident | reference GPU | source |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in MODELS.values():
        out.append(
            f"| {m.name} | {m.active_params:.3g} | {m.layers} | {m.kv_bytes_per_token:,.0f} | "
            f"{m.weight_bytes / 1e9:.1f} GB | {m.resident_bytes / 1e9:.1f} GB | {m.reference_gpu} "
            f"| {m.source} |"
        )
    out += [
        "",
        "| GPU | dense BF16 FLOP/s | HBM bandwidth | HBM capacity | source |",
        "|---|---|---|---|---|",
    ]
    for g in GPUS.values():
        out.append(
            f"| {g.name} | {g.flops / 1e12:.0f} T | {g.hbm_Bps / 1e12:.3g} TB/s | "
            f"{g.hbm_bytes / 1e9:.0f} GB | {g.source} |"
        )
    out.append("")
    out.append(
        f"MFU {MFU} for every inference workload (PD and the KV cache's misses): an "
        "assumption, range 0.35–0.45 (the Llama 3 paper, 'The Llama 3 Herd of Models', reports "
        "38–43 % BF16 MFU in pre-training; inference prefill is taken to be similar). KV memory "
        f"per prefill instance: {HBM_UTILISATION} × tp × HBM capacity − resident weights "
        f"({HBM_UTILISATION} = vLLM's `gpu_memory_utilization` default; an assumption that "
        "activations fit in the rest)."
    )
    return out


def pd_load_run(
    transport: str, hold: str, rate: float, kv_transfer: str = "after"
) -> dict[str, Any]:
    """Llama-3-70B, 4,096-token prompts, 4 prefill + 4 decode instances, 6 s at ``rate``."""
    data = {
        "name": "pd-load",
        "dt": "1ms",
        "seed": 3,
        "topology": {"kind": "leaf-spine", "leaves": 2, "spines": 2, "gpus_per_leaf": 4},
        "workload": [
            {
                "name": "pd",
                "kind": "pd",
                "prefill": 4,
                "rate_per_s": rate,
                "context_tokens": 4096,
                "transport": transport,
                "kv_hold": hold,
                "kv_transfer": kv_transfer,
            }
        ],
    }
    fabric = Fabric.from_scenario(parse_scenario(data))
    wl = fabric.workloads[0]
    run_for(fabric, 6.0)
    return dict(wl.kpis(fabric.sim_time_s))


def table_pd_load() -> list[str]:
    out = [
        "| requests/s | kv_hold | kv_transfer | RDMA TTFT mean ms (queue, transfer) | TCP TTFT mean "
        "ms (queue, transfer) | TCP / RDMA TTFT | TCP requests waiting at 6 s |",
        "|---|---|---|---|---|---|---|",
    ]
    for rate, hold, xfer in (
        (2.0, "memory", "after"),
        (2.0, "memory", "layerwise"),
        (15.0, "memory", "after"),
        (19.0, "memory", "after"),
        (15.0, "slot", "after"),
    ):
        k = {t: pd_load_run(t, hold, rate, xfer) for t in ("rdma", "tcp")}

        def cell(t: str, k: dict[str, dict[str, Any]] = k) -> str:
            v = k[t]
            return (
                f"{v['ttft_mean_seconds'] * 1e3:.0f} ({v['queue_mean_seconds'] * 1e3:.0f}, "
                f"{v['transfer_mean_seconds'] * 1e3:.0f})"
            )

        ratio = k["tcp"]["ttft_mean_seconds"] / k["rdma"]["ttft_mean_seconds"]
        out.append(
            f"| {rate:g} | {hold} | {xfer} | {cell('rdma')} | {cell('tcp')} | {ratio:.2f}× | "
            f"{k['tcp']['requests_waiting']:.0f} |"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    """Write the document."""
    parser = argparse.ArgumentParser(
        prog="python -m fabric_core.reports.endpoints_doc",
        description="Measure the endpoint model's tables and write docs/ENDPOINTS.md "
        "(about a minute).",
    )
    parser.add_argument(
        "out", nargs="?", type=Path, default=Path("docs/ENDPOINTS.md"), help="the file to write"
    )
    out = parser.parse_args(argv).out  # (a bare `--help` was taken for the file to write)
    head = (Path(__file__).parents[1] / "templates" / "ENDPOINTS.head.md").read_text()
    parts = [
        head,
        "## Parameters and their sources\n",
        *params_table(),
        "\n### Scale-up domain (`fabric_core/net/scaleup.py`, `ScaleUpParams`)\n",
        "Keys of `[topology]`: `gpus_per_node`, and `scaleup = { name = value }` to change "
        "the figures below (base units, as `endpoint = { ... }` takes them).\n",
        *scaleup_params_table(),
        "\n### Model presets (PD)\n",
        *models_table(),
        "\n## Measured: one isolated message (2 GPUs on one leaf, idle fabric)\n",
        "`python -m fabric_core.reports.endpoints_doc` (function `table_isolated`): latency from "
        "the request to the receiver noticing the data, through the fabric (native-400g).\n",
        *table_isolated(),
        "\n## Measured: message rate under parallel load (2 GPUs, N messages each way at once)\n",
        "`table_rate`: time until the last message is received, and the rate.\n",
        *table_rate(),
        "\n## Measured: DeepEP-style MoE dispatch/combine, EP 8 (8 GPUs, 2 leaves × 4 spines)\n",
        "`table_moe` (one layer, seed 1; `fabtop run moe-ibgda` / `moe-proxy` run the same "
        "workload). DeepEP's published low-latency figures on H800 + CX7 400G, EP 8: dispatch "
        "163 µs, combine 318 µs, ~46 GB/s per rank (DeepEP README, V1).\n",
        *table_moe(),
        "\n## Measured: MoE at EP 64 and EP 256 (4 GPUs per leaf, 4 spines)\n",
        "`table_moe_scale`: hidden 7168, 128 tokens × top-8, IBGDA, one layer, seed 1; the "
        "bound is the busiest NIC's remote messages at payload line rate. Adaptive routing "
        "against ECMP, the tick doubled, a send queue of 64 WQEs instead of 1,024 (issue 15: "
        "before, EP 64 dispatch took 209.6 µs on adaptive routing against 166.0 µs on ECMP, "
        "EP 256 dispatch 217.0 µs at dt = 1 µs and 231.8 µs at 2 µs, and combine with 64 "
        "WQEs 835 µs at EP 8 and 1,108 µs at EP 64). 32 experts a rank, 16 at EP 256 "
        "(4,096 experts: 8,192 would be more router draws a dispatch than the workload "
        "allows).\n",
        *table_moe_scale(),
        "\n## Measured: MoE with a scale-up domain (same-node peers over NVLink)\n",
        "`table_moe_scaleup`: hidden 7168, 128 tokens × top-8, IBGDA, one layer, seed 1, "
        "4 GPUs per leaf, 4 spines (the same layer at both node sizes: the same tokens go to "
        "the same experts); 8 GPUs per node = consecutive GPUs (two leaves' worth). The NIC "
        "bound counts the messages to other nodes only; the NVLink part is the time from the "
        "phase's start to its last NVLink message, against the busiest NVLink port's bound. "
        "The last column is DeepEP's own measurement of the same change (deepseek-ai/DeepEP PR "
        "#173, H20 + 400G, `allow_nvlink_for_low_latency_mode`): not the same GPU or NIC, so "
        "compare the ratios.\n",
        *table_moe_scaleup(),
        "\n`table_scaleup_sensitivity`: EP 8 on one 8-GPU node (every message over NVLink) "
        "over the ranges of the scale-up figures.\n",
        *table_scaleup_sensitivity(),
        "\n## Measured: PD disaggregation, TTFT breakdown over a context-length sweep\n",
        "`table_pd` (4 prefill + 4 decode instances, fixed context, Poisson arrivals at 1 / prefill time: "
        "a quarter of the prefill pool's capacity).\n",
        *table_pd(),
        "\n## Measured: PD TTFT at load, RDMA vs TCP (where the fabric is the bottleneck, and where "
        "it is not)\n",
        "`table_pd_load`: Llama-3-70B, 4,096-token prompts (1.34 GB of KV), 4 prefill + 4 decode "
        "instances (TP 8, H100), 6 s at a fixed Poisson rate, seed 3. The prefill pool serves "
        "4 / 190 ms ≈ 21 requests/s; over TCP one request's KV takes ~275 ms (the receiver's "
        "per-byte copy on 1 core: `client_cores` = 1, the storage default), so 4 decode nodes "
        "take ~15.6 requests/s. At 2/s nothing queues and TCP costs its transfer time; at 15/s "
        "and 19/s the TCP transfer is the bottleneck: with `kv_hold = slot` an instance is busy "
        "prefill + transfer (TCP serves ~8.6/s) and the queue grows; with the default "
        "`memory` hold the backlog stays in the transfer until the HBM fills (435 GB here: "
        "minutes at these rates; `tests/test_pd_transport.py` shows it with a small `kv_memory`).\n",
        *table_pd_load(),
        "\n## Measured: the IBGDA bring-up check (`fabtop check ibgda tiny [--mismatch GPU[:fail|:hang]]`)\n",
        *table_check(),
        "",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(parts) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
