"""The IBGDA bring-up check at its limits: a cluster too large for a full all-to-all, a
step scaled down (and saying so), multi-plane bounds, deadlines a tick apart, and the
command line's refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from console.cli import main
from fabric_core.endpoints.model import EndpointParams
from fabric_core.reports import bringup
from fabric_core.reports.bringup import (
    CLUSTER_MESSAGE_BUDGET,
    check_ibgda,
    peer_offsets,
    plan_step,
    size_step,
    ticks_in,
)
from fabric_core.runtime.scenario import load_scenario

# --- 1. a cluster too large for one message per GPU pair -----------------------------


def test_cluster_100k_is_planned_as_one_message_per_gpu_not_per_pair(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check crashed allocating 75 GiB: one message per pair of 100,352 GPUs is 10^10
    (rounds and messages per peer could not go below 1). Planned only: not run here."""
    scn = load_scenario("cluster-100k")
    topo = scn.build_topology()
    monkeypatch.setattr(scn, "build_topology", lambda: topo)  # (built once: a second)
    gpus = topo.gpus.astype(np.int64)
    plan = plan_step(
        scn,
        gpus,
        size_bytes=4096,
        rounds=4,
        burst=8,
        round_latency_s=4e-6,
        endpoint=EndpointParams(),
    )
    assert (plan.rounds, plan.burst, plan.peers) == (1, 1, 1)
    assert plan.messages == gpus.size == 100_352
    assert "each GPU sends to 1 of its 100,351 peers" in plan.scaled
    assert "every GPU still posts and receives" in plan.scaled


@pytest.mark.parametrize(("gpus", "rounds", "burst"), [(8, 4, 8), (512, 4, 8), (100_352, 1, 8)])
def test_a_step_is_scaled_to_the_budget_but_never_below_a_message_from_every_gpu(
    gpus: int, rounds: int, burst: int
) -> None:
    size = size_step(gpus, rounds, burst)
    assert size.messages(gpus) <= max(CLUSTER_MESSAGE_BUDGET, gpus)
    assert min(size.rounds, size.burst, size.peers) >= 1
    assert size.peers <= gpus - 1


def test_the_peers_of_a_scaled_step_are_spread_round_the_gpus() -> None:
    assert peer_offsets(8, 7).tolist() == [1, 2, 3, 4, 5, 6, 7]  # the full all-to-all
    assert peer_offsets(8, 1).tolist() == [4]  # half-way round: across the fabric
    assert peer_offsets(8, 2).tolist() == [2, 6]
    offsets = peer_offsets(100_352, 300)
    assert np.unique(offsets).size == 300 and offsets.min() >= 1 and offsets.max() <= 100_351


