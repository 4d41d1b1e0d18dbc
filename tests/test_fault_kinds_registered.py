"""Every fault kind the console offers is one an engine accepts, in whichever process the
engine runs; an incast's senders are whole GPUs (found by a review of the console)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from console.faultkinds import fault_kinds
from fabric_core.commands import CommandError, InjectFault
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario


def test_an_engine_process_knows_every_kind_the_console_offers() -> None:
    """An engine process imports the fabric, not the endpoint model, which registered
    version_mismatch: the console offered it and the engine refused it as unknown."""
    engine_kinds = subprocess.run(
        [sys.executable, "-c", "import fabric_core.runtime.fabric\n"
         "from fabric_core.faults.book import FAULT_KINDS\nprint(' '.join(sorted(FAULT_KINDS)))"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout.split()  # fmt: skip
    assert "version_mismatch" in engine_kinds
    assert {k.name for k in fault_kinds()} <= set(engine_kinds)


def test_an_incast_of_a_fraction_of_a_gpu_is_refused() -> None:
    fabric = Fabric.from_scenario(load_scenario("tiny"))
    with pytest.raises(CommandError, match=r"senders must be a whole number of GPUs, got 2\.5"):
        fabric.apply(InjectFault(kind="incast", target="gpu0001", params={"senders": 2.5}))
    assert fabric.apply(InjectFault(kind="incast", target="gpu0001", params={"senders": 2}))
