"""A tick's finished flows retired in one compiled call: timed inside the tick, their
slots freed, and the latencies of the flows now whole filed by traffic class.

``Fabric._complete`` takes this way on the compiled tick (``CompiledTick.finish_flows``).
It runs the kernels the separate steps call (``move.finish_times``,
``slots.complete_flows``, ``slots.live_end``, ``histogram.observe_rows``) in the same order
on the same arrays, so the results are the same bit for bit; what it saves is the Python
between them (three wrappers, the latency and class gathers, two more kernel calls): some
11 µs of the default scenario's tick of about 0.32 ms, where flows end in most ticks.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabric_core.tick.kernels._jit import kernel
from fabric_core.tick.kernels.histogram import observe_rows
from fabric_core.tick.kernels.move import finish_times
from fabric_core.tick.kernels.slots import complete_flows, live_end

_F = NDArray[np.float64]
_I = NDArray[np.intp]
_B = NDArray[np.bool_]


@kernel
def finish_flows(
    # the sub-tick finish (``move.finish_times``): the solution and the index
    rate: _F,
    level: _F,
    alpha: _F,
    credit_level: _F,
    buf_pad: _I,
    flow: _I,
    prev_pad: _I,
    last: _I,
    last_flow: _I,
    used_links: _I,
    link_ptr: _I,
    link_ent: _I,
    ent_link: _I,
    capacity: _F,
    done: _I,
    now: float,
    dt: float,
    # the flow table (in place, ``slots.complete_flows``), and one past its last flow
    path: NDArray[np.int32],
    backlog: _F,
    flow_rate: _F,
    active: _B,
    size: _F,
    delivered: _F,
    start_s: _F,
    wait_s: _F,
    parent_size: _F,
    fixed_latency_s: _F,
    extra_latency_s: _F,
    parent: _I,
    pending: NDArray[np.int32],
    latest_finish_s: _F,
    held: _B,
    bandwidth_Bps: _F,
    end: int,
    # the latency histograms, a row per class (in place, ``histogram.observe_rows``)
    cls: NDArray[np.int16],
    counts: NDArray[np.int64],
    stats: _F,
    rings: _F,
    bounds_s: _F,
) -> tuple[_I, _F, float, int, bool]:
    """Retire the (sub-)flows in ``done``, whose bytes have all arrived this tick.

    Returns, as ``FlowTable.finish_at`` does, the heads of the flows now whole, their
    finish times and the bytes rounding left in the network; then one past the last
    flow still in the table (``slots.live_end``), and whether each whole flow's class
    is a row of the histograms (False: none was filed, as ``observe_rows`` says).
    """
    t = finish_times(
        rate, level, alpha, credit_level, buf_pad, flow, prev_pad, last, last_flow,
        used_links, link_ptr, link_ent, ent_link, capacity, done, end, dt,
    )  # fmt: skip
    whole, whole_finish, rounding = complete_flows(
        done, t, now, dt, path, backlog, flow_rate, active, size, delivered, start_s,
        wait_s, parent_size, fixed_latency_s, extra_latency_s, parent, pending,
        latest_finish_s, held, bandwidth_Bps,
    )  # fmt: skip
    if done.size:
        end = live_end(active, end)
    if whole.size == 0:
        return whole, whole_finish, rounding, end, True
    latency = np.empty(whole.size)
    group = np.empty(whole.size, dtype=np.int16)
    for i in range(whole.size):
        latency[i] = whole_finish[i] - start_s[whole[i]]
        group[i] = cls[whole[i]]
    filed = observe_rows(counts, stats, rings, group, latency, bounds_s)
    return whole, whole_finish, rounding, end, filed
