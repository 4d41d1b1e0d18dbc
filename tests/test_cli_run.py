"""`fabtop run` and `fabtop scenarios` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from console.cli.run import fault_line
from fabric_core.runtime.scenario import bundled_dir, list_scenarios

ROOT = Path(__file__).resolve().parents[1]


def fabtop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_help_lists_the_subcommands() -> None:
    out = fabtop("--help")
    assert out.returncode == 0
    for sub in ("run", "scenarios"):
        assert sub in out.stdout


def test_scenarios_lists_the_bundled_ones() -> None:
    out = fabtop("scenarios")
    assert out.returncode == 0
    for name, _ in list_scenarios():
        assert name in out.stdout


@pytest.mark.parametrize("name", [n for n, _ in list_scenarios()])
def test_run_every_bundled_scenario_writes_a_valid_report(name: str, tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    out = fabtop("run", name, "--duration", "40us", "--json", str(report))
    assert out.returncode == 0, out.stderr
    data = json.loads(report.read_text())
    assert data["scenario"] == name
    # every bundled tick (250 ns .. 40 µs) divides 40 µs: the run is exactly 40 µs long
    run = data["run"]
    assert run["simulated_seconds"] == pytest.approx(40e-6, rel=1e-9)
    assert "whole ticks" not in out.stderr  # (no note of a rounded duration)
    # no bundled workload asks for more flows at once than the fabric-wide cap lets in
    assert data["admission"]["notes"] == [] and data["admission"]["refused_flows"] == 0
    assert run["ticks"] == round(40e-6 / run["dt_seconds"]) >= 1
    assert run["hop_updates_per_second"] > 0
    # the first tick (where a new process loads the compiled kernels) timed on its own too
    assert 0 < run["first_tick_seconds"] <= run["wall_seconds"]
    if run["ticks"] > 1:
        rest = run["after_first_tick"]
        assert rest["wall_seconds"] + run["first_tick_seconds"] == pytest.approx(
            run["wall_seconds"]
        )
        assert rest["sim_seconds_per_wall_second"] == pytest.approx(
            (run["ticks"] - 1) * run["dt_seconds"] / rest["wall_seconds"]
        )
        assert "after it" in out.stdout
    else:
        assert "after_first_tick" not in run
    assert data["totals"]["injected_bytes"] > 0
    assert "p99" in out.stdout and name in out.stdout


def test_broken_scenario_names_the_bad_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[topology]\nkind = "leaf-spine"\nleaves = 2\nspines = 0\ngpus_per_leaf = 2\n')
    out = fabtop("run", str(bad), "--duration", "10us")
    assert out.returncode != 0
    assert "topology.spines" in out.stderr and ">= 1" in out.stderr
    bad.write_text(
        '[topology]\nkind = "leaf-spine"\nleaves = 2\nspines = 1\ngpus_per_leaf = 2\n'
        '[[workload]]\nkind = "bulk"\nsize = "lots"\n'
    )
    out = fabtop("run", str(bad), "--duration", "10us")
    assert out.returncode != 0 and "workload[0]" in out.stderr and "lots" in out.stderr
    bad.write_text("this is [not toml")
    out = fabtop("run", str(bad))
    assert out.returncode != 0 and "not valid TOML" in out.stderr


_TWO_LEAVES = '[topology]\nkind = "leaf-spine"\nleaves = 2\nspines = 1\ngpus_per_leaf = 2\n'


def test_an_mtu_override_on_roce_says_what_sets_it(tmp_path: Path) -> None:
    """On RoCE the MTU is derived from the Ethernet MTU: an override, even 100 (below any
    IB MTU), ran as if not given."""
    scn = tmp_path / "mtu.toml"
    scn.write_text(_TWO_LEAVES + "[profile_overrides]\nmtu_bytes = 100\n")
    out = fabtop("run", str(scn), "--profile", "roce-400g", "--duration", "10us")
    assert out.returncode == 2, out.stderr
    assert (
        "mtu_bytes: a RoCE profile's MTU follows roce_mtu_bytes and ethernet_mtu_bytes "
        "(the largest IB MTU their frame fits: 4096 B here); set those instead"
    ) in out.stderr


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ('switch_latency_s = "fast"', "switch_latency_s: expected a number, got 'fast'"),
        ("cut_through = 1", "cut_through: expected a flag (true or false), got 1"),
        ("virtual_lanes = 2.5", "virtual_lanes: expected a whole number, got 2.5"),
        ("routing = 7", "routing: expected a text, got 7"),
        ("no_such_knob = 1", "unknown profile parameter(s): no_such_knob"),
        # values of the right kind the model cannot run: before, each of these ran (a
        # negative latency gave negative p50s, a zero link rate completed nothing) or
        # failed mid-run
        ("switch_latency_s = -1", "switch_latency_s: must be >= 0, got -1.0"),
        ("link_bandwidth_Bps = 0", "link_bandwidth_Bps: must be > 0, got 0.0"),
        ("virtual_lanes = 0", "virtual_lanes: must be in [1, 15], got 0"),
        ("ecn_pmax = 5", "ecn_pmax: must be in [0, 1], got 5.0"),
        ('flow_control = "x"', "flow_control: must be one of credit, pfc, got 'x'"),
        (
            'recovery = "x"',
            "recovery: must be one of auto, fast-reroute, bfd-ecmp, sm-resweep, got 'x'",
        ),
    ],
)
def test_a_profile_override_of_the_wrong_kind_or_range_is_a_clear_error(
    override: str, message: str, tmp_path: Path
) -> None:
    """Before, a string where a number belongs reached the compiled kernels and came out
    as a numba typing traceback."""
    bad = tmp_path / "bad.toml"
    bad.write_text(_TWO_LEAVES + f"[profile_overrides]\n{override}\n")
    out = fabtop("run", str(bad), "--duration", "10us")
    assert out.returncode != 0
    assert f"profile_overrides.{message}" in out.stderr or f"profile_overrides: {message}" in (
        out.stderr
    )
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # a negative rate reached numpy's Poisson draw and failed mid-run with its traceback
        (
            '[[workload]]\nkind = "rpc"\nrate_per_s = -5\n',
            "workload[0]: rate_per_s: expected a number in [0, 3.3e+08], got -5",
        ),
        (
            '[[workload]]\nkind = "bulk"\nhotspots = "many"\n',
            "workload[0]: hotspots: expected a whole number >= 0, got 'many'",
        ),
        (
            '[[workload]]\nkind = "bulk"\noutstanding = true\n',
            "workload[0]: outstanding: expected a whole number in 1..32768, got True",
        ),
        (
            '[[workload]]\nkind = "bulk"\nhotspot_fraction = 2\n',
            "workload[0]: hotspot_fraction: expected a number in [0, 1], got 2",
        ),
        # a bare number is seconds: this ran one tick of 5 s
        ("dt = 5\n", "dt: the tick must be between 1e-09 and 0.01 s, got 5 s"),
        ("dt = [1]\n", "dt: bad duration [1]"),  # an AttributeError before
        ('[[workload]]\nkind = "bulk"\nsize = [1]\n', "workload[0]: bad size [1]"),
        # 10^12 outstanding flows asked numpy for 14.6 TiB; 10^12 messages/s froze the run
        (
            '[[workload]]\nkind = "bulk"\noutstanding = 1e12\n',
            "workload[0]: outstanding: expected a whole number in 1..32768",
        ),
        (
            '[[workload]]\nkind = "rpc"\nrate_per_s = 1e12\n',
            "workload[0]: rate_per_s: expected a number in [0, 3.3e+08]",
        ),
        (
            '[[workload]]\nkind = "moe"\nranks = 4\ntokens_per_rank = 1000000\n',
            "the router draws one number per token and expert",
        ),
    ],
)
def test_a_workload_number_or_tick_out_of_range_is_a_clear_error(
    text: str, message: str, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.toml"
    top, _, rest = text.partition("[[workload]]")
    bad.write_text(top + _TWO_LEAVES + ("[[workload]]" + rest if rest else ""))
    out = fabtop("run", str(bad), "--duration", "10us")
    assert out.returncode != 0
    assert message in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("where", "table", "message"),
    [
        # NaN passed the storage table's ">= 0" (it compares false with everything)
        ("workload", "storage = { drive_read_latency_s = nan }", "storage.drive_read_latency_s"),
        # an infinite latency or rate ran, and completed nothing
        ("workload", "storage = { client_cores = inf }", "storage.client_cores"),
        ("workload", "endpoint = { cpu_post_s = inf }", "endpoint.cpu_post_s"),
        ("topology", "scaleup = { latency_s = inf }", "latency_s"),
    ],
)
def test_a_non_finite_parameter_override_is_a_clear_error(
    where: str, table: str, message: str, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.toml"
    topology = _TWO_LEAVES + ("gpus_per_node = 2\n" + table + "\n" if where == "topology" else "")
    workload = '[[workload]]\nkind = "moe"\nranks = 4\n' + (
        table + "\n" if where == "workload" else ""
    )
    if "storage" in table:
        workload = (
            '[[workload]]\nkind = "training"\npath = "nfs-rdma"\ngpus = "all"\n'
            f'batch = "1MiB"\ncompute = "1us"\nio_size = "64KiB"\n{table}\n'
        )
        topology = topology.replace(
            "gpus_per_leaf = 2\n", "gpus_per_leaf = 2\nstorage_targets = 1\n"
        )
    bad.write_text(topology + workload)
    out = fabtop("run", str(bad), "--duration", "10us")
    assert out.returncode != 0
    assert f"{message}: expected a finite number" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_a_topology_too_large_to_build_is_refused_before_it_is_built(tmp_path: Path) -> None:
    """4 million GPUs (8.5 million links, 14 times the bundled cluster-100k) built for
    minutes and ran out of memory; now it is an error at once."""
    bad = tmp_path / "huge.toml"
    bad.write_text(
        '[topology]\nkind = "leaf-spine"\nleaves = 4000\nspines = 64\ngpus_per_leaf = 1000\n'
    )
    out = fabtop("run", str(bad), "--duration", "2us")
    assert out.returncode != 0
    assert "topology: 8,512,000 links (4,000,000 endpoints); at most 4,194,304 fit" in out.stderr


def test_unknown_scenario_and_bad_duration_are_clear_errors() -> None:
    out = fabtop("run", "no-such-scenario")
    assert out.returncode != 0 and "no bundled scenario 'no-such-scenario'" in out.stderr
    out = fabtop("run", "")  # (it was ".: not a regular file (a directory)")
    assert out.returncode == 2 and "no scenario named: the name is empty" in out.stderr
    out = fabtop("run", "tiny", "--duration", "5 parsecs")
    assert out.returncode != 0 and "bad duration" in out.stderr


def test_a_duration_that_is_not_whole_ticks_is_said_to_be_rounded_up(tmp_path: Path) -> None:
    """``--duration 1ns`` ran a whole tick and said so only in the summary's tick count."""
    report = tmp_path / "r.json"
    out = fabtop("run", "tiny", "--duration", "1ns", "--json", str(report))
    assert out.returncode == 0, out.stderr
    run = json.loads(report.read_text())["run"]
    assert run["ticks"] == 1 and run["simulated_seconds"] == run["dt_seconds"] > 1e-9
    assert (
        "--duration 1 ns runs as 1 tick of " in out.stderr
        and "(a run is whole ticks)" in out.stderr
    )


