"""The yardstick: a few replicas simulated request by request and engine step by engine
step, to measure the fluid model's error on a short window (`compare`).

Each replica runs vLLM's V1 scheduling: every step decodes one token for each running
sequence, then gives what is left of `max_num_batched_tokens` to prefill chunks (prompts
already started first, then the waiting queue in arrival order, while fewer than
`max_num_seqs` run and the KV pool holds the prompt). A step takes
`perf.step.step_time(decodes, their mean context, prefill tokens, the first chunk's start)`
of the same step model; a request's first token comes at the end of the step that finishes
its prompt, its later tokens one per step. Prompt and output lengths are drawn from the
plan's lognormals (`max_model_len` caps a prompt). The region's Poisson arrivals are dealt
round robin (the ALB's default), so a sampled replica sees every n-th of them.

A request is inside the SLO when its TTFT meets the target and its longest token gap (or,
with `slo.itl: tpot`, its mean time per output token) meets the ITL target."""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np

from llmfleet.perf.step import StepModel, step_time
from llmfleet.plan.schema import CapacityPlan, TokenLength
from llmfleet.simulate.engine import Pool, ReplicaModel, inside_share

CONTEXT_ROUND = 64
CHUNK_ROUND = 16
START_ROUND = 256


@dataclass(frozen=True)
class ServedRequest:
    """Each request a sampled replica served: arrival time, TTFT, ITL as the SLO reads it."""

    arrival_s: np.ndarray
    ttft_s: np.ndarray
    itl_s: np.ndarray


def draw_lengths(rng: np.random.Generator, t: TokenLength, n: int, limit: int) -> np.ndarray:
    """n lengths from the lognormal through the mean and the highest percentile given."""
    sigma = t.sigma
    if sigma == 0:
        return np.full(n, min(t.mean, limit), dtype=np.int64)
    mu = math.log(t.mean) - sigma * sigma / 2
    return np.clip(np.rint(rng.lognormal(mu, sigma, n)), 1, limit).astype(np.int64)


def _timer(sm: StepModel) -> Callable[[int, int, int, int], float]:
    """Step times of this model, memoised on the rounded batch, context, chunk and start."""

    @cache
    def timed(decodes: int, context: int, prefill: int, start: int) -> float:
        return step_time(sm, decodes, float(context), float(prefill), float(start)).total_s

    return timed


