"""A region's serving replicas as a fluid, stepped on the plan's own step-time model.

Each region's Ready replicas share its arrivals evenly (the ALB's default round robin), so
they hold the same state and one "per replica" state stands for all of them: `running`
(sequences decoding) and `queued` (requests the engine cannot take: a backlog). Every step
of `step_s` seconds, at the step's expected arrival rate:

- the engine runs decode-only steps of `perf.step.step_time(D, context)` and mixed steps
  carrying a prefill chunk of what the token budget leaves (`max_num_batched_tokens - D`,
  vLLM's scheduler); the step model is the one the search sized the region with
  (`StepModel` rebuilt from the FleetPlan's replica record: its layout, levers and
  calibration; a test checks it is the search's own). A running sequence
  holds its prompt plus half its output weighted by how long it runs, i + E[o^2] / (2 E[o])
  (long outputs stay longer; the plan's i + o / 2 is the unweighted mean);
- requests finish at D x tokens per second / mean output (Little's law);
- the backlog is admitted while slots (max_num_seqs, or what the KV pool holds) and the
  prefill lane (chunk / mixed step, every step mixed) allow.

A request's TTFT is its own prompt's chunked prefill (`perf.chunked.prefill_s`) plus three
waits: the backlog ahead of it (the mean backlog over the step / the admission rate), the
prefill lane's M/G/1 wait (`perf.queueing.prefill_wait` at the step's mixed share, the
function the plan sizes with), and the wait for a batch slot, which the plan does not count.
A replica is one server whose rate grows with its batch D but ever more slowly, mu(D) =
D x tokens per step / (o x mean step(D)) (more sequences, longer steps): near the cap a
little more traffic needs a much larger batch. As a birth-death chain on D (Poisson
arrivals, exponential lifetimes) the chance that an arrival finds the cap is exact for
that chain; beyond the cap the queue drains at mu(cap), so a wait is Exp(mu(cap) - lambda),
its mean scaled by (ca^2 + cs^2) / 2 for round robin's regular arrivals (ca^2 = 1 /
replicas) and the output lengths' spread (cs^2 of their lognormal; Allen-Cunneen). The
lane's and the slot's waits are each an atom at zero plus an exponential tail, so their sum
has a closed-form tail (`wait_tail`); `inside_share` integrates it over the
prompt-length distribution (lognormal through the plan's mean and p95/p99, in quantile bins)
and multiplies by whether the step's token gap (or TPOT) meets the ITL target. The
stochastic waits are analytic, so the fluid runs on expected rates and its backlog is the
deterministic overload a spike, a loss or a slow scale-out leaves."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from llmfleet.errors import PlanError
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.fleetplan.replica_record import step_model_of
from llmfleet.perf.chunked import prefill_s
from llmfleet.perf.queueing import (
    length_at_percentile,
    length_cv2,
    prefill_wait,
)
from llmfleet.perf.slots import batch_table, slot_chain, tokens_per_step
from llmfleet.perf.step import StepModel
from llmfleet.plan.model import resolve_model
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.replica_slo import ttft_prompt_tokens

QUANTILE_EDGES = (
    0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.925, 0.95, 0.96, 0.97, 0.975,
    0.98, 0.985, 0.99, 0.9925, 0.995, 0.9975, 0.999, 0.9995, 1.0,
)
"""Prompt-length bins by probability, finer in the tail where a percentile SLO is decided."""
PREFILL_BATCH_POINTS = 24
"""Running batches at which a prompt's own prefill time is tabulated (linear between)."""
RHO_CAP = 0.98
"""The M/G/1 and M/G/c waits are read at a utilisation of at most this; above it the lane or
the slots are saturated and the fluid backlog carries the wait."""
RATE_POINTS = 512
"""Arrival rates at which the batch-slot chain is solved (nearest point used)."""
LONGEST_WAIT_S = 3600.0


def step_models(plan: CapacityPlan, fleet: FleetPlan) -> dict[str, StepModel]:
    """Each region's step model as the search sized it, rebuilt from the FleetPlan's replica
    record (`fleetplan.replica_record`: levers, layout, calibration), without searching."""
    model = resolve_model(plan)
    return {rp.region: step_model_of(rp.replica, model) for rp in fleet.regions}