def test_a_scheduled_fault_the_core_refuses_is_said_in_the_summary_and_report(
    tmp_path: Path,
) -> None:
    """A second link_down of one link, scheduled, was dropped without a word."""
    scenario = tmp_path / "dup.toml"
    down = '[[fault]]\nat = "{}"\nkind = "link_down"\ntarget = "leaf00->spine01"\n'
    scenario.write_text(
        'name = "dup"\ndt = "1us"\n[topology]\nkind = "leaf-spine"\nleaves = 2\n'
        "spines = 2\ngpus_per_leaf = 2\n" + down.format("5us") + down.format("10us")
    )
    out, report = run_with_report(tmp_path, str(scenario), "--duration", "20us")
    refused = "leaf00->spine01: link_down is already active on leaf00->spine01 (f0)"
    assert f"scheduled fault skipped, the core refused it: {refused}" in out.stdout
    (skipped,) = report["schedule_skipped"]
    assert skipped.startswith(refused)


def run_with_report(
    tmp_path: Path, *args: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``fabtop run ARGS --json F``, which must succeed: what it printed, and the report."""
    path = tmp_path / "r.json"
    out = fabtop("run", *args, "--json", str(path))
    assert out.returncode == 0, out.stderr
    return out, json.loads(path.read_text())


def test_a_scenario_with_no_workload_counts_a_fault_incast_under_bulk(tmp_path: Path) -> None:
    """No workload names a class, and an incast fault starts flows of its own: they are
    counted under "bulk" (before, the class histograms had no row for them and the
    compiled histogram wrote past its array: the run crashed as it ended)."""
    scn = tmp_path / "empty.toml"
    scn.write_text(
        'name = "empty"\ndescription = "no workload"\ncluster = "x"\nseed = 1\ndt = "1us"\n'
        'profile = "native-400g"\n\n[topology]\nkind = "leaf-spine"\nleaves = 2\nspines = 1\n'
        'gpus_per_leaf = 4\n\n[[fault]]\nat = "5us"\nkind = "incast"\ntarget = "gpu0000"\n'
    )
    report = tmp_path / "r.json"
    out = fabtop("run", str(scn), "--duration", "200us", "--json", str(report))
    assert out.returncode == 0, out.stderr
    classes = json.loads(report.read_text())["classes"]
    assert list(classes) == ["bulk"]
    assert classes["bulk"]["completed"] > 0


def test_a_tick_too_long_for_a_workload_is_said_before_the_run_and_in_the_report(
    tmp_path: Path,
) -> None:
    out, report = run_with_report(tmp_path, "tiny", "--duration", "200us", "--dt", "100us")
    note = "workload 'moe' starts a round every 40 µs, but the tick is 100 µs"
    assert f"fabtop: warning: {note}" in out.stderr
    (said,) = report["tick_notes"]
    assert said.startswith(note)


def test_a_scheduled_fault_past_the_runs_end_is_said_not_reached(tmp_path: Path) -> None:
    """A [[fault]] at 1 s in a 100 µs run ran as if it were not there, without a word."""
    scenario = tmp_path / "late.toml"
    scenario.write_text(
        'name = "late"\ndt = "1us"\n[topology]\nkind = "leaf-spine"\nleaves = 2\nspines = 2\n'
        'gpus_per_leaf = 2\n[[fault]]\nat = "1s"\nkind = "link_down"\ntarget = "leaf00->spine01"\n'
    )
    out = fabtop("run", str(scenario), "--duration", "100us")
    assert out.returncode == 0, out.stderr
    assert (
        "scheduled fault not reached: link_down on leaf00->spine01 at 1 s; the run ended at 100 µs"
        in out.stdout
    )


def test_a_run_on_roce_says_its_deadlock_and_its_pauses(tmp_path: Path) -> None:
    """pfc-deadlock on RoCE printed "dropped 163 MiB" and "credit wait 69.1 ms" and not a
    word of the deadlock its events named, nor that the wait was PFC's pauses."""
    out, report = run_with_report(
        tmp_path, "pfc-deadlock", "--profile", "roce-400g", "--duration", "200us"
    )
    (deadlock, *_) = [e for e in report["notable_events"] if e["kind"] == "deadlock"]
    assert deadlock["severity"] == "error" and "cyclic buffer dependency" in deadlock["message"]
    lines = out.stdout.splitlines()
    links = next(line for line in lines if line.startswith("links:"))
    assert "in all (PFC)" in links and "pause frames" in links and "credit" not in links
    at = lines.index(next(line for line in lines if line.startswith("warnings and errors")))
    assert lines[at + 1].startswith("  error at ") and "PFC deadlock" in lines[at + 1]


def test_the_summary_lists_each_kind_of_warning_once_errors_first() -> None:
    from console.cli.run import NOTABLE_LISTED, notable_lines

    def event(severity: str, kind: str, t: float) -> dict[str, Any]:
        return {"time_seconds": t, "severity": severity, "kind": kind, "target": "x",
                "message": f"{kind} {t:g}"}  # fmt: skip

    events = [event("warning", "pfc_watchdog", 1e-6), event("error", "deadlock", 2e-6)]
    events += [event("warning", "pfc_watchdog", 3e-6), event("warning", "fault_injected", 4e-6)]
    assert notable_lines(events) == [
        "warnings and errors (3, of the run's latest events):",
        "  error at 2 µs: deadlock 2e-06",
        "  warning at 1 µs: pfc_watchdog 1e-06 (and 1 more)",
    ]  # (a fault's own timeline is on its line above)
    many = [event("warning", f"kind{i}", 1e-6) for i in range(NOTABLE_LISTED + 2)]
    assert notable_lines(many)[-1] == "  and 2 more kinds: --json F lists them all"
    assert notable_lines([]) == []


def test_switch_to_switch_utilisation_leaves_storage_cables_out() -> None:
    """Idle storage cables (tiers stor-leaf, leaf-stor) were counted as switch-to-switch:
    training-nfs read 25.0 % where its leaf-spine links carried 18.9 % (a review)."""
    import numpy as np

    from fabric_core.reports.run import summarise
    from fabric_core.runtime.fabric import Fabric
    from fabric_core.runtime.scenario import parse_scenario

    scn = parse_scenario(
        {
            "name": "stor", "dt": "1us",
            "topology": {"kind": "leaf-spine", "leaves": 2, "spines": 1, "gpus_per_leaf": 2,
                         "storage_targets": 2},
            "workload": [{"name": "b", "kind": "bulk", "size": "1MiB"}],
        }
    )  # fmt: skip
    fabric = Fabric.from_scenario(scn)
    fabric.run_ticks(100)
    snap = fabric.snapshot()
    tiers = np.asarray(snap.links.tier)
    inner = np.isin(tiers, ["leaf-spine", "spine-leaf"])
    tx, bw = np.asarray(snap.link_state.tx_bytes_total), np.asarray(snap.links.bandwidth_Bps)
    assert (tiers == "stor-leaf").any()
    want = tx[inner].sum() / (bw[inner].sum() * snap.sim_time_s)
    assert summarise(snap)["links"]["fabric_mean_utilisation"] == pytest.approx(want, rel=1e-12)
    assert want > 0


def test_the_summary_gives_each_workloads_own_results() -> None:
    """storage-random-read's summary showed "storage p50 7.27 µs", the fabric's leg of an
    I/O, and not the I/O's 104 µs, which only --json had (a review)."""
    from console.cli.run import workload_lines

    workloads = {
        "probe": {"kind": "storage_io", "kpis": {"io_latency_p50_seconds": 104e-6, "iops": 36e3}},
        "idle": {"kind": "bulk", "kpis": {}},
        "moe": {"kind": "moe", "kpis": {"dispatch_p50_seconds": None}},  # none done yet
    }
    assert workload_lines(workloads) == [
        "workload probe (storage_io): I/O latency p50 104 µs, iops 36,000",
        "workload moe (moe): dispatch p50 —",
    ]


def test_the_summary_says_a_workload_started_stopped_never_ran(tmp_path: Path) -> None:
    """A workload its scenario starts stopped (``start_stopped = true``) moves nothing in a
    run, which sends no start command: the summary said only "flows in flight 0, goodput
    0 b/s", and nothing why."""
    path = tmp_path / "ss.toml"
    path.write_text(
        'name = "ss"\n[topology]\nkind = "leaf-spine"\nleaves = 2\nspines = 1\n'
        'gpus_per_leaf = 2\n[[workload]]\nname = "bg"\nkind = "bulk"\nclass = "bulk"\n'
        'size = "1MiB"\nstart_stopped = true\n[[workload]]\nname = "probe"\nkind = "rpc"\n'
        'class = "rpc"\nsize = "4KiB"\nrate_per_s = 100000\n'
    )
    out = fabtop("run", str(path), "--duration", "100us", "--json", str(tmp_path / "r.json"))
    assert out.returncode == 0, out.stderr
    lines = {ln.split(":")[0]: ln for ln in out.stdout.splitlines() if ln.startswith("workload ")}
    assert (
        "stopped all run: its scenario starts it stopped (start_stopped = true)"
        in lines["workload bg (bulk)"]
    )
    assert "stopped" not in lines["workload probe (rpc)"]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["stopped_workloads"] == ["bg"]


#: A scenario whose bulk asks for more flows at once than the fabric-wide cap lets in:
#: 10 senders x 30,000 outstanding = 300,000, past 262,144 (MAX_FLOWS_IN_FLIGHT)
PAST_THE_CAP = (
    'name = "flood"\ndt = "1us"\n[topology]\nkind = "leaf-spine"\nleaves = 2\nspines = 1\n'
    'gpus_per_leaf = 5\n[[workload]]\nname = "flood"\nkind = "bulk"\nclass = "bulk"\n'
    'senders = "all"\nsize = "4KiB"\noutstanding = 30000\n'
)


def test_flows_the_fabric_wide_cap_refused_are_said_in_the_summary_and_the_report(
    tmp_path: Path,
) -> None:
    """A step past the cap of 262,144 flows in flight ran in part, and the summary said
    only that flows completed (the refused ones were in no figure): a reader took the run
    for the one asked for. Now the summary warns beside the totals, naming the workload,
    the report counts them (``admission``), and --quiet says it on stderr."""
    path = tmp_path / "flood.toml"
    path.write_text(PAST_THE_CAP)
    out, report = run_with_report(tmp_path, str(path), "--duration", "1us")
    refused = 300_000 - 262_144
    note = (
        "workload 'flood' keeps 300,000 flows in flight (10 senders x 30,000 outstanding), "
        "more than the fabric-wide cap of 262,144 flows in flight: past it new flows are "
        "refused (each try counted) and its senders try again each tick, the room going to "
        'the flows asked for first, in sender order (docs/MQTT.md, "Limits")'
    )
    assert report["admission"] == {
        "refused_flows": refused,
        "refused_bytes": refused * 4096.0,
        "max_flows_in_flight": 262_144,
        "workloads": {"flood": {"refused_flows": refused, "refused_bytes": refused * 4096.0}},
        "notes": [note],
    }
    assert out.stderr.splitlines()[0] == f"fabtop: warning: {note}"  # (before the run)
    lines = out.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("delivered "))
    assert lines[at + 1] == (
        "warning: 37,856 flows (148 MiB) refused at admission: not queued or retried, they "
        'never ran (docs/MQTT.md, "Limits")'
    )
    assert lines[at + 2] == (
        "  workload flood (bulk): 37,856 flows (148 MiB), past the fabric-wide cap of "
        "262,144 flows in flight; its senders took the slots back and tried again the next "
        "tick (each try counted)"
    )
    quiet = fabtop("run", str(path), "--duration", "1us", "--quiet")
    assert quiet.returncode == 0 and quiet.stdout == ""
    assert "fabtop: warning: 37,856 flows (148 MiB) refused at admission" in quiet.stderr


