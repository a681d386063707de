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

from llmfleet.perf.periods import Engine
from llmfleet.perf.step import StepModel, step_time
from llmfleet.plan.schema import CapacityPlan, TokenLength
from llmfleet.simulate.engine import Pool, ReplicaModel, inside_share

CONTEXT_ROUND = 64
CHUNK_ROUND = 16
START_ROUND = 256


@dataclass(frozen=True)
class ServedRequest:
    """Each request a sampled replica served: arrival time, TTFT, its longest token gap and
    its mean time per output token (NaN for a refused request), and every period's length
    with the streams it gave a token to (the pooled token gaps, vLLM's benchmark `itl`)."""

    arrival_s: np.ndarray
    ttft_s: np.ndarray
    longest_gap_s: np.ndarray
    tpot_s: np.ndarray
    period_s: np.ndarray
    period_streams: np.ndarray

    def itl_s(self, itl: str) -> np.ndarray:
        """Per request, ITL as `slo.itl` reads it (the longest gap, or TPOT)."""
        return self.tpot_s if itl == "tpot" else self.longest_gap_s

    def gap_at(self, percentile: float) -> float:
        """The token gap at a percentile of every gap of every stream."""
        return weighted_quantile(self.period_s, self.period_streams, percentile / 100)

    def ttft_at(self, percentile: float) -> float:
        """TTFT at a percentile of the requests (a refused one counts as over any target)."""
        t = np.where(np.isnan(self.ttft_s), np.inf, self.ttft_s)
        return float(np.quantile(t, percentile / 100, method="inverted_cdf"))


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The q-quantile of `values` weighted by `weights` (the smallest value at or above it)."""
    if len(values) == 0 or weights.sum() <= 0:
        return 0.0
    order = np.argsort(values)
    cum = np.cumsum(weights[order]) / weights.sum()
    k = int(np.searchsorted(cum, q - 1e-12))
    return float(values[order][min(k, len(order) - 1)])


def draw_lengths(rng: np.random.Generator, t: TokenLength, n: int, limit: int) -> np.ndarray:
    """n lengths from the lognormal through the mean and the highest percentile given."""
    sigma = t.sigma
    if sigma == 0:
        return np.full(n, min(t.mean, limit), dtype=np.int64)
    mu = math.log(t.mean) - sigma * sigma / 2
    return np.clip(np.rint(rng.lognormal(mu, sigma, n)), 1, limit).astype(np.int64)


def draw_prompts(rng: np.random.Generator, t: TokenLength, n: int) -> np.ndarray:
    """n prompt lengths from the plan's lognormal, unclipped (`serve` refuses the long)."""
    return draw_lengths(rng, t, n, 2**62)


def _timer(sm: StepModel) -> Callable[[int, int, int, int], float]:
    """Step times of this model, memoised on the rounded batch, context, chunk and start."""

    @cache
    def timed(decodes: int, context: int, prefill: int, start: int) -> float:
        return step_time(sm, decodes, float(context), float(prefill), float(start)).total_s

    return timed


