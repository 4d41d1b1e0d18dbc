"""The console's number formats: three significant digits in the largest unit reached."""

from __future__ import annotations

import pytest

from console.fmt import fmt_bitrate, fmt_bytes, fmt_seconds
from console.screens.compare.difference import ratio


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (1.07, "1.07 s"),
        (0.9994, "999 ms"),
        # rounds up to a whole unit: the next one (the compare view's fault timeline showed
        # a reroute at 999.99 ms as "+1e+03 ms")
        (0.99999, "1 s"),
        (999.99e-9, "1 µs"),
        (2.5e-6, "2.5 µs"),
        (0.5e-9, "0.5 ns"),
        (0.0, "0 s"),
        (float("nan"), "—"),
    ],
)
def test_fmt_seconds(seconds: float, text: str) -> None:
    assert fmt_seconds(seconds) == text


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (512, "512 B"),
        (3 * 1024**3, "3 GiB"),
        (1023.9 * 1024, "1 MiB"),  # 1,023.9 KiB rounds to 1.02e+03 KiB: one MiB
        (1_040_000, "0.992 MiB"),  # 1,015.6 KiB, shown as the MiB it nearly is
    ],
)
def test_fmt_bytes(size: float, text: str) -> None:
    assert fmt_bytes(size) == text


def test_fmt_bitrate_goes_up_a_unit_at_a_rounded_thousand() -> None:
    assert fmt_bitrate(400e9 / 8) == "400 Gb/s"
    assert fmt_bitrate(999.99e9 / 8) == "1 Tb/s"
    # past the largest unit: whole numbers, not 2.02e+03 (cluster-100k-4plane's throughput)
    assert fmt_bitrate(2.02e15 / 8) == "2,020 Tb/s"


def test_the_cli_reports_and_events_format_a_thousand_of_a_unit_as_the_console_does() -> None:
    """``fabtop run`` printed "(2.02e+03 Tb/s)" and a reroute event "1.01e+03 KiB lost and
    resent": the core's formats lacked the console's step up to the next unit."""
    from fabric_core.units import format_bytes, format_duration, format_rate

    assert format_bytes(1010 * 1024) == fmt_bytes(1010 * 1024) == "0.986 MiB"
    assert format_rate(2.02e15 / 8) == "2,020 Tb/s"
    assert format_duration(999.99e-3) == "1 s" and format_duration(999.7e-9) == "1 µs"
    assert format_bytes(5000 * 1024**4) == "5,000 TiB"


def test_the_compare_views_ratio_drops_its_decimals_from_a_hundred_on() -> None:
    assert ratio(2.0, 3.26).plain == "×1.63"
    assert ratio(8.69e-6, 8.69e-6 * 119_355.4).plain == "×119,355"  # a probe's ACK wait
    assert ratio(1.0, 99.994).plain == "×99.99"
    assert ratio(1.0, 2.0).style == "bold red" and ratio(2.0, 1.0).style == "bold green"
    assert ratio(0.0, 1.0).plain == "—"
    assert ratio(901e-6, 3.96e-6).plain == "×0.0044"  # read ×0.00 before
    assert ratio(1.0, 0.25).plain == "×0.25"


def test_a_class_that_completed_nothing_lately_is_marked_stalled_not_shown_as_now() -> None:
    """A RoCE link down, before BFD sees it: the class's last p99 stayed on screen as if
    measured now, and its ratio against the other fabric read "RoCE better"."""
    from console.latency import ClassLatency
    from console.widgets.latency_panel import class_line

    waiting = ClassLatency("bulk", 47e-6, 59e-6, 80e-6, 0, ())
    fresh = ClassLatency("bulk", 47e-6, 59e-6, 80e-6, 12, ())
    idle = ClassLatency("bulk", float("nan"), float("nan"), float("nan"), 0, ())
    assert waiting.stalled and not fresh.stalled and not idle.stalled
    assert class_line(waiting).plain.endswith("none done lately")
    assert "none done" not in class_line(fresh).plain


def test_the_difference_table_says_stalled_instead_of_a_ratio() -> None:
    from rich.console import Console

    from console.latency import ClassLatency
    from console.screens.compare.difference import difference_table
    from console.viewstate import FabricView

    left, right = FabricView(), FabricView()
    left.latency = {"bulk": ClassLatency("bulk", 80e-6, 1.35e-3, 2e-3, 40, ())}
    right.latency = {"bulk": ClassLatency("bulk", 47.7e-6, 58.8e-6, 80e-6, 0, ())}
    console = Console(width=120, record=True)
    console.print(difference_table(left, right))
    row = next(line for line in console.export_text().splitlines() if line.startswith("bulk"))
    assert row.split()[-2:] == ["none", "done"] and "×0.04" not in row


def test_a_compare_value_breaks_between_its_items_not_inside_one() -> None:
    """The compare view's values wrap at its side's width between their " · " items, so a
    figure stays with its name and unit; an item wider than a line wraps by words."""
    from rich.console import Console
    from rich.text import Text

    from console.screens.compare.sides import wrap_value

    console = Console(width=80)

    def lines(value: str | Text, width: int) -> list[str]:
        return [line.plain.rstrip() for line in wrap_value(value, width, console)]

    # (the default scenario's rows at 120 columns, where words were split before)
    assert lines("784 · down 0 · degraded 0 · starved 176", 38) == [
        "784 · down 0 · degraded 0",
        "starved 176",
    ]
    assert lines("flows in flight 128 · goodput 5.48 Tb/s", 38) == [
        "flows in flight 128",
        "goodput 5.48 Tb/s",
    ]
    assert lines("pauses/s 0 · ECN/s 10.3M · drops 0 b/s", 37) == [
        "pauses/s 0 · ECN/s 10.3M",
        "drops 0 b/s",
    ]
    assert lines("pauses/s 0 · ECN/s 0 · drops 0 b/s", 38) == ["pauses/s 0 · ECN/s 0 · drops 0 b/s"]
    assert lines("an item longer than the line · x", 12) == [
        "an item",
        "longer than",
        "the line · x",  # (its last line goes on with the items after it)
    ]
    # a styled value keeps its style on every line, separators included
    dim = wrap_value(Text("p50 · p99 · p99.9", style="dim"), 9, console)
    assert [line.plain for line in dim] == ["p50 · p99", "p99.9"]
    assert all(line.style == "dim" for line in dim)
    assert lines("", 38) == [""]


def test_a_class_line_keeps_every_unit_in_a_100_column_terminals_panel() -> None:
    """At 100 columns the panel holds 47 characters a class: the p99.9 lost its unit
    ("p99.9  1.25") when each figure took 8 and the line 50."""
    from console.latency import ClassLatency
    from console.widgets.latency_panel import LINE_WIDTH, class_line

    for p50, p99, p999 in ((12.8e-6, 17.6e-6, 19.8e-6), (77.9e-6, 1.34e-3, 1.25e-3), (1, 10, 999)):
        line = class_line(ClassLatency("alltoall", p50, p99, p999, 5, ())).plain
        assert len(line) <= LINE_WIDTH <= 47, line
        assert line.count("µs") + line.count("ms") + line.count(" s") == 3, line


def test_a_workloads_goodput_says_it_is_since_the_start() -> None:
    """Its KPI is bytes delivered over the run's time: after a fault it stayed above the
    fabric's throughput now (a window), with nothing to tell the two apart."""
    from console.fmt import fmt_kpi, kpi_label

    assert kpi_label("goodput_bytes_per_second") == "goodput since start"
    assert fmt_kpi("goodput_bytes_per_second", 5.48e12 / 8) == "5.48 Tb/s"