#: 8 pairs x 32,768 outstanding 8-byte flows, for the first tick only (``until``): the
#: cap of 262,144 flows in flight, full, drained in a few µs; then a bulk, one flow a GPU
REFILL = (
    'name = "refill"\ndt = "1us"\n[topology]\nkind = "leaf-spine"\nleaves = 2\nspines = 1\n'
    'gpus_per_leaf = 5\n[[workload]]\nname = "burst"\nkind = "pairs"\nclass = "bulk"\n'
    "pairs = ["
    + ", ".join(f'["gpu{a:04d}", "gpu{b:04d}"]' for a, b in ((0, 1), (1, 2), (2, 3), (3, 4)))
    + ", "
    + ", ".join(f'["gpu{a:04d}", "gpu{b:04d}"]' for a, b in ((4, 0), (5, 6), (6, 7), (7, 8)))
    + ']\nsize = "8B"\noutstanding = 32768\nuntil = "1us"\n'
    '[[workload]]\nname = "bg"\nkind = "bulk"\nclass = "bulk"\nsenders = "all"\n'
    'size = "64KiB"\noutstanding = 1\n'
)


def test_a_bulk_refused_at_the_cap_sends_once_there_is_room(tmp_path: Path) -> None:
    """A bulk counted its flows refused at admission as in flight for ever: with the cap
    full at its first tick, its one slot a sender was lost, and it sent nothing all run
    ('flows in flight 10, goodput since start 0 b/s' with nothing of it in flight). Now
    its senders take the slots back, try again each tick, and send once the burst ends."""
    path = tmp_path / "refill.toml"
    path.write_text(REFILL)
    out, report = run_with_report(tmp_path, str(path), "--duration", "20us")
    bg = report["workloads"]["bg"]["kpis"]
    assert bg["goodput_bytes_per_second"] > 0
    assert bg["flows_in_flight"] <= 10
    refused = report["admission"]["workloads"]["bg"]["refused_flows"]
    assert refused > 10 and refused % 10 == 0  # each tick's tries, until there was room
    lines = out.stdout.splitlines()
    assert f"  workload bg (bulk): {refused:,} flows" in "\n".join(lines)
    assert any(
        ln.startswith("workload bg (bulk): flows in flight")
        and "goodput since start 0 b/s" not in ln
        for ln in lines
    )


