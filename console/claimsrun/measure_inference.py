"""C9: TTFT with RDMA vs TCP, and the KV transfer's share of TTFT vs context length.

The share comes from the PD-disaggregation workload of the bundled ``pd-llama70b``
scenario at a fixed context per run (arrivals at a quarter of the prefill pool's
capacity, as ``docs/ENDPOINTS.md``'s sweep); TTFT RDMA vs TCP from the bundled
``storage-kvcache`` scenario (KV cache restored instead of prefilled) with NVMe-oF
over RDMA against NVMe/TCP, over the request rate.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from console.claimsrun.model import Figure, Measurement, PartResult, Settings, Sweep, Tick
from console.claimsrun.params import profile_params, storage_params
from console.claimsrun.runs import bundled, kpi, run_scenario, set_workloads
from fabric_core.reports.storage import STORAGE_KINDS
from fabric_core.workloads.pd import GPU_FLOPS, MFU, MODELS, prefill_s

CONTEXTS = (256, 1024, 4096, 16384, 65536)
RDMA, TCP = "nvmeof", "nvme-tcp"


def pd_share(settings: Settings, tick: Tick, model: str, ctx: int) -> dict[str, Any]:
    """KPIs of the PD workload at a fixed context (12 prefill times of arrivals)."""
    raw = bundled("pd-llama70b")
    raw["workload"] = [t for t in raw["workload"] if t["kind"] == "pd"]  # no RPC probes
    pd = raw["workload"][0]
    tp = int(pd.get("tp", 8))
    pre = float(prefill_s(MODELS[model], np.array([float(ctx)]), tp, GPU_FLOPS, MFU)[0])
    raw["dt"] = min(max(pre / 2000, 100e-6), 2e-3)  # ~2,000 ticks a prefill
    pd.update(model=model, context_tokens=ctx, rate_per_s=1.0 / pre)
    pd.pop("context_median", None)
    rep = run_scenario(raw, 12 * pre + 0.2, settings, tick, label=f"C9 PD {model} {ctx} tokens")
    return dict(rep["workloads"]["pd"]["kpis"])


def measure_c9(settings: Settings, tick: Tick) -> Measurement:
    """Both halves of C9, with their sweeps."""
    models = ("llama3-70b",) if settings.quick else tuple(MODELS)
    share = Sweep(
        "c9_share_vs_context",
        "C9: KV transfer's share of TTFT vs context length",
        "context tokens",
        "n",
        "transfer share of TTFT",
        "frac",
        log_x=True,
    )
    kp: dict[tuple[str, int], dict[str, Any]] = {}
    for ctx in CONTEXTS:
        for m in models:
            kp[(m, ctx)] = pd_share(settings, tick, m, ctx)
        share.add(ctx, {m: kp[(m, ctx)]["transfer_share_of_ttft"] for m in models})
    s = share.series["llama3-70b"]
    rises = sum(b > a for a, b in itertools.pairwise(s)) / (len(s) - 1)
    peak = int(np.argmax(s))
    d = 0.1 if settings.quick else 0.2
    rates = (10.0,) if settings.quick else (5.0, 10.0, 20.0)
    ttft = Sweep(
        "c9_ttft_vs_rate",
        "C9: TTFT p50 vs request rate (KVCache restore)",
        "requests per second per GPU",
        "n",
        "TTFT p50",
        "s",
    )

    def kv(path: str, rate: float) -> float:
        raw = set_workloads(bundled("storage-kvcache"), STORAGE_KINDS, path=path, rate_per_s=rate)
        raw["dt"] = "100us"
        rep = run_scenario(
            raw,
            d,
            settings,
            tick,
            cache=True,
            drain=True,
            label=f"storage-kvcache {path} {rate:g}/s",
        )
        return kpi(rep, "kvcache", "ttft_p50_seconds")

    for r in rates:
        ttft.add(r, {p: kv(p, r) for p in (RDMA, TCP)})
    rate0 = float(
        next(t for t in bundled("storage-kvcache")["workload"] if t["kind"] == "kvcache")[
            "rate_per_s"
        ]
    )
    t_r, t_t = kv(RDMA, rate0), kv(TCP, rate0)
    src_s = "report workloads.pd.kpis.transfer_share_of_ttft (pd-llama70b, fixed context)"
    src_t = "report workloads.kvcache.kpis.ttft_p50_seconds (storage-kvcache)"
    lo, hi = CONTEXTS[0], CONTEXTS[-1]
    parts = {
        "ttft": PartResult(
            Figure("NVMe-oF/RDMA", t_r, "s", src_t),
            Figure("NVMe/TCP", t_t, "s", src_t),
            t_t / t_r,
            "TCP / RDMA TTFT",
            {"ttft_reduction": 1 - t_r / t_t},
            f"storage-kvcache: 8 GPUs, {rate0:g} requests/s each, 1,024-token Llama-3-70B KV "
            "(320 MiB), 80 % cache hits restored from 2 NVMe targets",
        ),
        "share": PartResult(
            Figure(f"{hi:,} tokens", s[-1], "frac", src_s),
            Figure(f"{lo:,} tokens", s[0], "frac", src_s),
            s[-1] / s[0],
            "long / short context share",
            {"share_rise_fraction": rises},
            f"pd-llama70b: 4 prefill + 4 decode instances (TP 8), contexts "
            f"{lo:,}–{hi:,} tokens; share rises on {rises:.0%} of the steps, peak "
            f"{s[peak]:.1%} at {CONTEXTS[peak]:,}",
        ),
    }
    notes = []
    if peak < len(s) - 1:
        notes.append(
            f"the KV transfer's share of TTFT peaks at {CONTEXTS[peak]:,} tokens and falls "
            "beyond: prefill's attention grows as n² while the KV cache grows as n"
        )
    params = profile_params(settings, ("link_bandwidth_Bps",), "native-400g") + storage_params(
        settings, ("rdma_stack_latency_s", "tcp_stack_latency_s", "tcp_rx_cpu_s_per_byte")
    )
    return Measurement(
        parts, [share, ttft], params, notes, runs=len(CONTEXTS) * len(models) + 2 * len(rates) + 2
    )
