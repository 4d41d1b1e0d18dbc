"""The header line: what fabric this is, how fast it runs, and in what state."""

from __future__ import annotations

from rich.text import Text

from console.compiling import Compiling, compiling_note
from console.fmt import fmt_seconds, fmt_speed
from console.widgets.text_view import TextView
from fabric_core.runtime.snapshot import Snapshot

FLOW_CONTROL_NAMES = {"credit": "native lossless (credit)", "pfc": "RoCE (PFC+ECN)"}


def state_label(
    snap: Snapshot | None, *, frozen: bool, compiling: Compiling | None = None
) -> tuple[str, str]:
    """(label, style) of the run state: frozen view wins over compiling, compiling over
    running / paused."""
    if frozen:
        return "❄ frozen view", "bold black on cyan"
    if compiling is not None:
        return "⧗ compiling", "bold black on magenta"
    if snap is None:
        return "… starting", "bold"
    if snap.running:
        return "▶ running", "bold black on green"
    return "⏸ paused", "bold black on yellow"


class StatusHeader(TextView):
    """Cluster, profile, simulated time, speed, state, active faults, exporter address."""

    DEFAULT_CSS = """
    StatusHeader { height: 1; background: $panel; }
    """

    def show(
        self,
        snap: Snapshot | None,
        *,
        frozen: bool,
        metrics_address: str | None,
        source: str,
        read_only: bool,
        compiling: Compiling | None = None,
    ) -> None:
        """Redraw from ``snap`` (None before the first snapshot); ``compiling``: what the
        engine's numba compiles now, if anything."""
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" fabtop ", "bold reverse")
        label, style = state_label(snap, frozen=frozen, compiling=compiling)
        # the state first: on a narrow terminal the end of the line is cut
        text.append(f" {label} ", style)
        if compiling is not None and not frozen:
            text.append(f" {compiling_note(compiling)} ", "magenta")
        if snap is not None:
            # what changes and what an operator acts on first (faults, time, speed), the
            # fabric's names after: an 80-column terminal cuts the end of the line
            n_faults = len(snap.active_faults)
            text.append(" ")
            text.append(f"faults {n_faults}", "bold red" if n_faults else "")
            text.append(f" │ sim {fmt_seconds(snap.sim_time_s)} · tick {fmt_seconds(snap.dt_s)} ")
            speed = f"speed {fmt_speed(snap.target_speed)}"
            if snap.measured_speed > 0:
                speed += f" (now {fmt_speed(snap.measured_speed)})"
            text.append(f"│ {speed} ")
            fc = FLOW_CONTROL_NAMES.get(snap.flow_control, snap.flow_control)
            text.append(f"│ {snap.cluster} ", "bold")
            text.append(f"│ {snap.profile} · {fc} ")
        text.append(f"│ metrics {metrics_address or 'off'} │ {source}")
        if read_only:
            text.append(" │ ")
            text.append("read-only", "bold magenta")
        self.show_text(text)
