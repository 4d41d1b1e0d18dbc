"""The claims page's parameter tables show the values the runs used: a bundled scenario's
own overrides (training-nfs's 0.5 client cores, pfc-deadlock's 512 KiB static PFC buffer),
not only the dataclasses' defaults, which the page showed before."""

from __future__ import annotations

from console.claimsrun.model import Settings
from console.claimsrun.params import profile_params, storage_params
from fabric_core.runtime.scenario import load_scenario
from fabric_core.storage.model import StorageParams


def test_a_storage_value_a_scenario_sets_is_the_one_shown() -> None:
    preset = next(
        t["storage"]["client_cores"]
        for t in load_scenario("training-nfs").raw["workload"]
        if "storage" in t
    )
    assert preset != StorageParams().client_cores
    (row,) = storage_params(Settings(), ("client_cores",), scenario="training-nfs")
    assert row.value == f"{preset:g} (training-nfs sets it; the default is 1)"
    (row,) = storage_params(
        Settings(storage={"client_cores": 3.0}), ("client_cores",), "training-nfs"
    )
    assert row.value == "3 (these runs set it; the default is 1)"
    (row,) = storage_params(Settings(), ("client_cores",))
    assert row.value == "1"


def test_a_profile_value_a_scenario_overrides_is_shown_beside_the_profiles() -> None:
    overrides = load_scenario("pfc-deadlock").raw["profile_overrides"]
    rows = profile_params(
        Settings(),
        ("pfc_buffer_bytes", "link_bandwidth_Bps"),
        "native-400g",
        "roce-400g",
        scenario="pfc-deadlock",
    )
    assert rows[0].value.endswith(f"; pfc-deadlock runs with {overrides['pfc_buffer_bytes']} B")
    assert "runs with" not in rows[1].value  # not overridden there
