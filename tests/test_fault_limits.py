"""How many faults a fabric keeps: open ones capped, settled ones forgotten oldest first.

A review of hostile input (session 37) sent 3,000 injects: each inject and each tick went
over every open fault, the tick of ``tiny`` grew from 0.1 to 2.4 ms and the engine fell
behind its pace; an inject/clear loop grew the book without end.
"""

from __future__ import annotations

import pytest

from fabric_core.commands import ClearFault, InjectFault
from fabric_core.faults import book as book_module
from fabric_core.runtime.engine import Engine
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario

LINK = "leaf00->spine00"


def _engine() -> Engine:
    return Engine(Fabric.from_scenario(load_scenario("tiny")))


def test_injects_past_the_open_limit_are_refused_until_some_are_cleared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(book_module, "MAX_OPEN_FAULTS", 3)
    engine = _engine()
    links = [name for name in engine.fabric.topo.links.name if "->spine" in name][:4]

    def degrade(link: str) -> InjectFault:
        return InjectFault(kind="link_degraded", target=link, params={"ber": 1e-9})

    for link in links[:3]:
        assert engine.apply(degrade(link)).ok
    refused = engine.apply(degrade(links[3]))
    assert not refused.ok and refused.error is not None
    assert "3 faults are open (at most 3): clear some first" in refused.error
    assert len(engine.fabric.faults.active()) == 3  # nothing half-made
    assert engine.apply(ClearFault(all=True)).ok
    engine.fabric.run_ticks(5)  # a degraded link recovers when cleared
    assert engine.apply(degrade(links[3])).ok


def test_settled_faults_are_forgotten_oldest_first_but_their_ids_stay_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(book_module, "MAX_SETTLED_FAULTS", 2)
    engine = _engine()
    for i in range(5):
        assert engine.apply(InjectFault(kind="link_degraded", target=LINK, params={"ber": 1e-9})).ok
        assert engine.apply(ClearFault(fault_id=f"f{i}")).ok
        engine.fabric.run_ticks(5)
    book = engine.fabric.faults
    assert not book.open
    assert list(book.faults) == ["f3", "f4"]  # the newest two
    again = engine.apply(ClearFault(fault_id="f0"))
    assert again.error is not None and "fault 'f0' is already cleared" in again.error
    never = engine.apply(ClearFault(fault_id="f9"))
    assert never.error is not None and "unknown active fault 'f9'" in never.error


def test_the_same_fault_again_on_a_link_it_holds_is_refused_naming_the_first() -> None:
    """A second link_down on a link already down changed nothing, and its timeline said it
    recovered at once (a review of the console); an incast, traffic, adds up."""
    engine = _engine()
    assert engine.apply(InjectFault(kind="link_down", target=LINK)).ok
    back = "->".join(reversed(LINK.split("->")))
    again = engine.apply(InjectFault(kind="link_down", target=back))
    assert again.error == (
        f"link_down is already active on {LINK} (f0): clear it first (it holds {back} too)"
    )
    assert engine.apply(InjectFault(kind="link_degraded", target=LINK)).ok  # another kind
    burst = InjectFault(kind="incast", target="gpu0001", params={"senders": 2})
    assert engine.apply(burst).ok and engine.apply(burst).ok
    assert engine.apply(ClearFault(fault_id="f0")).ok
    engine.fabric.run_ticks(5)
    assert engine.apply(InjectFault(kind="link_down", target=LINK)).ok


def test_a_second_version_mismatch_on_a_gpu_is_refused() -> None:
    """Four on one GPU (fail and hang) were all active at once: the GPU both failed its
    posts and hung, and each clear left the others."""
    engine = _engine()
    assert engine.apply(InjectFault(kind="version_mismatch", target="gpu0003")).ok
    hang = InjectFault(kind="version_mismatch", target="gpu0003", params={"hang": 1})
    assert engine.apply(hang).error == (
        "version_mismatch is already active on gpu0003 (f0): clear it first"
    )
    assert engine.apply(InjectFault(kind="version_mismatch", target="gpu0002")).ok


def test_a_fault_scheduled_where_the_same_one_ends_follows_it() -> None:
    """The faults that expire end before the schedule's are applied: a link_down scheduled
    at the end of another on the same link was refused as "already active"."""
    from fabric_core.runtime.scenario import parse_scenario

    data = dict(load_scenario("tiny").raw)
    data["fault"] = [
        {"at": "100us", "kind": "link_down", "target": LINK, "duration": "100us"},
        {"at": "200us", "kind": "link_down", "target": LINK, "duration": "50us"},
    ]
    fabric = Fabric.from_scenario(parse_scenario(data, "back-to-back"))
    fabric.run_ticks(round(300e-6 / fabric.dt_s))
    snap = fabric.snapshot()
    assert [f.id for f in snap.faults] == ["f0", "f1"]
    assert not [e for e in snap.events if e.kind == "schedule_skipped"]


def test_the_bring_up_check_injects_a_scenarios_faults_once_and_its_clears_not() -> None:
    from fabric_core.reports.bringup import _fabric_for
    from fabric_core.workloads.traffic import Scripted

    scn = load_scenario("chaos-linkdown")
    kinds = [f.kind for f in scn.faults]
    assert "clear" in kinds  # the scenario clears what it injected
    probe = Scripted(name="probe", traffic_class="probe", flows=[])
    _, cmds = _fabric_for(scn, probe)  # type: ignore[arg-type]
    assert "clear" not in [c.kind for c in cmds]
    assert len({(c.kind, c.target) for c in cmds}) == len(cmds)
