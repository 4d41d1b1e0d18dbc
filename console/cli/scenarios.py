"""``fabtop scenarios``: list the bundled scenarios."""

from __future__ import annotations

import argparse
from typing import Any

from fabric_core.scenario import bundled_dir, list_scenarios


def register(sub: Any) -> None:
    """Add the ``scenarios`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser("scenarios", help="list the bundled scenarios")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print name and description of each bundled scenario."""
    rows = list_scenarios()
    width = max((len(n) for n, _ in rows), default=0)
    for name, desc in rows:
        print(f"{name:<{width}}  {desc}")
    print(f"\n(files in {bundled_dir()})")
    return 0
