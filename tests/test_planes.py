"""One engine per plane, in this process (``fabric_core.planes``; issue 19).

The plane engines here run in an ``InProcessPool``; ``tests/test_ray_planes.py`` runs
the same coordinator with each plane a Ray actor and holds it to these results.
"""

from __future__ import annotations

import asyncio
import copy
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fabric_core.commands import ClearFault, CommandError, InjectFault, SetTick
from fabric_core.faults.admission import AdmissionLimits
from fabric_core.net.tables import LinkStatus
from fabric_core.planes.coordinator import PlanedFabric, parts_of, spray
from fabric_core.planes.messages import MessageTable
from fabric_core.planes.plane import PlaneSpec
from fabric_core.planes.pool import InProcessPool, PlaneLostError
from fabric_core.reports.record import snapshot_digest
from fabric_core.reports.run import report_of
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import Scenario, ScenarioError, load_scenario, parse_scenario

TINY_2PLANE: dict[str, Any] = {
    "name": "tiny-2plane",
    "seed": 7,
    "dt": "1us",
    "profile": "native-400g",
    "topology": {
        "kind": "leaf-spine",
        "planes": 2,
        "leaves": 2,
        "spines": 2,
        "gpus_per_leaf": 4,
    },
    "classes": {"bulk": 0, "alltoall": 1, "rpc": 1},
    "workload": [
        {"name": "background", "kind": "bulk", "class": "bulk", "senders": 4, "size": "1MiB"},
        {"name": "moe", "kind": "alltoall", "class": "alltoall", "ranks": 8, "size": "16KiB",
         "period": "40us"},
        {"name": "probe", "kind": "rpc", "class": "rpc", "size": "4KiB", "rate_per_s": 20000},
    ],
}  # fmt: skip


def scenario(**changes: Any) -> Scenario:
    """The 2-plane tiny fabric, with top-level keys or the topology changed."""
    table = copy.deepcopy(TINY_2PLANE)
    table["topology"].update(changes.pop("topology", {}))
    table.update(changes)
    return parse_scenario(table, "tiny-2plane")


def one_message(size: str, planes: int) -> Scenario:
    """gpu0000 sends one message of ``size`` to gpu0004 (the other leaf) at t = 0."""
    return scenario(
        topology={"planes": planes},
        workload=[
            {"name": "one", "kind": "pairs", "class": "bulk", "pairs": [["gpu0000", "gpu0004"]],
             "size": size, "until": "1us"},
        ],
    )  # fmt: skip


def test_the_planes_cut_share_the_endpoints_and_split_the_links() -> None:
    f = PlanedFabric(load_scenario("planes-2"), InProcessPool)
    whole = f.topo
    owners = np.zeros(len(whole.links), dtype=int)
    for cut in f.cuts:
        owners[cut.link_global] += 1
        # a plane's link joins the nodes its whole-fabric link joins
        assert (cut.node_global[cut.topo.links.src] == whole.links.src[cut.link_global]).all()
        assert (cut.node_global[cut.topo.links.dst] == whole.links.dst[cut.link_global]).all()
        assert (cut.node_global[cut.topo.endpoints] == whole.endpoints).all()
        assert (whole.nodes.plane[cut.node_global[cut.topo.nodes.tier > 0]] == cut.plane).all()
    assert (owners == 1).all()  # every link in exactly one plane
    f.close()


def test_a_plane_keeps_the_whole_fabrics_link_settings() -> None:
    """A ``[links]`` entry names the whole fabric's link; the plane's link has its value."""
    scn = scenario(links={"named": {"p1leaf00->p1spine01": {"bandwidth": "100Gb/s"}}})
    f = PlanedFabric(scn, InProcessPool)
    cut = f.cuts[1]
    local = cut.topo.links.index["leaf00->spine01"]
    assert cut.topo.links.bandwidth_Bps[local] == pytest.approx(100e9 / 8)
    other = f.cuts[0].topo.links.index["leaf00->spine01"]
    assert f.cuts[0].topo.links.bandwidth_Bps[other] == pytest.approx(400e9 / 8)


