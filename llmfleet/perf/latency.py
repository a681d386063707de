"""One replica at a load, as distributions: the SLO model the search sizes with, `predict
--stack` and the report read, and the simulator steps on (one queue model for all three).

At a request rate (Poisson; `arrival_cv2` < 1 for smoother arrivals) an engine's `Table`
(`perf.periods`) settles at:
- a running batch D by Little's law: D = admitted rate x (output - 1) x mean period / tokens
  a period, the mean period mixing periods with and without a chunk by their share of time;
- the prefill lane as an M/G/c queue (c = data-parallel lanes) of prompt work, each prompt
  occupying its lane for its share of full periods, loaded by its share of *time* (the
  share of periods is smaller: a period with a chunk lasts longer); an arrival waits with
  Erlang C's chance and the wait's tail decays at the Cramer-Lundberg rate of the prompts'
  own work (`perf.queueing`);
- the slots as a birth-death chain (`perf.slots`): an arrival that finds every slot taken
  waits for one to free.

The SLO figures are then distributions, never sums of percentiles:
- TTFT at p: the share of requests whose request handling + the period under way + the
  lane's wait + the slot's wait + their own prompt's chunked prefill exceeds a target,
  integrated over the prompt-length bins; prompts longer than max_model_len are refused and
  count against the 1 - p budget;
- the token gap at p over every gap of every stream (vLLM's benchmark `itl`): a share of
  the gaps sits in periods that carry a chunk (full ones at their starts, a prompt's last
  partial one unless another waiting prompt tops it up); when it exceeds 1 - p the gap at p
  is such a period, else a decode period;
- the longest stall: the longest period a chunk makes (`Table.stall_s`), bounded apart;
- TPOT at p over requests: a request's (output - 1) gaps, the chunks of the prompts that
  arrive during it a compound Poisson count (a long prompt's chunks come in a row),
  integrated over the output lengths (a short answer varies most)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from llmfleet.perf.lanes import Lane, busy_lanes, lane_at, rate_at, running_at
from llmfleet.perf.periods import Table, interp_batch
from llmfleet.perf.queueing import wait_tail
from llmfleet.perf.slots import chain_weights, completion_at, slot_chain
from llmfleet.perf.workload import SloTargets, output_bins

OVER_SLO = 1e3
"""`Point.load_ratio` of a replica that cannot keep up with its load."""
TTFT_GRID = 33
"""Targets a pass of `Point.ttft_at` evaluates at once."""
BATCH_QUANTILES = ((0.0, 0.3), (0.3, 0.7), (0.7, 0.9), (0.9, 0.98), (0.98, 1.0))
"""Bins of the running batch's distribution TTFT's wait is mixed over (finer in the tail)."""


@dataclass(frozen=True)
class Point:
    """One replica at a request rate: its queues and SLO figures, each computed when read."""

    table: Table
    rate: float  # requests/s reaching the replica (the refused ones included)
    running: float  # mean sequences decoding
    percentile: float
    arrival_cv2: float = 1.0
    slots: int | None = None  # fewer slots than the table's cap

    @property
    def admitted_rate(self) -> float:
        return self.rate * self.table.workload.prompts.admitted

    @cached_property
    def lane(self) -> Lane:
        return lane_at(self.table, self.admitted_rate, self.running, self.arrival_cv2)

    @property
    def chunk_tokens(self) -> float:
        return self.lane.chunk

    @property
    def decode_s(self) -> float:
        return self.lane.decode_s

    @property
    def mixed_s(self) -> float:
        return self.lane.mixed_s

    @property
    def lane_utilisation(self) -> float:
        return self.lane.utilisation

    @property
    def mixed_time_share(self) -> float:
        return min(self.lane.busy, 1.0)

    @cached_property
    def _at(self) -> tuple[int, float]:
        return self.table.prefill_weights(self.running)

    @cached_property
    def own_prefill_s(self) -> np.ndarray:
        """Each prompt bin's own chunked prefill at this batch (its periods stretched by the
        other data-parallel ranks' chunks)."""
        return self.table.by_prefill_batch(self.table.own_s, self._at) * self.lane.stretch

    @cached_property
    def _shared_s(self) -> np.ndarray:
        """What a prompt that waited for the lane loses beyond its wait: it starts in the
        period the prompt ahead of it ends in, with what that one leaves of the budget
        (uniform over a chunk), and needs on average the fraction of a period its own last
        chunk fills (n mod chunk / chunk) more than it would alone."""
        per = max(self.lane.chunk * self.table.engine.pipeline, 1.0)
        tokens = self.table.workload.prompts.computed
        return self.lane.mixed_s * (tokens % per) / per

    @property
    def own_mean_s(self) -> float:
        p = self.table.workload.prompts
        return float(self.own_prefill_s @ p.weights) / max(p.admitted, 1e-12)

    @cached_property
    def _slot(self) -> tuple[float, float, float]:
        """(the chance an arrival finds every slot taken, its wait's mean, completions at
        the cap). Far below the cap (ten standard deviations of a Poisson batch) the chance
        is nil and only the completion rate is needed."""
        slots = self.table.cap if self.slots is None else min(self.slots, self.table.cap)
        if slots - self.running > 10 * math.sqrt(self.running + 1) + 10:
            at_cap = completion_at(self.table, self.mixed_time_share, self.own_mean_s, slots)
            full = 0.0
        else:
            full, at_cap = slot_chain(self.table, self.admitted_rate, self.mixed_time_share,
                                      self.own_mean_s, self.slots)
        spare = at_cap - self.admitted_rate
        cs2 = self.table.workload.output_cv2
        wait = (self.arrival_cv2 + cs2) / 2 / spare if spare > 0 else math.inf
        return full, wait, at_cap

    @property
    def slot_full_chance(self) -> float:
        return self._slot[0]

    @property
    def slot_wait_s(self) -> float:
        return self._slot[1]

    @property
    def stable(self) -> bool:
        """The lane and the slots keep up with the rate."""
        return self.lane.stable and self.admitted_rate < self._slot[2]

    @property
    def fixed_s(self) -> float:
        """Request handling before the first token, and the period under way on arrival."""
        lane = self.lane
        f = self.mixed_time_share
        second = f * lane.mixed_s**2 + (1 - f) * lane.decode_s**2
        residual = (1 - math.exp(-self.running)) * second / (
            2 * (f * lane.mixed_s + (1 - f) * lane.decode_s))
        return self.table.engine.step_model.ttft_overhead_s + residual

    # --- TTFT -----------------------------------------------------------------------------

    @cached_property
    def _batches(self) -> list[tuple[float, Lane, np.ndarray, float]]:
        """The running batch's spread, as (weight, the lane, each prompt bin's own prefill,
        its period) at BATCH_QUANTILES of the slots' stationary distribution: the batch moves
        slowly beside the lane (a request's life against a prompt's prefill), so the lane's
        wait is an M/G/1 wait at each batch, mixed by how often the batch is there. A larger
        batch leaves a smaller chunk and lengthens every period, so the mixture's tail is
        heavier than the lane's at the mean batch."""
        t = self.table
        slots = t.cap if self.slots is None else max(1, min(self.slots, t.cap))
        weight, _ = chain_weights(t, self.admitted_rate, self.own_mean_s, slots)
        cdf = np.cumsum(weight) / weight.sum()
        out = []
        for (lo, hi) in BATCH_QUANTILES:
            d = float(np.searchsorted(cdf, (lo + hi) / 2))
            lane = lane_at(t, self.admitted_rate, d, self.arrival_cv2)
            own = t.by_prefill_batch(t.own_s, d) * lane.stretch
            out.append((hi - lo, lane, own, lane.mixed_s))
        return out

    def ttft_over(self, target_s: float) -> float:
        """Share of requests (the refused ones included) whose TTFT exceeds `target_s`: over
        the prompt lengths and the running batch's spread."""
        return float(self.ttft_over_each(np.array([target_s]))[0])

    def ttft_over_each(self, targets_s: np.ndarray) -> np.ndarray:
        """`ttft_over` at each of `targets_s` in one pass."""
        p = self.table.workload.prompts
        targets = np.asarray(targets_s, dtype=float)
        if not self.stable:
            return np.ones_like(targets)
        per = self.table.engine.pipeline
        over = np.zeros_like(targets)
        fixed = self.fixed_s
        for share, lane, own, mixed in self._batches:
            if not lane.stable:
                over += share
                continue
            slack = targets[:, None] - fixed - own[None, :]
            shared = mixed * (p.computed % (lane.chunk * per)) / (lane.chunk * per)
            tail = wait_tail(np.maximum(slack, 0.0), lane.wait_chance, lane.wait_s,
                             self.slot_full_chance, self.slot_wait_s, shift1=shared)
            over += share * (np.where(slack < 0, 1.0, tail) @ p.weights) / p.admitted
        out: np.ndarray = p.refused + over * p.admitted
        return out

    def ttft_at(self, percentile: float | None = None) -> float:
        """TTFT (s) at a percentile (the point's own by default): inf when the refused share
        or an unstable queue already exceeds its tail. The share over a target only falls
        as the target grows: a grid of targets brackets the percentile, and two finer grids
        inside the bracket close it to 1e-5 of itself."""
        tail = 1 - (self.percentile if percentile is None else percentile) / 100
        if not self.stable or self.table.workload.prompts.refused >= tail:
            return math.inf
        lo = self.fixed_s + float(self.own_prefill_s.min())
        hi = self.fixed_s + float(self.own_prefill_s.max()) + 0.1
        while self.ttft_over(hi) > tail:
            lo, hi = hi, hi * 4
            if hi > 1e7:
                return math.inf
        for _ in range(4):
            grid = np.linspace(lo, hi, TTFT_GRID)
            over = self.ttft_over_each(grid)
            k = int(np.argmax(over <= tail))  # the first target within the tail
            lo, hi = (grid[k - 1] if k > 0 else lo), grid[k]
            if hi - lo <= 1e-5 * hi:
                break
        return float(hi)

    @property
    def ttft_mean_s(self) -> float:
        lane = self.lane
        waits = lane.wait_chance * lane.wait_s + self.slot_full_chance * self.slot_wait_s
        return self.fixed_s + waits + self.own_mean_s

    # --- token gaps -----------------------------------------------------------------------

    @cached_property
    def mixed_gap_share(self) -> float:
        """The share of token gaps in periods that carry a chunk."""
        lane = self.lane
        f = self.mixed_time_share
        mixed = f / lane.mixed_s
        return mixed / (mixed + (1 - f) / lane.decode_s)

    @cached_property
    def _chunk_offsets(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(offsets, weights, half-widths) of one rank's chunk: how much longer than a period
        carrying a chunk at the mean start its period is. Every prompt's full chunks, each of
        its CHUNK_POINTS standing for its share of the starts (a period grows linearly with
        its start, so for offsets spread evenly over half a width on either side), and its
        last partial one, which another waiting prompt tops up to a full one (with the lane's
        wait chance)."""
        t, lane = self.table, self.lane
        w = t.workload.prompts.weights
        offsets = t.by_prefill_batch(t.period_lengths, self._at)
        weights = t.by_prefill_batch(t.period_weights, self._at) * w[:, None]
        k = offsets.shape[1] - 1
        half = np.abs(offsets[:, k - 1] - offsets[:, 0]) / (2 * max(k - 1, 1))
        partial = ~np.isnan(offsets[:, -1])
        top = min(lane.wait_chance, 1.0)
        tail_l = np.where(partial, offsets[:, -1], 0.0)
        tail_w = np.where(partial, weights[:, -1], 0.0)
        flat_l = np.concatenate([offsets[:, :k].ravel(), tail_l, offsets[:, k - 1]])
        flat_w = np.concatenate([weights[:, :k].ravel(), tail_w * (1 - top), tail_w * top])
        flat_h = np.concatenate([np.repeat(half, k), np.zeros(2 * len(half))])
        keep = flat_w > 0
        total = max(float(flat_w[keep].sum()), 1e-300)
        return flat_l[keep], flat_w[keep] / total, flat_h[keep]

    def _offset_at_most(self, y: float | np.ndarray) -> np.ndarray:
        """P(one chunk's offset <= y), each offset spread over its half-width."""
        off, w, half = self._chunk_offsets
        y = np.asarray(y, dtype=float)[..., None]
        spread = np.clip((y - (off - half)) / np.maximum(2 * half, 1e-300), 0.0, 1.0)
        below = np.where(half > 0, spread, off <= y)
        out: np.ndarray = below @ w
        return out

    @cached_property
    def _rank_periods(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(k, the share of chunk-carrying periods in which k data-parallel ranks carry one,
        such a period at the mean start): one rank, every such period; several, k of c ranks
        busy as `perf.lanes.busy_lanes` has them (k >= 1), each period as
        long as its slowest rank's chunk (the period with k chunks at the mean start, plus
        the largest of k offsets)."""
        t, lane = self.table, self.lane
        c = t.engine.lanes
        if c == 1:
            return np.array([1]), np.array([1.0]), np.array([lane.mixed_s])
        ks = np.arange(1, c + 1)
        busy = busy_lanes(c, lane.utilisation)
        base = np.array([interp_batch(t.ranks_mixed_s[k - 1], self.running) for k in ks])
        off, w, _ = self._chunk_offsets
        longest = float(off @ w) + t.by_prefill_batch(t.rank_offsets, self._at)  # E[max of k]
        counts = busy / np.maximum(base + longest, 1e-12)  # time shares as period counts
        total = float(counts.sum())
        if total <= 0:
            return np.array([1]), np.array([1.0]), np.array([lane.mixed_s])
        return ks, counts / total, base

    def _mixed_over(self, target_s: float) -> float:
        """Share of the periods that carry a chunk longer than `target_s`."""
        edge = target_s * (1 + 1e-9)
        if self.lane.decode_s > edge:
            return 1.0
        ks, shares, base = self._rank_periods
        within = self._offset_at_most(edge - base) ** ks
        return float(shares @ (1.0 - within))

    def gap_over(self, target_s: float) -> float:
        """Share of all token gaps longer than `target_s`."""
        decode_over = 1.0 if self.lane.decode_s > target_s * (1 + 1e-9) else 0.0
        share = self.mixed_gap_share
        return share * self._mixed_over(target_s) + (1 - share) * decode_over

    @cached_property
    def gap_s(self) -> float:
        """The token gap at the point's percentile of all gaps."""
        tail = 1 - self.percentile / 100
        td = self.lane.decode_s
        if self.mixed_gap_share <= tail:
            return td
        off, _, half = self._chunk_offsets
        lo = td
        hi = max(td, float(self._rank_periods[2].max()) + float((off + half).max(initial=0.0)))
        while hi - lo > 1e-6 * hi:
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self.gap_over(mid) > tail else (lo, mid)
        return hi

    @property
    def stall_s(self) -> float:
        """The longest token gap a chunk makes."""
        return self.table.stall_s

    @cached_property
    def mixed_mean_s(self) -> float:
        """The mean period that carries a chunk."""
        t = self.table
        ks, shares, base = self._rank_periods
        off, w, _ = self._chunk_offsets
        longest = float(off @ w) + t.by_prefill_batch(t.rank_offsets, self._at)[ks - 1]
        return max(float(shares @ (base + longest)), self.lane.decode_s)

    # --- TPOT -----------------------------------------------------------------------------

    @cached_property
    def _tpot_terms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per output bin: (periods it decodes, mean and sd of its mixed periods, weight)."""
        t, lane = self.table, self.lane
        w, e = t.workload, t.engine
        p = w.prompts
        chunks = np.ceil(p.computed / max(lane.chunk * e.pipeline, 1.0))  # a prompt's periods
        c1 = float(chunks @ p.weights) / p.admitted
        c2 = float((chunks * chunks) @ p.weights) / p.admitted
        outs, ow = output_bins(w.output_mean, w.output_sigma)
        periods = np.maximum(outs - 1, 1.0) / e.tokens_per_period
        others = max(0.0, self.running - 1) / max(self.running, 1.0)
        arrivals = self.admitted_rate * periods * lane.period_s * others
        return periods, arrivals * c1, np.sqrt(arrivals * c2), ow

    def tpot_over(self, target_s: float) -> float:
        """Share of requests whose mean time per output token exceeds `target_s`."""
        td, tm = self.lane.decode_s, self.mixed_mean_s
        tps = self.table.engine.tokens_per_period
        if not self.stable:
            return 1.0
        if tm <= td:
            return 1.0 if td / tps > target_s else 0.0
        periods, mean, sd, weights = self._tpot_terms
        need = periods * (target_s * tps - td) / (tm - td)  # mixed periods that reach it
        z = (need - mean) / np.maximum(sd, 1e-12)
        # scipy.special takes a tenth of a second to import: only a TPOT SLO reads it here, and
        # a FleetPlan read back from disk_memo never does
        from scipy.special import ndtr

        return float(ndtr(-z) @ weights)

    @cached_property
    def tpot_s(self) -> float:
        """A request's mean time per output token at the point's percentile."""
        tail = 1 - self.percentile / 100
        tps = self.table.engine.tokens_per_period
        lo, hi = self.lane.decode_s / tps, max(self.mixed_mean_s, self.lane.decode_s) / tps
        if self.tpot_over(lo) <= tail:
            return lo
        while hi - lo > 1e-6 * hi:
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self.tpot_over(mid) > tail else (lo, mid)
        return hi

    @property
    def token_s(self) -> float:
        """A stream's mean time per output token."""
        return self.lane.period_s / self.table.engine.tokens_per_period

    # --- the SLO --------------------------------------------------------------------------

    def itl_s(self, kind: str) -> float:
        """ITL as the SLO reads it: the token gap at the percentile, or TPOT at it."""
        return self.tpot_s if kind == "tpot" else self.gap_s

    def load_ratio(self, slo: SloTargets, exact: bool = True) -> float:
        """The worst of the shares outside a target that grow with the load (token gaps or
        TPOTs over the ITL target, arrivals finding every slot taken, TTFTs over the TTFT
        target) over the share allowed: <= 1 where they all hold (OVER_SLO when the replica
        cannot keep up). Not `exact`: once the token gaps or the slots alone are past their
        allowance, that ratio (a lower bound of the worst) without computing TTFT's."""
        if not self.stable:
            return OVER_SLO
        over_itl = (self.tpot_over(slo.itl_s) if slo.itl == "tpot"
                    else self.gap_over(slo.itl_s))
        cheap = max(over_itl, self.slot_full_chance) / slo.tail
        if not exact and cheap > 1:
            return cheap
        ttft = self.ttft_over(slo.ttft_s) if math.isfinite(slo.ttft_s) else 0.0
        return max(cheap, ttft / slo.tail)

    def margin(self, slo: SloTargets) -> float:
        """How far past its limit the worst SLO is (<= 0: every SLO holds): each as the share
        outside its target over the share allowed, less one; the stall as a ratio."""
        return max(self.load_ratio(slo) - 1, self.stall_s / slo.max_stall_s - 1)

    def meets(self, slo: SloTargets) -> bool:
        return self.margin(slo) <= 1e-9


def at_rate(
    table: Table, rate: float, percentile: float, arrival_cv2: float = 1.0,
    slots: int | None = None,
) -> Point:
    """The replica of `table` serving `rate` requests/s; `slots`: fewer than the table's."""
    admitted = rate * table.workload.prompts.admitted
    return Point(table, rate, running_at(table, admitted), percentile, arrival_cv2, slots)


def at_running(table: Table, running: float, percentile: float, slots: int | None = None
               ) -> Point:
    """The replica whose running batch settles at `running` (Poisson arrivals)."""
    admitted = rate_at(table, running)
    rate = admitted / max(table.workload.prompts.admitted, 1e-12)
    return Point(table, rate, running, percentile, 1.0, slots)


def saturation_rate(table: Table, percentile: float, tolerance: float = 1e-3) -> float:
    """The highest request rate the replica keeps up with (its lane and its slots stable),
    to `tolerance` of itself, by bisection on the log of the rate below every slot decoding
    in periods without chunks (Little's law)."""
    w, e = table.workload, table.engine
    td = float(table.decode_s[table.cap])
    hi = table.cap * e.tokens_per_period / (max(w.output_mean - 1, 1.0) * td)
    hi /= w.prompts.admitted
    lo = hi * 1e-6
    if at_rate(table, hi, percentile).stable:
        return hi
    while hi / lo - 1 > tolerance:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if at_rate(table, mid, percentile).stable else (lo, mid)
    return lo
