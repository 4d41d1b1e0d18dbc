"""Regenerate ``screenshots/*.svg`` from a seeded, hand-stepped run.

``python -m console.screenshots [--scenario tiny] [--out screenshots]`` runs the
scenario for a fixed number of ticks, injects a link-down fault, and saves the
main screen, the link detail screen, the fault dialog, the compare view and help.
The same scenario, seed and steps give the same pictures.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from textual.pilot import Pilot

from console.app import FabtopApp
from console.stepped import SteppedSource
from fabric_core.commands import InjectFault
from fabric_core.runtime.fabric import Fabric
from fabric_core.runtime.scenario import load_scenario

SIZE = (200, 60)  # the size issue 16 checked the layout at
WARMUP_TICKS = 120
FAULT_LINK = "leaf00->spine01"
#: The second fabric of the compare view (the RoCE profile replaces it once it exists).
COMPARE_PROFILES = ("native-400g", "roce-400g", "native-800g")


def stepped(scenario: str, profile: str | None = None) -> SteppedSource:
    """A seeded fabric for ``scenario`` (optionally on another profile)."""
    scn = load_scenario(scenario, profile=profile)
    return SteppedSource(Fabric.from_scenario(scn), description=f"seeded {scn.name}")


def compare_pair(scenario: str) -> tuple[SteppedSource, SteppedSource]:
    """The same scenario on the native profile and on the other one available."""
    from fabric_core.net.profiles import PROFILES

    other = next(p for p in COMPARE_PROFILES[1:] if p in PROFILES)
    return stepped(scenario, COMPARE_PROFILES[0]), stepped(scenario, other)


async def step_all(app: FabtopApp, sources: list[SteppedSource], ticks: int, samples: int) -> None:
    """Advance every source in ``samples`` steps, letting the app sample each one."""
    for _ in range(samples):
        for src in sources:
            src.step(ticks // samples)
        app.refresh_view()
        await asyncio.sleep(0)


def make_app(scenario: str = "tiny") -> tuple[FabtopApp, list[SteppedSource]]:
    """The app over seeded, hand-stepped sources (main, and the compare pair)."""
    main = stepped(scenario)
    left, right = compare_pair(scenario)
    # The app's timer must not sample at wall-clock moments: the scenes render by hand.
    app = FabtopApp(
        main,
        metrics_address="127.0.0.1:9464",
        compare_sources=(left, right),
        render_interval_s=3600,
    )
    return app, [main, left, right]


async def warm_up(app: FabtopApp, sources: list[SteppedSource]) -> None:
    """Run every fabric, inject a link down on ``FAULT_LINK``, run on (same steps every time)."""
    await step_all(app, sources, WARMUP_TICKS, 8)
    for src in sources:
        await src.submit(InjectFault(kind="link_down", target=FAULT_LINK, id="shot"))
    await step_all(app, sources, WARMUP_TICKS, 8)


async def scene(
    name: str, app: FabtopApp, sources: list[SteppedSource], pilot: Pilot[None]
) -> None:
    """Bring the app to the scene ``name`` (one of ``SCENES``)."""
    # Only the compare view shows the compare pair: the other scenes need not run it.
    await warm_up(app, sources if name == "compare" else sources[:1])
    await pilot.pause()
    if name == "link_detail":
        app.open_link(FAULT_LINK)
        await pilot.pause()
        app.refresh_view(force=True)
    elif name == "fault_dialog":
        await pilot.press("i", *"leaf01->sp", "tab", "tab")  # Tab completes, then moves on
    elif name == "compare":
        await pilot.press("c")
        await pilot.pause()
        app.screen.refresh_sides(force=True)  # type: ignore[attr-defined]
    elif name == "help":
        await pilot.press("question_mark")
    await pilot.pause()


SCENES = ("main", "link_detail", "fault_dialog", "compare", "help")


async def shoot(scenario: str, out: Path) -> list[Path]:
    """Save one SVG per scene; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name in SCENES:
        app, sources = make_app(scenario)
        async with app.run_test(size=SIZE) as pilot:
            await scene(name, app, sources, pilot)
            path = out / f"{name}.svg"
            app.save_screenshot(str(path))
            written.append(path)
    return written


def main() -> None:
    """Command-line entry: ``python -m console.screenshots``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scenario", default="tiny")
    parser.add_argument("--out", type=Path, default=Path("screenshots"))
    args = parser.parse_args()
    for path in asyncio.run(shoot(args.scenario, args.out)):
        print(path)


if __name__ == "__main__":
    main()