def test_a_run_that_refused_nothing_says_nothing_of_it(tmp_path: Path) -> None:
    out, report = run_with_report(tmp_path, "tiny", "--duration", "20us")
    assert report["admission"]["refused_flows"] == 0 and report["admission"]["workloads"] == {}
    assert report["admission"]["notes"] == []
    assert "refused" not in out.stdout + out.stderr


def test_a_workload_that_asks_for_more_flows_at_once_than_the_cap_is_warned_of_before_the_run(
    tmp_path: Path,
) -> None:
    """An all-to-all of 1,024 ranks starts 1,047,552 flows a round, four times the cap of
    262,144 flows in flight: its rounds could never complete, and nothing said so before
    the run. Both big workloads start stopped (they are warned of all the same: the
    console or serve can start them), so the run itself stays small."""
    path = tmp_path / "big.toml"
    path.write_text(
        'name = "big"\ndt = "1us"\n[topology]\nkind = "leaf-spine"\nleaves = 32\n'
        "spines = 16\ngpus_per_leaf = 32\n"
        '[[workload]]\nname = "everyone"\nkind = "alltoall"\nclass = "alltoall"\n'
        'ranks = "all"\nsize = "4KiB"\nstart_stopped = true\n'
        '[[workload]]\nname = "experts"\nkind = "moe"\nclass = "moe"\nranks = 512\n'
        "experts = 512\ntokens_per_rank = 128\nstart_stopped = true\n"
        '[[workload]]\nname = "background"\nkind = "bulk"\nclass = "bulk"\n'
        'senders = 0.5\nsize = "1MiB"\noutstanding = 2\n'
    )
    out, report = run_with_report(tmp_path, str(path), "--duration", "1us")
    past = (
        ", more than the fabric-wide cap of 262,144 flows in flight: past it new flows are "
        "refused, not queued or retried, so they never run and what waits for them waits "
        'for ever (docs/MQTT.md, "Limits")'
    )
    notes = [
        "workload 'everyone' starts 1,047,552 flows a round (1,024 ranks, each to the 1,023 "
        "others)" + past,
        "workload 'experts' posts up to 524,288 flows a dispatch (512 ranks x 128 tokens x "
        "top-8)" + past,
    ]
    assert [ln for ln in out.stderr.splitlines() if "cap" in ln] == [
        f"fabtop: warning: {n}" for n in notes
    ]
    assert report["admission"]["notes"] == notes  # (the bulk's 1,024 flows: no note)


