"""Scenario and topology files that are not what they should be: refused at once, by name.

Found by a review of hostile input (session 37): ``fabtop run /dev/zero`` read until the
memory ran out, a FIFO blocked for ever, a topology file of 4.4 million links built for a
minute and then failed in numpy, two workloads of one name hid one of them from every
report, and a cluster name that is no MQTT topic level stopped ``fabtop serve`` after its
engine had started.
"""

from __future__ import annotations

import copy
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

from fabric_core.net import topofile
from fabric_core.reports.record import scenario_table
from fabric_core.runtime import scenario as scenario_module
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import ScenarioError, bundled_dir, load_scenario, parse_scenario
from tests.test_console_cli import fabtop

TINY = tomllib.loads((bundled_dir() / "tiny.toml").read_text())


def test_a_device_is_refused_before_it_is_read() -> None:
    result = fabtop("run", "/dev/zero", "--duration", "10us")
    assert result.returncode == 2
    assert "/dev/zero: not a regular file (a device)" in result.stderr


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "scenario.toml"
    os.mkfifo(fifo)
    with pytest.raises(ScenarioError, match=r"scenario.toml: not a regular file \(a FIFO\)"):
        load_scenario(fifo)


def test_a_directory_and_a_file_too_large_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"not a regular file \(a directory\)"):
        load_scenario(tmp_path)
    big = tmp_path / "big.toml"
    big.write_text("# padding\n" * (scenario_module.MAX_SCENARIO_BYTES // 10 + 1))
    with pytest.raises(ScenarioError, match=r"big.toml: [0-9,]+ bytes; at most 4 MiB are read"):
        load_scenario(big)


def test_bytes_that_are_not_utf8_are_named_by_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'name = "x"\n# caf\xe9\n')
    with pytest.raises(ScenarioError, match=r"latin1.toml: not UTF-8 text \(byte 0xe9 on line 2\)"):
        load_scenario(path)


def test_a_byte_order_mark_before_the_text_is_read_past(tmp_path: Path) -> None:
    """A file saved by an editor that marks UTF-8 (Notepad) was refused as "not valid TOML:
    Invalid statement (at line 1, column 1)", for a character nobody sees."""
    text = (bundled_dir() / "tiny.toml").read_text()
    path = tmp_path / "marked.toml"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert scenario_table(load_scenario(path)) == scenario_table(
        parse_scenario(tomllib.loads(text))
    )
    path.write_bytes(b'name = "x"\n\xef\xbb\xbf')  # elsewhere it is a character, as TOML says
    with pytest.raises(ScenarioError, match="not valid TOML"):
        load_scenario(path)


def _topology_file(tmp_path: Path, cables: int) -> Path:
    lines = ["node s0 switch"]
    for i in range(cables):
        lines += [f"node g{i} gpu", f"link g{i} s0"]
    (tmp_path / "t.topo").write_text("\n".join(lines) + "\n")
    scn = tmp_path / "file.toml"
    scn.write_text(
        'name = "file"\n[topology]\nkind = "file"\npath = "t.topo"\n'
        '[[workload]]\nname = "bg"\nkind = "bulk"\nclass = "bulk"\n'
    )
    return scn


def test_a_topology_file_counts_its_links_against_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted as the file is read: refused at the cable past the limit, not built."""
    path = _topology_file(tmp_path, cables=3)
    load_scenario(path)  # 6 links
    monkeypatch.setattr(topofile, "MAX_LINKS", 4)
    with pytest.raises(ScenarioError, match=r"t.topo:7: more than 4 links \(a cable is two\)"):
        load_scenario(path)


def test_a_topology_file_that_is_a_device_is_refused(tmp_path: Path) -> None:
    scn = tmp_path / "dev.toml"
    scn.write_text('name = "dev"\n[topology]\nkind = "file"\npath = "/dev/zero"\n')
    with pytest.raises(ScenarioError, match=r"/dev/zero: not a regular file \(a device\)"):
        load_scenario(scn)


#: One message from gpu0000 to gpu0004, a workload of kind "pairs"
ONE_PAIR = {"name": "p", "kind": "pairs", "class": "bulk", "pairs": [["gpu0000", "gpu0004"]]}


def _tiny_with(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(TINY)
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            _tiny_with(workload=[*TINY["workload"], {**TINY["workload"][0]}]),
            f"workload[{len(TINY['workload'])}].name: {TINY['workload'][0]['name']!r} is "
            "already the name of workload[0]",
        ),
        (_tiny_with(cluster="my cluster/#"), "cluster: 'my cluster/#' must be 1-64 characters"),
        (_tiny_with(name=[1]), "name: must be a string, got [1]"),
        (_tiny_with(name=""), "name: must not be empty"),
        (_tiny_with(name="x\x1b[2J"), "name: holds the control character '\\x1b'"),
        (_tiny_with(name="n" * 129), "name: at most 128 characters, got 129"),
        (_tiny_with(description=7), "description: must be a string, got 7"),
        (
            _tiny_with(workload=[{**TINY["workload"][0], "name": "pr\nobe"}]),
            "workload[0].name: holds the control character '\\n'",
        ),
        (
            _tiny_with(workload=[{**TINY["workload"][0], "class": ["bulk"]}]),
            "workload[0].class: must be a string, got ['bulk']",
        ),
        (_tiny_with(fault=5), "fault: must be an array of tables ([[fault]]), got 5"),
        (_tiny_with(fault=[5]), "fault[0]: must be a table ([[fault]]), got 5"),
        (_tiny_with(route=5), "route: must be an array of tables ([[route]]), got 5"),
        (
            _tiny_with(fault=[{"at": "1us", "kind": "link_down", "target": "x", "params": [1]}]),
            "fault[0].params: must be a table of names and values, got [1]",
        ),
        (
            _tiny_with(fault=[{"at": "1us", "kind": "link_down", "target": "x", "duration": -1}]),
            "fault[0].duration: duration must be > 0, got -1",
        ),
        # (session 45: 2e6 s loaded, where the fault command it becomes takes 1e6 s at most)
        (
            _tiny_with(fault=[{"at": "1us", "kind": "link_down", "target": "x", "duration": 2e6}]),
            "fault[0].duration: at most 1e+06 s, as a fault command's, got 2e+06 s",
        ),
        (
            _tiny_with(workload=[{**TINY["workload"][0], "size": "1e300B"}]),
            "workload[0]: size: must be 1 B to 2 GiB (one message's most), got '1e300B'",
        ),
        (
            _tiny_with(workload=[{**TINY["workload"][0], "size": "1e400B"}]),
            "workload[0]: size must be a finite number, got '1e400B'",
        ),
        # (session 41: the key named, a sign said to be one, a misspelt class refused)
        (
            _tiny_with(workload=[TINY["workload"][0], {**TINY["workload"][1], "period": "0us"}]),
            "workload[1]: period: duration must be > 0, got '0us'",
        ),
        (
            _tiny_with(workload=[{**TINY["workload"][0], "size": "-5KiB"}]),
            "workload[0]: size: must be 1 B to 2 GiB (one message's most), got '-5KiB'",
        ),
        # (session 48: a message of 4.5 bytes ran)
        (
            _tiny_with(workload=[{**TINY["workload"][0], "size": "4.5B"}]),
            "workload[0]: size: '4.5B' is 4.5 bytes, not a whole number of them (a message "
            "carries whole bytes): write 4B or 5B",
        ),
        (
            _tiny_with(workload=[{**TINY["workload"][0], "size": "0.1MiB"}]),
            "workload[0]: size: '0.1MiB' is 104,857.6 bytes, not a whole number of them (a "
            "message carries whole bytes): write 104857B or 104858B",
        ),
        # (session 43: "false" ran as true; a rails that does not divide the leaves ended in
        # a traceback)
        (
            _tiny_with(workload=[{**TINY["workload"][0], "start_stopped": "false"}]),
            "workload[0].start_stopped: expected true or false, got 'false'",
        ),
        (
            _tiny_with(topology={**TINY["topology"], "rails": 3}),
            "topology.rails: the leaves (2) must be a multiple of rails (3)",
        ),
        (
            _tiny_with(workload=[{k: v for k, v in TINY["workload"][0].items() if k != "kind"}]),
            "workload[0].kind: missing; known: ",
        ),
        # (both ran, sending nothing, without a word)
        (
            _tiny_with(workload=[{**ONE_PAIR, "pairs": []}]),
            "workload[0]: pairs: names no pair; give at least one [src, dst]",
        ),
        (
            _tiny_with(workload=[{**ONE_PAIR, "start": "10us", "until": "5us"}]),
            "workload[0]: until: '5us' is not after start ('10us')",
        ),
        (  # (session 44: read as 4 MB, where rates tell Gb from GB)
            _tiny_with(workload=[{**TINY["workload"][0], "size": "4Mb"}]),
            "workload[0]: bad size '4Mb': 'Mb' reads as bits; a size is in bytes, a capital B "
            "(MB or MiB)",
        ),
        (  # (session 44: accepted, and did nothing)
            _tiny_with(workload=[{**TINY["workload"][0], "hotspot_fraction": 0.9}]),
            "workload[0]: hotspot_fraction: 0.9 of the flows go to hot spots, but hotspots is 0",
        ),
        (  # (session 44: said "dtype: expected ...", a key no file has)
            _tiny_with(workload=[{"name": "m", "kind": "moe", "dispatch_dtype": "fp16"}]),
            "workload[0]: dispatch_dtype: expected 'fp8' or 'bf16', got 'fp16'",
        ),
        (
            _tiny_with(classes={"bulk": 99}),
            "classes.bulk: virtual lane must be in 0..3 (the profile's 4), got 99",
        ),
        (  # (session 42: the switch-by-switch table of 100,000 leaves wanted 37 GiB)
            _tiny_with(topology={**TINY["topology"], "leaves": 100000}),
            "topology: 100,002 switches; at most 16,384 fit",
        ),
        (
            _tiny_with(
                topology={
                    "kind": "fat-tree",
                    "pods": 130,
                    "leaves_per_pod": 64,
                    "spines_per_pod": 64,
                    "cores_per_spine": 1,
                    "gpus_per_leaf": 1,
                }
            ),
            "topology: 16,704 switches; at most 16,384 fit",  # 8,320 + 8,320 + 64 cores
        ),
        (  # (session 42: a bulk workload of no message in flight sent nothing, silently)
            _tiny_with(workload=[{**TINY["workload"][0], "outstanding": 0}]),
            "workload[0]: outstanding: expected a whole number in 1..32768, got 0",
        ),
        (  # (session 42: a negative size in the words of a zero one)
            _tiny_with(workload=[{**TINY["workload"][0], "size": 0}]),
            "workload[0]: size: must be 1 B to 2 GiB (one message's most), got 0",
        ),
        (_tiny_with(dt="-1us"), "dt: duration must be > 0, got '-1us'"),
        (
            _tiny_with(workload=[{**TINY["workload"][0], "class": "bluk"}]),
            "workload[0].class: 'bluk' is not one of the scenario's [classes] (bulk, alltoall, "
            "rpc)",
        ),
    ],
)
def test_scenario_tables_are_refused_by_key(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data, "x.toml")
    assert message in str(info.value)


#: A fault table as a user might write it, its parameter beside its kind
DEGRADED = {"at": "10us", "kind": "link_degraded", "target": "leaf00->spine00"}


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (
            {**DEGRADED, "bogus": 1},
            "fault[0]: unknown key(s) bogus; accepted: at, kind, target, params, duration",
        ),
        (
            {**DEGRADED, "kind": "link_flap", "period_s": 0.01, "down_fraction": "half"},
            "fault[0]: unknown key(s) down_fraction, period_s; accepted: at, kind, target, "
            "params, duration (down_fraction, period_s are parameters of link_flap: write "
            "params = { down_fraction = …, period_s = 0.01 })",
        ),
        (  # (a kind misspelt: the key is a parameter of some kind)
            {**DEGRADED, "kind": "link_dgraded", "ber": 1e-6},
            "(ber is a parameter of a fault kind: write params = { ber = 1e-06 })",
        ),
    ],
)
def test_a_fault_tables_unknown_key_lists_the_keys_accepted(
    fault: dict[str, Any], message: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(_tiny_with(fault=[fault]), "x.toml")
    assert message in str(info.value)


def test_a_fault_parameter_beside_its_kind_is_pointed_to_params(tmp_path: Path) -> None:
    """``ber = 1e-6`` in a ``[[fault]]`` table, not in its ``params``: ``fabtop run`` names
    the keys a fault table takes and where ``ber`` goes (it named neither)."""
    path = tmp_path / "b20.toml"
    text = (bundled_dir() / "tiny.toml").read_text()
    path.write_text(
        text + '\n[[fault]]\nat = "10us"\nkind = "link_degraded"\n'
        'target = "leaf00->spine00"\nber = 1e-6\n'
    )
    out = fabtop("run", str(path), "--duration", "20us")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == (
        f"fabtop: {path}: fault[0]: unknown key(s) ber; accepted: at, kind, target, params, "
        "duration (ber is a parameter of link_degraded: write params = { ber = 1e-06 })\n"
    )


def test_a_fabric_of_one_gpu_is_refused_before_its_traffic_runs() -> None:
    """Its bulk and RPC workloads found no peer in the first tick: a traceback."""
    topology = {**TINY["topology"], "leaves": 1, "gpus_per_leaf": 1}
    for workload in ({**TINY["workload"][0], "senders": "all"}, TINY["workload"][2]):
        one = _tiny_with(topology=topology, workload=[workload])
        with pytest.raises(ScenarioError, match="needs at least 2 GPUs, the fabric has 1"):
            Fabric.from_scenario(parse_scenario(one, "x.toml"))


def test_a_sender_given_twice_is_refused_when_the_fabric_is_built() -> None:
    """``senders = [0, 0, 0]`` made three senders of one GPU, without a word."""
    twice = _tiny_with(workload=[{**TINY["workload"][0], "senders": [0, 0, 0]}])
    with pytest.raises(ScenarioError, match=r"senders: indices \[0\] given more than once"):
        Fabric.from_scenario(parse_scenario(twice, "x.toml"))


@pytest.mark.parametrize(
    ("kind", "key", "value", "error"),
    [
        ("checkpoint", "io_size", "0B", "must be 1 B to 2 GiB .*, got '0B'"),
        # (session 48: "size must be >= 0" named the wrong key; 3 GiB, past the largest
        # message, and half a byte loaded)
        ("checkpoint", "io_size", "-1KiB", "must be 1 B to 2 GiB .*, got '-1KiB'"),
        ("checkpoint", "io_size", "3GiB", "must be 1 B to 2 GiB .*, got '3GiB'"),
        ("checkpoint", "io_size", "0.5B", "must be 1 B to 2 GiB .*, got '0.5B'"),
        ("training", "io_size", "1.5B", "'1.5B' is 1.5 bytes, not a whole number of them"),
        ("training", "batch", "-1MiB", "must be 1 B to 1 TiB .*, got '-1MiB'"),
    ],
)
def test_a_storage_workloads_bad_size_is_named_by_its_key(
    kind: str, key: str, value: str, error: str
) -> None:
    """ "depth, size and io_size must be > 0" named three keys for one; a negative
    ``io_size`` or ``batch`` was refused as a bad "size", an I/O past the largest message or
    of a fraction of a byte loaded."""
    scn = load_scenario("checkpoint-burst" if kind == "checkpoint" else "training-nfs")
    table = scenario_table(scn)
    (wl,) = [w for w in table["workload"] if w["kind"] == kind]
    wl[key] = value
    with pytest.raises(ScenarioError, match=rf"workload\[\d\]: {key}: {error}"):
        parse_scenario(table, "x.toml")


def test_storage_workloads_that_disagree_on_their_parameters_are_named() -> None:
    """It said "storage workloads of one fabric must share the same storage parameters",
    naming neither the workload nor the parameter."""
    table = scenario_table(load_scenario("storage-random-read"))
    other = {**table["workload"][0], "name": "other", "storage": {"client_cores": 2}}
    table["workload"].append(other)
    with pytest.raises(
        ScenarioError,
        match=r"workload 'other': .* \(their `storage` tables\): client_cores 2 here, 1 before",
    ):
        Fabric.from_scenario(parse_scenario(table, "x.toml"))


def test_a_checkpoints_size_is_given_and_bounded_in_tebibytes() -> None:
    """Its bound read "1.02e+03 GiB", and "2TiB" was no size at all."""
    table = scenario_table(load_scenario("checkpoint-burst"))
    (ckpt,) = [w for w in table["workload"] if w["kind"] == "checkpoint"]
    ckpt["size"] = "2TiB"
    with pytest.raises(ScenarioError, match=r"size: must be 1 B to 1 TiB .*, got '2TiB'"):
        parse_scenario(table, "x.toml")


def test_a_seed_given_on_the_command_line_is_checked_as_such() -> None:
    result = fabtop("run", "tiny", "--duration", "10us", "--seed", "-1")
    assert result.returncode == 2
    assert "argument --seed: must be 0 or more, got '-1'" in result.stderr
    assert "tiny.toml" not in result.stderr  # (the file is not what is wrong)
    # and given in code, the scenario says which seed it refuses
    with pytest.raises(ScenarioError, match=r"the seed given \(--seed\) must be a non-negative"):
        load_scenario("tiny", seed=-1)