@dataclass(frozen=True)
class ReplicaModel:
    """What one replica of a region does, tabulated by its running batch (0..batch_cap)."""

    region: str
    step_model: StepModel
    max_num_seqs: int
    budget_tokens: int
    batch_cap: int  # max_num_seqs, or fewer when the KV pool holds fewer running contexts
    kv_bound: bool  # the KV pool, not max_num_seqs, caps the batch
    kv_cache_tokens: int
    input_mean: float
    output_mean: float
    context_tokens: float  # KV a running sequence holds on average, i + E[o^2] / (2 E[o])
    prompt_cv2: float
    service_cv2: float  # a request's decode time: its output length's squared CV
    tokens_per_step: float
    ttft_overhead_s: float
    decode_s: list[float]  # a decode-only step at each batch
    mixed_s: list[float]  # a step carrying a chunk of what the budget leaves
    chunk: list[int]
    prefill_batches: np.ndarray  # batches of the prefill table
    prefill_s: np.ndarray  # (batch points, prompt bins): a prompt's own chunked prefill
    prompt_weights: np.ndarray  # probability of each prompt bin
    prompt_tokens: np.ndarray
    slo_prompt_prefill_s: list[float]  # the SLO-percentile prompt's prefill, by batch
    rate_step: float  # arrival rates of the slot chain: 0, rate_step, 2 x rate_step, ...
    slot_wait_chance: list[float]  # P(an arrival finds every slot taken), by rate
    cap_rate: list[float]  # requests/s a replica completes at the cap, by rate


