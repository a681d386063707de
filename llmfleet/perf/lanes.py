"""The prefill lane: how prompts share a replica's periods with the running streams, as plain
numbers at a rate and a running batch.

A prompt's work on its lane is its share of full periods (`perf.periods`); each lane (a
data-parallel rank's scheduler; one without data parallelism) is an M/G/1 queue of that work at
its share of the rate, loaded by its share of *time*. A period that carries chunks takes
longer; data-parallel ranks step together, so a period is as long as its slowest rank's and
every rank's chunk passes the shared experts.
The running batch a rate settles at follows by Little's law over the mean period."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from llmfleet.perf.periods import Table, chunk_at, interp_batch
from llmfleet.perf.queueing import cramer_lundberg_constant, lundberg_decay

SATURATED = 0.999
"""A lane loaded beyond this share of its time cannot keep up: the wait is unbounded."""


@dataclass(frozen=True)
class Lane:
    """The prefill lane at a running batch and rate: M/G/c (c = lanes) of prompt work."""

    chunk: float  # prompt tokens a scheduled batch carries beside its decodes
    decode_s: float  # a period without a chunk
    mixed_s: float  # a period that carries chunks (of as many ranks as carry one, on average)
    utilisation: float  # of each lane
    busy: float  # share of time a period carries a chunk
    wait_chance: float  # an arrival waits for the lane
    wait_s: float  # the mean of that wait's exponential tail
    stretch: float = 1.0  # a lane's periods over a lone rank's (the other ranks' chunks)

    @property
    def period_s(self) -> float:
        """The mean period."""
        return 1 / (self.busy / self.mixed_s + (1 - self.busy) / self.decode_s)

    @property
    def stable(self) -> bool:
        return self.utilisation < SATURATED


@dataclass(frozen=True)
class LanePeriods:
    """What the prefill lane does to the periods at a rate and running batch."""

    decode_s: float
    mixed_s: float  # the mean period that carries chunks
    busy: float  # the share of time a period carries chunks
    utilisation: float  # of each lane (its work stretched by the other ranks' chunks)
    stretch: float  # a busy lane's periods over a lone rank's at the mean start
    work_s: float  # a mean prompt's work on its lane, stretched


def busy_lanes(lanes: int, utilisation: float) -> np.ndarray:
    """P(k of `lanes` data-parallel lanes carry a chunk), k = 1..lanes, each lane busy
    `utilisation` of the time. vLLM's coordinator sends a request to the rank with the fewest
    waiting and running requests, and a rank whose lane holds a prompt counts it, so an
    arrival that finds a lane free takes it: the lanes fill as one pooled queue's servers do
    (M/M/c's busy servers at the same load) rather than independently."""
    c, q = lanes, min(max(utilisation, 0.0), 1.0)
    if q >= SATURATED:
        out = np.zeros(c)
        out[-1] = 1.0
        return out
    a = c * q
    terms = np.array([a**k / math.factorial(k) for k in range(c)])
    full = a**c / (math.factorial(c) * (1 - q))
    idle = 1 / (float(terms.sum()) + full)
    return np.append(terms[1:], full) * idle


def lane_periods(table: Table, admitted_rate: float, running: float) -> LanePeriods:
    """The lane's periods. One lane (one scheduler): a period that carries a chunk takes the
    table's mixed period, and the lane is busy its utilisation of the time. Several data-
    parallel ranks step together: a period is as long as its slowest rank's, and every rank's
    chunk passes the shared experts, so a rank's chunk takes longer the more other ranks
    carry one. A busy rank sees as many other busy ranks as `busy_lanes` puts beside it,
    which stretches its work and so its utilisation: a short fixed point. The mean period
    with chunks is over those k >= 1."""
    e = table.engine
    c = e.lanes
    td, tm = table.decode_at(running), table.mixed_at(running)
    at = table.prefill_weights(running)
    work1 = float(table.by_prefill_batch(table.work_mean_s, at))
    if c == 1:
        rho = admitted_rate * work1
        return LanePeriods(td, tm, min(rho, 1.0), rho, 1.0, work1)
    offsets = table.by_prefill_batch(table.rank_offsets, at)  # k = 1..c
    ranks = np.array([interp_batch(table.ranks_mixed_s[k], running) for k in range(c)]) + offsets
    ranks = np.maximum(ranks, tm)
    ks = np.arange(1, c + 1)
    rho = admitted_rate * work1 / c
    stretch = 1.0
    for _ in range(30):
        q = min(rho, 1.0)
        p = busy_lanes(c, q)
        # a busy rank's share of the periods with k busy is k / c: the other busy ranks
        k_eff = 1 + float(p @ (ks * (ks - 1))) / (c * q) if q > 0 else 1.0
        j = min(int(k_eff) - 1, c - 2)
        frac = k_eff - 1 - j
        per = ranks[j] * (1 - frac) + ranks[j + 1] * frac
        stretch = per / tm
        nxt = admitted_rate * work1 * stretch / c
        if abs(nxt - rho) <= 1e-7 * max(nxt, 1e-9):
            rho = nxt
            break
        rho = nxt
    p = busy_lanes(c, rho)
    busy = float(p.sum())
    mixed = float(p @ ranks / busy) if busy > 0 else tm
    return LanePeriods(td, mixed, busy, rho, stretch, work1 * stretch)


def lane_at(table: Table, admitted_rate: float, running: float, arrival_cv2: float = 1.0
            ) -> Lane:
    """The lane at an admitted rate and running batch."""
    e = table.engine
    c = e.lanes
    chunk = float(chunk_at(e, running))
    lp = lane_periods(table, admitted_rate, running)
    if lp.work_s <= 0 or admitted_rate <= 0:  # nothing to prefill (a decode engine) or idle
        return Lane(chunk, lp.decode_s, lp.mixed_s, 0.0, 0.0, 0.0, 0.0)
    rho = lp.utilisation
    if rho >= SATURATED:
        return Lane(chunk, lp.decode_s, lp.mixed_s, rho, 1.0, 1.0, math.inf, lp.stretch)
    at = table.prefill_weights(running)
    # Each lane is its own M/G/1 queue at rate / c: vLLM's data-parallel coordinator sends a
    # request to the rank with the fewest waiting and running requests, not the least prompt
    # work, so a rank holding a long prompt still gets new ones (no shared queue).
    rate = admitted_rate / c
    work = table.by_prefill_batch(table.work_s, at) * lp.stretch
    weights = table.workload.prompts.weights / table.workload.prompts.admitted
    decay = lundberg_decay(rate, work, weights)
    # The wait's tail is C exp(-decay t) (Cramer-Lundberg): its constant, not the chance to
    # wait at all (rho), is what a percentile in the tail reads. With prompts of many lengths
    # C < rho: the waits behind short prompts end in a fraction of the tail's scale.
    waits = min(1.0, cramer_lundberg_constant(rate, work, weights, decay))
    cv2 = float(table.by_prefill_batch(table.work_cv2, at))
    decay *= (1 + cv2) / (arrival_cv2 + cv2)  # smoother arrivals wait less (Kingman)
    return Lane(chunk, lp.decode_s, lp.mixed_s, rho, lp.busy, waits, 1 / decay, lp.stretch)


def _decodes_per_request(table: Table) -> float:
    """Periods a request decodes for after its first token."""
    return max(table.workload.output_mean - 1, 1e-9) / table.engine.tokens_per_period


def running_at(table: Table, admitted_rate: float) -> float:
    """The running batch D an admitted rate settles at: the root of D = rate x periods a
    request decodes x mean period(D) (the right side grows more slowly than D, so there is
    one), by regula falsi (Illinois) on [0, cap]; the table's cap when the lane cannot keep
    up there (its load only grows with D) or the slots cannot hold the root."""
    per = _decodes_per_request(table)
    cap = float(table.cap)

    def excess(d: float) -> float:
        lp = lane_periods(table, admitted_rate, d)
        return admitted_rate * per / (lp.busy / lp.mixed_s + (1 - lp.busy) / lp.decode_s) - d

    lo, f_lo = 0.0, excess(0.0)
    if f_lo <= 0:
        return 0.0
    hi, f_hi = cap, excess(cap)
    if f_hi >= 0:
        return cap
    side, x = 0, lo
    for _ in range(100):
        x = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        f = excess(x)
        if f > 0:
            lo, f_lo = x, f
            if side == 1:
                f_hi /= 2
            side = 1
        else:
            hi, f_hi = x, f
            if side == -1:
                f_lo /= 2
            side = -1
        if hi - lo <= 1e-7 * max(hi, 1e-3) or abs(f) <= 1e-9 * max(x, 1e-3):
            break
    if lane_periods(table, admitted_rate, x).utilisation >= SATURATED:
        return cap
    return x


def rate_at(table: Table, running: float) -> float:
    """The admitted rate at which the running batch is `running` (the inverse of
    `running_at`): closed form for one lane, a short fixed point for several."""
    e = table.engine
    per = _decodes_per_request(table)
    td, tm = table.decode_at(running), table.mixed_at(running)
    work = float(table.by_prefill_batch(table.work_mean_s, running))
    if e.lanes == 1:
        rate = (running / td) / (per + running * work * (1 / td - 1 / tm))
        return min(rate, SATURATED / work) if work > 0 else rate
    rate = running / (per * td)
    for _ in range(60):
        lp = lane_periods(table, rate, running)
        if lp.utilisation >= SATURATED:
            rate *= 0.9
            continue
        nxt = running / (per / (lp.busy / lp.mixed_s + (1 - lp.busy) / lp.decode_s))
        if abs(nxt - rate) <= 1e-7 * nxt:
            return nxt
        rate = nxt
    return rate


