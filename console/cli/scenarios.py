"""``fabtop scenarios``: list the bundled scenarios."""

from __future__ import annotations

import argparse
from typing import Any

from console.claims import spell_out_claims
from fabric_core.runtime.scenario import bundled_dir, list_scenarios


def register(sub: Any) -> None:
    """Add the ``scenarios`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser("scenarios", help="list the bundled scenarios")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print name and description of each bundled scenario."""
    rows = list_scenarios()
    width = max((len(n) for n, _ in rows), default=0)
    for name, desc in rows:
        print(f"{name:<{width}}  {spell_out_claims(desc)}")
    print(f"\n(files in {bundled_dir()})")
    print(
        "(article claims: what a vendor article on scaleFabric, a native lossless RDMA "
        "fabric, says; fabtop measures each against RoCE: README, docs/MODEL.md)"
    )
    return 0
