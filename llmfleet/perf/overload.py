"""An open-loop arrival rate above what the replica can serve: no steady state exists.

Requests then queue for a batch slot (and for the prefill lane) and each waits longer
than the one before; the mean wait depends on how long the run lasts, so it is given for
a run of a stated number of requests and is unbounded without one.

A finite run of N requests also never batches more than N at once: its steps are those
of a batch of min(slots, N), and its throughput is N requests over the run's duration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmfleet.perf.chunked import mixed_steps, prefill_s
from llmfleet.perf.step import StepModel, step_time


@dataclass(frozen=True)
class Overload:
    """A rate-driven run the replica cannot keep up with."""

    input_tokens: int
    output_tokens: int
    chunk: float  # prompt tokens a step carries beside the batch
    batch: float  # sequences decoding together once the queue forms
    capacity_requests_per_s: float  # completions per second at that batch
    token_s: float  # a stream's mean time per output token at that batch (its TPOT)
    ttft_s: float | None  # mean over the run; None: the wait grows without bound
    output_tokens_per_s: float  # output tokens / the run's duration (at capacity if unbounded)
    reason: str


def run_batch(cap: float, num_requests: int | None) -> float:
    """Most sequences a run can decode together: the slots, and no more than its requests."""
    return min(cap, float(num_requests)) if num_requests else cap


def capacity(
    step_model: StepModel, input_tokens: int, output_tokens: int, batch: float, budget_tokens: int
) -> tuple[float, float]:
    """(requests per second, time per output token) with `batch` sequences always decoding."""
    chunk = max(1.0, budget_tokens - batch)
    token_s = mixed_steps(step_model, batch, input_tokens, output_tokens, chunk).mean_token_s
    return batch / (output_tokens * token_s), token_s


def assess(
    step_model: StepModel,
    input_tokens: int,
    output_tokens: int,
    request_rate: float,
    num_requests: int | None,
    cap: float,
    budget_tokens: int,
) -> tuple[float | None, Overload | None]:
    """(the replica's capacity in requests per second, with every slot decoding; the
    overloaded run at `request_rate`, or None when the replica keeps up with it).

    Overload is a property of the replica (the rate exceeds its capacity); a finite run's
    TTFT and throughput come from its own batch of at most `num_requests` sequences.
    (None, None) when no sequence fits."""
    i, o, n, rate = input_tokens, output_tokens, num_requests, request_rate
    if cap < 1:
        return None, None
    mu = capacity(step_model, i, o, cap, budget_tokens)[0]
    if rate <= mu:
        return mu, None
    batch = run_batch(cap, n)
    token_s = capacity(step_model, i, o, batch, budget_tokens)[1]
    chunk = max(1.0, budget_tokens - batch)
    service = prefill_s(step_model, batch, i + o / 2, i, int(chunk))
    reason = f"arrival rate {rate:g} req/s exceeds the capacity of {mu:.3g} req/s"
    if n is None:
        reason += ": the queue and TTFT grow without bound"
        return mu, Overload(i, o, chunk, batch, mu, token_s, None, batch / token_s, reason)
    mixed = mixed_steps(step_model, batch, i, o, chunk).mixed_s
    lane = min(service, i / chunk * mixed)  # a chunk packs prompts: the lane is by tokens
    ttft, duration = fluid_run(n, rate, int(cap), service, lane, token_s, o)
    reason += f"; mean wait over a run of {n} requests"
    return mu, Overload(i, o, chunk, batch, mu, token_s, ttft, n * o / duration, reason)


def fluid_run(
    n: int,
    rate: float,
    slots: int,
    prefill_s_: float,
    lane_s: float,
    token_s: float,
    output_tokens: int,
) -> tuple[float, float]:
    """(mean TTFT, duration) of n requests arriving 1/rate apart, served in order.

    Request k arrives at k / rate and starts its prefill once a slot is free (request
    k - slots has finished) and the prefill lane has room: the lane is a chunk of prompt
    tokens per step, so a prompt holds it for `lane_s` (its tokens' share of the chunk's
    steps, all of `prefill_s_` for a prompt longer than a chunk, a fraction of one step for a
    short one: one step packs many short prompts). Its first token comes `prefill_s_` after
    it starts (the steps its own chunks ride on); it then decodes its remaining tokens at
    `token_s` each.
    """
    slots = max(1, slots)
    finish: list[float] = []
    lane_free = 0.0
    ttft_sum = 0.0
    for k in range(n):
        arrive = k / rate
        slot_free = finish[k - slots] if k >= slots else 0.0
        start = max(arrive, slot_free, lane_free)
        lane_free = start + lane_s
        first_token = start + prefill_s_
        ttft_sum += first_token - arrive
        finish.append(first_token + (output_tokens - 1) * token_s)
    return ttft_sum / n, max(finish)


def fields(step_model: StepModel, over: Overload) -> dict[str, Any]:
    """The fields of `predict.Prediction` for an overloaded run (all but the mode)."""
    i, o, chunk = over.input_tokens, over.output_tokens, over.chunk
    ttft = None if over.ttft_s is None else over.ttft_s + step_model.ttft_overhead_s
    out_s = over.output_tokens_per_s
    return {
        "batch_size": over.batch,
        "prefill_tokens_per_step": over.batch * i / o,
        "step_bound": step_time(step_model, over.batch, i + o / 2, chunk, i / 2).bound,
        "ttft_ms": None if ttft is None else ttft * 1000,
        "itl_ms": over.token_s * 1000,
        "e2e_latency_ms": None if ttft is None else (ttft + (o - 1) * over.token_s) * 1000,
        "output_tokens_per_s": out_s,
        "total_tokens_per_s": out_s * (i + o) / o,
        "requests_per_s": out_s / o,
        "saturated": True,
        "overloaded": True,
        "capacity_requests_per_s": over.capacity_requests_per_s,
        "ttft_reason": over.reason,
    }