def test_an_incast_faults_refused_flows_are_said_apart_from_the_workloads(
    tmp_path: Path,
) -> None:
    """An incast fault past its per-sender limit: its flows are refused by its own limits,
    not a workload's, and the summary says whose they were."""
    path = tmp_path / "inc.toml"
    path.write_text(
        'name = "inc"\ndt = "1us"\n[topology]\nkind = "leaf-spine"\nleaves = 2\nspines = 1\n'
        'gpus_per_leaf = 4\n[[fault]]\nat = "5us"\nkind = "incast"\ntarget = "gpu0000"\n'
        "params = {senders = 7, size_bytes = 4096, period_s = 1e-7}\n"
    )
    out, report = run_with_report(tmp_path, str(path), "--duration", "20us")
    adm = report["admission"]
    assert adm["refused_flows"] > 0 and adm["workloads"] == {}
    flows = f"{adm['refused_flows']:,} flows"
    assert f"warning: {flows} " in out.stdout
    assert f"  incast faults: {flows} " in out.stdout
    assert "past their own limits or the fabric-wide cap" in out.stdout


def test_each_fault_line_says_whether_it_is_still_active_and_each_stages_time(
    tmp_path: Path,
) -> None:
    """A degraded link still active at the end read "recovered, recovered after 10 µs", and
    a link down "detected, recovered after —", its detection time in the report but not
    said: each line now says when the fault came, whether it was cleared, and each stage's
    time after it, "not yet" for one not reached; the event's text reads as a sentence."""
    scenario = tmp_path / "three.toml"
    scenario.write_text(
        (ROOT / "fabric_core/scenarios/tiny.toml").read_text()
        + '\n[[fault]]\nat = "150us"\nkind = "link_degraded"\ntarget = "leaf00->spine00"\n'
        'params = { ber = 1e-6 }\nduration = "1ms"\n'
        '\n[[fault]]\nat = "160us"\nkind = "link_down"\ntarget = "leaf01->spine01"\n'
        '\n[[fault]]\nat = "170us"\nkind = "incast"\ntarget = "gpu0000"\nduration = "10us"\n'
    )
    out, report = run_with_report(tmp_path, str(scenario), "--duration", "300us")
    degraded = report["faults"][0]
    # "recovered" is the latest stage: the throughput came back while the fault lasts
    assert degraded["state"] == "recovered" and degraded["cleared_at_seconds"] is None
    assert degraded["time_to_mitigate_seconds"] == pytest.approx(10e-6)
    assert [line for line in out.stdout.splitlines() if line.startswith("fault ")] == [
        "fault f0 link_degraded on leaf00->spine00: injected at 150 µs, active at the run's "
        "end; detected after 10 µs, mitigated after 10 µs, throughput ≥ 90% of its pre-fault "
        "rate after 11 µs",
        "fault f1 link_down on leaf01->spine01: injected at 160 µs, active at the run's end; "
        "detected after 10 µs, rerouted: not yet, throughput ≥ 90% of its pre-fault rate: "
        "not yet",
        # (nothing mitigates an incast: the line has no such stage)
        "fault f2 incast on gpu0000: injected at 170 µs, cleared after 10 µs; detected after "
        "1 µs, throughput ≥ 90% of its pre-fault rate: not yet",
    ]
    messages = [e["message"] for e in report["notable_events"]]
    assert (
        "link_degraded on leaf00->spine00 detected by the port's symbol errors after 10 µs (f0)"
        in messages
    )
    assert "incast on gpu0000 detected by its port after 1 µs (f2): 128 KiB queued for gpu0000" in (
        messages
    )


