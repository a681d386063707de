"""A replica's SLO figures under the plan's traffic: the prompt a TTFT is for, TTFT and ITL
at the SLO percentile at a running batch, and the running batch a request rate settles at.

The ITL target is, by default, every gap between two tokens of a stream at the SLO
percentile (vLLM's benchmark `itl`; `slo.itl: tpot` reads it as a request's mean time per
output token instead). TTFT is the chunked prefill of the prompt at that percentile plus
the wait in the prefill lane at that percentile (`perf.queueing`) plus the mean wait for
the step under way (`MixedSteps.arrival_wait_s`)."""

from __future__ import annotations

from llmfleet.perf.chunked import MixedSteps, mixed_steps, prefill_s
from llmfleet.perf.queueing import length_cv2, prefill_wait, running_batch
from llmfleet.perf.step import StepModel
from llmfleet.plan.schema import CapacityPlan


def ttft_prompt_tokens(plan: CapacityPlan) -> int:
    """The prompt a TTFT at the SLO percentile is for: that percentile of the input lengths,
    at most what max_model_len leaves for one output token."""
    prompt = plan.traffic.input_tokens.at_percentile(plan.slo.percentile)
    return max(1, min(prompt, plan.max_model_len - 1))


def itl_percentile_s(plan: CapacityPlan, steps: MixedSteps) -> float:
    """ITL as the SLO defines it (`slo.itl`): the longest token gap, or a request's TPOT at
    the percentile."""
    if plan.slo.itl == "tpot":
        return steps.tpot_percentile_s(plan.traffic.output_tokens.mean, plan.slo.percentile)
    return steps.longest_gap_s


def ttft_percentile_s(
    step_model: StepModel, plan: CapacityPlan, steps: MixedSteps, batch: float, chunk: int
) -> float:
    """Own chunked prefill of the prompt at the SLO percentile + the prefill-lane wait at
    that percentile."""
    t = plan.traffic.input_tokens
    ctx = t.mean + plan.traffic.output_tokens.mean / 2
    service_p = prefill_s(step_model, batch, ctx, ttft_prompt_tokens(plan), chunk)
    service_p += step_model.ttft_overhead_s
    service_mean = t.mean / chunk * steps.mixed_s
    cv2 = length_cv2(t.mean, t.p95_or_mean)
    wait = prefill_wait(steps.mixed_share, service_mean, cv2, plan.slo.percentile)
    return service_p + wait.percentile_s + steps.arrival_wait_s(batch)


BATCH_RESOLUTION = 0.01
"""Bisections on the running batch stop at 1/100 of a sequence."""


def predict_at(
    step_model: StepModel, plan: CapacityPlan, batch: int, chunk_tokens: int, rate: float
) -> tuple[MixedSteps, float]:
    """Steps and TTFT (s) of a replica of at most `batch` running sequences and
    `chunk_tokens`-token prefill chunks serving `rate` requests/s (below its capacity)."""
    o = plan.traffic.output_tokens.mean
    i = plan.traffic.input_tokens.mean

    def token_s(d: float) -> float:
        return mixed_steps(step_model, d, i, o, chunk_tokens).mean_token_s

    running = running_batch(rate, o, float(batch), token_s, 1e-6, resolution=BATCH_RESOLUTION)
    steps = mixed_steps(step_model, max(running, 1e-6), i, o, chunk_tokens)
    return steps, ttft_percentile_s(step_model, plan, steps, running, chunk_tokens)
