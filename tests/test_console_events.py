"""The events panel at the widths terminals have: an entry whose target does not fit on its
line goes on two, so no target is cut (``console.widgets.event_log_view``)."""

from __future__ import annotations

from console.app import FabtopApp
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