def test_a_fault_line_leaves_out_the_stages_its_kind_does_not_reach_on_this_fabric(
    tmp_path: Path,
) -> None:
    """A PFC storm on the credit fabric read "mitigated: not yet", as if a mitigation were
    coming, though on credits nothing mitigates it until it is cleared (no PFC, so no
    watchdog): the report's faults now carry the ``stages`` their kind reaches on this
    fabric, and the line says "not yet" only for those. On RoCE the watchdog's mitigation
    is still to come."""
    base = (ROOT / "fabric_core/scenarios/tiny.toml").read_text()
    storm = '\n[[fault]]\nat = "100us"\nkind = "pfc_storm"\ntarget = "gpu0001"\n'
    native = tmp_path / "storm.toml"
    native.write_text(base + storm)
    out, report = run_with_report(tmp_path, str(native), "--duration", "200us")
    assert report["flow_control"] == "credit"
    (fault,) = report["faults"]
    assert fault["stages"] == ["detected", "recovered"]
    assert [line for line in out.stdout.splitlines() if line.startswith("fault ")] == [
        "fault f0 pfc_storm on gpu0001: injected at 100 µs, active at the run's end; "
        "detected after 10 µs, throughput ≥ 90% of its pre-fault rate: not yet"
    ]
    roce = tmp_path / "storm-roce.toml"
    roce.write_text(base.replace('profile = "native-400g"', 'profile = "roce-400g"') + storm)
    out, report = run_with_report(tmp_path, str(roce), "--duration", "200us")
    assert report["faults"][0]["stages"] == ["detected", "mitigated", "recovered"]
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("fault ")]
    assert "mitigated: not yet" in line


