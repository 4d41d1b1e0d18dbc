"""The fabric map of a large fabric: a cell per pod or core group, drilled into with Enter.

The groups come from the cabling alone (``console.mapgroups``), so they are checked against
the pods the fat-tree builder assigned; the map is driven by key presses on a generated
fat-tree whose tiers are too large for a cell per switch.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
from rich.console import Console

from console.app import FabtopApp
from console.mapgroups import TIER_CORE, TIER_ENDPOINT, node_groups
from console.stepped import SteppedSource
from console.widgets.fabric_map import MAX_CELLS_PER_ROW, SEVERITY_STYLES, FabricMap
from fabric_core.commands import InjectFault
from fabric_core.net.profiles import PROFILES
from fabric_core.net.topology import fat_tree, leaf_spine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from tests.helpers import settle

SIZE = (140, 44)
PODS, PER_POD = 6, 30  # 180 leaves and 180 spines: more than a row has cells
WORST = SEVERITY_STYLES[-1]  # a link down


def test_pods_and_core_groups_come_from_the_cabling() -> None:
    topo = fat_tree(
        PROFILES["native-400g"],
        pods=3,
        leaves_per_pod=2,
        spines_per_pod=2,
        cores_per_spine=2,
        gpus_per_leaf=2,
        storage_targets=2,
    )
    groups = node_groups(topo.nodes, topo.links)
    tier = np.asarray(topo.nodes.tier)
    switch = (tier > TIER_ENDPOINT) & (tier < TIER_CORE)
    assert groups.names == ("pod 0", "pod 1", "pod 2", "core group 0", "core group 1")
    assert (groups.of_node[switch] == topo.node_pod[switch]).all()
    # every endpoint, storage included, is in the pod of the leaf it is cabled to
    src, dst = np.asarray(topo.links.src), np.asarray(topo.links.dst)
    up = (tier[src] == TIER_ENDPOINT) & (tier[dst] == 1)
    assert (groups.of_node[src[up]] == topo.node_pod[dst[up]]).all()
    assert (tier[src[up]] == TIER_ENDPOINT).all() and np.unique(src[up]).size == 14
    # core group j serves spine slot j of every pod
    cores = np.flatnonzero(tier == TIER_CORE)
    names = topo.nodes.name
    for core in cores:
        spines = {names[d] for s, d in zip(src, dst, strict=True) if s == core}
        slot = groups.of_node[core] - 3
        assert spines == {f"spine{pod * 2 + slot:02d}" for pod in range(3)}


def test_a_two_tier_fabric_is_one_pod_with_no_core_groups() -> None:
    topo = leaf_spine(PROFILES["native-400g"], leaves=4, spines=2, gpus_per_leaf=2)
    groups = node_groups(topo.nodes, topo.links)
    assert groups.names == ("pod 0",)
    assert (groups.of_node == 0).all()


def big_fat_tree(tmp_path: Path) -> SteppedSource:
    toml = tmp_path / "wide.toml"
    toml.write_text(
        f"""name = "wide"
description = "a fat-tree with tiers wider than the map"
dt = "1us"
profile = "native-400g"

[topology]
kind = "fat-tree"
pods = {PODS}
leaves_per_pod = {PER_POD}
spines_per_pod = {PER_POD}
cores_per_spine = 1
gpus_per_leaf = 1

