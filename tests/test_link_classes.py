"""Bandwidth, delay and buffer per link class and per named link (``[links]``): the values
reach the link table, flows' completion times follow them, bad entries are refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fabric_core.net.topology import Topology
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import ScenarioError, load_scenario, parse_scenario
from tests.helpers import credit_loop_bytes, scripted_fabric

MiB = 1024**2


def scenario(links: dict[str, Any], profile: str = "native-400g", **topo: int) -> Any:
    data = {
        "profile": profile,
        "topology": {"kind": "leaf-spine", "leaves": 2, "spines": 1, "gpus_per_leaf": 2, **topo},
        "links": links,
    }
    return parse_scenario(data, "t.toml")


def fct(fabric: Fabric, wl: Any) -> float:
    """Run until the scripted flow is done; its completion time."""
    for _ in range(200_000):
        if wl.finished:
            break
        fabric.step()
    _, start, finish = wl.finished[0]
    return float(finish - start)


def expected_fct(fabric: Fabric, size: float, bw_bps: float, delays: list[float]) -> float:
    """Size over the slowest link's payload rate, plus propagation, switches, NICs: worked
    out from the values the scenario gave, not from the link table."""
    p = fabric.profile
    payload = bw_bps / 8 * p.mtu_bytes / (p.mtu_bytes + p.header_bytes)
    return (
        size / payload
        + sum(delays)
        + (len(delays) - 1) * p.switch_latency_s
        # the endpoints: NIC pipelines, DMA read and write, the CPU's post, doorbell, poll
        + 2 * p.nic_latency_s
        + p.pcie_read_latency_s
        + 2 * p.pcie_write_latency_s
        + p.host_post_s
        + p.host_poll_s
    )


def values(topo: Topology, name: str) -> tuple[float, float, float]:
    i = topo.links.index[name]
    links = topo.links
    return float(links.bandwidth_Bps[i]), float(links.prop_delay_s[i]), float(links.buffer_bytes[i])


def test_host_class_sets_bandwidth_delay_and_buffer_and_the_fct_follows() -> None:
    scn = scenario({"host": {"bandwidth": "100Gb/s", "delay": "2us", "buffer": "64KiB"}})
    topo = scn.build_topology()
    for name in ("gpu0000->leaf00", "leaf00->gpu0001", "leaf01->gpu0003"):
        assert values(topo, name) == (100e9 / 8, 2e-6, 65536.0)
    assert values(topo, "leaf00->spine00")[0] == scn.profile.link_bandwidth_Bps  # untouched
    size = 1 * MiB
    fabric, (wl,) = scripted_fabric(
        topo, scn.profile, [("gpu0000", "gpu0001", size, 0.0)], dt_s=1e-6
    )
    got = fct(fabric, wl)
    # 1 MiB at 100 Gb/s: ~86 µs, plus 2 × 2 µs of cable
    assert got == pytest.approx(expected_fct(fabric, size, 100e9, [2e-6, 2e-6]), rel=0.02)
    assert got > 88e-6  # four times what the 400G default gives
    per_lane = fabric.buffer_bytes.reshape(len(topo.links), -1)
    assert (per_lane[topo.links.index["spine00->leaf01"]] != 65536).all()
    assert (per_lane[topo.links.index["gpu0000->leaf00"]] == 65536).all()


def test_leaf_spine_class_is_the_bottleneck_of_a_cross_leaf_flow() -> None:
    scn = scenario({"leaf_spine": {"bandwidth": "50G", "delay": "1us"}})
    topo = scn.build_topology()
    assert values(topo, "spine00->leaf00")[:2] == (50e9 / 8, 1e-6)
    size = 512 * 1024
    fabric, (wl,) = scripted_fabric(
        topo, scn.profile, [("gpu0000", "gpu0002", size, 0.0)], dt_s=1e-6
    )
    host = float(topo.links.prop_delay_s[topo.links.index["gpu0000->leaf00"]])
    want = expected_fct(fabric, size, 50e9, [host, 1e-6, 1e-6, host])
    assert fct(fabric, wl) == pytest.approx(want, rel=0.02)


def test_named_cable_and_direction_override_the_class_in_that_order() -> None:
    scn = scenario(
        {
            "leaf_spine": {"bandwidth": "200G"},
            "named": {
                "leaf00-spine00": {"bandwidth": "100G", "delay": "3us"},
                "leaf00->spine00": {"bandwidth": "25G"},
            },
        }
    )
    topo = scn.build_topology()
    assert values(topo, "leaf00->spine00")[:2] == (25e9 / 8, 3e-6)
    assert values(topo, "spine00->leaf00")[:2] == (100e9 / 8, 3e-6)
    assert values(topo, "leaf01->spine00")[0] == 200e9 / 8
    # the flow crosses the 25G direction: its FCT is set by it
    size = 256 * 1024
    fabric, (wl,) = scripted_fabric(
        topo, scn.profile, [("gpu0000", "gpu0002", size, 0.0)], dt_s=1e-6
    )
    host = float(topo.links.prop_delay_s[topo.links.index["gpu0000->leaf00"]])
    leaf_spine = float(topo.links.prop_delay_s[topo.links.index["spine00->leaf01"]])
    want = expected_fct(fabric, size, 25e9, [host, 3e-6, leaf_spine, host])
    assert fct(fabric, wl) == pytest.approx(want, rel=0.02)


def test_a_small_class_buffer_bounds_the_queue_on_the_credit_fabric() -> None:
    scn = scenario({"leaf_spine": {"buffer": "16KiB"}}, gpus_per_leaf=3)
    topo = scn.build_topology()
    # an incast into gpu0003 (under leaf01) from leaf01's own GPUs and one across the spine:
    # the queue builds at leaf01's ingress, in the spine00->leaf01 buffer among others
    flows = [(s, "gpu0003", 2 * MiB, 0.0) for s in ("gpu0000", "gpu0004", "gpu0005")]
    fabric, (wl,) = scripted_fabric(topo, scn.profile, flows, dt_s=1e-6)
    down = topo.links.index["spine00->leaf01"]
    n_vls = fabric.n_vls
    peak = 0.0
    while len(wl.finished) < 3:
        fabric.step()
        peak = max(peak, float(fabric.occupancy[down * n_vls : (down + 1) * n_vls].max()))
    # the spine->leaf buffer fills, to its 16 KiB less the bytes of its credit loop: the
    # flow across the spine drains a third of gpu0003's downlink, both ways over 30 m and
    # through the leaf's forwarding (8 KiB would not fill: its loop alone, 9.3 KB at a
    # third of the link, holds that flow below its share)
    p = scn.profile
    third = p.link_bandwidth_Bps * p.mtu_bytes / (p.mtu_bytes + p.header_bytes) / 3
    full = 16384 - credit_loop_bytes(fabric, "spine00->leaf01", third)
    assert full < 8192  # (some 9 KB of the 16 in the loop)
    assert peak == pytest.approx(full, rel=0.01)
    assert fabric.dropped_bytes == 0


def test_buffer_is_the_pfc_queue_buffer_on_roce() -> None:
    scn = scenario({"host": {"buffer": "96KiB"}}, profile="roce-400g")
    topo = scn.build_topology()
    assert values(topo, "gpu0000->leaf00")[2] == 96 * 1024
    assert values(topo, "leaf00->spine00")[2] == scn.profile.pfc_buffer_bytes


@pytest.mark.parametrize(
    ("links", "key", "reason"),
    [
        ({"host": {"bandwidth": "fast"}}, "links.host.bandwidth", "bad rate 'fast'"),
        ({"host": {"bandwidth": 400}}, "links.host.bandwidth", "text with a unit"),
        ({"host": {"bandwidth": "400"}}, "links.host.bandwidth", "with a unit"),
        ({"host": {"bandwidth": "0G"}}, "links.host.bandwidth", "must be > 0"),
        ({"leaf_spine": {"delay": "-1us"}}, "links.leaf_spine.delay", "must be >= 0"),
        ({"leaf_spine": {"delay": "5 parsecs"}}, "links.leaf_spine.delay", "bad duration"),
        ({"leaf_spine": {"delay": "5"}}, "links.leaf_spine.delay", "without a unit is seconds"),
        ({"leaf_spine": {"delay": "2ms"}}, "links.leaf_spine.delay", "at most 1 ms (200 km)"),
        ({"host": {"buffer": "0B"}}, "links.host.buffer", "must be > 0"),
        ({"host": {"buffer": "lots"}}, "links.host.buffer", "bad size 'lots'"),
        ({"host": {"speed": "400G"}}, "links.host", "unknown key 'speed'"),
        ({"leaf_core": {"delay": "1us"}}, "links", "unknown class 'leaf_core'"),
        ({"spine_core": {"delay": "1us"}}, "links.spine_core", "no link of this class"),
        ({"named": {"leaf00-spine09": {"delay": "1us"}}}, 'links.named."leaf00-spine09"', "no cable"),
        ({"named": {"leaf00->leaf01": {"delay": "1us"}}}, 'links.named."leaf00->leaf01"', "no link"),
        ({"named": {"leaf00-spine00": {"delay": 3}}}, 'links.named."leaf00-spine00".delay', "unit"),
        ({"host": "400G"}, "links.host", "must be a table"),
    ],
)  # fmt: skip
def test_bad_link_settings_are_refused_naming_the_file_key_and_reason(
    links: dict[str, Any], key: str, reason: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad.toml"
    body = "\n".join(_toml_links(links))
    path.write_text(
        '[topology]\nkind = "leaf-spine"\nleaves = 2\nspines = 1\ngpus_per_leaf = 2\n' + body
    )
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    msg = str(err.value)
    assert msg.startswith(str(path)) and key in msg and reason in msg, msg


def _toml_links(links: dict[str, Any]) -> list[str]:
    """``[links]`` as TOML text (nested tables, quoted named keys)."""

    def val(v: Any) -> str:
        return f'"{v}"' if isinstance(v, str) else str(v)

    out = []
    for cls, table in links.items():
        if not isinstance(table, dict):
            out += ["[links]", f"{cls} = {val(table)}"]
        elif cls == "named":
            for name, sub in table.items():
                out.append(f'[links.named."{name}"]')
                out += [f"{k} = {val(v)}" for k, v in sub.items()]
        else:
            out.append(f"[links.{cls}]")
            out += [f"{k} = {val(v)}" for k, v in table.items()]
    return out


def test_link_classes_apply_to_a_fat_tree_too() -> None:
    data = {
        "topology": {
            "kind": "fat-tree",
            "pods": 2,
            "leaves_per_pod": 1,
            "spines_per_pod": 1,
            "cores_per_spine": 1,
            "gpus_per_leaf": 1,
        },
        "links": {"spine_core": {"bandwidth": "800G", "delay": "700ns"}},
    }
    topo = parse_scenario(data, "f.toml").build_topology()
    core = np.array(["core" in t for t in topo.links.tier])
    assert (topo.links.bandwidth_Bps[core] == 100e9).all()
    assert topo.links.prop_delay_s[core] == pytest.approx(700e-9)
    assert (topo.links.bandwidth_Bps[~core] == 50e9).all()


@pytest.mark.parametrize(
    ("text", "bytes_per_s"),
    [("400G", 50e9), ("400Gb/s", 50e9), ("400 Gbps", 50e9), ("100Mb/s", 12.5e6),
     ("1.6T", 200e9), ("50GB/s", 50e9), ("8e9 b/s", 1e9)],
)  # fmt: skip
def test_rates_read_as_links_are_rated(text: str, bytes_per_s: float) -> None:
    from fabric_core.units import parse_rate

    assert parse_rate(text) == pytest.approx(bytes_per_s)