def test_a_fault_line_of_a_report_without_stages_takes_them_from_its_kind() -> None:
    """A report from before faults carried ``stages`` (a record's, ``fabtop compare`` of
    one): the line takes them from the kind and the report's flow control, and says a
    stage reached whatever they say."""
    fault = {
        "id": "f0",
        "kind": "pfc_storm",
        "target": "gpu0001",
        "state": "detected",
        "injected_at_seconds": 100e-6,
        "time_to_detect_seconds": 10e-6,
        "time_to_mitigate_seconds": None,
        "time_to_recover_seconds": None,
    }
    assert fault_line(fault, "credit").endswith(
        "detected after 10 µs, throughput ≥ 90% of its pre-fault rate: not yet"
    )
    assert "mitigated: not yet" in fault_line(fault, "pfc")
    assert "mitigated: not yet" in fault_line(fault)  # (no flow control: either fabric's)
    reached = {**fault, "time_to_mitigate_seconds": 20e-6, "stages": ["detected", "recovered"]}
    assert "mitigated after 20 µs" in fault_line(reached, "credit")
    slow = {**fault, "kind": "slow_target", "time_to_detect_seconds": None}
    assert fault_line({**slow, "stages": ["recovered"]}).endswith(
        "active at the run's end; throughput ≥ 90% of its pre-fault rate: not yet"
    )