def replica_model(plan: CapacityPlan, rp: RegionPlan, sm: StepModel) -> ReplicaModel:
    t = plan.traffic
    i, o = float(t.input_tokens.mean), float(t.output_tokens.mean)
    out_sigma = t.output_tokens.sigma
    rec = rp.replica  # the whole replica's batch and budget (a DP replica's ranks together)
    seqs, budget = rec.batch, rec.replica_budget_tokens
    kv_tokens = rec.memory.kv_cache_tokens
    table = batch_table(sm, i, o, out_sigma, seqs, budget, kv_tokens)
    cap, ctx, kv_cap = table.cap, table.context_tokens, int(kv_tokens // table.context_tokens)
    chunks, decode, mixed = table.chunk, table.decode_s, table.mixed_s
    edges = np.array(QUANTILE_EDGES)
    mids = (edges[:-1] + edges[1:]) / 2
    limit = plan.max_model_len - 1
    tin = t.input_tokens
    lengths = np.array(
        [min(limit, max(1, length_at_percentile(tin.mean, tin.p95, tin.p99, 100 * q)))
         for q in mids]
    )
    points = np.unique(np.linspace(0, cap, PREFILL_BATCH_POINTS).round().astype(int))
    prefill_table = np.array(
        [[prefill_s(sm, float(d), ctx, int(n), chunks[d]) for n in lengths] for d in points]
    )
    slo_prompt = ttft_prompt_tokens(plan)
    slo_prefill = [prefill_s(sm, float(d), ctx, slo_prompt, chunks[d]) for d in range(cap + 1)]
    top = cap * tokens_per_step(sm) / (o * decode[cap])  # none completes faster than this
    rates = np.linspace(0.0, top, RATE_POINTS)
    chance, at_cap = slot_chain(np.array(decode), np.array(mixed), np.array(chunks, float),
                                i, o, tokens_per_step(sm), rates)
    return ReplicaModel(
        region=rp.region,
        step_model=sm,
        max_num_seqs=seqs,
        budget_tokens=budget,
        batch_cap=cap,
        kv_bound=kv_cap < seqs,
        kv_cache_tokens=kv_tokens,
        input_mean=i,
        output_mean=o,
        context_tokens=ctx,
        prompt_cv2=length_cv2(tin.mean, tin.p95_or_mean),
        service_cv2=math.exp(out_sigma**2) - 1,
        tokens_per_step=tokens_per_step(sm),
        ttft_overhead_s=sm.ttft_overhead_s,
        decode_s=decode,
        mixed_s=mixed,
        chunk=chunks,
        prefill_batches=points,
        prefill_s=prefill_table,
        prompt_weights=np.diff(edges),
        prompt_tokens=lengths,
        slo_prompt_prefill_s=slo_prefill,
        rate_step=float(rates[1]),
        slot_wait_chance=[float(v) for v in chance],
        cap_rate=[float(v) for v in at_cap],
    )


def not_simulated(fleet: FleetPlan) -> str | None:
    """Why the fleet cannot be simulated, or None: a disaggregated region (a prefill pool,
    the KV's transfer and a decode pool) is not modelled; its replicas are not one engine."""
    split = [rp.region for rp in fleet.regions if rp.disaggregation is not None]
    if not split:
        return None
    return (
        f"{', '.join(split)} serve{'s' if len(split) == 1 else ''} disaggregated (a prefill "
        "and a decode pool); the simulator models colocated replicas only (prefill chunked "
        "beside decode on one engine). Set allowed.disaggregated: false to simulate the "
        "colocated fleet"
    )


def replica_models(plan: CapacityPlan, fleet: FleetPlan) -> dict[str, ReplicaModel]:
    why = not_simulated(fleet)
    if why is not None:
        raise PlanError("allowed.disaggregated", plan.allowed.disaggregated, why)
    models = step_models(plan, fleet)
    return {rp.region: replica_model(plan, rp, models[rp.region]) for rp in fleet.regions}


@dataclass
class Trace:
    """Per step, what `inside_share` and the autoscaler's windowed signals need."""

    batch: list[int] = field(default_factory=list)  # index into the tables
    mixed_share: list[float] = field(default_factory=list)  # the prefill lane's utilisation
    lane_wait_s: list[float] = field(default_factory=list)  # its M/G/1 mean wait
    slot_chance: list[float] = field(default_factory=list)  # P(wait for a batch slot)
    slot_wait_s: list[float] = field(default_factory=list)  # mean of that wait, if waiting
    backlog_wait_s: list[float] = field(default_factory=list)  # the fluid backlog's
    backlog: list[float] = field(default_factory=list)  # per replica, at the step's end
    mean_wait_s: list[float] = field(default_factory=list)  # queue time of a step's arrival
    ttft_p_s: list[float] = field(default_factory=list)  # TTFT at the percentile


class Pool:
    """The Ready replicas of one region as a fluid (per replica `running` and `queued`)."""

    def __init__(self, model: ReplicaModel, step_s: float, percentile: float) -> None:
        self.model = model
        self.step_s = step_s
        self.percentile = percentile
        self.tail = 1 - percentile / 100
        self.running = 0.0
        self.queued = 0.0
        self.mean_step_s = model.decode_s[1]
        self.trace = t = Trace()
        self._log: tuple[Callable[[Any], None], ...] = (
            t.batch.append, t.mixed_share.append, t.lane_wait_s.append, t.slot_chance.append,
            t.slot_wait_s.append, t.backlog_wait_s.append, t.backlog.append,
            t.mean_wait_s.append, t.ttft_p_s.append,
        )
        # The latest step's gauges, per replica (what vLLM's metrics would show).
        self.waiting = 0.0  # mean requests waiting (num_requests_waiting)
        self.kv_usage = 0.0

    def clear(self) -> None:
        """The replicas are gone (a lost region): nothing runs or waits."""
        self.running = self.queued = 0.0

    def advance(self, rate: float, replicas: int) -> None:
        """One step at `rate` requests/s spread over `replicas` Ready replicas (> 0).

        Implicit Euler on the running batch, D' = (D + admitted) / (1 + step / life): at a
        constant rate it settles at D = rate x life (Little's law) for any step length."""
        m, dt = self.model, self.step_s
        i, o, tps, cap = m.input_mean, m.output_mean, m.tokens_per_step, m.batch_cap
        lam = rate / replicas
        d, q = self.running, self.queued
        k = int(d + 0.5)
        k = 1 if k < 1 else cap if k > cap else k
        td, tm, c = m.decode_s[k], m.mixed_s[k], m.chunk[k]
        life = o * self.mean_step_s / tps  # a request's decode time
        x = dt / life
        want = q + lam * dt
        admit = min(want, cap * (1 + x) - d, dt / tm * c / i)
        if admit < 0:
            admit = 0.0
        mixed = admit * i / c
        busy = dt - mixed * tm
        steps = mixed + (busy if busy > 0 else 0.0) / td
        f = mixed / steps
        self.mean_step_s = dt / steps
        self.running = (d + admit) / (1 + x)
        queued = want - admit
        self.queued = queued = queued if queued > 0 else 0.0
        ahead = (q + queued) / 2
        if ahead <= 1e-9:
            wait = 0.0
        elif admit > 0:
            wait = min(LONGEST_WAIT_S, ahead * dt / admit)
        else:
            wait = LONGEST_WAIT_S
        lane = prefill_wait(f if f < RHO_CAP else RHO_CAP, i / c * tm, m.prompt_cv2,
                            self.percentile)
        # The wait for a batch slot: the chain's chance, Exp(mu(cap) - lambda) beyond it.
        j = int(lam / m.rate_step + 0.5)
        if j >= RATE_POINTS:
            j = RATE_POINTS - 1
        chance, at_cap = m.slot_wait_chance[j], m.cap_rate[j]
        spare = max(at_cap - lam, at_cap * (1 - RHO_CAP))
        slot = (1 / replicas + m.service_cv2) / 2 / spare
        lane_s = lane.mean_s
        self.waiting = queued + lam * (lane_s + chance * slot)
        self.kv_usage = self.running * m.context_tokens / m.kv_cache_tokens
        slot_p = slot * math.log(chance / self.tail) if chance > self.tail else 0.0
        ttft_p = m.slo_prompt_prefill_s[k] + wait + lane.percentile_s + slot_p + m.ttft_overhead_s
        log = self._log
        log[0](k)
        log[1](f)
        log[2](lane_s)
        log[3](chance)
        log[4](slot)
        log[5](wait)
        log[6](queued)
        log[7](wait + lane_s + chance * slot)
        log[8](ttft_p)

    def skip(self) -> None:
        """A step without Ready replicas: nothing is served (its arrivals fail)."""
        log = self._log
        log[0](1)
        for append in log[1:]:
            append(0.0)
        self.waiting = self.kv_usage = 0.0


def wait_tail(x: np.ndarray, p1: np.ndarray, r1: np.ndarray, p2: np.ndarray,
              r2: np.ndarray) -> np.ndarray:
    """P(W1 + W2 > x) for x >= 0, each W an atom at 0 and, with chance p, Exp(rate r)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        e1, e2 = np.exp(-r1 * x), np.exp(-r2 * x)
        close = np.abs(r2 - r1) <= 1e-9 * np.maximum(r1, r2)
        both = np.where(close, (1 + r1 * x) * e1, (r2 * e1 - r1 * e2) / (r2 - r1))
    tail: np.ndarray = p1 * (1 - p2) * e1 + p2 * (1 - p1) * e2 + p1 * p2 * np.nan_to_num(both)
    return tail


def inside_share(
    model: ReplicaModel,
    trace: Trace,
    ttft_s: float,
    itl_s: float,
    itl: str,
    percentile: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Per step, the share of its arrivals inside both targets, and whether the step's token
    gap (or TPOT) at the percentile meets the ITL target (vectorised over the day)."""
    m = model
    k = np.asarray(trace.batch)
    f = np.asarray(trace.mixed_share)
    rho = np.minimum(f, RHO_CAP)
    lane = np.asarray(trace.lane_wait_s)
    # Own prefill of each prompt bin at each step's batch (linear in the batch between points).
    pts = m.prefill_batches.astype(float)
    j = np.clip(np.searchsorted(pts, k, side="right") - 1, 0, len(pts) - 1)
    j2 = np.minimum(j + 1, len(pts) - 1)
    span = np.where(pts[j2] > pts[j], pts[j2] - pts[j], 1.0)
    frac = np.clip((k - pts[j]) / span, 0.0, 1.0)[:, None]
    own = m.prefill_s[j] * (1 - frac) + m.prefill_s[j2] * frac
    slack = ttft_s - m.ttft_overhead_s - np.asarray(trace.backlog_wait_s)[:, None] - own
    r1 = np.where(lane > 0, rho / np.where(lane > 0, lane, 1.0), 1.0)
    slot = np.asarray(trace.slot_wait_s)
    r2 = np.where(slot > 0, 1 / np.where(slot > 0, slot, 1.0), 1.0)
    chance = np.asarray(trace.slot_chance)
    over = wait_tail(np.maximum(slack, 0.0), rho[:, None], r1[:, None], chance[:, None],
                     r2[:, None])
    tail = np.where(slack < 0, 1.0, over)
    ttft_ok = 1.0 - tail @ m.prompt_weights
    td = np.asarray(m.decode_s)[k]
    tm = np.asarray(m.mixed_s)[k]
    if itl == "tpot":
        o = m.output_mean
        g = np.minimum(1.0, f)
        z = NormalDist().inv_cdf(percentile / 100)
        count = o * g + z * np.sqrt(o * g * (1 - g))
        gap = (td + np.minimum(1.0, count / o) * (tm - td)) / m.tokens_per_step
    else:
        gap = np.where(f > 0, tm, td)
    itl_ok = gap <= itl_s * (1 + 1e-9)
    return np.clip(ttft_ok, 0.0, 1.0) * itl_ok, itl_ok
