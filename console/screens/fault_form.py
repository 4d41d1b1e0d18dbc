"""The fault injection form: kind, target (with completion), parameters, duration.

The form checks what it can before sending (a target that exists and fits the
kind, parameters of the form ``name=value``, a positive duration) and shows the
core's reply when the core refuses; it closes only once a fault is injected.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Collection
from typing import ClassVar

import numpy as np
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Label, Select, Static

from console.faultkinds import FaultKind, fault_kinds, kind_named
from console.targets import normalise_target, typed_spellings
from fabric_core.commands import Command, CommandError, CommandResult, InjectFault, shown, unknown
from fabric_core.faults.book import link_not_node, not_of_sort
from fabric_core.runtime.snapshot import Snapshot
from fabric_core.units import parse_duration as parse_quantity

MAX_DURATION_S = 1e6
#: An example value per parameter name for the placeholder (the hint gives the range).
PARAM_EXAMPLES = {
    "ber": "1e-6",
    "period_s": "0.001",
    "rate": "0.1",
    "slowdown": "2",
    "factor": "10",
    "hang": "1",
}


def parse_params(text: str) -> dict[str, float | str]:
    """``ber=1e-6 factor=2`` (spaces or commas between) -> ``{"ber": 1e-06, "factor": 2.0}``."""
    params: dict[str, float | str] = {}
    for item in text.replace(",", " ").split():
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise CommandError(f"parameter {shown(item)} must look like name=value (e.g. ber=1e-6)")
        if name in params:
            raise CommandError(f"parameter {shown(name)} is given twice")
        try:
            number = float(value)
        except ValueError:
            params[name] = value
            continue
        if not math.isfinite(number):
            raise CommandError(
                f"parameter {shown(name)} must be a finite number, got {shown(value)}"
            )
        params[name] = number
    return params


def parse_duration(text: str) -> float | None:
    """Seconds of simulated time from ``5ms`` (a unit is needed, as on the command line);
    empty means "until cleared"."""
    text = text.strip()
    if not text:
        return None
    if text.startswith("-"):
        raise CommandError(f"duration must be positive, got {text!r}")
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        if not number > 0:
            raise CommandError(f"duration must be positive, got {shown(text)}")
        raise CommandError(f"duration {shown(text)} needs a unit (ns, us, ms, s): e.g. {text}ms")
    try:
        value = parse_quantity(text)
    except ValueError:
        raise CommandError(
            f"duration must be a positive time with a unit (5ms, 250us, 1s), got {text!r}"
        ) from None
    if value > MAX_DURATION_S:
        raise CommandError(f"duration must be at most {MAX_DURATION_S:g} s, got {text!r}")
    return value


class CompletingInput(Input):
    """An ``Input`` where Tab takes the suggestion shown (and moves on when there is none)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("tab", "complete", "Complete", show=False, priority=True)
    ]

    def action_complete(self) -> None:
        """Accept the suggested completion, or focus the next field."""
        suggestion = self._suggestion
        if suggestion and suggestion != self.value:
            self.value = suggestion
            self.cursor_position = len(suggestion)
        else:
            self.screen.focus_next()


def nodes_of_sort(snap: Snapshot, sort: str) -> list[str]:
    """The names of the fabric's nodes of ``sort`` (``gpu``, ``switch``, ...; ``node``: all)."""
    return [
        name
        for name, kind in zip(snap.nodes.name, snap.nodes.kind, strict=True)
        if sort in ("node", kind)
    ]


def check_target(
    kind: FaultKind,
    target: str,
    snap: Snapshot | None,
    link_names: Collection[str] | None = None,
) -> None:
    """Raise if ``target`` is not a name of the right sort in this fabric.

    ``link_names``: every link of the fabric when the snapshot holds only some of them
    (a remote console sees the top links; its source knows them all).
    """
    if not target:
        raise CommandError(f"{kind.name} needs a target")
    if snap is None:
        return  # no fabric seen yet: the core will check
    if kind.target == "link":
        known = link_names if link_names else snap.links.index
        if target not in known:
            ni = snap.nodes.index.get(target)
            if ni is not None:  # a node where a link is needed: one of its links
                (first, *_) = np.flatnonzero(snap.links.src == ni)
                found = snap.nodes.kind[ni]
                raise CommandError(
                    not_of_sort(kind.name, target, "link", found, snap.links.name[first])
                )
            raise unknown("link", target, known)
        return
    if target not in snap.nodes.index:  # (suggested from its sort: a GPU, not 'spine00')
        of_sort = nodes_of_sort(snap, kind.target)
        if target in (link_names or snap.links.index) and of_sort:  # a link, not a node
            ends = [n for n in target.split("->") if n in of_sort]
            raise CommandError(link_not_node(kind.name, target, kind.target, (ends or of_sort)[0]))
        raise unknown(kind.target, target, of_sort)
    node_kind = snap.nodes.kind[snap.nodes.index[target]]
    if kind.target in ("switch", "gpu", "storage") and node_kind != kind.target:
        raise CommandError(not_of_sort(kind.name, target, kind.target, node_kind))


def build_inject(
    kind_name: str,
    target: str,
    params: str,
    duration: str,
    snap: Snapshot | None,
    link_names: Collection[str] | None = None,
) -> InjectFault:
    """The command the form describes, or ``CommandError`` saying what is wrong."""
    kind = kind_named(kind_name)
    if kind is None:
        raise unknown("fault kind", kind_name, [k.name for k in fault_kinds()])
    target = normalise_target(target)
    check_target(kind, target, snap, link_names)
    return InjectFault(
        kind=kind.name,
        target=target,
        params=parse_params(params),
        duration_s=parse_duration(duration),
    )


