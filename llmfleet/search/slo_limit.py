"""The SLO-limit rate of one engine: the highest request rate at which the replica of a
`perf.periods.Table` meets every SLO, found on a fixed grid so that its answer does not
depend on the path the search takes (`search.operating_point` sizes with it, the
disaggregated pools' decode side too)."""

from __future__ import annotations

import math

from llmfleet.perf.lanes import running_at
from llmfleet.perf.latency import at_running
from llmfleet.perf.periods import Table
from llmfleet.perf.workload import SloTargets

RATE_TOLERANCE = 3e-3
"""The SLO-limit rate is found to this share of itself."""
COARSE_TOLERANCE = 2e-2
"""Budgets are compared at rates found to this share (the best one's then to RATE_TOLERANCE)."""


def max_rate(table: Table, slo: SloTargets, tolerance: float = RATE_TOLERANCE,
             guess: float | None = None, slots: int | None = None) -> float:
    """The highest request rate at which the replica of `table` meets every SLO (0: not even
    an idle one does), to `tolerance` of itself. Searched on the running batch D the rate
    settles at (the rate follows from D in closed form; both only grow together), around the
    batch of `guess` when given: regula falsi (Illinois) on log D of the log of the worst
    share outside a target over the share allowed (`Point.load_ratio`: shares grow about
    exponentially with the load, so their log is nearly linear in it).

    Every probe sits on one fixed grid of log D (steps of log(1 + tolerance) from 0), so the
    search ends between the same two grid points whichever path it takes, and the answer is
    where the margin interpolated between them crosses zero: a last-bit difference in a
    margin (numpy's SIMD kernels differ by CPU) cannot move it by up to the tolerance, as a
    path's last probe did. At RATE_TOLERANCE, an answer a replica is sized at, it is checked
    to meet the SLOs (else the lower point, which does)."""
    p = slo.percentile
    if table.stall_s > slo.max_stall_s * (1 + 1e-9):
        return 0.0
    step = math.log1p(tolerance)
    top = math.log(float(table.cap))
    floor = math.log(1e-4)
    k_floor, k_top = math.ceil(floor / step) - 1, math.floor(top / step) + 1

    def at(k: int) -> float:
        """Grid point k's log D (the floor and the top close the grid)."""
        return min(max(k * step, floor), top)

    seen: dict[int, float] = {}

    def margin(k: int) -> float:
        ratio = at_running(table, math.exp(at(k)), p, slots).load_ratio(slo, exact=False)
        seen[k] = math.log(max(ratio, 1e-9))
        return seen[k]

    f_floor = margin(k_floor)
    if f_floor > 0:  # not even a nearly idle replica meets the SLOs
        return 0.0
    start = (math.log(max(running_at(table, guess * table.workload.prompts.admitted), 1e-4))
             if guess else None)
    if start is None:
        hi, f_hi = k_top, margin(k_top)
        if f_hi <= 0:
            return at_running(table, float(table.cap), p, slots).rate
        lo, f_lo = k_floor, f_floor
    else:
        width = math.ceil(2 * math.log1p(max(tolerance, COARSE_TOLERANCE)) / step)
        widen = math.ceil(0.5 / step)
        k = min(max(round(start / step), k_floor), k_top)
        lo, hi = max(k_floor, k - width), min(k_top, k + width)
        if hi - lo < 1:
            lo, hi = max(k_floor, hi - 1), max(k_floor + 1, hi)
        f_lo, f_hi = margin(lo), margin(hi)
        while f_hi <= 0:
            if hi >= k_top:
                return at_running(table, math.exp(top), p, slots).rate
            lo, f_lo = hi, f_hi
            hi = min(k_top, hi + widen)
            f_hi = margin(hi)
        while f_lo > 0:
            hi, f_hi = lo, f_lo
            lo = max(k_floor, lo - widen)
            f_lo = f_floor if lo <= k_floor else margin(lo)
    side = 0
    while hi - lo > 1:
        x = at(hi) - f_hi * (at(hi) - at(lo)) / (f_hi - f_lo)
        k = min(max(round(x / step), lo + 1), hi - 1)
        f = margin(k)
        if f <= 0:
            lo, f_lo = k, f
            if side == -1:
                f_hi /= 2
            side = -1
        else:
            hi, f_hi = k, f
            if side == 1:
                f_lo /= 2
            side = 1
    # the margin is nearly linear in log D: between the two points its zero is a far better
    # answer than the lower point, and as path-free (both margins are the grid's own)
    x = at(lo) + (at(hi) - at(lo)) * seen[lo] / (seen[lo] - seen[hi])
    point = at_running(table, math.exp(x), p, slots)
    if tolerance <= RATE_TOLERANCE and point.load_ratio(slo, exact=False) > 1:
        # a served answer must meet the SLOs: the lower point does
        point = at_running(table, math.exp(at(lo)), p, slots)
    return point.rate