def serve(
    model: ReplicaModel,
    arrivals: np.ndarray,
    prompts: np.ndarray,
    outputs: np.ndarray,
    itl: str,
) -> ServedRequest:
    """One replica serving these requests (arrival times sorted)."""
    m = model
    timed = _timer(m.step_model)
    budget, seqs, kv = m.budget_tokens, m.max_num_seqs, m.kv_cache_tokens
    tps = m.tokens_per_step
    n = len(arrivals)
    ttft = np.full(n, np.nan)
    gap = np.full(n, np.nan)
    first_at = np.zeros(n)
    first_step = np.zeros(n, dtype=np.int64)
    waiting: deque[int] = deque()
    prefilling: deque[list[int]] = deque()  # [request, prompt tokens done]
    decoding: list[tuple[float, int]] = []  # (step at which it ends, request)
    durations: list[float] = []
    context_sum = 0.0  # KV tokens held by decoding sequences
    held = 0  # KV tokens held by every running sequence
    t, nxt, step = 0.0, 0, 0
    while nxt < n or waiting or prefilling or decoding:
        while nxt < n and arrivals[nxt] <= t:
            waiting.append(nxt)
            nxt += 1
        if not (waiting or prefilling or decoding):
            t = float(arrivals[nxt])
            continue
        decodes = len(decoding)
        left = budget - decodes
        chunks: list[tuple[list[int], int]] = []
        start = 0
        for entry in prefilling:
            if left <= 0:
                break
            take = min(int(prompts[entry[0]]) - entry[1], left)
            if not chunks:
                start = entry[1]
            chunks.append((entry, take))
            left -= take
        while waiting and left > 0 and decodes + len(prefilling) < seqs:
            r = waiting[0]
            need = int(prompts[r] + outputs[r])
            if held + need > kv:
                break
            waiting.popleft()
            held += need
            entry = [r, 0]
            prefilling.append(entry)
            take = min(int(prompts[r]), left)
            if not chunks:
                start = 0
            chunks.append((entry, take))
            left -= take
        prefill = sum(take for _, take in chunks)
        ctx = int(round(context_sum / decodes / CONTEXT_ROUND)) * CONTEXT_ROUND if decodes else 0
        dt = timed(
            decodes,
            ctx,
            int(math.ceil(prefill / CHUNK_ROUND)) * CHUNK_ROUND if prefill else 0,
            int(start // START_ROUND) * START_ROUND,
        )
        t += dt
        durations.append(dt)
        step += 1
        context_sum += decodes * tps
        while decoding and decoding[0][0] <= step:
            _, r = heapq.heappop(decoding)
            held -= int(prompts[r] + outputs[r])
            context_sum -= float(prompts[r] + outputs[r])
            if outputs[r] > 1:
                steps = durations[int(first_step[r]):step]
                gap[r] = max(steps) if itl == "token_gap" else (t - first_at[r]) / (outputs[r] - 1)
            else:
                gap[r] = 0.0
        for entry, take in chunks:
            entry[1] += take
        while prefilling and prefilling[0][1] >= prompts[prefilling[0][0]]:
            r = prefilling.popleft()[0]
            ttft[r] = t - arrivals[r]
            first_at[r], first_step[r] = t, step
            remaining = max(0.0, (float(outputs[r]) - 1) / tps)
            heapq.heappush(decoding, (step + math.ceil(remaining - 1e-9), r))
            context_sum += float(prompts[r] + 1)
    return ServedRequest(arrivals, ttft, gap)


@dataclass(frozen=True)
class Comparison:
    """The fluid model against the request-by-request run on the same window."""

    minutes: int
    requests: int  # served by the sampled replicas
    attainment_events: float
    attainment_fluid: float
    minute_events: list[float]
    minute_fluid: list[float]

    @property
    def error(self) -> float:
        """Fluid minus events, overall attainment."""
        return self.attainment_fluid - self.attainment_events

    @property
    def minute_mae(self) -> float:
        pairs = list(zip(self.minute_fluid, self.minute_events, strict=True))
        return sum(abs(a - b) for a, b in pairs) / len(pairs)


def compare(
    plan: CapacityPlan,
    model: ReplicaModel,
    rate_per_replica: np.ndarray,
    replicas: int,
    sample: int = 2,
    seed: int = 0,
    step_s: float = 1.0,
) -> Comparison:
    """Fluid and events over a window: `rate_per_replica[s]` requests/s per replica in second
    s, `replicas` Ready replicas sharing the region's Poisson arrivals round robin; the events
    run serves the arrivals of `sample` of them."""
    slo = plan.slo
    rng = np.random.default_rng(seed)
    seconds = len(rate_per_replica)
    counts = rng.poisson(rate_per_replica * replicas)
    times = np.concatenate(
        [s + np.sort(rng.random(c)) for s, c in enumerate(counts)]
    ) if counts.sum() else np.zeros(0)
    limit = plan.max_model_len - 1
    ttft_ok: list[np.ndarray] = []
    arrival: list[np.ndarray] = []
    for j in range(sample):
        mine = times[j::replicas]
        prompts = draw_lengths(rng, plan.traffic.input_tokens, len(mine), limit)
        outputs = draw_lengths(rng, plan.traffic.output_tokens, len(mine), plan.max_model_len)
        outputs = np.minimum(outputs, plan.max_model_len - prompts)
        got = serve(model, mine, prompts, outputs, slo.itl)
        ok = (got.ttft_s <= slo.ttft_ms / 1000) & (got.itl_s <= slo.itl_ms / 1000 * (1 + 1e-9))
        ttft_ok.append(ok)
        arrival.append(mine)
    ok_all, at_all = np.concatenate(ttft_ok), np.concatenate(arrival)
    minutes = seconds // 60
    minute_events = []
    for k in range(minutes):
        sel = (at_all >= 60 * k) & (at_all < 60 * (k + 1))
        minute_events.append(float(ok_all[sel].mean()) if sel.any() else 1.0)
    pool = Pool(model, step_s, slo.percentile)
    per = int(round(step_s))
    for k in range(0, seconds, per):
        pool.advance(float(rate_per_replica[k:k + per].mean()) * replicas, replicas)
    stepped, _ = inside_share(model, pool.trace, slo.ttft_ms / 1000, slo.itl_ms / 1000,
                              slo.itl, slo.percentile)
    share = np.repeat(stepped, per)[:seconds]
    weights = counts.astype(float)
    minute_fluid = []
    for k in range(minutes):
        w = weights[60 * k:60 * (k + 1)]
        minute_fluid.append(float((w * share[60 * k:60 * (k + 1)]).sum() / w.sum()) if w.sum()
                            else 1.0)
    return Comparison(
        minutes=minutes,
        requests=len(ok_all),
        attainment_events=float(ok_all.mean()) if len(ok_all) else 1.0,
        attainment_fluid=float((weights * share).sum() / weights.sum()) if weights.sum() else 1.0,
        minute_events=minute_events,
        minute_fluid=minute_fluid,
    )
