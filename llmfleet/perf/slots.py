"""The wait for a batch slot: how far below its SLO-limit rate a replica must run so that an
arrival rarely finds every slot (max_num_seqs) taken.

The operating point sets max_num_seqs to the running batch D at the SLO-limit rate: the
*mean* batch there. Open-loop (Poisson) traffic makes the batch fluctuate around its mean,
so at that rate an arrival finds the batch full about as often as not and waits for a slot,
a wait the TTFT model does not count. The plan's headroom keeps a replica well below it
every day; in a region loss the headroom is spent, so stage 4 sizes a survivor at the
highest rate where an arrival finds the batch full no more often than 1 - p/100
(`loss_share`): the p-th percentile request then never waits for a slot.

The running batch is a birth-death chain on D = 0..cap: arrivals at rate lambda, each
running sequence finishes at D x tokens per step / (output x mean step(D)) (more sequences,
longer steps; the mixed steps the arrivals' prefills add included). Its stationary chance
that an arrival finds the cap is exact for that chain (`slot_chain`); the simulator reads
the same chain (`simulate.engine`), so the plan and the simulated day agree on it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from llmfleet.perf.step import StepModel, step_time

SEARCH_BATCH_POINTS = 33
"""Batches at which the search's table is computed (the rest linear between)."""
LOSS_SHARE_RESOLUTION = 0.002
"""How closely the loss share is found (of the SLO-limit rate)."""


def running_context_tokens(input_mean: float, output_mean: float, output_sigma: float) -> float:
    """KV a running sequence holds on average, i + E[o^2] / (2 E[o]): a sequence holds its
    prompt plus half its output, weighted by how long it runs (long outputs stay longer;
    `output_sigma`: of the output lengths' lognormal, `TokenLength.sigma`)."""
    return input_mean + output_mean * math.exp(output_sigma**2) / 2


def tokens_per_step(step_model: StepModel) -> float:
    """Tokens a stream gets per step (> 1 with speculative decoding)."""
    return step_model.speculation.tokens_per_step if step_model.speculation else 1.0


@dataclass(frozen=True)
class BatchTable:
    """A replica's step times by running batch D = 0..cap."""

    cap: int  # max_num_seqs, or fewer when the KV pool holds fewer running contexts
    context_tokens: float
    chunk: list[int]  # prefill tokens a mixed step carries: what the token budget leaves
    decode_s: list[float]  # a decode-only step at each batch
    mixed_s: list[float]  # a step carrying a chunk of what the budget leaves


def batch_table(
    step_model: StepModel,
    input_mean: float,
    output_mean: float,
    output_sigma: float,
    max_num_seqs: int,
    budget_tokens: int,
    kv_cache_tokens: int,
    points: int | None = None,
) -> BatchTable:
    """Every batch's step times, or with `points` those of that many batches spread over
    0..cap and the rest linear between them (a step is a roofline of affine terms in the
    batch: the search's cheap table; the simulator takes every batch)."""
    ctx = running_context_tokens(input_mean, output_mean, output_sigma)
    cap = max(1, min(max_num_seqs, int(kv_cache_tokens // ctx)))
    chunks = [max(1, budget_tokens - d) for d in range(cap + 1)]
    every = range(cap + 1)
    at = every if points is None or points > cap else np.unique(  # 1: a decode step's least
        np.concatenate([[1], np.linspace(0, cap, points).round().astype(int)])
    )
    decode = [step_time(step_model, max(int(d), 1), ctx).total_s for d in at]
    mixed = [
        step_time(step_model, int(d), ctx, chunks[int(d)], input_mean / 2).total_s for d in at
    ]
    if at is not every:
        decode = list(np.interp(every, at, decode))
        mixed = list(np.interp(every, at, mixed))
    return BatchTable(cap, ctx, chunks, decode, mixed)


def slot_chain(
    decode_s: np.ndarray, mixed_s: np.ndarray, chunk: np.ndarray, input_mean: float,
    output_mean: float, tokens_per_step: float, rates: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """For each arrival rate: the chance an arrival finds every batch slot taken, and the
    replica's completion rate at the cap, from the birth-death chain on the running batch
    D = 0..cap whose death rate is mu(D) = D x tokens per step / (o x mean step(D, rate))."""
    cap = len(decode_s) - 1
    batch = np.arange(cap + 1, dtype=float)[None, :]
    lam = rates[:, None]
    mixed = lam * input_mean / chunk[None, :]  # mixed steps per second
    steps = mixed + np.maximum(0.0, 1.0 - mixed * mixed_s[None, :]) / decode_s[None, :]
    mu = batch * steps * tokens_per_step / output_mean
    with np.errstate(divide="ignore"):
        ratio = np.log(np.maximum(lam, 1e-300)) - np.log(np.maximum(mu[:, 1:], 1e-300))
    log_pi = np.concatenate([np.zeros((len(rates), 1)), np.cumsum(ratio, axis=1)], axis=1)
    top = log_pi.max(axis=1, keepdims=True)
    weight = np.exp(log_pi - top)
    at_cap = mu[:, cap]
    r = np.minimum(rates / np.maximum(at_cap, 1e-300), 1 - 1e-12)
    beyond = weight[:, cap] * r / (1 - r)
    chance = (weight[:, cap] + beyond) / (weight.sum(axis=1) + beyond)
    chance = np.where(rates >= at_cap, 1.0, chance)
    return np.clip(chance, 0.0, 1.0), at_cap


def slot_wait_chance(
    step_model: StepModel, table: BatchTable, prefill_tokens_mean: float, output_mean: float,
    rates: np.ndarray,
) -> np.ndarray:
    """P(an arrival finds every slot taken) at each of `rates` (requests/s per replica);
    `prefill_tokens_mean`: the prompt tokens a replica prefills per request (0 for a
    disaggregated decode replica: its KV arrives computed, so no step is mixed)."""
    chance, _ = slot_chain(
        np.array(table.decode_s), np.array(table.mixed_s), np.array(table.chunk, float),
        prefill_tokens_mean, output_mean, tokens_per_step(step_model), rates,
    )
    return chance


def loss_share(
    step_model: StepModel,
    table: BatchTable,
    prefill_tokens_mean: float,
    output_mean: float,
    capacity_requests_per_s: float,
    percentile: float,
    floor_share: float,
) -> float:
    """The largest share of the SLO-limit rate (`floor_share` to 1) at which an arrival
    finds the batch full no more often than 1 - percentile / 100, to within
    LOSS_SHARE_RESOLUTION (the chance only grows with the rate: bisection); `floor_share`
    (the everyday sized share, 1 - headroom) when even that rate fills it more often."""
    allowed = 1 - percentile / 100 + 1e-12

    def within(share: float) -> bool:
        rate = np.array([share * capacity_requests_per_s])
        chance = slot_wait_chance(step_model, table, prefill_tokens_mean, output_mean, rate)
        return bool(chance[0] <= allowed)

    if within(1.0):
        return 1.0
    lo, hi = floor_share, 1.0
    if not within(lo):
        return floor_share
    while hi - lo > LOSS_SHARE_RESOLUTION:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if within(mid) else (lo, mid)
    return round(lo, 4)
