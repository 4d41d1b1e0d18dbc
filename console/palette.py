"""Command palette provider (ctrl+p): fault injection, clearing, pause, freeze, sort, ports.

Per-link commands ("Inject link down on leaf03->spine01") are generated only
for links whose name contains the last word typed (or, before a link name is
typed, for the links in the table), so the palette stays quick on a 10k-link
fabric.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from console.faultkinds import fault_kinds
from console.linkview import SORT_ORDER
from console.widgets.links_table import column_label
from fabric_core.commands import ClearFault, InjectFault

if TYPE_CHECKING:
    from console.app import FabtopApp

MAX_LINK_CANDIDATES = 200


class FabricCommands(Provider):
    """See the module docstring."""

    @property
    def fabtop(self) -> FabtopApp:
        """The app, typed."""
        return cast("FabtopApp", self.app)

    def _general(self) -> Iterator[tuple[str, str, Callable[[], object]]]:
        app = self.fabtop
        snap = app.view.snapshot
        writable = not app.read_only
        if writable:
            yield "Clear all faults", "asks first", app.action_clear_all
            yield "Inject a fault…", "open the fault form", app.action_inject
            # (as the footer's p says: the one record, which a frozen view's snapshot is not)
            yield (
                ("Resume emulation", "let simulated time run", app.action_toggle_pause)
                if app.pauses.paused(app.source)
                else ("Pause emulation", "stop simulated time", app.action_toggle_pause)
            )
        freeze = "Unfreeze view" if app.frozen else "Freeze view"
        yield freeze, "the emulation keeps running", app.action_toggle_freeze
        for column in SORT_ORDER:
            label = column_label(column, app.links_table.flow_control)
            yield (
                f"Sort links by {label}",
                "hottest first",
                partial(app._set_sort, column, reverse=False),
            )
        yield "Compare native and RoCE", "side by side", app.action_compare
        yield "Help: keys", "every key of the console", app.action_help
        if writable and snap is not None:
            for fault in snap.active_faults:
                yield (
                    f"Clear fault {fault.id} ({fault.kind} on {fault.target})",
                    "clear this fault",
                    partial(app._send_in_background, ClearFault(fault_id=fault.id)),
                )

    def _per_target(self, query: str) -> Iterator[tuple[str, str, Callable[[], object]]]:
        app = self.fabtop
        snap = app.view.snapshot
        if snap is None:
            return
        word = query.split()[-1].lower() if query.split() else ""
        links = [n for n in snap.links.name if word in n.lower()][:MAX_LINK_CANDIDATES]
        if not links or len(word) < 3:
            links = app.links_table.links_shown
        nodes = [n for n in snap.nodes.name if word in n.lower()][:MAX_LINK_CANDIDATES]
        switch_names = [n for n in nodes if snap.nodes.kind[snap.nodes.index[n]] == "switch"]
        for link in links:
            yield f"Open link {link}", "link detail", partial(app.open_link, link)
        if app.read_only:
            for name in switch_names:
                yield (
                    f"Show ports of {name}",
                    "filter the links table",
                    partial(app.set_filter, name),
                )
            return
        for kind in fault_kinds():
            words = kind.name.replace("_", " ")
            if kind.target == "link":
                for link in links:
                    if kind.name == "link_down":
                        cmd = InjectFault(kind=kind.name, target=link)
                        action: Callable[[], object] = partial(app._send_in_background, cmd)
                        yield f"Inject {words} on {link}", "injects now, no form", action
                    else:
                        action = partial(app.action_inject, link, kind.name)
                        yield f"Inject {words} on {link}…", "open the form", action
            elif kind.target == "switch":
                for name in switch_names:
                    yield (
                        f"Inject {words} on {name}…",
                        "open the form (asks for parameters)",
                        partial(app.action_inject, name, kind.name),
                    )
        for name in switch_names:
            yield f"Show ports of {name}", "filter the links table", partial(app.set_filter, name)

    async def discover(self) -> Hits:
        """The general commands, shown before anything is typed."""
        for text, help_text, action in self._general():
            yield DiscoveryHit(text, action, help=help_text)

    async def search(self, query: str) -> Hits:
        """General and per-target commands that fuzzily match ``query``."""
        matcher = self.matcher(query)
        for source in (self._general(), self._per_target(query)):
            for text, help_text, action in source:
                score = matcher.match(text)
                if score > 0:
                    yield Hit(score, matcher.highlight(text), action, text=text, help=help_text)