def serve(
    engine: Engine,
    arrivals: np.ndarray,
    prompts: np.ndarray,
    outputs: np.ndarray,
    max_model_len: int | None = None,
) -> ServedRequest:
    """One replica serving these requests (arrival times sorted), period by period as vLLM's
    V1 scheduler runs them: every running sequence decodes; then `lanes` batches (pipeline
    microbatches, data-parallel ranks) each take prompt chunks from what their budget leaves
    beside their share of the decodes, first come first served, a prompt in one batch at a
    time, while fewer than `slots` run and the KV pool holds the prompt and its output. A
    period takes the step model's time of its decodes and the fullest batch's chunk. A prompt
    at or over `max_model_len` is refused."""
    timed = _timer(engine.step_model)
    budget, seqs, kv = engine.budget_tokens, engine.slots, engine.kv_cache_tokens
    lanes, pipeline, batches = engine.lanes, engine.pipeline, engine.batches
    tps = engine.tokens_per_period
    handling = engine.step_model.ttft_overhead_s  # the API server before the first token
    n = len(arrivals)
    ttft = np.full(n, np.nan)
    gap = np.full(n, np.nan)
    tpot = np.full(n, np.nan)
    first_at = np.zeros(n)
    first_step = np.zeros(n, dtype=np.int64)
    waiting: deque[int] = deque()
    prefilling: deque[list[int]] = deque()  # [request, prompt tokens done]
    decoding: list[tuple[float, int]] = []  # (period at which it ends, request)
    durations: list[float] = []
    streams: list[int] = []
    context_sum = 0.0  # KV tokens held by decoding sequences
    held = 0  # KV tokens held by every running sequence
    limit = max_model_len if max_model_len is not None else 2**62
    t, nxt, step = 0.0, 0, 0
    while nxt < n or waiting or prefilling or decoding:
        while nxt < n and arrivals[nxt] <= t:
            if prompts[nxt] < limit:
                waiting.append(nxt)
            nxt += 1
        if not (waiting or prefilling or decoding):
            if nxt >= n:
                break
            t = float(arrivals[nxt])
            continue
        decodes = len(decoding)
        room = max(0, budget - math.ceil(decodes / batches))  # a microbatch's chunk tokens
        left = [room * pipeline] * lanes  # a rank's chunk tokens a period, its microbatches'
        chunks: list[tuple[list[int], int]] = []
        biggest, start = 0, 0

        def place(entry: list[int], want: int) -> bool:
            """Chunks of this prompt on the first rank with room (a prompt stays on one)."""
            nonlocal biggest, start
            for b in range(lanes):
                if left[b] > 0:
                    take = min(want, left[b])
                    chunks.append((entry, take))
                    left[b] -= take
                    used = min(room, room * pipeline - left[b])  # the fullest microbatch
                    if used > biggest:
                        biggest, start = used, entry[1]
                    return True
            return False

        for entry in prefilling:
            if not place(entry, int(prompts[entry[0]]) - entry[1]):
                break
        while waiting and any(x > 0 for x in left) and decodes + len(prefilling) < seqs:
            r = waiting[0]
            need = int(prompts[r] + outputs[r])
            if held + need > kv:
                break
            waiting.popleft()
            held += need
            entry = [r, 0]
            prefilling.append(entry)
            place(entry, int(prompts[r]))
        ctx = int(round(context_sum / decodes / CONTEXT_ROUND)) * CONTEXT_ROUND if decodes else 0
        dt = timed(
            decodes,
            ctx,
            int(math.ceil(biggest / CHUNK_ROUND)) * CHUNK_ROUND if biggest else 0,
            int(start // START_ROUND) * START_ROUND,
        )
        t += dt
        durations.append(dt)
        streams.append(decodes)
        step += 1
        context_sum += decodes * tps
        while decoding and decoding[0][0] <= step:
            _, r = heapq.heappop(decoding)
            held -= int(prompts[r] + outputs[r])
            context_sum -= float(prompts[r] + outputs[r])
            if outputs[r] > 1:
                gap[r] = max(durations[int(first_step[r]):step])
                tpot[r] = (t - first_at[r]) / (outputs[r] - 1)
            else:
                gap[r] = tpot[r] = 0.0
        for entry, take in chunks:
            entry[1] += take
        # Prompts whose last chunk ran now give their first token (with lanes side by side,
        # one behind the head may finish first).
        for entry in [e for e in prefilling if e[1] >= prompts[e[0]]]:
            prefilling.remove(entry)
            r = entry[0]
            ttft[r] = t - arrivals[r] + handling
            first_at[r], first_step[r] = t, step
            remaining = max(0.0, (float(outputs[r]) - 1) / tps)
            heapq.heappush(decoding, (step + math.ceil(remaining - 1e-9), r))
            context_sum += float(prompts[r] + 1)
    return ServedRequest(arrivals, ttft, gap, tpot, np.array(durations), np.array(streams,
                                                                                    float))


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
    ttft_ok: list[np.ndarray] = []
    arrival: list[np.ndarray] = []
    engine = model.table.engine
    for j in range(sample):
        mine = times[j::replicas]
        prompts = draw_prompts(rng, plan.traffic.input_tokens, len(mine))
        outputs = draw_lengths(rng, plan.traffic.output_tokens, len(mine), plan.max_model_len)
        outputs = np.maximum(1, np.minimum(outputs, plan.max_model_len - prompts))
        got = serve(engine, mine, prompts, outputs, plan.max_model_len)
        ok = (got.ttft_s <= slo.ttft_ms / 1000) & (
            got.itl_s(slo.itl) <= (slo.itl_ms if slo.itl == "tpot" else slo.stall_ms) / 1000
            * (1 + 1e-9))
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
    stepped, _ = inside_share(model, pool.trace)
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