def test_spray_puts_a_message_on_as_many_planes_as_it_has_packets() -> None:
    """4 planes, MTU 4096: 1 MiB goes over all four in quarters; 6 KiB (two packets) over
    two in halves; 100 B over one; each from its first plane on, round the planes."""
    sizes = np.array([1024.0**2, 6144.0, 100.0])
    parts = parts_of(sizes, planes=4, mtu=4096)
    assert parts.tolist() == [4, 2, 1]
    owner, plane, size = spray(np.array([3, 1, 0]), sizes, parts, planes=4)
    assert owner.tolist() == [0, 0, 0, 0, 1, 1, 2]
    assert plane.tolist() == [3, 0, 1, 2, 1, 2, 0]
    assert size.tolist() == [262144.0] * 4 + [3072.0] * 2 + [100.0]


def test_a_message_sprayed_over_two_planes_finishes_as_half_of_it_on_one() -> None:
    """The planes are alike and share nothing: 1 MiB sprayed over two planes is two
    independent 512 KiB parts on identical paths, so it finishes when 512 KiB alone on one
    plane does (a single fabric of one plane, the same tick)."""
    f = PlanedFabric(one_message("1MiB", planes=2), InProcessPool, batch_ticks=1)
    f.run_ticks(200)
    sprayed = f.class_hist["bulk"].freeze()
    single = Fabric.from_scenario(one_message("512KiB", planes=1))
    single.run_ticks(200)
    alone = single.class_hist["bulk"].freeze()
    assert sprayed.count == alone.count == 1
    assert sprayed.mean() == pytest.approx(alone.mean(), rel=1e-12)
    # and about half of 1 MiB alone on one plane: its serialisation is halved
    whole = Fabric.from_scenario(one_message("1MiB", planes=1))
    whole.run_ticks(400)
    assert sprayed.mean() < 0.6 * whole.class_hist["bulk"].freeze().mean()
    f.close()


def test_where_a_caller_splits_its_ticks_changes_nothing() -> None:
    """Batches end on a fixed grid: 300 ticks at once, one by one, or in odd pieces give
    the same snapshot (a replay splits the ticks where its commands fall, not where the
    live engine's batches ended)."""
    digests = []
    for pieces in ([300], [1] * 300, [7, 50, 3, 100, 1, 139]):
        f = PlanedFabric(scenario(), InProcessPool, batch_ticks=8)
        for n in pieces:
            f.run_ticks(n)
        digests.append(snapshot_digest(f.snapshot(running=False)))
        f.close()
    assert digests[0] == digests[1] == digests[2]


def run_and_balance(scn: Scenario, ticks: int) -> None:
    """Run ``ticks`` over the planes: messages complete, and every byte injected is
    delivered, in flight, cancelled or dropped."""
    f = PlanedFabric(scn, InProcessPool)
    f.run_ticks(ticks)
    t = f.snapshot().totals
    assert t.injected_bytes_total > 0 and t.completed_flows_total > 0
    assert t.injected_bytes_total == pytest.approx(
        t.delivered_bytes_total + t.in_flight_bytes + t.cancelled_bytes_total
        + t.dropped_bytes_total, rel=1e-9
    )  # fmt: skip
    f.close()


def test_bytes_are_conserved_over_the_planes() -> None:
    run_and_balance(load_scenario("planes-2"), 400)


def test_a_link_fault_lands_on_the_plane_that_owns_the_link() -> None:
    f = PlanedFabric(scenario(), InProcessPool)
    f.run_ticks(20)
    fid = f.apply(InjectFault(kind="link_down", target="p1leaf00->p1spine01"))["fault_id"]
    f.run_ticks(20)
    snap = f.snapshot()
    links = snap.links.index
    status = snap.link_state.status
    down = {links["p1leaf00->p1spine01"], links["p1spine01->p1leaf00"]}
    assert {int(i) for i in np.flatnonzero(status == LinkStatus.DOWN)} == down
    (view,) = snap.faults
    assert (view.id, view.kind, view.target) == (fid, "link_down", "p1leaf00->p1spine01")
    injected = [e for e in snap.events if e.kind == "fault_injected"]
    assert [(e.target, e.message) for e in injected] == [
        ("p1leaf00->p1spine01", f"link_down injected on p1leaf00->p1spine01 ({fid}, plane 1)")
    ]
    assert f.apply(ClearFault(fault_id=fid)) == {"cleared": [fid]}
    with pytest.raises(CommandError, match=f"fault '{fid}' is already cleared"):
        f.apply(ClearFault(fault_id=fid))
    f.run_ticks(20)
    assert (f.snapshot().link_state.status == LinkStatus.UP).all()
    f.close()


