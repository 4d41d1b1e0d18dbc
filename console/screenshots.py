"""Regenerate ``screenshots/*.svg`` from a seeded, hand-stepped run.

``python -m console.screenshots [--scenario tiny] [--out screenshots]`` runs the
scenario for a fixed number of ticks, injects a link-down fault, and saves the
main screen, the link detail screen, the fault dialog and the compare view.
The same scenario, seed and steps give the same pictures.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from console.app import FabtopApp
from console.stepped import SteppedSource
from fabric_core.commands import InjectFault
from fabric_core.fabric import Fabric
from fabric_core.scenario import load_scenario

SIZE = (150, 46)
WARMUP_TICKS = 400
FAULT_LINK = "leaf00->spine01"
#: The second fabric of the compare view (the RoCE profile replaces it once it exists).
COMPARE_PROFILES = ("native-400g", "roce-400g", "native-800g")


def stepped(scenario: str, profile: str | None = None) -> SteppedSource:
    """A seeded fabric for ``scenario`` (optionally on another profile)."""
    scn = load_scenario(scenario, profile=profile)
    return SteppedSource(Fabric.from_scenario(scn), description=f"seeded {scn.name}")


def compare_pair(scenario: str) -> tuple[SteppedSource, SteppedSource]:
    """The same scenario on the native profile and on the other one available."""
    from fabric_core.profiles import PROFILES

    other = next(p for p in COMPARE_PROFILES[1:] if p in PROFILES)
    return stepped(scenario, COMPARE_PROFILES[0]), stepped(scenario, other)


async def step_all(app: FabtopApp, sources: list[SteppedSource], ticks: int, samples: int) -> None:
    """Advance every source in ``samples`` steps, letting the app sample each one."""
    for _ in range(samples):
        for src in sources:
            src.step(ticks // samples)
        app.refresh_view()
        await asyncio.sleep(0)


async def shoot(scenario: str, out: Path) -> list[Path]:
    """Make the four screenshots; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    main = stepped(scenario)
    left, right = compare_pair(scenario)
    # The app's own timer must not add samples at wall-clock moments: render by hand.
    app = FabtopApp(
        main,
        metrics_address="127.0.0.1:9464",
        compare_sources=(left, right),
        render_interval_s=3600,
    )
    written: list[Path] = []

    def save(name: str) -> None:
        path = out / f"{name}.svg"
        app.save_screenshot(str(path))
        written.append(path)

    async with app.run_test(size=SIZE) as pilot:
        await step_all(app, [main, left, right], WARMUP_TICKS, 8)
        for src in (main, left, right):
            await src.submit(InjectFault(kind="link_down", target=FAULT_LINK, id="shot"))
        await step_all(app, [main, left, right], WARMUP_TICKS, 8)
        await pilot.pause()
        save("main")
        app.open_link(FAULT_LINK)
        await pilot.pause()
        app.refresh_view(force=True)
        await pilot.pause()
        save("link_detail")
        await pilot.press("escape")
        await pilot.press("i")
        await pilot.pause()
        await pilot.press(*"leaf01->spine00", "tab", "tab")
        await pilot.pause()
        save("fault_dialog")
        await pilot.press("escape")
        await pilot.press("c")
        await pilot.pause()
        app.screen.refresh_sides(force=True)  # type: ignore[attr-defined]
        await pilot.pause()
        save("compare")
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
