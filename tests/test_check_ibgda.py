"""The IBGDA bring-up check (C3): fabtop check ibgda, version_mismatch diagnosis."""

from __future__ import annotations

import pytest

from console.cli import main
from fabric_core.bringup import check_ibgda
from fabric_core.commands import ClearFault, CommandError, InjectFault
from fabric_core.endpoint import fault_masks
from fabric_core.fabric import Fabric
from fabric_core.scenario import load_scenario


def test_a_healthy_fabric_passes_both_steps(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "ibgda", "tiny"]) == 0
    out = capsys.readouterr().out
    assert "step 1 2-GPU all-to-all" in out and "step 2 cluster all-to-all" in out
    assert out.count("PASS") == 3 and "M msg/s" in out


def test_post_failures_are_diagnosed_on_the_right_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "ibgda", "tiny", "--mismatch", "gpu0005"]) == 1
    out = capsys.readouterr().out
    assert "step 1 2-GPU all-to-all     PASS" in out  # gpu0005 is not in the first pair
    assert "failure: post_error" in out
    assert "gpu0005:" in out and "post(s) failed" in out
    assert "gpu0003:" not in out


def test_a_hang_is_found_by_timeout_and_says_where_it_stuck(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["check", "ibgda", "tiny", "--mismatch", "gpu0000:hang", "--timeout", "200us"]) == 1
    out = capsys.readouterr().out
    assert "failure: hang" in out
    assert "gpu0000:" in out and "no completion after 200 µs" in out
    assert "step 2" not in out  # the cluster step does not run after step 1 fails


def test_clearing_the_fault_makes_the_check_pass() -> None:
    scn = load_scenario("tiny")
    fault = InjectFault(kind="version_mismatch", target="gpu0001")
    assert not all(s.passed for s in check_ibgda(scn, faults=[fault], rounds=1))
    assert all(s.passed for s in check_ibgda(scn, faults=[], rounds=1))
    # and on a live fabric: inject, see the masks, clear, masks empty again
    fabric = Fabric.from_scenario(scn)
    fid = fabric.apply(InjectFault(kind="version_mismatch", target="gpu0001"))["fault_id"]
    fail, hang = fault_masks(fabric)
    assert fail.sum() == 1 and hang.sum() == 0
    assert fabric.apply(ClearFault(fault_id=fid))["cleared"] == [fid]
    fail, hang = fault_masks(fabric)
    assert fail.sum() == hang.sum() == 0


def test_bad_targets_are_refused() -> None:
    fabric = Fabric.from_scenario(load_scenario("tiny"))
    with pytest.raises(CommandError, match="gpu"):
        fabric.apply(InjectFault(kind="version_mismatch", target="leaf00"))
    assert main(["check", "ibgda", "tiny", "--mismatch", "gpu9999"]) == 2


def test_version_mismatch_through_fabric_apply() -> None:
    fabric = Fabric.from_scenario(load_scenario("tiny"))
    fabric.apply(InjectFault(kind="version_mismatch", target="gpu0002"))
    fail, _ = fault_masks(fabric)
    assert fail.sum() == 1


def test_scenario_faults_are_part_of_the_check(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    from pathlib import Path

    src = (Path(__file__).parent.parent / "fabric_core" / "scenarios" / "tiny.toml").read_text()
    path = Path(str(tmp_path)) / "mismatch.toml"
    path.write_text(
        src
        + '\n[[fault]]\nat = "1ns"\nkind = "version_mismatch"\ntarget = "gpu0007"\n'
        + "params = { hang = 1.0 }\n"
    )
    assert main(["check", "ibgda", str(path), "--timeout", "100us"]) == 1
    out = capsys.readouterr().out
    assert "step 1 2-GPU all-to-all     PASS" in out
    assert "gpu0007:" in out and "failure: hang" in out
