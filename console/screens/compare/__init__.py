"""The compare view: two engines side by side, live (``CompareScreen``).

A module each: the screen and its keys (``screen``), an engine's panel (``sides``), the
difference table (``difference``), the fault timelines (``timelines``), the speed line
under them (``speed_line``), the tables both are laid out in (``grid``) and the panels'
sizing to their tables (``sizing``).
"""

from console.screens.compare.screen import CompareScreen

__all__ = ["CompareScreen"]
