"""The compiled solve's conservation where a route breaks up*/down*, held to figures
derived by hand (issue 23, session 19).

There the entry order is not upstream first, so ``kernels.solve.conserve_by_hop`` clips
the entries hop by hop, every hop including the last: an entry carries at most what it
holds plus what its upstream hop delivers in the tick. ``scripts/mutate`` runs this file
first in the ``kernels.solve`` subset.
"""

from __future__ import annotations

import numpy as np
import pytest

from fabric_core.tick.kernels.solve import conserve_by_hop


def test_a_cut_at_the_first_hop_is_carried_down_to_the_last() -> None:
    """One flow of three hops, listed last hop first (entries 0, 1, 2 are hops 2, 0, 1;
    entry 3 is the pad, rate 0), dt = 1 s. Hop 0 holds 100 B and was cut to 4 B/s; hops 1
    and 2 hold nothing and were given 10 B/s. Hop 1 carries at most 0 + 4 = 4 B/s and
    hop 2 at most 0 + 4 = 4 B/s: [4, 4, 4] by hop. A second flow of two hops, holding
    1 B at its last hop, fed 2 B/s and given 5 B/s there: 1 + 2 = 3 B/s."""
    hop = np.array([2, 0, 1, 0, 1], dtype=np.intp)
    prev_pad = np.array([2, 5, 1, 5, 3], dtype=np.intp)  # 5: none (the pad)
    rate = np.array([10.0, 4.0, 10.0, 2.0, 5.0, 0.0])
    held = np.array([0.0, 100.0, 0.0, 50.0, 1.0])
    conserve_by_hop(rate, held, prev_pad, hop)
    assert rate[:5] == pytest.approx([4.0, 4.0, 4.0, 2.0, 3.0], rel=1e-12)
