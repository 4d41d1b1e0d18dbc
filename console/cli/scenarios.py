"""``fabtop scenarios [NAME]``: list the bundled scenarios, or print one's file (to read
what it runs, or to copy it as the start of one's own)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from console.claims import spell_out_claims
from fabric_core.commands import unknown
from fabric_core.runtime.scenario import bundled_dir, list_scenarios


def register(sub: Any) -> None:
    """Add the ``scenarios`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "scenarios",
        help="list the bundled scenarios, or print one's file",
        description="List the bundled scenarios; with NAME, print that scenario's file "
        "(e.g. fabtop scenarios tiny > mine.toml, then edit it and fabtop run mine.toml).",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="a bundled scenario to print")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print name and description of each bundled scenario, or one scenario's file."""
    rows = list_scenarios()
    if args.name is not None:
        return show(args.name, [name for name, _ in rows])
    width = max((len(n) for n, _ in rows), default=0)
    for name, desc in rows:
        print(f"{name:<{width}}  {spell_out_claims(desc)}")
    print(f"\n(files in {bundled_dir()})")
    print(
        "(article claims: what a vendor article on scaleFabric, a native lossless RDMA "
        "fabric, says; fabtop measures each against RoCE: README, docs/MODEL.md)"
    )
    return 0


def show(name: str, names: list[str]) -> int:
    """Print the file of the bundled scenario ``name`` (exit 2, with the names, if none)."""
    if name not in names:
        print(
            f"fabtop scenarios: error: {unknown('scenario', name, names)}; bundled: "
            f"{', '.join(names)}",
            file=sys.stderr,
        )
        return 2
    print((bundled_dir() / f"{name}.toml").read_text(), end="")
    return 0
