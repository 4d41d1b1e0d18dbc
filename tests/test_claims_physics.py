"""A physical parameter moves the claim's figure the right way (issue 17, "What must hold")."""

from __future__ import annotations

import itertools

from console.claimsrun import Settings
from console.claimsrun.measure_inference import pd_share
from console.claimsrun.measure_latency import measure_c7
from console.claimsrun.measure_storage import measure_c5


def _tick(label: str) -> None:
    pass


def test_a_slower_roce_switch_widens_the_c7_gap() -> None:
    base = measure_c7(Settings(quick=True), _tick)
    slow = measure_c7(
        Settings(quick=True, profile_overrides={"roce-400g": {"switch_latency_s": 1.2e-6}}),
        _tick,
    )
    for part in ("3-switch", "sub-microsecond"):
        assert slow.parts[part].right.value > base.parts[part].right.value
        assert slow.parts[part].left.value == base.parts[part].left.value  # native untouched
    assert (
        slow.parts["3-switch"].metrics["gap_3sw_ge_4k"]
        > base.parts["3-switch"].metrics["gap_3sw_ge_4k"]
    )
    # and the sweep at every size, over 1 and 3 switches
    for b, s in zip(base.sweeps, slow.sweeps, strict=True):
        if b.key.startswith("c7_gap"):
            assert all(
                y > x
                for x, y in zip(b.series["native vs RoCE"], s.series["native vs RoCE"], strict=True)
            )


def _c5_gap(cores: float) -> float:
    m = measure_c5(Settings(quick=True, storage={"client_cores": cores}), _tick)
    util = m.parts["util"]
    return util.left.value - util.right.value


def test_more_client_cores_narrow_the_c5_gap() -> None:
    few, many = _c5_gap(0.5), _c5_gap(2.0)
    assert few > 0.2  # NFS over TCP is CPU-bound at half a core per GPU
    assert many < few


def test_a_slower_kv_transport_raises_the_c9_share() -> None:
    base = pd_share(Settings(), _tick, "llama3-70b", 4096)["transfer_share_of_ttft"]
    slow = pd_share(
        Settings(profile_overrides={"native-400g": {"link_bandwidth_Bps": 12.5e9}}),
        _tick,
        "llama3-70b",
        4096,
    )["transfer_share_of_ttft"]
    assert slow > base > 0
    bounce = pd_share(
        Settings(endpoint={"control": "proxy", "data_path": "bounce", "host_copy_Bps": 5e9}),
        _tick,
        "llama3-70b",
        4096,
    )["transfer_share_of_ttft"]
    assert bounce > base


def test_the_c7_switch_sweep_shows_the_gap_follow_the_switch_latencies() -> None:
    """With no vendor figure for either switch the claim rests on their difference: the
    sweep's gap grows with the RoCE switch's latency, falls with the native one's, and is
    about nothing (headers only) where the two are equal."""
    m = measure_c7(Settings(quick=True), _tick)
    sweep = next(s for s in m.sweeps if s.key == "c7_switch_latency_gap")
    for series in sweep.series.values():
        assert all(b > a for a, b in itertools.pairwise(series))
    by_native = list(sweep.series.values())
    at = sweep.x.index(250e-9)  # the RoCE point nearest the native switch's 275 ns
    assert by_native[0][at] > by_native[1][at] > by_native[2][at]  # 150, 275, 400 ns
    assert abs(by_native[1][at]) < 0.05  # 3 x 25 ns and the headers, of ~1.8 us
