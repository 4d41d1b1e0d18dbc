"""One engine per plane through what a user runs (issue 19): ``fabtop run
--planes-distributed`` and its record and replay, the console's fault form, and
``fabtop serve --planes-distributed`` behind a real mosquitto.

The CLI runs start a local Ray cluster of their own (loopback only) with an actor per
plane; the console test runs the planes in its own process (``InProcessPool``: the
same coordinator, the same commands, and bit for bit the same results,
``tests/test_ray_planes.py``).
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from console.app import FabtopApp
from console.screens.fault_form import FaultFormScreen
from console.stepped import SteppedSource
from console.widgets.faults_panel import FaultsPanel
from fabric_core.planes.coordinator import PlanedFabric
from fabric_core.planes.pool import InProcessPool
from fabric_core.reports.record import comparable_report
from fabric_core.reports.run import run_for
from fabric_core.runtime.scenario import load_scenario
from fabric_core.runtime.snapshot import LinkStatus
from fabric_core.units import format_bytes
from tests._mosquitto import REPO, Mosquitto, Served, broker  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow

LINK = "p1leaf00->p1spine01"


def fabtop(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def close(a: Any, b: Any, path: str = "report") -> None:
    """Every number of two reports equal within 1e-6 relative (and the rest equal)."""
    if isinstance(a, dict):
        assert sorted(a) == sorted(b), path
        for k in a:
            close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float) and math.isfinite(a):
        assert b == pytest.approx(a, rel=1e-6, abs=1e-12), path
    else:
        assert a == b, path


def test_a_run_on_ray_actors_reports_what_one_process_does_and_replays(tmp_path: Path) -> None:
    """``fabtop run --planes-distributed`` (a Ray actor per plane) against the same
    coordinator with its planes in this process: the same report within 1e-6 (bit for
    bit, in fact); and its record replays, in one process, digest for digest."""
    out, record = tmp_path / "ray.json", tmp_path / "ray.record"
    r = fabtop(
        "run", "planes-2", "--duration", "120us", "--planes-distributed", "--plane-batch", "4",
        "--json", str(out), "--record", str(record), "--quiet",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    on_ray = json.loads(out.read_text())
    assert on_ray["run"]["planes"] == {"placement": "ray", "planes": 2, "batch_ticks": 4}

    here = PlanedFabric(load_scenario("planes-2"), InProcessPool, batch_ticks=4)
    in_process = run_for(here, 120e-6)
    assert on_ray["totals"]["completed_flows"] > 1000
    close(comparable_report(in_process), comparable_report(on_ray))

    replayed = fabtop("replay", str(record), "--quiet")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert replayed.stdout.startswith("replay OK: 120 ticks"), replayed.stdout


#: 16 pairs x 32,768 outstanding 8-byte messages (one part each, the planes in turn), for
#: the first tick only: each plane's cap of 262,144 flows in flight, full, drained in a few
#: µs; then a bulk, one message a GPU, which the planes refuse at first
REFILL_2PLANE = (
    'name = "refill-2plane"\ndt = "1us"\n[topology]\nkind = "leaf-spine"\nplanes = 2\n'
    'leaves = 2\nspines = 1\ngpus_per_leaf = 5\n[[workload]]\nname = "burst"\nkind = "pairs"\n'
    'class = "bulk"\npairs = ['
    + ", ".join(
        f'["gpu{a:04d}", "gpu{b:04d}"]'
        for pair in ((0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (5, 6), (6, 7), (7, 8))
        for a, b in (pair, pair[::-1])
    )
    + ']\nsize = "8B"\noutstanding = 32768\nuntil = "1us"\n[[workload]]\nname = "bg"\n'
    'kind = "bulk"\nclass = "bulk"\nsenders = "all"\nsize = "64KiB"\noutstanding = 1\n'
)


def test_a_bulk_the_planes_refused_at_first_sends_once_there_is_room(tmp_path: Path) -> None:
    """The coordinator did not hand a message a plane refused back to its workload: a
    bulk whose first messages the full planes refused lost its senders' slots and sent
    nothing all run ('goodput since start 0 b/s'). Now its senders hear of it at the
    batch's end, try again each batch, and send once the burst is done."""
    path, out = tmp_path / "refill.toml", tmp_path / "refill.json"
    path.write_text(REFILL_2PLANE)
    r = fabtop(
        "run", str(path), "--duration", "20us", "--planes-distributed", "--plane-batch", "4",
        "--json", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    report = json.loads(out.read_text())
    assert report["workloads"]["bg"]["kpis"]["goodput_bytes_per_second"] > 0
    bg = report["admission"]["workloads"]["bg"]
    refused = bg["refused_flows"]  # (the parts refused: a 64 KiB message is one a plane)
    assert refused >= 10 and refused % 10 == 0  # each batch's tries, until there was room
    assert (
        f"  workload bg (bulk): {refused:,} flows ({format_bytes(bg['refused_bytes'])}), "
        "past the fabric-wide "
        "cap of 262,144 flows in flight; its senders took the slots back and tried again "
        "the next batch of 4 ticks (each try counted)"
    ) in r.stdout.splitlines()
    assert "its senders try again each batch of ticks" in r.stderr  # (the note before it)


def test_a_scenario_that_cannot_run_one_engine_per_plane_is_refused_clearly() -> None:
    r = fabtop("run", "tiny", "--duration", "10us", "--planes-distributed", timeout=120)
    assert r.returncode == 2
    assert "one engine per plane: the fabric has 1 plane" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert "Ray actor" not in r.stderr  # (it said they were starting, then refused)
    bad = fabtop("run", "planes-2", "--planes-distributed", "--plane-batch", "0", timeout=60)
    assert bad.returncode == 2 and "the batch must be between 1 and" in bad.stderr


@pytest.mark.parametrize("argv", [["run", "planes-2", "--duration", "10us"], ["--no-metrics"]])
def test_a_plane_batch_without_engines_per_plane_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """It was ignored silently: the run went on in one process."""
    from console.cli import main

    with pytest.raises(SystemExit) as exc:
        main([*argv, "--plane-batch", "4"] if argv[0] == "run" else ["--plane-batch", "4", *argv])
    assert exc.value.code == 2
    assert "--plane-batch needs --planes-distributed" in capsys.readouterr().err


async def test_a_fault_from_the_console_lands_on_its_plane() -> None:
    fabric = PlanedFabric(load_scenario("planes-2"), InProcessPool)
    src = SteppedSource(fabric, description="planes-2, one engine per plane")  # type: ignore[arg-type]
    src.step(20)
    app = FabtopApp(src, render_interval_s=0.05)  # type: ignore[arg-type]
    async with app.run_test(size=(140, 44)) as pilot:
        for _ in range(200):
            if app.view.snapshot is not None:
                break
            await asyncio.sleep(0.02)
        await pilot.press("i")
        assert isinstance(app.screen, FaultFormScreen)
        await pilot.press(*LINK, "enter")
        faults = app.query_one(FaultsPanel)
        for _ in range(200):
            if faults.row_count == 1:
                break
            await asyncio.sleep(0.02)
        assert faults.row_count == 1
        src.step(10)
        await asyncio.sleep(0.1)
    snap = src.latest()
    assert snap is not None
    names = snap.links.name
    down = sorted(names[i] for i, s in enumerate(snap.link_state.status) if s == LinkStatus.DOWN)
    assert down == [LINK, "p1spine01->p1leaf00"]
    engines = fabric.pool.engines  # type: ignore[attr-defined]
    assert [len(e.fabric.faults.active("link_down")) for e in engines] == [0, 1]
    fabric.close()


@pytest.mark.integration
def test_a_fault_over_mqtt_lands_on_its_plane(broker: Mosquitto) -> None:  # noqa: F811
    served = Served(broker.url, "planes", "--planes-distributed", scenario="planes-2")
    cli = broker.cli()
    try:
        served.wait_online(cli, timeout_s=240)
        # on a loaded machine the engines may take past the 10 s a reply waits: the reply
        # says so, and the same id again gives the command's own result (docs/MQTT.md)
        for _ in range(6):
            sub = cli.sub_start("fabtop/planes/result/op-1", count=1)
            cli.pub(
                "fabtop/planes/cmd/inject",
                json.dumps({"id": "op-1", "kind": "link_down", "target": LINK}),
            )
            (reply,) = cli.sub_collect(sub)
            if "did not apply the command within" not in (json.loads(reply[1]).get("error") or ""):
                break
        assert json.loads(reply[1])["ok"] is True, reply
        _, payload = cli.wait_for(
            "fabtop/planes/telemetry",
            lambda _t, p: any(f["target"] == LINK for f in json.loads(p)["faults"]),
            timeout_s=120,
        )
        tm = json.loads(payload)
        links = tm["links"]
        shown = dict(zip(links["name"], links["status"], strict=True))
        assert shown[LINK] == LinkStatus.DOWN
        assert all(s == LinkStatus.UP for n, s in shown.items() if n.startswith("p0"))
    finally:
        assert served.stop() == 0, served.output()
