"""The dead-port drops of ``kernels.blackhole`` on tables made by hand: the bytes lost
(``drop_at_dead_links``) and their flows held for their ACK timeout
(``lose_at_dead_links``), owing a resend of what they go back for (per flow slot: counted
retransmitted when it is sent, ``kernels.move.count_resends``)."""

from __future__ import annotations

import numpy as np

from fabric_core.tick.kernels.blackhole import drop_at_dead_links, lose_at_dead_links


def test_bytes_queued_for_a_dead_link_go_back_to_the_source_and_are_counted() -> None:
    # three slots, three hops; link 5 is dead. Slot 0 crosses it at hop 1 (300 B queued
    # there), slot 1 at hop 2 (40 B), slot 2 starts on it (a NIC knows its own link:
    # hop 0 keeps its bytes) and slot 3 crosses it but is not in flight.
    path = np.array([[1, 2, 5, 6], [5, 3, 7, 5], [4, 5, -1, 8]], dtype=np.int32)
    active = np.array([True, True, True, False])
    backlog = np.array([[10.0, 20.0, 30.0, 1.0], [300.0, 7.0, 0.0, 2.0], [0.0, 40.0, 0.0, 3.0]])
    dead = np.zeros(9, dtype=np.bool_)
    dead[5] = True
    lost_by_link = np.zeros(9)
    owed = np.array([5.0, 0.0, 0.0, 0.0])  # slot 0 already owed 5 B
    lost, slots = drop_at_dead_links(path, active, backlog, dead, lost_by_link, owed)
    # hop-major, slot order: (hop 1, slot 0) then (hop 2, slot 1)
    assert lost.tolist() == [300.0, 40.0]
    assert lost_by_link[5] == 340.0 and lost_by_link.sum() == 340.0
    assert owed.tolist() == [305.0, 40.0, 0.0, 0.0]
    assert backlog[:, 0].tolist() == [310.0, 0.0, 0.0]
    assert backlog[:, 1].tolist() == [60.0, 7.0, 0.0]
    assert backlog[:, 2].tolist() == [30.0, 0.0, 0.0]  # starts on the dead link: kept
    assert backlog[:, 3].tolist() == [1.0, 2.0, 3.0]  # not in flight: untouched
    # the flows that lost bytes (they wait for their ACK timeout), and only they
    assert slots.tolist() == [0, 1]


def test_slots_past_the_live_ones_are_not_read() -> None:
    # the caller passes ``active`` up to the flow table's live_end: slot 1 lies past it
    # (whatever its path and bytes say, nothing in flight is there)
    path = np.array([[1, 1], [5, 5]], dtype=np.int32)
    backlog = np.array([[0.0, 0.0], [8.0, 9.0]])
    dead = np.zeros(6, dtype=np.bool_)
    dead[5] = True
    lost_by_link, owed = np.zeros(6), np.zeros(2)
    lost, slots = drop_at_dead_links(path, np.array([True]), backlog, dead, lost_by_link, owed)
    assert lost.tolist() == [8.0] and slots.tolist() == [0] and owed.tolist() == [8.0, 0.0]
    assert backlog[:, 1].tolist() == [0.0, 9.0] and lost_by_link[5] == 8.0


def test_three_losers_come_out_in_order_and_link_zero_is_a_link_like_any_other() -> None:
    # slots 0..2 each cross a dead link past their source: link 0 (dead too) at hop 1 of
    # slot 0 (a file topology may number a switch link first), link 7 at hops 1 and 2
    path = np.array([[3, 4, 5], [0, 7, 6], [8, 9, 7]], dtype=np.int32)
    backlog = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 4.0]])
    dead = np.zeros(10, dtype=np.bool_)
    dead[[0, 7]] = True
    lost_by_link, owed = np.zeros(10), np.zeros(3)
    lost, slots = drop_at_dead_links(
        path, np.ones(3, dtype=np.bool_), backlog, dead, lost_by_link, owed
    )
    # hop-major, then slot order: (hop 1, slot 0), (hop 1, slot 1), (hop 2, slot 2)
    assert lost.tolist() == [1.0, 2.0, 4.0]
    assert slots.tolist() == [0, 1, 2]
    assert lost_by_link[0] == 1.0 and lost_by_link[7] == 6.0
    assert owed.tolist() == [1.0, 2.0, 4.0]
    assert backlog[0].tolist() == [1.0, 2.0, 4.0] and not backlog[1:].any()


def test_a_flow_that_lost_bytes_goes_back_to_its_source_whole_and_waits() -> None:
    # slot 0 loses 300 B at dead link 5 (hop 1) with 25 B further on at hop 2; slot 1
    # loses nothing (its dead link is its own NIC's, hop 0) and keeps sending
    path = np.array([[1, 4], [5, 3], [6, 7]], dtype=np.int32)
    active = np.array([True, True])
    backlog = np.array([[10.0, 30.0], [300.0, 7.0], [25.0, 0.0]])
    rate = np.full((3, 2), 9.0)
    held = np.zeros(2, dtype=np.bool_)
    resend_s = np.full(2, np.inf)
    dead = np.zeros(8, dtype=np.bool_)
    dead[[4, 5]] = True
    discards, owed = np.zeros(8), np.zeros(2)
    dropped, lost_by_link, slots = lose_at_dead_links(
        path, active, backlog, rate, held, resend_s, dead, 1.5, discards, owed
    )
    assert dropped == 300.0 and slots.tolist() == [0]
    assert lost_by_link[5] == 300.0 and lost_by_link.sum() == 300.0
    assert discards[5] == 300.0 and discards.sum() == 300.0
    # go-back-N: all of it is sent again from the source, the 300 B lost and the 25 B
    # beyond (owed a resend: the 10 B at the source are new), and the flow carries
    # nothing until its ACK timeout
    assert backlog[:, 0].tolist() == [335.0, 0.0, 0.0]
    assert owed.tolist() == [325.0, 0.0]
    assert rate[:, 0].tolist() == [0.0, 0.0, 0.0] and rate[:, 1].tolist() == [9.0, 9.0, 9.0]
    assert active.tolist() == [False, True] and held.tolist() == [True, False]
    assert resend_s.tolist() == [1.5, np.inf]
    assert backlog[:, 1].tolist() == [30.0, 7.0, 0.0]