class FaultFormScreen(ModalScreen[CommandResult | None]):
    """See the module docstring. Dismisses with the core's result, or None if cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    FaultFormScreen { align: center middle; }
    FaultFormScreen > VerticalScroll {
        width: 76; height: auto; max-height: 100%; border: thick $error; background: $surface;
        padding: 1 2;
    }
    FaultFormScreen Label { margin-top: 1; }
    FaultFormScreen #error { color: $error; text-style: bold; margin-top: 1; height: auto; }
    FaultFormScreen #hint { color: $text-muted; height: auto; }
    FaultFormScreen Horizontal { height: auto; margin-top: 1; }
    FaultFormScreen Button { margin-right: 2; }
    """

    def __init__(
        self,
        submit: Callable[[Command], Awaitable[CommandResult]],
        snapshot: Snapshot | None,
        *,
        target: str = "",
        kind: str = "link_down",
        title: str = "Inject a fault",
        link_names: Collection[str] | None = None,
    ) -> None:
        super().__init__()
        self._submit = submit
        self._snapshot = snapshot
        self._link_names = link_names
        self._target = target
        self._kind = kind
        self._title = title
        self._confirmed: tuple[str, str] | None = None
        #: a command is on its way: another Enter must not send it again (a quick double
        #: Enter injected two faults and then dismissed the form twice, which crashed)
        self._sending = False

    def compose(self) -> ComposeResult:
        kinds = [(k.name, k.name) for k in fault_kinds()]
        initial_kind = self._kind if any(k == self._kind for _, k in kinds) else kinds[0][1]
        # scrolls where the terminal is shorter than the form (80x24): the error line is
        # scrolled into view whenever it changes
        with VerticalScroll():
            yield Static(f"[b]{self._title}[/b]")
            yield Label("Kind")
            yield Select(kinds, value=initial_kind, allow_blank=False, id="kind")
            yield Label("Target (link, switch, GPU, storage; Tab takes the suggestion)")
            yield CompletingInput(
                self._target,
                placeholder="leaf00->spine01 (or leaf00:spine01)",
                suggester=SuggestFromList(self._names_for(initial_kind), case_sensitive=False),
                id="target",
            )
            yield Label("Parameters (name=value …)")
            yield Input(id="params")
            yield Static(id="hint")
            yield Label("Duration, simulated time with a unit (empty: until cleared)")
            yield Input(placeholder="e.g. 5ms, 250us, 1s", id="duration")
            yield Static(id="error")
            with Horizontal():
                yield Button("Inject", variant="error", id="inject")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self._show_hint(str(self.query_one("#kind", Select).value))
        self.query_one("#target", Input).focus()

    @on(Select.Changed, "#kind")
    def _kind_changed(self, event: Select.Changed) -> None:
        self._show_hint(str(event.value))

    def _names_for(self, kind_name: str) -> list[str]:
        """What Tab may complete a target to: names of the sort the kind targets (a GPU
        kind's target completed to a link, ``gpu0001->leaf00``, before)."""
        snap = self._snapshot
        if snap is None:
            return []
        kind = kind_named(kind_name)
        wanted = "node" if kind is None else kind.target
        if wanted == "link":
            return typed_spellings(list(snap.links.name))
        return nodes_of_sort(snap, wanted)

    def _show_hint(self, kind_name: str) -> None:
        self.query_one("#target", Input).suggester = SuggestFromList(
            self._names_for(kind_name), case_sensitive=False
        )
        kind = kind_named(kind_name)
        hint = ""
        if kind is not None:
            hint = f"{kind.help}; " if kind.help else ""
            hint += f"targets a {kind.target}"
            if kind.params:
                hint += "; parameters: " + ", ".join(f"{n} ({h})" for n, h in kind.params)
        self.query_one("#hint", Static).update(hint)
        self.query_one("#error", Static).update("")  # (the last kind's error)
        params = self.query_one("#params", Input)
        if kind is not None and kind.params:
            name, hint = kind.params[0]
            example = PARAM_EXAMPLES.get(name) or hint.split(",")[0].removeprefix("default ")
            params.placeholder = f"e.g. {name}={example}"
            params.disabled = False
        else:
            params.placeholder = "this kind takes no parameters"
            params.value = ""
            params.disabled = True

    @on(Input.Submitted)
    @on(Button.Pressed, "#inject")
    async def _inject(self) -> None:
        if self._sending:
            return
        error = self.query_one("#error", Static)
        try:
            cmd = build_inject(
                str(self.query_one("#kind", Select).value),
                self.query_one("#target", Input).value,
                self.query_one("#params", Input).value,
                self.query_one("#duration", Input).value,
                self._snapshot,
                self._link_names,
            )
        except CommandError as exc:
            self._say(f"✗ {exc}")
            return
        kind = kind_named(cmd.kind)
        confirm_key = (cmd.kind, cmd.target)
        if kind is not None and kind.destructive and self._confirmed != confirm_key:
            # Two steps for what takes a whole switch down: say so, inject on the second press.
            self._confirmed = confirm_key
            self._say(
                f"⚠ {cmd.kind} takes {cmd.target} and all its links down: "
                "press Inject again to confirm"
            )
            return
        error.update("sending…")
        self._sending = True
        try:
            result = await self._submit(cmd)
        finally:
            self._sending = False
        if not result.ok:
            self._say(f"✗ {result.error}")
            return
        self._sending = True  # for good: the form is closing
        self.dismiss(result)

    def _say(self, text: str) -> None:
        """Show ``text`` on the error line, scrolled into view."""
        error = self.query_one("#error", Static)
        error.update(text)
        error.scroll_visible(animate=False)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        """Close without injecting anything."""
        self.dismiss(None)