def test_a_scaled_step_still_finds_a_faulty_gpu_and_says_how_it_was_scaled(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """tiny's 8 GPUs with a budget of 16 messages: each GPU sends to 2 of its 7 peers."""
    monkeypatch.setattr(bringup, "CLUSTER_MESSAGE_BUDGET", 16)
    out_json = tmp_path / "check.json"
    assert main(["check", "ibgda", "tiny", "--mismatch", "gpu0005", "--json", str(out_json)]) == 1
    out = capsys.readouterr().out
    assert "step 2 cluster all-to-all   FAIL" in out and "gpu0005: 2 WQE post(s) failed" in out
    assert "scaled down: 1 round of the 4 asked (--rounds); 1 message to each peer" in out
    assert "each GPU sends to 2 of its 7 peers" in out and "budget of 16" in out
    step2 = json.loads(out_json.read_text())[1]
    assert (step2["rounds"], step2["burst"], step2["peers"], step2["messages"]) == (1, 1, 2, 16)
    assert (step2["rounds_asked"], step2["burst_asked"]) == (4, 8)
    assert "each GPU sends to 2 of its 7 peers" in step2["scaled"]


# --- 2. what the user asked for is not overridden silently ---------------------------


def test_rounds_cut_to_the_budget_are_said_in_the_output_and_the_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """--rounds 1 and --rounds 100 ran the same step 2 on default, and said nothing."""
    monkeypatch.setattr(bringup, "CLUSTER_MESSAGE_BUDGET", 8 * 8 * 7)  # one round of tiny
    out_json = tmp_path / "check.json"
    assert main(["check", "ibgda", "tiny", "--rounds", "3", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "scaled down: 1 round of the 3 asked (--rounds): the full all-to-all is 1,344" in out
    first, second = json.loads(out_json.read_text())
    assert (first["rounds"], first["scaled"]) == (3, "")  # the 2-GPU step runs as asked
    assert (second["rounds"], second["rounds_asked"], second["burst"]) == (1, 3, 8)


def test_a_step_run_as_asked_says_nothing_about_scaling(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["check", "ibgda", "tiny", "--rounds", "1"]) == 0
    assert "scaled down" not in capsys.readouterr().out


# --- 3. every plane's uplinks ---------------------------------------------------------


def test_the_leaf_uplink_bound_counts_every_plane(monkeypatch: pytest.MonkeyPatch) -> None:
    """It read plane 0 only: planes-2's step 2 ran in 45.3 µs against an expected 82.6 µs."""
    monkeypatch.setattr(bringup, "CLUSTER_MESSAGE_BUDGET", 1 << 20)  # the full all-to-all
    scn = load_scenario("planes-2")
    gpus = scn.build_topology().gpus.astype(np.int64)
    plan = plan_step(
        scn,
        gpus,
        size_bytes=4096,
        rounds=1,
        burst=4,
        round_latency_s=4e-6,
        endpoint=EndpointParams(),
    )
    assert plan.bound == "leaf uplinks" and plan.peers == 511
    # 32 GPUs of a leaf send to 480 others, half of it over each plane's 16 uplinks of 50 GB/s
    uplink_round = 32 * 480 * 4 * 4096 / 2 / (16 * 50e9)
    assert plan.expected_s == pytest.approx(uplink_round + 4e-6)


def test_planes_2_cluster_step_takes_about_its_expected_time() -> None:
    _, cluster = check_ibgda(load_scenario("planes-2"), rounds=1)
    assert cluster.passed
    assert 0.8 < cluster.expected_s / cluster.elapsed_s < 1.25, (
        cluster.expected_s,
        cluster.elapsed_s,
    )


# --- 4. deadlines on a tick ---------------------------------------------------------


def test_a_time_a_rounding_error_from_a_tick_is_on_it() -> None:
    assert ticks_in(10 * 1e-6, 1e-6) == ticks_in(1e-5, 1e-6) == 10.0
    assert ticks_in(7.5e-6, 1e-6) == pytest.approx(7.5)  # (not a whole number: left as is)


@pytest.mark.parametrize("timeout", ["10us", "0.01ms", "10000ns", "1e-5s"])
def test_equal_timeouts_give_equal_results(
    timeout: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``10us`` gave 32/64 in 10 µs, the others 48/64 in 11 µs (10 * 1e-6 != 1e-5)."""
    assert main(["check", "ibgda", "tiny", "--timeout", timeout]) == 1
    out = capsys.readouterr().out
    assert "32/64 messages in 10 µs" in out
    assert "32/64 messages completed by the deadline 10 µs" in out


def test_a_message_counts_by_the_deadline_only_if_it_finished_by_then(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """tiny's 2-GPU rounds finish at 4.25 and 8.5 µs; the second was reported (and
    counted) in the tick ending at 7 µs."""
    assert main(["check", "ibgda", "tiny", "--timeout", "7us"]) == 1
    assert "16/64 messages completed by the deadline 7 µs" in capsys.readouterr().out


def test_a_step_whose_last_messages_finish_after_the_deadline_is_slow(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The last of tiny's 2-GPU messages finish at 17.0 µs, reported in the tick ending at
    16 µs: against 16.5 µs the step passed."""
    assert main(["check", "ibgda", "tiny", "--timeout", "16.5us"]) == 1
    out = capsys.readouterr().out
    assert "failure: slow" in out
    assert "50/64 messages completed by the deadline 16.5 µs" in out
    assert "all completed in 17 µs" in out


# --- 5. the command line ------------------------------------------------------------


def test_a_negative_size_is_given_the_range(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["check", "ibgda", "tiny", "--size", "-5"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--size: a message is 1 B to 2 GiB, got '-5'" in err and ">= 0" not in err


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("gpu0", "gpu0000"),
        ("GPU0001:fail", "gpu0001"),
        ("gpu7", "gpu0007"),
        ("gpu00004", "gpu0004"),
        ("gpx5", "gpu0005"),
    ],
)
def test_an_unknown_gpu_gets_the_closest_name_and_the_range(
    typed: str, meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``gpu0`` was offered ``gpu0007``."""
    assert main(["check", "ibgda", "tiny", "--mismatch", typed]) == 2
    err = capsys.readouterr().err
    assert f"did you mean {meant}?" in err and "its 8 GPUs are gpu0000..gpu0007" in err


def test_the_mismatch_modes_are_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--mismatch GPU[:MODE]" in text
    assert "MODE 'fail' (the default): its WQE posts fail; 'hang':" in text


def test_the_fail_mode_is_the_default_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "ibgda", "tiny", "--rounds", "1", "--mismatch", "gpu0005:fail"]) == 1
    out = capsys.readouterr().out
    assert "failure: post_error" in out and "gpu0005: 56 WQE post(s) failed" in out
