"""Snapshot tests of the console's screens (Textual is pinned exactly in pyproject.toml).

Each scene is the seeded ``tiny`` scenario stepped by hand (no engine thread, no
wall-clock figures on screen), exactly as ``python -m console.screenshots`` makes
the README's pictures. Update after an intended change with
``python -m pytest tests/test_console_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from console import screenshots


@pytest.mark.parametrize("name", screenshots.SCENES)
def test_screen(name: str, snap_compare: Any) -> None:
    app, sources = screenshots.make_app("tiny")
    run_before = partial(screenshots.scene, name, app, sources)
    assert snap_compare(app, terminal_size=screenshots.SIZE, run_before=run_before)
