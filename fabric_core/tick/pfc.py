"""RoCEv2 flow control: PFC per priority, ECN marking, DCQCN at the senders, deadlock detection.

Units and arrays follow the core: a *queue* is the ingress buffer at the
downstream end of a link for one priority (virtual lane), indexed
``link * VLs + vl`` like the credit fabric's buffers.

* **PFC.** When a queue passes XOFF the downstream port pauses the upstream
  sender for that priority; the sender stops after a reaction delay plus the
  cable's round trip, so bytes in flight land in the headroom above XOFF. The
  crossing is timed inside the tick (a credit-like bound of XOFF plus the
  reaction's bytes), so the overshoot does not grow with ``dt``.
  XOFF = buffer − headroom, XON = XOFF − MTU, the headroom computed as the mlx5
  driver does. Bytes past the buffer are dropped; the sender goes back N.
* **Shared buffer** (``pfc_buffer_mode = "shared"``, the default). A switch's
  queues share its buffer: each keeps its headroom reserved, and may hold
  ``pfc_alpha`` × the shared buffer still free before it pauses (Broadcom's
  dynamic threshold, as HPCC's ns-3 switch model computes it: ``GetPfcThreshold``
  = (buffer − headroom − used) >> pfc_a_shift). The thresholds are set at the
  start of each tick from the switch's occupancy, so one congested queue may
  take about ``alpha/(1 + alpha)`` of the pool and N of them ``alpha/(1 + N·alpha)``
  each. ``"static"`` keeps a fixed ``pfc_buffer_bytes`` per port and priority.
* **Pause time and frames** are counted from the fluid rates, not from the tick's
  transitions (``pause_accounting``): the sender of a queue whose bound was hit
  sent for ``send × alpha`` of the tick, and a pause at the tick's rates lasts
  ``(XOFF − XON + A·reaction) / drain`` (``A``: the sender's rate while sending).
  A frame is sent at each XOFF and re-sent every refresh period while paused
  (half the 65535 × 512 bit times a frame asks for, so it depends on the link's
  speed). With the hysteresis smaller than a tick's drain a queue goes through
  many pause cycles in one tick; counted this way, frames and paused time do not
  depend on ``dt``.
* **Watchdog.** A queue paused longer than ``pfc_watchdog_s`` has its pause
  ignored for ``pfc_watchdog_recovery_s`` (what switch PFC watchdogs do).
* **ECN/DCQCN.** Packets are marked by the **egress** queue of the port they
  leave (RED on the output queue, as switches and ns-3's switch model do; the
  DCQCN paper): the bytes at the switch waiting for that link and priority,
  whichever ingress buffer holds them. Probability 0 below Kmin, rising
  linearly to Pmax at Kmax, 1 above; Kmin and Kmax scale with the port's speed
  (``ecn_kmin_s``, ``ecn_kmax_s``: queueing time at line rate). The receivers echo
  the marks (``cnp_interval_s`` may rate-limit them); the senders run the
  Mellanox-style DCQCN reaction point of the HPCC repository (``Dcqcn``).
* **Deadlock.** Queues that hold bytes and cannot drain because every hop out
  of them is paused form a graph; pruning the queues that can drain leaves the
  cycles (a cyclic buffer dependency, Hu et al., HotNets 2016).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from fabric_core.net.profiles import Profile
from fabric_core.net.tables import LinkTable
from fabric_core.tick.step import ENDLESS_ROOM_BYTES, EntryIndex, sum_by


def mlx5_headroom_bytes(
    bandwidth_Bps: NDArray[np.float64], cable_m: NDArray[np.float64], mtu: float
) -> NDArray[np.float64]:
    """Headroom (bytes) as Linux mlx5 ``calculate_xoff``: (301 + 2.16·cable_m)·Gb/s + 2.72·MTU."""
    speed_gbps = bandwidth_Bps * 8 / 1e9
    return (301 + 2.16 * cable_m) * speed_gbps + 2.72 * mtu


@dataclass
class PfcQueues:
    """Per-queue PFC state (one entry per (link, priority))."""

    buffer: NDArray[np.float64]
    xoff: NDArray[np.float64]
    xon: NDArray[np.float64]
    reaction_s: NDArray[np.float64]  # pause reaction + cable round trip, per queue
    line_rate_Bps: NDArray[np.float64]  # of the link each queue's sender sends on
    paused: NDArray[np.bool_]
    paused_since_s: NDArray[np.float64]  # when it passed XOFF
    resume_s: NDArray[np.float64]  # when its sender resumes (a reaction after XON)
    watchdog_until_s: NDArray[np.float64]
    frames_owed: NDArray[np.float64]  # frames the pause time so far accounts for (fractional)
    frames_sent: NDArray[np.float64]  # whole frames counted: ceil(frames_owed)
    headroom: NDArray[np.float64]  # reserved above XOFF, per queue
    #: shared buffer: the switch holding each queue (-1: a NIC's, or static mode), the
    #: pool each switch shares (its buffer less the headroom it reserves), and alpha
    switch_of: NDArray[np.intp]
    shared_pool: NDArray[np.float64]
    alpha: float  # 0 in the static mode
    mtu: float

    @classmethod
    def build(
        cls,
        links: LinkTable,
        profile: Profile,
        n_vls: int,
        switch_nodes: NDArray[np.bool_] | None = None,
    ) -> PfcQueues:
        """Thresholds from the profile, the links' speed and cable length.

        ``switch_nodes`` says which nodes are switches (their queues share a buffer in
        the shared mode; a NIC's do not); without it every link's far end is one.
        """
        cable_m = links.prop_delay_s / profile.propagation_s_per_m
        if profile.pfc_headroom_bytes > 0:
            headroom = np.full(len(links), profile.pfc_headroom_bytes)
        else:
            headroom = mlx5_headroom_bytes(links.bandwidth_Bps, cable_m, profile.ethernet_mtu_bytes)
        buffer = links.buffer_bytes.astype(np.float64)  # per (port, priority)
        xoff = np.maximum(buffer - headroom, 0.0)
        xon = np.maximum(xoff - profile.ethernet_mtu_bytes, 0.0)
        reaction = profile.pfc_reaction_s + 2 * links.prop_delay_s
        n = len(links) * n_vls

        def rep(a: NDArray[np.float64]) -> NDArray[np.float64]:
            return np.repeat(a, n_vls)

        shared = profile.pfc_buffer_mode == "shared"
        is_switch = (
            np.ones(int(links.dst.max(initial=-1)) + 1, dtype=bool)
            if switch_nodes is None
            else switch_nodes
        )
        owner = np.where(is_switch[links.dst] & shared, links.dst, -1).astype(np.intp)
        switch_of = np.repeat(owner, n_vls)
        n_nodes = is_switch.size
        reserved = np.bincount(
            switch_of[switch_of >= 0], rep(headroom)[switch_of >= 0], minlength=n_nodes
        )
        pool = np.maximum(profile.switch_buffer_bytes - reserved, 0.0)
        queues = cls(
            buffer=rep(buffer),
            xoff=rep(xoff),
            xon=rep(xon),
            reaction_s=rep(reaction),
            line_rate_Bps=rep(links.bandwidth_Bps.astype(np.float64)),
            paused=np.zeros(n, dtype=bool),
            paused_since_s=np.zeros(n),
            resume_s=np.full(n, -1.0),
            watchdog_until_s=np.full(n, -1.0),
            frames_owed=np.zeros(n),
            frames_sent=np.zeros(n),
            headroom=rep(headroom),
            switch_of=switch_of,
            shared_pool=pool,
            alpha=profile.pfc_alpha if shared else 0.0,
            mtu=profile.ethernet_mtu_bytes,
        )
        queues.share(np.zeros(n))
        return queues

    def share(self, occupancy: NDArray[np.float64]) -> None:
        """Set the shared-buffer queues' thresholds from their switches' occupancy (the
        start of a tick): XOFF = alpha × the pool still free, XON one MTU below. A queue
        drops what arrives past its headroom above XOFF, or above what it already holds
        where the threshold has fallen below that: bytes it admitted keep their place (a
        switch admits, or drops, a packet as it arrives; HPCC ns-3 CheckIngressAdmission).
        Static queues keep theirs."""
        mine = self.switch_of >= 0
        if not mine.any():
            return
        owner = self.switch_of[mine]
        used = np.bincount(owner, occupancy[mine], minlength=self.shared_pool.size)
        free = np.maximum(self.shared_pool - used, 0.0)
        xoff = self.alpha * free[owner]
        self.xoff[mine] = xoff
        self.xon[mine] = np.maximum(xoff - self.mtu, 0.0)
        self.buffer[mine] = np.maximum(xoff, occupancy[mine]) + self.headroom[mine]


@dataclass
class PauseTick:
    """What PFC allows in one tick, decided at its start."""

    send_fraction: NDArray[np.float64]  # per queue: share of the tick the upstream may send
    room_bytes: NDArray[np.float64]  # per queue: net bytes it may take before the sender stops
    ignoring: NDArray[np.bool_]  # per queue: the watchdog ignores its pause


def pause_limits(
    q: PfcQueues,
    occupancy: NDArray[np.float64],
    drain_Bps: NDArray[np.float64],
    capacity_Bps: NDArray[np.float64],
    forced: NDArray[np.bool_],
    now: float,
    dt: float,
) -> PauseTick:
    """Limits for the tick, timed inside it so that they do not depend on ``dt``.

    A queue that is not paused may take bytes up to XOFF, plus what its sender
    sends during the reaction time after the crossing (``capacity × reaction``):
    the solver enforces that as a credit-like bound, and the tick that hits it
    is the one that pauses; its sender stops a reaction time after that tick began.
    A paused queue's sender resumes a reaction time after the queue has drained to
    XON (within this tick, at last tick's drain rate, or at the crossing
    ``update_pause`` found).
    """
    ignoring = q.watchdog_until_s >= now
    reaction_bytes = capacity_Bps * q.reaction_s
    # the reaction's bytes are one allowance past XOFF, not one per tick: a queue already
    # past XOFF (paused, its sender resuming within a long tick) has only what is left of it
    room = np.maximum(q.xoff + reaction_bytes - occupancy, 0.0)
    to_xon = np.divide(
        np.maximum(occupancy - q.xon, 0.0),
        drain_Bps,
        out=np.full(occupancy.size, np.inf),
        where=drain_Bps > 0,
    )
    resume_in = to_xon + q.reaction_s
    # the sender of a queue that has just passed XOFF stops only a reaction time later
    # (the pause frame's generation, flight and the MAC's response): what matters when
    # ticks are shorter than that
    stop_in = q.paused_since_s + q.reaction_s - now
    sending = np.clip(stop_in / dt, 0.0, 1.0) + np.clip(1 - resume_in / dt, 0.0, 1.0)
    # and one that has drained to XON resumes a reaction time after that
    resumed = np.clip((now + dt - q.resume_s) / dt, 0.0, 1.0)
    send = np.where(q.paused, np.minimum(sending, 1.0), resumed)
    send = np.where(forced, 0.0, send)
    send = np.where(ignoring, 1.0, send)
    room = np.where(ignoring, ENDLESS_ROOM_BYTES, room)
    return PauseTick(send_fraction=send, room_bytes=room, ignoring=ignoring)


#: Pause quanta a PFC frame asks for (the 16-bit field's maximum) and the bit times in one
#: quantum (IEEE 802.1Qbb).
PAUSE_QUANTA = 65535
QUANTUM_BITS = 512
#: A fraction of the tick this close to 1 is "not stopped" (the solver's own rounding).
STOP_EPS = 1e-9


def refresh_period_s(line_rate_Bps: NDArray[np.float64], fraction: float) -> NDArray[np.float64]:
    """How often a paused receiver re-sends PAUSE: ``fraction`` of the time one frame
    pauses the sender, 65535 quanta of 512 bit times at the link's speed."""
    return fraction * PAUSE_QUANTA * QUANTUM_BITS / (8.0 * line_rate_Bps)


def update_pause(
    q: PfcQueues,
    occupancy: NDArray[np.float64],
    net_Bps: NDArray[np.float64],
    hit_xoff: NDArray[np.bool_],
    forced: NDArray[np.bool_],
    profile: Profile,
    now: float,
    dt: float,
) -> NDArray[np.intp]:
    """Pause transitions at the end of a tick (``hit_xoff``: the queue reached XOFF in it;
    ``net_Bps``: its inflow less its drain) and the watchdog. Returns the queues whose
    watchdog fired.

    A pause starts when the queue crossed XOFF, and ends when it crossed XON, each
    found inside the tick from its net rate: the sender stops, and resumes, a
    reaction time after that instant (``pause_limits``).
    """
    start = (hit_xoff | (occupancy > q.xoff) | forced) & ~q.paused
    stop = q.paused & (occupancy <= q.xon) & ~forced & ~hit_xoff
    q.paused = (q.paused | start) & ~stop
    rise = net_Bps * dt
    into_tick = np.divide(
        q.xoff - (occupancy - rise), rise, out=np.zeros(rise.size), where=rise > 0
    )
    crossed_s = now + np.clip(into_tick, 0.0, 1.0) * dt
    q.paused_since_s = np.where(start, crossed_s, q.paused_since_s)
    fall = -rise
    above_xon = np.divide((occupancy + fall) - q.xon, fall, out=np.zeros(fall.size), where=fall > 0)
    xon_s = now + np.clip(above_xon, 0.0, 1.0) * dt
    q.resume_s = np.where(stop, xon_s + q.reaction_s, q.resume_s)
    # watchdog: a queue paused too long has its pause ignored for a recovery period
    fire = (
        q.paused & (now - q.paused_since_s >= profile.pfc_watchdog_s) & (q.watchdog_until_s < now)
    )
    q.watchdog_until_s = np.where(fire, now + profile.pfc_watchdog_recovery_s, q.watchdog_until_s)
    q.paused_since_s = np.where(fire, now + profile.pfc_watchdog_recovery_s, q.paused_since_s)
    return np.flatnonzero(fire)


def pause_accounting(
    q: PfcQueues,
    send_fraction: NDArray[np.float64],
    alpha: NDArray[np.float64],
    inflow_Bps: NDArray[np.float64],
    drain_Bps: NDArray[np.float64],
    profile: Profile,
    dt: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(fraction of the tick each queue's sender was stopped, pause frames it received).

    The sender of a queue may send ``send_fraction`` of the tick and, when the
    queue's bound was hit, did so for ``alpha`` of that (the solver's factor: in
    a fluid tick, the time until the queue reached XOFF plus the reaction).
    Frames follow from how long one pause lasts at this tick's rates,
    ``S = (XOFF − XON + A·reaction) / drain`` with ``A`` the sender's rate while
    sending: one frame at its start and one per refresh period within it, so a
    stopped second carries ``(1 + floor(S / refresh)) / S`` frames. A queue that
    does not drain, or whose sender is no faster than the drain, goes through no
    cycle: one frame per refresh period. Whole frames are counted as
    soon as a pause begins (``ceil`` of what is owed); a queue that ran free for a
    whole tick starts its next pause with a new frame.
    """
    sending = send_fraction * alpha
    stopped = np.where(sending > 1 - STOP_EPS, 0.0, np.clip(1 - sending, 0.0, 1.0))
    rate_sending = np.divide(
        inflow_Bps, sending, out=q.line_rate_Bps.copy(), where=(sending > 0) & (inflow_Bps > 0)
    )
    hysteresis = q.xoff - q.xon + rate_sending * q.reaction_s
    # a sender no faster than the drain fills the queue no more: no new pause, only
    # the refreshes of the one on
    cycles = (drain_Bps > 0) & (rate_sending > drain_Bps)
    pause_s = np.divide(hysteresis, drain_Bps, out=np.full(stopped.size, np.inf), where=cycles)
    pause_s = np.maximum(pause_s, 1e-9)
    refresh = refresh_period_s(q.line_rate_Bps, profile.pfc_refresh_fraction)
    finite = np.isfinite(pause_s)
    pause_s = np.where(finite, pause_s, 1.0)  # (the other branch is taken there)
    per_stopped_s = np.where(finite, (1 + np.floor(pause_s / refresh)) / pause_s, 1 / refresh)
    q.frames_owed += stopped * dt * per_stopped_s
    sent = np.ceil(q.frames_owed - 1e-9)
    frames = sent - q.frames_sent
    q.frames_sent = sent
    # a queue that was not stopped and is not paused has ended its pause: the next one
    # begins with a frame of its own
    over = (stopped == 0) & ~q.paused
    q.frames_owed = np.where(over, q.frames_sent, q.frames_owed)
    return stopped, frames


def ecn_thresholds(
    line_rate_Bps: NDArray[np.float64], profile: Profile
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(Kmin, Kmax) in bytes of each queue: the profile's queueing times at its port's
    line rate (deployments scale Kmin/Kmax with link speed)."""
    return profile.ecn_kmin_s * line_rate_Bps, profile.ecn_kmax_s * line_rate_Bps


def ecn_probability(
    queue_bytes: NDArray[np.float64],
    kmin: NDArray[np.float64],
    kmax: NDArray[np.float64],
    pmax: float,
) -> NDArray[np.float64]:
    """RED-style marking probability of a packet leaving an egress queue of this many bytes."""
    ramp = pmax * (queue_bytes - kmin) / np.maximum(kmax - kmin, 1e-9)
    return np.where(queue_bytes <= kmin, 0.0, np.where(queue_bytes >= kmax, 1.0, ramp))


def egress_bytes(
    idx: EntryIndex, backlog: NDArray[np.float64], n_queues: int
) -> NDArray[np.float64]:
    """Bytes waiting at a switch for each (link, priority): the egress queue of the port,
    gathered from the ingress buffers that hold them (a NIC's send queue is not a switch
    queue: hop-0 bytes are left out)."""
    at_switch = idx.prev_pad < idx.size
    return sum_by(idx.queue[at_switch], backlog[at_switch], n_queues)


def feedback_probability(
    log_unmarked: NDArray[np.float64] | float,
    packets_per_s: NDArray[np.float64] | float,
    interval_s: float,
    cnp_interval_s: float,
) -> NDArray[np.float64]:
    """The chance that a sender's ``interval_s`` holds ECN feedback (a CNP).

    ``log_unmarked`` is the log of a packet's chance of crossing the path unmarked: the
    interval's packets all cross unmarked with ``exp(log_unmarked · n)``. A receiver that
    sends at most one CNP per ``cnp_interval_s`` reaches an interval shorter than that at
    most ``interval / cnp_interval`` of the time.
    """
    q = -np.expm1(np.asarray(log_unmarked) * np.asarray(packets_per_s) * interval_s)
    if cnp_interval_s > interval_s:
        q = q * (interval_s / cnp_interval_s)
    return np.asarray(q, dtype=np.float64)


def binomial_draw(
    trials: NDArray[np.float64], prob: NDArray[np.float64], u: NDArray[np.float64]
) -> NDArray[np.float64]:
    """How many of ``trials`` independent events of chance ``prob`` happen, by inverting
    the binomial distribution at the uniform draw ``u`` (one draw per sender a tick)."""
    k = np.zeros(trials.shape)
    term = (1 - prob) ** trials  # P(0)
    cum = term.copy()
    ratio = prob / np.maximum(1 - prob, 1e-300)
    for j in range(int(trials.max(initial=0))):
        more = (u >= cum) & (j < trials)
        k += more
        term = term * (trials - j) / (j + 1) * ratio
        cum = cum + term
    return np.where(prob >= 1, trials, k)


#: A DCQCN sender's per-flow fields (``Dcqcn``'s arrays), in the order the kernels take
#: them, and each one's value in a fresh flow slot; a flow that starts then has its rates
#: set to line rate (``Dcqcn.start``, and ``kernels.pfc.start_senders`` in the busy ticks)
SENDER_FIELDS = (
    "rc", "rt", "alpha", "since_cut_s", "since_alpha_s", "since_dec_s", "since_inc_s",
    "stage", "cwnd",
)  # fmt: skip
FRESH_SENDER = (0.0, 0.0, 1.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0)
SENDER_RC = SENDER_FIELDS.index("rc")
SENDER_RT = SENDER_FIELDS.index("rt")


@dataclass
class Dcqcn:
    """DCQCN sender state per flow slot (grows with the flow table).

    The reaction point is the Mellanox-style one of the HPCC repository (rdma-hw.cc,
    ``*Mlx``), with its ``run.py --cc dcqcn`` parameters (``Profile.dcqcn_*``):

    * every ``dcqcn_alpha_interval_s`` alpha = (1 − g)·alpha, plus g if feedback arrived
      since the last update; per tick the expected value over its updates;
    * every ``dcqcn_decrease_interval_s`` a check: if feedback arrived since the last one,
      RC ×= 1 − alpha/2 (no lower than ``dcqcn_min_rate_Bps``), the target takes the old
      rate if an increase has happened since the last cut, and the increase timer
      restarts. The first cut sets alpha to 1 first. How many of a tick's checks find
      feedback is drawn (one uniform per sender, inverted through the binomial), so a
      tick of 8 µs and two of 4 µs cut alike;
    * every ``dcqcn_timer_s`` after a cut, an increase event: fast recovery (RC halfway
      to the target) for the first ``dcqcn_fast_recovery_steps``, then one additive and
      then hyper increases of the target (their sizes scale with the port's speed).
    """

    rc: NDArray[np.float64]  # current rate
    rt: NDArray[np.float64]  # target rate
    alpha: NDArray[np.float64]
    since_cut_s: NDArray[np.float64]  # Swift: time since its last cut
    since_alpha_s: NDArray[np.float64]  # phase of the alpha updates
    since_dec_s: NDArray[np.float64]  # phase of the decrease checks
    since_inc_s: NDArray[np.float64]  # time since the last increase event or cut; < 0: none yet
    stage: NDArray[np.float64]  # increase events since the last cut
    cwnd: NDArray[np.float64]  # Swift's window in bytes (0: not yet set)
    cnps_total: float = 0.0

    #: each per-flow field and its value for a fresh flow slot
    _FRESH: ClassVar[dict[str, float]] = dict(zip(SENDER_FIELDS, FRESH_SENDER, strict=True))

    @classmethod
    def empty(cls, n: int) -> Dcqcn:
        """State for ``n`` flow slots (rates set when flows start)."""
        arrays: dict[str, NDArray[np.float64]] = {k: np.full(n, v) for k, v in cls._FRESH.items()}
        return cls(**arrays)  # type: ignore[arg-type]  # mypy cannot see the keys match

    def grow(self, n: int) -> None:
        """Make room for ``n`` slots."""
        pad = n - self.rc.size
        if pad > 0:
            for name, fresh in self._FRESH.items():
                setattr(self, name, np.r_[getattr(self, name), np.full(pad, fresh)])

    def start(self, slots: NDArray[np.intp], line_rate: NDArray[np.float64]) -> None:
        """New flows start at line rate with alpha = 1 (DCQCN paper)."""
        for name, fresh in self._FRESH.items():
            getattr(self, name)[slots] = fresh
        self.rc[slots] = line_rate
        self.rt[slots] = line_rate

    def update(
        self,
        active: NDArray[np.intp],
        log_unmarked: NDArray[np.float64],
        sent_bytes: NDArray[np.float64],
        line_rate: NDArray[np.float64],
        u: NDArray[np.float64],
        p: Profile,
        dt: float,
    ) -> NDArray[np.float64]:
        """One tick for the flows in ``active`` (``log_unmarked``, ``sent_bytes``,
        ``line_rate`` and the uniform draws ``u`` per active flow); returns the cuts."""
        g = p.dcqcn_g
        ta, td, ti = p.dcqcn_alpha_interval_s, p.dcqcn_decrease_interval_s, p.dcqcn_timer_s
        rc, rt, al = self.rc[active], self.rt[active], self.alpha[active]
        stage, since_inc = self.stage[active], self.since_inc_s[active]
        started = since_inc >= 0
        pps = sent_bytes / dt / p.mtu_bytes
        # the timers' phases
        sa, sd = self.since_alpha_s[active] + dt, self.since_dec_s[active] + dt
        k_a, k_d = np.floor(sa / ta), np.floor(sd / td)
        sa, sd = sa - k_a * ta, sd - k_d * td
        # alpha: the expected value after k_a updates, each with feedback at chance q_a
        q_a = feedback_probability(log_unmarked, pps, ta, p.cnp_interval_s)
        decay = (1 - g) ** k_a
        al = np.where(started, decay * al + q_a * (1 - decay), al)
        # cuts: the checks of this tick that find feedback
        q_d = feedback_probability(log_unmarked, pps, td, p.cnp_interval_s)
        cuts = binomial_draw(k_d, q_d, u)
        cut = cuts > 0
        al = np.where(cut & ~started, 1.0, al)
        clamp = cut & (p.dcqcn_clamp_target | (stage != 0))
        rt = np.where(clamp, rc, rt)
        if p.dcqcn_clamp_target:  # every cut after the first clamps too
            rt = np.where(cut, rc * (1 - al / 2) ** (cuts - 1), rt)
        rc = np.where(cut, np.maximum(rc * (1 - al / 2) ** cuts, p.dcqcn_min_rate_Bps), rc)
        stage = np.where(cut, 0.0, stage)
        # the timer restarted at the last check that cut (taken as the tick's last)
        since_inc = np.where(cut, sd, np.where(since_inc >= 0, since_inc + dt, since_inc))
        # increase events
        k_i = np.where(since_inc >= 0, np.floor(np.maximum(since_inc, 0) / ti), 0.0)
        since_inc = since_inc - k_i * ti
        events = np.minimum(k_i, 64)
        scale = line_rate / 25e9 * 8
        fr = p.dcqcn_fast_recovery_steps
        for _ in range(int(events.max(initial=0))):
            step = events > 0
            additive = step & (stage == fr)
            hyper = step & (stage > fr)
            rt = rt + scale * (
                np.where(additive, p.dcqcn_ai_at_25g_Bps, 0.0)
                + np.where(hyper, p.dcqcn_hai_at_25g_Bps, 0.0)
            )
            rt = np.minimum(rt, line_rate)
            rc = np.where(step, (rt + rc) / 2, rc)
            stage = stage + step
            events = events - step
        self.rc[active] = np.minimum(rc, line_rate)
        self.rt[active] = rt
        self.alpha[active] = al
        self.since_alpha_s[active] = sa
        self.since_dec_s[active] = sd
        self.since_inc_s[active] = since_inc
        self.stage[active] = stage
        self.cnps_total += float(cuts.sum())
        return cuts


#: Swift never paces a sender below this share of its line rate (its window may fall
#: below one packet, paced; a floor keeps a fluid rate from reaching zero).
SWIFT_MIN_RATE_FRACTION = 1e-3


def flow_queueing_delay(
    idx: EntryIndex,
    egress: NDArray[np.float64],
    line_rate_Bps: NDArray[np.float64],
    n_slots: int,
) -> NDArray[np.float64]:
    """Per flow slot: the queueing delay its packets meet now, the bytes ahead of them in
    each switch port's egress queue over that port's line rate (what a delay-based sender
    measures, less the fabric's fixed delay)."""
    at_switch = idx.prev_pad < idx.size
    per_hop = np.where(at_switch, egress[idx.queue] / line_rate_Bps[idx.queue], 0.0)
    return sum_by(idx.flow, per_hop, n_slots)


def swift_update(
    dc: Dcqcn,
    flows: NDArray[np.intp],
    delay: NDArray[np.float64],
    base_rtt: NDArray[np.float64],
    line_rate: NDArray[np.float64],
    p: Profile,
    dt: float,
) -> None:
    """One tick of Swift's AIMD for the senders of ``flows`` (Kumar et al., SIGCOMM 2020).

    Swift is window-based: a sender keeps ``cwnd`` bytes in flight, so it sends at
    ``cwnd / RTT`` and slows as queues lengthen the RTT (here ``base_rtt`` plus the
    queueing ``delay``). Below the target delay the window grows by ``ai`` packets per
    RTT; above it, at most once per RTT, it is cut by ``beta·(delay − target)/delay``,
    at most ``max_mdf``. A new flow starts with one bandwidth-delay product. The
    pacing rate is kept in ``dc.rc``.
    """
    rtt = base_rtt + delay
    cwnd = dc.cwnd[flows]
    cwnd = np.where(cwnd > 0, cwnd, line_rate * base_rtt)
    since = dc.since_cut_s[flows] + dt
    target = p.swift_target_delay_s
    over = delay > target
    cut = over & (since >= rtt)
    factor = np.maximum(
        1 - p.swift_beta * (delay - target) / np.maximum(delay, 1e-15), 1 - p.swift_max_mdf
    )
    cwnd = np.where(cut, cwnd * factor, cwnd)
    since = np.where(cut, 0.0, since)
    cwnd = np.where(over, cwnd, cwnd + p.swift_ai_packets * p.mtu_bytes * (dt / rtt))
    cwnd = np.minimum(cwnd, line_rate * rtt)  # more in flight than line rate sends is moot
    dc.cwnd[flows] = cwnd
    dc.rc[flows] = np.clip(cwnd / rtt, line_rate * SWIFT_MIN_RATE_FRACTION, line_rate)
    dc.since_cut_s[flows] = since


def hol_send_fraction(
    idx: EntryIndex, backlog: NDArray[np.float64], send_fraction: NDArray[np.float64]
) -> NDArray[np.float64]:
    """How much of the tick each entry may send, with head-of-line blocking.

    A lossless ingress queue is served in order: when any flow holding bytes in
    it faces a paused egress, the packets behind its head wait too, whatever
    their own egress (the HOL blocking that makes PFC pauses spread to victims
    and lets cyclic dependencies deadlock).
    """
    own = send_fraction[idx.queue]
    upstream = idx.drains_pad  # the padding queue at the source NIC stays at 1
    holding = (upstream < send_fraction.size) & (backlog > 0)
    worst = np.ones(send_fraction.size + 1)
    np.minimum.at(worst, upstream[holding], own[holding])
    return np.minimum(own, worst[upstream])


def find_deadlock(
    idx: EntryIndex,
    backlog: NDArray[np.float64],
    occupancy: NDArray[np.float64],
    blocked: NDArray[np.bool_],
) -> NDArray[np.intp]:
    """Queues on a cycle of paused queues that cannot drain (empty when there is none).

    Queue ``u`` waits on queue ``v`` when a flow holding bytes in ``u`` must go
    next over a link that ``v`` pauses (head-of-line: one such flow holds the
    whole queue). A queue whose every wait is on queues that will drain is
    pruned, repeatedly; what is left lies on cycles (Hu et al., HotNets 2016).
    """
    n = occupancy.size
    e = np.flatnonzero((idx.drains_pad < n) & (backlog > 0))
    u = idx.drains_pad[e]
    v = idx.queue[e]
    edge = blocked[v]
    alive = (occupancy > 0) & (sum_by(u, edge.astype(np.float64), n) > 0)
    while True:
        keep = alive & (sum_by(u, (edge & alive[v]).astype(np.float64), n) > 0)
        if (keep == alive).all():
            break
        alive = keep
    return np.flatnonzero(alive)


def one_cycle(idx: EntryIndex, queues: NDArray[np.intp]) -> list[int]:
    """One cycle through ``queues`` (queue ids), following the flows' hops."""
    members = set(queues.tolist())
    e = np.flatnonzero(idx.prev_pad < idx.size)
    src = idx.drains_pad[e]
    dst = idx.queue[e]
    succ: dict[int, int] = {}
    for s_, d_ in zip(src.tolist(), dst.tolist(), strict=True):
        if s_ in members and d_ in members and s_ not in succ:
            succ[s_] = d_
    if not succ:
        return []
    node = next(iter(succ))
    seen: list[int] = []
    while node not in seen and node in succ:
        seen.append(node)
        node = succ[node]
    return seen[seen.index(node) :] if node in seen else seen
