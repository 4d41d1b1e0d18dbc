"""The progress line of long headless runs (``console.cli.progress``), and what it says
while the first run after an install compiles the kernels."""

from __future__ import annotations

import io

from console.cli.progress import ProgressBar
from console.cli.run import compile_progress_note


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as the bar draws only on one."""

    def isatty(self) -> bool:
        return True


def last_line(stream: io.StringIO) -> str:
    return stream.getvalue().split("\r")[-1].rstrip()


def test_a_note_shows_at_once_after_the_figures_and_goes_at_the_next_update() -> None:
    out = Terminal()
    bar = ProgressBar("run default", stream=out, total_s=1e-3)
    bar.note(compile_progress_note("solve_tick"))
    line = last_line(out)
    assert line.startswith("run default [")
    assert "0%" in line and "/ 1 ms" in line  # the run's length, known before any tick
    assert line.endswith("compiling solve_tick (the first run after an install: cached after)")
    bar.note(compile_progress_note("move_step"))  # the next kernel: drawn at once, not throttled
    assert "compiling move_step" in last_line(out)
    bar.note(compile_progress_note(None))  # done: no redraw of its own (no flicker between two)
    assert "compiling move_step" in last_line(out)
    bar.update(1e-3, 1e-3)
    assert "compiling" not in last_line(out) and "100%" in last_line(out)


def test_nothing_is_drawn_off_a_terminal() -> None:
    out = io.StringIO()
    bar = ProgressBar("run default", stream=out, total_s=1e-3)
    bar.note(compile_progress_note("solve_tick"))
    bar.update(1e-3, 1e-3)
    bar.close()
    assert out.getvalue() == ""