def test_the_summary_counts_the_flows_in_flight_and_those_stuck_behind_a_dead_link(
    tmp_path: Path,
) -> None:
    """A run with flows stuck behind a fault said only their bytes ('in flight 4.09 MiB'):
    on RoCE a link that died before routing knew swallowed bytes, and their flows wait
    for their ACK timeout (1.07 s) to resend, long past this run's end. The summary and
    the report now count the flows in flight and, of those, the ones waiting so."""
    path = tmp_path / "down.toml"
    path.write_text(
        (bundled_dir() / "tiny.toml").read_text()
        + '\n[[fault]]\nat = "5us"\nkind = "link_down"\ntarget = "leaf00->spine01"\n'
    )
    out, report = run_with_report(
        tmp_path, str(path), "--profile", "roce-400g", "--duration", "60us"
    )
    stuck = report["in_flight"]
    assert 0 < stuck["waiting_to_resend"] <= stuck["flows"]
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("delivered "))
    assert (
        f"({stuck['flows']:,} flow{'s' if stuck['flows'] > 1 else ''}, "
        f"{stuck['waiting_to_resend']:,} of them waiting for their ACK timeout to resend)"
    ) in line
    _, native = run_with_report(tmp_path, str(path), "--duration", "60us")
    assert native["in_flight"]["waiting_to_resend"] == 0  # (routing knows at once: rerouted)
    assert native["in_flight"]["flows"] > 0