def test_a_switch_fault_lands_on_its_plane_and_a_nic_storm_on_every_plane() -> None:
    f = PlanedFabric(scenario(profile="roce-400g"), InProcessPool)
    f.apply(InjectFault(kind="switch_down", target="p0spine01"))
    f.apply(InjectFault(kind="pfc_storm", target="gpu0003"))
    f.run_ticks(5)
    snap = f.snapshot()
    names = snap.links.name
    down = {names[i] for i in np.flatnonzero(snap.link_state.status == LinkStatus.DOWN)}
    assert down and all("p0spine01" in n for n in down)
    assert sorted(v.target for v in snap.faults) == ["gpu0003", "p0spine01"]
    stormed = [e.fabric.faults.active("pfc_storm") for e in f.pool.engines]  # type: ignore[attr-defined]
    assert [len(s) for s in stormed] == [1, 1]
    f.close()


def test_bad_fault_commands_are_refused_as_a_single_fabric_refuses_them() -> None:
    scn = scenario()
    f = PlanedFabric(scn, InProcessPool)
    single = Fabric.from_scenario(scn)
    for cmd in (
        InjectFault(kind="link_down", target="p1leaf00->nowhere"),
        InjectFault(kind="switch_down", target="gpu0001"),
        InjectFault(kind="meteor", target="p0spine00"),
        ClearFault(fault_id="f9"),
        ClearFault(target="p0spine00"),
    ):
        with pytest.raises(CommandError) as ours:
            f.apply(cmd)
        with pytest.raises(CommandError) as theirs:
            single.apply(cmd)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(CommandError, match="unknown active fault 'f9'"):
        f.apply(ClearFault(fault_id="f9"))
    with pytest.raises(CommandError, match="tick must be between"):
        f.apply(SetTick(dt_s=1.0))
    f.run_ticks(3)  # and it runs on
    assert f.tick == 3
    f.close()


def test_a_scheduled_fault_the_planes_refuse_is_reported_as_a_single_fabric_reports_it() -> None:
    """The coordinator said a refused scheduled command as "command_failed", which the run
    report does not read: a planed run's report said nothing was refused."""
    fault = {"at": "3us", "kind": "clear", "target": "p0spine00"}
    scn = scenario(fault=[fault])
    f = PlanedFabric(scn, InProcessPool)
    single = Fabric.from_scenario(scn)
    f.run_ticks(5)
    single.run_ticks(5)
    assert f.schedule_skipped == single.schedule_skipped
    assert report_of(f, 5, 0, 1.0)["schedule_skipped"] == f.schedule_skipped
    (event,) = [e for e in f.snapshot().events if e.severity == "warning"]
    assert (event.kind, event.target) == ("schedule_skipped", "p0spine00")
    f.close()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"topology": {"planes": 1}}, "needs two or more"),
        ({"topology": {"gpus_per_node": 4}}, "scale-up domains"),
    ],
)  # fmt: skip
def test_a_fabric_that_cannot_run_one_engine_per_plane_says_why(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ScenarioError, match=message):
        PlanedFabric(scenario(**changes), InProcessPool)