[[workload]]
name = "probe"
kind = "rpc"
size = "4KiB"
rate_per_s = 20000
"""
    )
    src = SteppedSource(Fabric.from_scenario(load_scenario(str(toml))))
    src.step(5)
    return src


def cell_styles(fabric_map: FabricMap) -> list[str]:
    """The style of each ■ the map draws, in order (a run of cells alike is one span)."""
    text = fabric_map.render()
    return [
        str(s.style)
        for s in text.spans
        if set(text.plain[s.start : s.end]) == {"■"}
        for _ in range(s.end - s.start)
    ]


async def test_a_wide_tier_shows_a_cell_per_pod_and_enter_drills_into_one(
    tmp_path: Path,
) -> None:
    src = big_fat_tree(tmp_path)
    # leaf 2 of pod 4 loses its uplink to that pod's spine 0
    down = f"leaf{4 * PER_POD + 2:02d}->spine{4 * PER_POD:02d}"
    src.engine.fabric.apply(InjectFault(kind="link_down", target=down))
    src.step(5)
    app = FabtopApp(src, render_interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("shift+tab")  # from the links table to the map
        fabric_map = app.fabric_map
        assert app.focused is fabric_map
        labels = ["core", "spine", "leaf", "gpu"]
        await settle(pilot, lambda: [row.label for row in fabric_map.rows] == labels)
        core, spine, leaf, gpu = fabric_map.rows
        assert not core.grouped and len(core.cells) == PER_POD <= MAX_CELLS_PER_ROW
        assert spine.grouped and leaf.grouped and gpu.grouped
        assert len(leaf.cells) == PODS and leaf.nodes.size == PODS * PER_POD
        # the pod with the down link is the worst cell of the leaf and spine rows
        styles = cell_styles(fabric_map)  # the core row has 30 named cells, not ■
        assert len(styles) == 3 * PODS
        spine_cells, leaf_cells = styles[:PODS], styles[PODS : 2 * PODS]
        for cells in (spine_cells, leaf_cells):
            worst = [i for i, s in enumerate(cells) if s.startswith(WORST)]
            assert worst == [4], cells

        # the label counts the row's nodes and the groups they form
        assert f"leaf {PODS * PER_POD:,} in {PODS} groups: " in fabric_map.render().plain

        await pilot.press("down", "down", *["right"] * 4)  # the leaf row, pod 4
        assert fabric_map.selected_name == "pod 4"
        assert "pod 4  (Enter: its nodes)" in fabric_map.render().plain
        # the cursor's cell alone is drawn reversed, within a run of cells alike or not
        styles = cell_styles(fabric_map)
        assert [i for i, s in enumerate(styles) if "reverse" in s] == [PODS + 4]
        await pilot.press("enter")
        assert fabric_map.drilled == 4
        assert [row.label for row in fabric_map.rows] == ["spine", "leaf", "gpu"]
        pod_nodes = np.concatenate([row.nodes for row in fabric_map.rows])
        assert pod_nodes.size == 3 * PER_POD
        assert set(np.asarray(src.engine.fabric.topo.node_pod)[pod_nodes[: 2 * PER_POD]]) == {4}
        assert fabric_map.render().plain.startswith("pod 4  (Esc: back to all groups)")

        await pilot.press("down", "right", "right", "enter")  # leaf 2 of the pod: its ports
        await pilot.pause()
        leaf_name = f"leaf{4 * PER_POD + 2:02d}"
        assert app.link_filter.text == leaf_name

        app.set_focus(fabric_map)
        await pilot.press("escape")  # back to the groups, the cursor on pod 4
        assert fabric_map.drilled is None
        assert fabric_map.selected_name == "pod 4"
        assert [row.label for row in fabric_map.rows] == labels


async def test_a_counts_row_keeps_each_count_on_the_line_of_its_name() -> None:
    """The default scenario's 256 GPUs are a counts row; at 90 columns the map is some
    43 wide, so the counts take two lines, each "name count" whole on one of them."""
    src = SteppedSource(Fabric.from_scenario(load_scenario("default")))
    src.step(400)  # (busy, hot and starved GPUs beside the idle ones)
    app = FabtopApp(src, render_interval_s=0.05)
    async with app.run_test(size=(90, 40)) as pilot:
        fabric_map = app.fabric_map
        await settle(pilot, lambda: bool(fabric_map.rows) and fabric_map.size.width > 0)
        gpu = next(r for r in range(len(fabric_map.rows)) if fabric_map.rows[r].label == "gpu")
        assert not fabric_map.rows[gpu].walkable
        # the lines as drawn: Rich wraps the text to the map's width
        width = fabric_map.size.width
        wrapped = fabric_map.render().wrap(Console(width=width), width)
        drawn = [ln.plain.replace("\u00a0", " ") for ln in wrapped]
        at = next(i for i, ln in enumerate(drawn) if "256 nodes: " in ln)
        later = [row.label for row in fabric_map.rows[gpu + 1 :]]  # the next row's label
        end = next(
            (i for i in range(at + 1, len(drawn)) if drawn[i].split()[:1] == later[:1]),
            len(drawn),
        )
        counts_lines = drawn[at:end]
        assert len(counts_lines) >= 2, counts_lines  # (the case this covers)
        # each "name count" whole on one line; the lines after the first under its chips
        names = fabric_map.severity_names
        chips = [(name, ln) for ln in counts_lines for name in names if f" {name} " in ln]
        assert len(chips) >= 3, counts_lines
        for name, line in chips:
            assert re.search(rf" {name} [\d,]+ ", line), (name, counts_lines)
        for line in counts_lines[1:]:
            assert line.startswith(" " * 9), counts_lines
        for line in counts_lines:
            assert len(line.rstrip()) <= fabric_map.size.width, line


async def test_the_map_scrolls_to_its_cursor_on_a_short_terminal() -> None:
    """At 100x30 the map's box shows 5 of the default scenario's 10 lines: the cursor
    walked onto the GPU and storage rows below its edge, unseen. The box now scrolls."""
    src = SteppedSource(Fabric.from_scenario(load_scenario("default")))
    src.step(50)
    app = FabtopApp(src, render_interval_s=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.3)
        await pilot.press("shift+tab")
        fabric_map = app.fabric_map
        box = app.query_one("#map-box")
        assert app.focused is fabric_map and box.max_scroll_y > 0
        for _ in range(len(fabric_map.rows) - 1):  # down to the last tier, storage
            await pilot.press("down")
            await pilot.pause(0.1)
            await settle(
                pilot,
                lambda: box.scroll_y <= fabric_map._cursor_line < box.scroll_y + box.size.height,
            )
        assert fabric_map.rows[fabric_map.cursor[0]].label == "storage" and box.scroll_y > 0


async def test_the_gpu_counts_chips_sit_side_by_side_and_leave_room_for_storage() -> None:
    """With a space between its chips, the GPU row took a second line whenever a count
    had three digits, and pushed the storage row out of the map's box, so it came and
    went from one refresh to the next."""
    src = SteppedSource(Fabric.from_scenario(load_scenario("default")))
    src.step(400)
    app = FabtopApp(src, render_interval_s=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        fabric_map = app.fabric_map
        await settle(pilot, lambda: bool(fabric_map.rows) and fabric_map.size.width > 0)
        text = fabric_map.render()
        drawn = text.plain.splitlines()
        gpu = next(i for i, ln in enumerate(drawn) if "256 nodes: " in ln)
        assert drawn[gpu + 1].split()[0] == "storage", drawn
        # the chips side by side: each coloured chip ends where the next begins
        start = text.plain.index("256 nodes: ")
        end = text.plain.index("\n", start)
        chips = sorted(
            (span.start, span.end)
            for span in text.spans
            if start <= span.start < end and span.style in SEVERITY_STYLES
        )
        assert len(chips) >= 3
        assert all(a_end == b_start for (_, a_end), (b_start, _) in itertools.pairwise(chips))
