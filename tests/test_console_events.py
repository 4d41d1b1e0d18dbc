"""The events panel at the widths terminals have: an entry whose target does not fit on its
line goes on two, so no target is cut (``console.widgets.event_log_view``)."""

from __future__ import annotations

from pathlib import Path

from console.app import FabtopApp
from console.cli._common import unit_warnings
from console.stepped import SteppedSource
from console.widgets.event_log_view import TWO_LINES_BELOW
from fabric_core.commands import InjectFault
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario
from tests.helpers import settle

LINK = "leaf00->spine01"


def faulted_source() -> SteppedSource:
    src = SteppedSource(Fabric.from_scenario(load_scenario("tiny")))
    src.engine.fabric.apply(InjectFault(kind="link_down", target=LINK))
    src.step(400)  # detected, rerouted
    return src


async def test_a_narrow_events_panel_puts_the_target_under_the_kind() -> None:
    app = FabtopApp(faulted_source(), render_interval_s=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.event_log
        await settle(pilot, lambda: "fault_detected" in view.text.plain)
        assert 0 < view.size.width < TWO_LINES_BELOW  # the case: 33 columns at 120
        lines = view.text.plain.splitlines()
        assert len(lines) <= view.size.height
        heads = [i for i, line in enumerate(lines) if "fault_" in line]
        assert heads and all(lines[i + 1].split()[0] == LINK for i in heads)
        assert lines[0] == lines[heads[0]]  # whole entries only: none begins cut off
        # the target is whole within the panel (the line's end is cut at the panel's edge)
        assert all(line.index(LINK) + len(LINK) <= view.size.width for line in lines[1::2])

        await pilot.resize_terminal(180, 40)  # room for one line an entry again
        await settle(pilot, lambda: view.size.width >= TWO_LINES_BELOW)
        await settle(
            pilot,
            lambda: all(LINK in line for line in view.text.plain.splitlines() if "fault_" in line),
        )
        assert LINK not in view.text.plain.splitlines()[1].split()[:1]  # no second lines


async def test_a_narrow_panels_second_line_gives_the_message_room() -> None:
    """At 100 columns the second line put the target under the kind, padded to 18: the
    message had no room left, and every entry ended in "…" after its target."""
    app = FabtopApp(faulted_source(), render_interval_s=0.05)
    async with app.run_test(size=(100, 40)) as pilot:
        view = app.event_log
        await settle(pilot, lambda: "fault_detected" in view.text.plain)
        lines = view.text.plain.splitlines()
        (head,) = [i for i, line in enumerate(lines) if "fault_detected" in line]
        second = lines[head + 1]
        assert second.startswith(f"  {LINK}  ")
        (event,) = [e for e in app.source.latest().events if e.kind == "fault_detected"]  # type: ignore[union-attr]
        shown = second.removeprefix(f"  {LINK}  ").rstrip("…")
        assert len(shown) >= 5 and event.message.startswith(shown)


def _scenario_file(tmp_path: Path, workload: str, fault: str = "") -> str:
    path = tmp_path / "lab.toml"
    path.write_text(
        'name = "lab"\nprofile = "native-400g"\nseed = 1\ndt = "1us"\n'
        '[topology]\nkind = "leaf-spine"\nleaves = 2\nspines = 2\ngpus_per_leaf = 8\n'
        f'[[workload]]\nname = "bg"\nkind = "bulk"\nsize = "64KiB"\n{workload}\n{fault}'
    )
    return str(path)


async def test_the_scenarios_warnings_are_on_screen_as_the_console_opens(
    tmp_path: Path,
) -> None:
    """They go to stderr before the screen opens, which hides them until the operator
    quits: a duration without a unit (a fault of 5 s meant as 5 ms) is shown on the screen
    too."""
    path = _scenario_file(
        tmp_path,
        "",
        '[[fault]]\nkind = "link_down"\ntarget = "leaf00->spine00"\nat = "10us"\nduration = 5\n',
    )
    scn = load_scenario(path)
    warnings = unit_warnings(scn)
    assert warnings == [
        f"{path}: fault[0].duration = 5 has no unit, so it is 5 s (a duration without a unit "
        'is seconds): write the unit, duration = "5s" if that is meant, or "5ms", "5us"',
    ]
    fabric = Fabric.from_scenario(scn)
    app = FabtopApp(SteppedSource(fabric), render_interval_s=0.05, warnings=warnings)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot, lambda: len(app._notifications) == 1)
        (shown,) = app._notifications
        assert (shown.title, shown.message, shown.severity) == (
            "scenario warning",
            warnings[0],
            "warning",
        )
        assert shown.timeout >= 30  # (time to read it)


def test_a_scenario_without_warnings_shows_none(tmp_path: Path) -> None:
    assert unit_warnings(load_scenario(_scenario_file(tmp_path, ""))) == []
    assert unit_warnings(load_scenario("default")) == []