class _LosesAPlane(InProcessPool):
    """The in-process engines, but plane 1's engine dies on its ``after``-th batch (a
    worker killed: ``tests/test_ray_planes.py`` kills a real one)."""

    def __init__(self, specs: Sequence[PlaneSpec], after: int = 3) -> None:
        super().__init__(specs)
        self.batches = 0
        self.after = after

    def call(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        if method == "advance":
            self.batches += 1
            if self.batches >= self.after:
                raise PlaneLostError(1, "its worker died (SIGKILL)")
        return super().call(method, args)


def test_a_plane_lost_before_any_snapshot_still_gives_one() -> None:
    """A snapshot after the loss shows every plane as last seen (the lost one as it
    started), each on its own links."""
    f = PlanedFabric(scenario(), functools.partial(_LosesAPlane, after=1))
    with pytest.raises(PlaneLostError, match="plane 1"):
        f.run_ticks(5)
    snap = f.snapshot()
    assert snap.link_state.status.size == len(f.topo.links)
    assert [e.target for e in snap.events if e.kind == "plane_lost"] == ["plane1"]


def test_a_lost_plane_ends_the_engines_run_with_an_event_naming_it() -> None:
    async def main() -> tuple[Engine, list[Any]]:
        f = PlanedFabric(scenario(), _LosesAPlane, batch_ticks=4)
        engine = Engine(f, speed=0)
        task = asyncio.create_task(engine.run())
        await asyncio.wait_for(task, timeout=30)  # it ends on its own
        after = await engine.submit(InjectFault(kind="link_down", target="p0leaf00->p0spine00"))
        return engine, [after]

    engine, (after,) = asyncio.run(main())
    assert engine.ended == "plane 1's engine was lost: its worker died (SIGKILL)"
    snap = engine.bus.latest
    # the last snapshot is of where the run stopped: two batches in, the third lost
    assert snap is not None and snap.tick == engine.fabric.tick > 0
    lost = [e for e in snap.events if e.kind == "plane_lost"]
    assert [(e.severity, e.target) for e in lost] == [("error", "plane1")]
    assert not after.ok
    assert after.error == f"the engine has stopped: {engine.ended}"


def test_a_lost_plane_loses_no_recorded_command(tmp_path: Path) -> None:
    """Commands applied before a plane was lost are all in the record, with the state
    after each; the record replays (its planes in one process) to where the run stopped
    and finds every one of those states again."""
    from fabric_core.reports.record import Recorder, load_record, replay

    scn = scenario()

    async def main() -> Recorder:
        f = PlanedFabric(scn, functools.partial(_LosesAPlane, after=40), batch_ticks=2)
        recorder = Recorder.start(scn, f)
        engine = Engine(f, speed=0, on_command=recorder.on_command)
        task = asyncio.create_task(engine.run())
        for cmd in (
            InjectFault(kind="link_down", target="p1leaf00->p1spine01"),
            SetTick(dt_s=2e-6),
            ClearFault(all=True),
        ):
            assert (await engine.submit(cmd)).ok
        await asyncio.wait_for(task, timeout=60)
        assert engine.ended is not None
        return recorder

    recorder = asyncio.run(main())
    assert [c["command"]["command"] for c in recorder.commands] == ["inject", "tick", "clear"]
    path = tmp_path / "lost.record"
    recorder.save(path)
    record = load_record(path)
    assert record["ended"] == "plane 1's engine was lost: its worker died (SIGKILL)"
    result = replay(record)
    assert result.ok and result.checked == 3
    assert result.fabric.tick == record["end_tick"]


def two_planes(name: str) -> Scenario:
    """A bundled leaf-spine scenario with a second plane."""
    import tomllib

    from fabric_core.runtime.scenario import bundled_dir

    raw = tomllib.loads((bundled_dir() / f"{name}.toml").read_text())
    raw["topology"]["planes"] = 2
    return parse_scenario(raw, f"{name} on two planes")


@pytest.mark.parametrize(
    "name", ["moe-ibgda", "pd-llama70b", "storage-random-read", "training-nfs", "checkpoint-burst"]
)
def test_every_kind_of_workload_runs_over_the_planes(name: str) -> None:
    """The workloads run at the coordinator and read only the endpoints, the whole
    topology and the faults kept there: MoE with its GPU endpoints, PD, storage I/O,
    training and checkpoints complete messages over two planes, bytes conserved."""
    run_and_balance(two_planes(name), 300)


def test_an_incast_sends_its_share_on_every_plane() -> None:
    """An incast fault's messages are sprayed as any other: each plane's incast carries
    half the bytes of each message, so the planes together offer what one fabric would."""
    f = PlanedFabric(scenario(), InProcessPool)
    fid = f.apply(
        InjectFault(kind="incast", target="gpu0001", params={"senders": 4, "size_bytes": 65536})
    )["fault_id"]
    engines = f.pool.engines  # type: ignore[attr-defined]
    shares = [e.fabric.faults.active("incast")[0].params for e in engines]
    assert [p["size_bytes"] for p in shares] == [32768.0, 32768.0]
    assert all(p["senders"] == 4.0 for p in shares)
    (view,) = f.snapshot().faults
    assert (view.id, view.target) == (fid, "gpu0001")
    f.close()


def test_what_the_planes_refuse_is_counted_by_the_whole_fabric() -> None:
    """Four senders, each starting a round at half its line rate into one GPU, whose
    link they share: a flow takes about four rounds, past each plane's limit of one flow
    a sender in flight. The planes refuse the rest, and the coordinator, whose count the
    engine exports as ``fabtop_flows_refused_total``, counts every flow and byte they
    refused, as one fabric counts its own."""
    f = PlanedFabric(scenario(), InProcessPool)
    engines = f.pool.engines  # type: ignore[attr-defined]
    for e in engines:
        e.fabric.faults.admission.limits = AdmissionLimits(per_sender_flows=1)
    size = 65536.0
    line = f.topo.links.bandwidth_Bps.max()
    f.apply(
        InjectFault(
            kind="incast",
            target="gpu0001",
            params={"senders": 4, "size_bytes": size, "period_s": 2 * size / line},
        )
    )
    f.run_ticks(200)
    planes = [e.fabric.faults.admission for e in engines]
    assert all(a.refused_flows_total > 0 for a in planes)
    mine = f.faults.admission
    assert mine.refused_flows_total == sum(a.refused_flows_total for a in planes)
    assert mine.refused_bytes_total == pytest.approx(sum(a.refused_bytes_total for a in planes))
    f.close()


def test_a_fault_the_workloads_read_stays_with_them() -> None:
    """A slow storage target is the storage model's, which runs with the workloads at
    the coordinator: it is kept there, in no plane, listed and cleared like any other."""
    f = PlanedFabric(two_planes("storage-random-read"), InProcessPool)
    fid = f.apply(InjectFault(kind="slow_target", target="stor00"))["fault_id"]
    assert len(f.faults.active("slow_target")) == 1
    engines = f.pool.engines  # type: ignore[attr-defined]
    assert [len(e.fabric.faults.active()) for e in engines] == [0, 0]
    f.run_ticks(10)
    snap = f.snapshot()
    assert [(v.id, v.kind, v.target) for v in snap.faults] == [(fid, "slow_target", "stor00")]
    assert any(e.kind == "fault_injected" and f"({fid})" in e.message for e in snap.events)
    assert f.apply(ClearFault(target="stor00")) == {"cleared": [fid]}
    assert f.faults.active("slow_target") == []
    f.close()


def test_each_workloads_refused_parts_are_summed_over_the_planes() -> None:
    """The report names the workloads whose flows the fabric-wide cap refused: over the
    planes, each workload's count is the sum of its parts the planes refused, and with no
    fault those are every refusal (``fabtop run``'s report, ``admission``)."""
    f = PlanedFabric(scenario(), InProcessPool)
    engines = f.pool.engines  # type: ignore[attr-defined]
    for e in engines:
        e.fabric.faults.admission.limits = AdmissionLimits(fabric_flows=20)
    f.run_ticks(20)
    planes = [e.fabric.faults.admission.refused_by_workload for e in engines]
    mine = f.faults.admission
    assert "moe" in mine.refused_by_workload  # (its rounds of 56 parts)
    assert set(mine.refused_by_workload) <= {"background", "moe", "probe"}
    for name, (flows, total_bytes) in mine.refused_by_workload.items():
        assert flows == sum(p[name][0] for p in planes if name in p) > 0
        assert total_bytes == pytest.approx(sum(p[name][1] for p in planes if name in p))
    assert mine.refused_flows_total == sum(n for n, _ in mine.refused_by_workload.values())
    admission = report_of(f, f.tick, f.hop_updates, 1.0)["admission"]
    assert admission["refused_flows"] == mine.refused_flows_total
    assert {k: v["refused_flows"] for k, v in admission["workloads"].items()} == {
        k: v[0] for k, v in mine.refused_by_workload.items()
    }
    f.close()


def _add(ms: MessageTable, n: int) -> list[int]:
    """``n`` one-part messages of workload 0; their ids."""
    z = np.zeros(n, dtype=np.int64)
    return ms.add(0, z, z, z, np.ones(n), np.zeros(n), np.ones(n, dtype=np.int64)).tolist()


def test_a_message_takes_the_lowest_free_slot_and_the_table_grows_past_its_capacity() -> None:
    """A message's id is its slot, and the planes it is sprayed over start at its id: the
    lowest free slots are taken, in order, after messages are freed and after the table
    grows (a run's plane assignment, and so its results, rest on it)."""
    ms = MessageTable(capacity=4)
    assert _add(ms, 3) == [0, 1, 2]
    ms.release(np.array([1]))
    assert _add(ms, 2) == [1, 3]  # (the freed one first, then the rest of the capacity)
    assert _add(ms, 3) == [4, 5, 6] and ms.size.size >= 7  # grown
    ms.release(np.array([5, 0]))
    assert _add(ms, 1) == [0]
    assert _add(ms, 1) == [5]
    assert ms.in_flight == 7
    big = MessageTable(capacity=2)
    assert _add(big, 9) == list(range(9))  # grown by as many as asked at once
    assert big.size.size >= 9 and big.refused.size == big.size.size
    assert _add(big, 1) == [9]


def test_a_message_a_plane_refused_is_handed_back_once_and_freed_when_its_parts_are_done() -> None:
    """The message table: a message sprayed as two parts, one refused and one run, is
    refused once (not completed) and its slot freed only when the part that ran is done;
    one whose parts are all refused ends at once."""
    ms = MessageTable(capacity=4)
    ids = ms.add(
        0, np.array([10, 11]), np.array([0, 1]), np.array([2, 3]), np.array([8e3, 8e3]),
        np.array([0.0, 0.0]), np.array([2, 2]),
    )  # fmt: skip
    a, b = ids.tolist()
    first, ended = ms.refuse(np.array([a, b, b]))
    assert first.tolist() == [a, b] and ended.tolist() == [b]
    first, ended = ms.refuse(np.array([], dtype=np.int64))
    assert first.size == ended.size == 0
    whole = ms.parts_done(np.array([a]), np.array([1e-6]), np.array([2e-6]))
    assert whole.tolist() == [a] and ms.refused[whole].all()  # ended, but refused
    ms.release(np.array([a, b]))
    assert ms.in_flight == 0
    again = ms.add(0, np.array([12]), np.array([0]), np.array([2]), np.array([1.0]),
                   np.array([0.0]), np.array([1]))  # fmt: skip
    assert not ms.refused[again].any()  # (a reused slot starts afresh)


def test_a_bulk_sender_a_plane_refused_gets_its_slot_back_and_sends_once_there_is_room() -> None:
    """A plane's cap refused parts of a bulk's messages, and the coordinator never told
    the bulk: its senders' slots were lost and they never sent again (the note said
    "waits for ever"). Here 1 MiB messages, sprayed over both planes, fill each plane's
    cap of 8 at the first tick; the bulk's 8 one-flow senders are refused, hear of it at
    the batch's end, try again each batch, and send once the burst is done."""
    table = copy.deepcopy(TINY_2PLANE)
    gpus = [f"gpu{i:04d}" for i in range(8)]
    table["workload"] = [
        {"name": "burst", "kind": "pairs", "class": "bulk", "size": "1MiB", "until": "1us",
         "pairs": [[gpus[i], gpus[(i + 1) % 8]] for i in range(8)]},
        {"name": "bg", "kind": "bulk", "class": "bulk", "senders": "all", "size": "4KiB"},
    ]  # fmt: skip
    f = PlanedFabric(parse_scenario(table, "refill-2plane"), InProcessPool, batch_ticks=4)
    for e in f.pool.engines:  # type: ignore[attr-defined]
        e.fabric.faults.admission.limits = AdmissionLimits(fabric_flows=8)
    burst, bg = f.workloads
    f.run_ticks(4)
    assert f.faults.admission.refused_by_workload == {"bg": (8, 8 * 4096.0)}
    assert int(bg.in_flight.sum()) == 0  # the slots are back (the old code: 8)
    assert f.messages.in_flight == 8  # the burst's; the bulk's refused messages are freed
    f.run_ticks(96)
    assert burst.delivered_bytes == 8 * 2.0**20
    refused = f.faults.admission.refused_by_workload["bg"][0]
    assert refused % 8 == 0 and refused > 8  # tried again each batch until there was room
    assert bg.delivered_bytes >= 8 * 4096.0  # each sender sent
    assert f.messages.in_flight == int(bg.in_flight.sum())  # nothing refused left behind
    f.close()
