"""How ``--link-metrics top:N`` picks links, scrape after scrape (controlled clock)."""

from __future__ import annotations

import numpy as np

from exporters.prometheus.options import parse_link_metrics
from exporters.prometheus.selection import LinkSelector, heat


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_top_n_picks_the_hottest_and_only_hot_links() -> None:
    sel = LinkSelector(parse_link_metrics("top:2"), hold_s=60, clock=Clock())
    score = np.array([0.1, 0.9, 0.0, 0.5, 0.0])
    assert sel.select(score, np.zeros(5, bool)).tolist() == [1, 3]
    idle = LinkSelector(parse_link_metrics("top:2"), hold_s=60, clock=Clock())
    assert idle.select(np.zeros(5), np.zeros(5, bool)).tolist() == []


def test_a_link_that_cools_keeps_its_series_for_the_hold_time() -> None:
    clock = Clock()
    sel = LinkSelector(parse_link_metrics("top:1"), hold_s=60, clock=clock)
    none = np.zeros(3, bool)
    assert sel.select(np.array([0.9, 0.1, 0.0]), none).tolist() == [0]
    clock.now += 30  # link 1 is now the hottest; link 0 is held
    assert sel.select(np.array([0.0, 0.8, 0.0]), none).tolist() == [0, 1]
    clock.now += 31  # link 0 was last hot 61 s ago: dropped; link 1 stays
    assert sel.select(np.array([0.0, 0.0, 0.0]), none).tolist() == [1]


def test_links_not_up_or_with_errors_are_always_exported() -> None:
    sel = LinkSelector(parse_link_metrics("top:1"), hold_s=0, clock=Clock())
    always = np.array([False, False, True, False])
    assert sel.select(np.array([0.0, 0.7, 0.0, 0.2]), always).tolist() == [1, 2]


def test_all_and_switch_modes() -> None:
    score, always = np.array([0.0, 1.0]), np.array([True, False])
    assert LinkSelector(parse_link_metrics("all")).select(score, always).tolist() == [0, 1]
    assert LinkSelector(parse_link_metrics("switch")).select(score, always).tolist() == []


def test_a_new_link_table_starts_afresh() -> None:
    sel = LinkSelector(parse_link_metrics("top:1"), hold_s=600, clock=Clock())
    sel.select(np.array([1.0, 0.0]), np.zeros(2, bool))
    assert sel.select(np.array([0.0, 0.0, 0.5]), np.zeros(3, bool)).tolist() == [2]


def test_heat_is_utilisation_plus_queue_fill() -> None:
    got = heat(np.array([0.5, 0.2, 0.0]), np.array([0.0, 500.0, 10.0]), np.array([1e3, 1e3, 0]))
    assert got.tolist() == [0.5, 0.7, 0.0]
