"""Topology files: parsed with line-numbered errors, routed up*/down* (deadlock-free, the
shortest legal paths, the same on both solvers), run on both fabrics, rerouted on a
link failure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fabric_core.commands import InjectFault
from fabric_core.net.profiles import NATIVE_400G, ROCE_400G
from fabric_core.net.routing import MAX_HOPS, route
from fabric_core.net.topofile import TopologyFileError, parse_topology
from fabric_core.net.topology import Topology
from fabric_core.net.updown import UpDownError
from fabric_core.runtime.fabric import Fabric, _link_rank
from fabric_core.runtime.scenario import ScenarioError, bundled_dir, load_scenario
from fabric_core.workloads.traffic import Scripted
from tests.helpers import scripted_fabric
from tests.test_kernels import _lockstep

MiB = 1024**2


def express(profile: str = "native-400g") -> Topology:
    return load_scenario("express-lab", profile=profile).build_topology()


def graph(
    switches: int, cables: list[tuple[int, int]], gpus: dict[int, int], roots: str = ""
) -> str:
    """A topology file: switches s0.., ``gpus[s]`` GPUs on switch ``s``, ``cables``."""
    lines = [f"node s{i} switch" for i in range(switches)]
    g = 0
    for s, n in gpus.items():
        for _ in range(n):
            lines += [f"node g{g} gpu", f"link g{g} s{s}"]
            g += 1
    lines += [f"link s{a} s{b}" for a, b in cables]
    if roots:
        lines.append(f"root {roots}")
    return "\n".join(lines) + "\n"


def build(text: str) -> Topology:
    return parse_topology(text, "t.topo").build(NATIVE_400G)


RING = graph(5, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (1, 3)], {i: 2 for i in range(5)})


def all_pairs(topo: Topology, keys: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    eps = topo.endpoints.astype(np.int64)
    s, d = np.meshgrid(eps, eps, indexing="ij")
    src = np.repeat(s.ravel(), keys)
    dst = np.repeat(d.ravel(), keys)
    return src, dst, np.arange(src.size, dtype=np.int64) * 7919


def check_paths(
    topo: Topology, src: np.ndarray, dst: np.ndarray, path: np.ndarray, hops: np.ndarray
) -> None:
    """Every path is a chain from src to dst that never goes up after going down, along
    which the link ranks strictly rise (the buffer graph has no cycle)."""
    ud = topo.updown
    assert ud is not None
    links = topo.links
    rank = _link_rank(topo)
    for f in range(src.size):
        p = path[: hops[f], f]
        assert (p >= 0).all() and (path[hops[f] :, f] == -1).all()
        assert links.src[p[0]] == src[f] and links.dst[p[-1]] == dst[f]
        assert (links.dst[p[:-1]] == links.src[p[1:]]).all(), "a path is a chain of links"
        up = ud.link_up[p]
        assert not (up[1:] & ~up[:-1]).any(), f"a down-then-up turn: {[links.name[i] for i in p]}"
        assert (np.diff(rank[p]) > 0).all()


def test_the_express_cable_is_taken_and_paths_are_legal_and_shortest() -> None:
    topo = express()
    ud = topo.updown
    assert ud is not None
    names = topo.nodes.name
    assert [names[r] for r in ud.roots] == ["spine00", "spine01"]
    idx = topo.nodes.index
    src, dst, key = all_pairs(topo)
    for mode in ("ecmp", "adaptive"):
        path, hops = route(topo, src, dst, key, mode=mode, link_cost=np.zeros(len(topo.links)))
        check_paths(topo, src, dst, path, hops)
        sw = topo.switch_index
        leaf_s, leaf_d = topo.ep_leaf[src, 0], topo.ep_leaf[dst, 0]
        np.testing.assert_array_equal(hops, ud.dist_any[sw[leaf_s], sw[leaf_d]] + 2)
        # leaf00 <-> leaf01 take the express cable (3 hops), leaf02 goes over a spine (4)
        a = (leaf_s == idx["leaf00"]) & (leaf_d == idx["leaf01"])
        assert (hops[a] == 3).all()
        assert (path[1, a] == topo.links.index["leaf00->leaf01"]).all()
        c = (leaf_s == idx["leaf02"]) & (leaf_d == idx["leaf00"])
        assert (hops[c] == 4).all()
        spines = {topo.links.name[i].split("->")[1] for i in path[1, c]}
        assert spines == {"spine00", "spine01"}  # both equal-cost spines are used


def test_the_express_cable_orients_leaf01_below_leaf00() -> None:
    topo = express()
    ud = topo.updown
    assert ud is not None
    tier = dict(zip(topo.nodes.name, topo.nodes.tier.tolist(), strict=True))
    # same BFS level: the higher node id is lower (OpenSM's tie-break), so leaf01 -> leaf00
    # climbs, and both spines sit above both
    assert tier["leaf01"] < tier["leaf00"] < tier["spine00"] == tier["spine01"]
    assert tier["leaf02"] == 1 and tier["gpu00"] == 0
    assert ud.link_up[topo.links.index["leaf01->leaf00"]]
    assert not ud.link_up[topo.links.index["leaf00->leaf01"]]


@pytest.mark.parametrize("profile", ["native-400g", "roce-400g"])
def test_flows_complete_over_the_express_cable_on_both_fabrics(profile: str) -> None:
    topo = express(profile)
    prof = load_scenario("express-lab", profile=profile).profile
    flows = [
        ("gpu00", "gpu04", 2 * MiB, 0.0),  # over the express cable
        ("gpu05", "gpu01", 2 * MiB, 0.0),  # back over it
        ("gpu02", "gpu09", 1 * MiB, 0.0),  # over a spine
        ("stor00", "gpu06", 1 * MiB, 0.0),
        ("gpu10", "gpu07", 64 * 1024, 5e-6),
    ]
    fabric, (wl,) = scripted_fabric(topo, prof, flows, dt_s=1e-6)
    for _ in range(2000):
        if len(wl.finished) == len(flows):
            break
        fabric.step()
    assert len(wl.finished) == len(flows)
    assert fabric.dropped_bytes == 0
    express_link = topo.links.index["leaf00->leaf01"]
    assert fabric.counters["tx_bytes_total"][express_link] >= 2 * MiB * 0.99


MALFORMED = [
    ("node a gpu\nnode a gpu\n", 2, "node 'a' declared twice (first on line 1)"),
    ("node a router\n", 1, "unknown role 'router'"),
    ("node a\n", 1, "expected `node NAME ROLE`"),
    ("node a->b gpu\n", 1, "bad node name 'a->b'"),
    ("node g gpu\n\n# c\nlink g s\n", 4, "unknown node 's'"),
    ("node g gpu\nnode s leaf\nlink g s speed=4\n", 3, "link: unknown key 'speed'"),
    ("node g gpu\nnode s leaf\nlink g s bandwidth=fast\n", 3, "link.bandwidth: bad rate 'fast'"),
    ("node g gpu\nnode s leaf\nlink g s delay\n", 3, "expected KEY=VALUE, got 'delay'"),
    # (a delay without a unit is seconds: 5 s of cable, refused with the unit to write)
    ("node g gpu\nnode s leaf\nlink g s delay=5\n", 3, "1,000,000 km of fibre; a cable's delay must be at most 1 ms (200 km); a delay without a unit is seconds: write one, e.g. '5ns'"),
    ("node g gpu\nnode s leaf\nlink g s\nlink s g\n", 4, "a second cable between s and g (first on line 3)"),
    ("node g gpu\nnode s leaf\nnode t leaf\nlink g s\nlink g t\n", 5, "endpoint g has a second cable"),
    ("node g gpu\nnode h gpu\nlink g h\n", 3, "a cable between two endpoints"),
    ("node s leaf\nlink s s\n", 2, "a cable from s to itself"),
    ("node g gpu\nnode s leaf\nlink g s\nroot g\n", 4, "root g is an endpoint"),
    ("switch s\n", 1, "unknown statement 'switch'"),
    ("node g gpu\nnode s leaf\n", 1, "endpoint g has no cable to a switch"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "line", "reason"), MALFORMED)
def test_a_malformed_file_is_refused_with_the_line_and_the_reason(
    text: str, line: int, reason: str, tmp_path: Path
) -> None:
    (tmp_path / "bad.topo").write_text(text)
    scn = tmp_path / "s.toml"
    scn.write_text('[topology]\nkind = "file"\npath = "bad.topo"\n')
    with pytest.raises(ScenarioError) as err:
        load_scenario(scn)
    msg = str(err.value)
    assert msg.startswith(f"{scn}: topology.path: {tmp_path / 'bad.topo'}:{line}: "), msg
    assert reason in msg


def test_a_missing_file_and_a_missing_path_are_refused(tmp_path: Path) -> None:
    scn = tmp_path / "s.toml"
    scn.write_text('[topology]\nkind = "file"\npath = "nowhere.topo"\n')
    with pytest.raises(ScenarioError, match=r"nowhere\.topo: cannot read"):
        load_scenario(scn)
    scn.write_text('[topology]\nkind = "file"\n')
    with pytest.raises(ScenarioError, match=r"topology\.path: missing"):
        load_scenario(scn)


UNROUTABLE = [
    # two roots, each the only way up from its leaf, joined only through a switch below
    # them: s0 -> r0 -> m (down) -> r1 (up) is the only path, and it turns down then up
    (
        "node g0 gpu\nnode g1 gpu\nnode s0 leaf\nnode s1 leaf\nnode r0 spine\nnode r1 spine\n"
        "node m switch\nlink g0 s0\nlink g1 s1\nlink s0 r0\nlink s1 r1\nlink r0 m\nlink r1 m\n"
        "root r0 r1\n",
        "no up*/down* path from s0 to s1 with root(s) r0, r1: every path between them turns "
        "down then up",
    ),
    (graph(4, [(0, 1), (2, 3)], {0: 1, 2: 1}), "the fabric is disconnected"),
    (
        graph(6, [(i, i + 1) for i in range(5)], {0: 1, 5: 1}, roots="s0"),
        "the shortest up*/down* path from s0 to s5 (root(s) s0) has 7 hops, more than "
        f"routing.MAX_HOPS = {MAX_HOPS}",
    ),
]


@pytest.mark.parametrize(("text", "reason"), UNROUTABLE)
def test_a_topology_up_down_cannot_route_is_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(TopologyFileError) as err:
        build(text)
    assert str(err.value) == f"t.topo: {reason}" or reason in str(err.value), str(err.value)


def test_auto_roots_fall_back_to_one_root_when_all_of_them_cannot_route() -> None:
    # a chain s0 - s2 - s1 (ids in that order), GPUs on all three: every switch is one hop
    # from a GPU, so all are candidate roots; with all on level 0 the id order makes
    # s0 -> s2 -> s1 turn down then up, so one root (s0) is used instead
    topo = build(graph(3, [(0, 2), (2, 1)], {0: 1, 1: 1, 2: 1}))
    assert topo.updown is not None
    assert [topo.nodes.name[r] for r in topo.updown.roots] == ["s0"]
    src, dst, key = all_pairs(topo)
    path, hops = route(topo, src, dst, key, mode="ecmp", link_cost=np.zeros(len(topo.links)))
    check_paths(topo, src, dst, path, hops)


def test_updown_errors_are_value_errors() -> None:
    assert issubclass(UpDownError, ValueError) and issubclass(TopologyFileError, ValueError)


@st.composite
def odd_topologies(draw: st.DrawFn) -> Topology:
    """A random connected switch graph (a spanning tree plus extra cables), GPUs on some
    switches, sometimes an explicit root."""
    n = draw(st.integers(2, 7))
    cables = {(draw(st.integers(0, i - 1)), i) for i in range(1, n)}
    for a, b in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=6)):
        if a != b and (a, b) not in cables and (b, a) not in cables:
            cables.add((a, b))
    gpus = draw(st.dictionaries(st.integers(0, n - 1), st.integers(1, 2), min_size=1))
    assume(sum(gpus.values()) >= 2)
    root = draw(st.one_of(st.just(""), st.integers(0, n - 1).map(lambda r: f"s{r}")))
    try:
        return build(graph(n, sorted(cables), gpus, roots=root))
    except TopologyFileError:
        assume(False)  # longer than MAX_HOPS: refused, as tested above
        raise


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(odd_topologies(), st.booleans(), st.integers(0, 2**16), st.data())
def test_routes_are_deadlock_free_and_the_same_on_both_solvers(
    topo: Topology, adaptive: bool, salt: int, data: st.DataObject
) -> None:
    src, dst, key = all_pairs(topo, keys=2)
    key = key + salt
    n_links = len(topo.links)
    v = int(NATIVE_400G.virtual_lanes)
    occupancy = np.array(
        data.draw(
            st.lists(
                st.sampled_from([0.0, 4096.0, 50_000.0]), min_size=n_links * v, max_size=n_links * v
            )
        )
    )
    down = np.array(data.draw(st.lists(st.booleans(), min_size=n_links, max_size=n_links)))
    ref = Fabric(topo, NATIVE_400G, [], dt_s=1e-6, seed=1, solver="reference")._tick
    comp = Fabric(topo, NATIVE_400G, [], dt_s=1e-6, seed=1, solver="compiled")._tick
    for known_down in (np.zeros(n_links, dtype=bool), down):
        path, hops = ref.route(topo, src, dst, key, adaptive, occupancy, v, known_down)
        c_path, c_hops = comp.route(topo, src, dst, key, adaptive, occupancy, v, known_down)
        np.testing.assert_array_equal(c_path, path)
        np.testing.assert_array_equal(c_hops, hops)
        check_paths(topo, src, dst, path, hops)
    # with links down, a pair that still has a legal path avoids every down link
    assert topo.updown is not None
    any_d, _ = topo.updown.tables(down)
    sw = topo.switch_index
    ok = any_d[sw[topo.ep_leaf[src, 0]], sw[topo.ep_leaf[dst, 0]]] < 10_000
    sw_links = (sw[topo.links.src] >= 0) & (sw[topo.links.dst] >= 0)
    crosses = (down & sw_links)[np.where(path >= 0, path, 0)] & (path >= 0)
    assert not crosses[:, ok].any()


@pytest.mark.parametrize("profile", [NATIVE_400G, ROCE_400G], ids=["native", "roce"])
def test_both_solvers_run_a_file_topology_in_lockstep(profile: object) -> None:
    topo = express()
    rng = np.random.default_rng(5)
    eps = topo.endpoints
    flows = [
        (int(a), int(b), float(rng.choice([4e3, 2e5, 1e6])), float(rng.integers(0, 40)) * 1e-6)
        for a, b in zip(rng.choice(eps, 24), rng.choice(eps, 24), strict=True)
        if a != b
    ]

    def make(solver: str) -> Fabric:
        wl = Scripted(name="w", traffic_class="bulk", flows=flows)
        return Fabric(topo, profile, [wl], dt_s=1e-6, seed=3, solver=solver)  # type: ignore[arg-type]

    _lockstep(make("reference"), make("compiled"), 150)


def test_a_failed_express_cable_is_routed_around_and_the_flow_completes() -> None:
    topo = express()
    # local fast reroute after 50 µs (the profile's 2 ms would only make the test longer)
    prof = load_scenario("express-lab").profile.with_overrides(reroute_s=50e-6)
    fabric, (wl,) = scripted_fabric(topo, prof, [("gpu00", "gpu04", 8 * MiB, 0.0)], dt_s=1e-6)
    cable = topo.links.index["leaf00->leaf01"]
    fabric.run_ticks(20)
    slot = int(np.flatnonzero(fabric.flows.active)[0])
    assert fabric.flows.path[1, slot] == cable
    fabric.apply(InjectFault(kind="link_down", target="leaf00->leaf01"))
    fault = fabric.faults.faults["f0"]
    while fault.mitigated_at_s is None:  # until rerouted
        assert not wl.finished and fabric.sim_time_s < 1e-3
        fabric.step()
    # the rerouted path: leaf00 up to a spine and down to leaf01 (4 hops), legal
    path = fabric.flows.path[:, slot].copy()
    for _ in range(5000):
        if wl.finished:
            break
        fabric.step()
    assert wl.finished
    names = [topo.links.name[i] for i in path if i >= 0]
    assert len(names) == 4 and names[1].startswith("leaf00->spine") and cable not in path
    check_paths(
        topo,
        np.array([topo.nodes.index["gpu00"]]),
        np.array([topo.nodes.index["gpu04"]]),
        path[:, None],
        np.array([4]),
    )
    assert fabric.dropped_bytes == 0


def test_fabtop_runs_a_scenario_file_with_a_topology_file(tmp_path: Path) -> None:
    for name in ("express-lab.toml", "express-lab.topo"):
        (tmp_path / name).write_text((bundled_dir() / name).read_text())
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-m", "console.cli", "run", str(tmp_path / "express-lab.toml"), "--duration", "30us"],
        cwd=root, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "express-lab" in out.stdout and "p99" in out.stdout


def test_sprayed_flows_on_a_file_topology_take_legal_paths() -> None:
    from fabric_core.net.routing import spray, spray_ways

    topo = express()
    ways = spray_ways(topo)
    assert ways == 3  # leaf01's up links: leaf00 and the two spines
    src, dst, key = all_pairs(topo, keys=1)
    path, hops = spray(topo, src, dst, key, ways=ways, link_cost=np.zeros(len(topo.links)))
    check_paths(topo, np.repeat(src, ways), np.repeat(dst, ways), path, hops)


def test_a_detour_longer_than_a_path_can_be_keeps_the_healthy_route() -> None:
    """A failed link whose only legal detour is longer than ``MAX_HOPS`` (found by the
    property test above): routing keeps the healthy path, where the flow waits at the
    dead link, instead of indexing past the path's end; both solvers agree."""
    cables = [(0, 1), (0, 2), (0, 5), (1, 3), (1, 5), (2, 4), (3, 6), (4, 0)]
    topo = build(graph(7, cables, {i: 1 for i in range(7)}, roots=""))
    src, dst, key = all_pairs(topo, keys=2)
    n_links = len(topo.links)
    v = int(NATIVE_400G.virtual_lanes)
    down = np.zeros(n_links, dtype=bool)
    down[topo.links.index["s0->s4"]] = True
    occupancy = np.zeros(n_links * v)
    ref = Fabric(topo, NATIVE_400G, [], dt_s=1e-6, seed=1, solver="reference")._tick
    comp = Fabric(topo, NATIVE_400G, [], dt_s=1e-6, seed=1, solver="compiled")._tick
    for adaptive in (False, True):
        path, hops = ref.route(topo, src, dst, key, adaptive, occupancy, v, down)
        c_path, c_hops = comp.route(topo, src, dst, key, adaptive, occupancy, v, down)
        np.testing.assert_array_equal(c_path, path)
        np.testing.assert_array_equal(c_hops, hops)
        check_paths(topo, src, dst, path, hops)
        assert (hops <= MAX_HOPS).all()
