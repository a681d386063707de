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
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from llmfleet.perf.periods import Engine
from llmfleet.perf.step import StepModel, step_time
from llmfleet.plan.schema import CapacityPlan
from llmfleet.plan.traffic import TokenLength
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
    first_chunk_s: np.ndarray | None = None  # when its first prompt chunk was scheduled
    period_chunk_tokens: np.ndarray | None = None  # prompt tokens each period carried
    period_chunk_ranks: np.ndarray | None = None  # data-parallel ranks carrying a chunk

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


def _timer(sm: StepModel) -> Callable[[int, int, int, int, int], float]:
    """Step times of this model, memoised on the rounded batch, context, chunk, its start
    and the other data-parallel ranks' chunks."""

    @cache
    def timed(decodes: int, context: int, prefill: int, start: int, others: int) -> float:
        return step_time(sm, decodes, float(context), float(prefill), float(start),
                         float(others)).total_s

    return timed


def _up(x: int, step: int) -> int:
    return int(math.ceil(x / step)) * step if x > 0 else 0


def _down(x: int, step: int) -> int:
    return int(x // step) * step


@dataclass
class _Rank:
    """One data-parallel rank's scheduler (the whole engine without data parallelism)."""

    slots: int
    kv: float
    waiting: deque[int] = field(default_factory=deque)
    prefilling: deque[list[int]] = field(default_factory=deque)  # [request, tokens done]
    started: list[int] = field(default_factory=list)  # decoding, latest last (may be stale)
    decodes: int = 0
    held: float = 0.0  # KV tokens in use: prompts admitted and every token generated

    @property
    def load(self) -> int:
        """What vLLM's data-parallel coordinator compares: waiting and running requests."""
        return len(self.waiting) + len(self.prefilling) + self.decodes


def serve(
    engine: Engine,
    arrivals: np.ndarray,
    prompts: np.ndarray,
    outputs: np.ndarray,
    max_model_len: int | None = None,
    cached: np.ndarray | None = None,
) -> ServedRequest:
    """One replica serving these requests (arrival times sorted), period by period as vLLM's
    V1 scheduler runs them. Each data-parallel rank (one without data parallelism) has its
    own scheduler, slots and KV pool; a request goes to the rank with the fewest waiting and
    running requests. In a period every running sequence decodes; then each of a rank's
    pipeline microbatches takes prompt chunks from what its budget leaves beside its share of
    the rank's decodes, first come first served (one prompt may have a chunk in each), while
    the rank has a free slot and its KV pool holds the prompt. The ranks step together: a
    period takes the slowest rank's step, every rank's chunk passing the shared experts.
    When decodes outgrow a rank's KV pool, the request that started decoding last there is
    preempted and recomputed later. A prompt at or over `max_model_len` is refused.

    `cached`: per request, the prompt tokens this replica's prefix cache already holds
    (vLLM's automatic prefix caching; `simulate.prefix_fleet` works them out). Prefill then
    computes only the rest, its chunks starting at that offset of the context (so each step
    attends to the cached prefix), and at least the prompt's last token (vLLM recomputes it
    to sample the first output token). The request still holds its whole prompt in the KV
    pool. A preempted request recomputes everything (its cached blocks counted as lost)."""
    timed = _timer(engine.step_model)
    budget = engine.budget_tokens
    lanes, pipeline = engine.lanes, engine.pipeline
    tps = engine.tokens_per_period
    handling = engine.step_model.ttft_overhead_s  # the API server before the first token
    ranks = [_Rank(max(1, engine.slots // lanes), engine.kv_cache_tokens / lanes)
             for _ in range(lanes)]
    n = len(arrivals)
    ttft = np.full(n, np.nan)
    gap = np.full(n, np.nan)
    tpot = np.full(n, np.nan)
    first_at = np.zeros(n)
    first_chunk = np.full(n, np.nan)
    since = np.zeros(n, dtype=np.int64)  # the period it (re)started decoding after
    longest = np.zeros(n)  # its longest gap before its latest start
    last_token = np.zeros(n)  # when its latest token before that start came
    made = np.zeros(n)  # output tokens before its latest start
    offset = np.zeros(n, dtype=np.int64)  # prompt tokens already cached: prefill starts there
    if cached is not None:
        offset = np.clip(np.asarray(cached, dtype=np.int64), 0,
                         np.maximum(prompts.astype(np.int64) - 1, 0))
    todo = prompts.astype(np.int64) - offset  # tokens to prefill (more after a preemption)
    home = np.zeros(n, dtype=np.int64)  # its rank
    ends: list[tuple[int, int, int]] = []  # (period it ends in, request, version)
    version = np.zeros(n, dtype=np.int64)  # a preempted request's old end is stale
    decoding = np.zeros(n, dtype=bool)
    durations: list[float] = []
    streams: list[int] = []
    carried: list[int] = []
    carrying: list[int] = []
    limit = max_model_len if max_model_len is not None else 2**62
    t, nxt, step = 0.0, 0, 0
    while nxt < n or any(k.waiting or k.prefilling or k.decodes for k in ranks):
        while nxt < n and arrivals[nxt] <= t:
            if prompts[nxt] < limit:
                b = min(range(lanes), key=lambda j: ranks[j].load)
                home[nxt] = b
                ranks[b].waiting.append(nxt)
            nxt += 1
        if not any(k.waiting or k.prefilling or k.decodes for k in ranks):
            if nxt >= n:
                break
            t = float(arrivals[nxt])
            continue
        chunks: list[tuple[list[int], int]] = []
        used, starts, contexts = [0] * lanes, [0] * lanes, [0] * lanes
        for b, rank in enumerate(ranks):
            room = max(0, budget - math.ceil(rank.decodes / pipeline))  # a microbatch's chunk
            left = room * pipeline  # the rank's chunk tokens a period
            for entry in rank.prefilling:
                if left <= 0:
                    break
                take = min(int(todo[entry[0]]) - entry[1], left)
                if left == room * pipeline:
                    starts[b] = int(offset[entry[0]]) + entry[1]
                chunks.append((entry, take))
                left -= take
            # vLLM admits a prompt while its blocks fit the KV pool (decodes grow into it).
            while (rank.waiting and left > 0
                   and rank.decodes + len(rank.prefilling) < rank.slots):
                r = rank.waiting[0]
                if rank.held + todo[r] + offset[r] > rank.kv:
                    break
                rank.waiting.popleft()
                if math.isnan(first_chunk[r]):
                    first_chunk[r] = t
                rank.held += todo[r] + offset[r]
                entry = [r, 0]
                rank.prefilling.append(entry)
                take = min(int(todo[r]), left)
                if left == room * pipeline:
                    starts[b] = int(offset[r])
                chunks.append((entry, take))
                left -= take
            used[b] = room * pipeline - left
            filling = sum(todo[e[0]] + offset[e[0]] for e in rank.prefilling)
            context = (rank.held - filling) / rank.decodes if rank.decodes else 0.0
            contexts[b] = int(round(context / CONTEXT_ROUND)) * CONTEXT_ROUND
            used[b] = min(room, used[b]) if pipeline > 1 else used[b]
        total = sum(used)
        # The ranks step together: the slowest sets the period (a rank's decodes as its
        # share of a batch of `lanes` such ranks), every rank's chunk passing the experts.
        dt = max(
            timed(ranks[b].decodes * lanes, contexts[b], _up(used[b], CHUNK_ROUND),
                  _down(starts[b], START_ROUND),
                  _up(total - used[b], CHUNK_ROUND) if lanes > 1 else 0)
            for b in range(lanes)
        )
        t += dt
        durations.append(dt)
        streams.append(sum(k.decodes for k in ranks))
        carried.append(total)
        carrying.append(sum(1 for u in used if u > 0))
        step += 1
        for rank in ranks:
            rank.held += rank.decodes * tps
        while ends and ends[0][0] <= step:
            _, r, v = heapq.heappop(ends)
            if v != version[r] or not decoding[r]:
                continue
            decoding[r] = False
            rank = ranks[home[r]]
            rank.decodes -= 1
            rank.held -= prompts[r] + outputs[r]
            if outputs[r] > 1:
                gap[r] = max(longest[r], max(durations[since[r]:step]))
                tpot[r] = (t - first_at[r]) / (outputs[r] - 1)
            else:
                gap[r] = tpot[r] = 0.0
        # Out of KV: vLLM preempts the request that started decoding last; it recomputes its
        # prompt and what it generated, and carries on from there.
        for rank in ranks:
            while rank.held > rank.kv and rank.decodes:
                r = rank.started.pop()
                if not decoding[r]:
                    continue  # stale: it ended or was preempted already
                decoding[r] = False
                rank.decodes -= 1
                version[r] += 1
                now = made[r] + (step - since[r]) * tps
                longest[r] = max(longest[r], max(durations[since[r]:step], default=0.0))
                last_token[r] = t
                rank.held -= prompts[r] + now  # its blocks are freed
                made[r] = now
                todo[r] = int(prompts[r] + now)
                offset[r] = 0
                rank.waiting.appendleft(r)
        for entry, take in chunks:
            entry[1] += take
        # Prompts whose last chunk ran now give their first token (with ranks side by side,
        # one behind another's head may finish first).
        for rank in ranks:
            for entry in [e for e in rank.prefilling if e[1] >= todo[e[0]]]:
                rank.prefilling.remove(entry)
                r = entry[0]
                if made[r] == 0:
                    ttft[r] = t - arrivals[r] + handling
                    first_at[r] = t
                    made[r] = 1
                    rank.held += 1
                else:  # a preempted request: its next token after the recompute
                    longest[r] = max(longest[r], t - last_token[r])
                    rank.held += 1
                    made[r] += 1
                since[r] = step
                remaining = max(0.0, (float(outputs[r]) - made[r]) / tps)
                if remaining <= 0:
                    rank.held -= prompts[r] + outputs[r]
                    gap[r] = longest[r] if outputs[r] > 1 else 0.0
                    tpot[r] = (t - first_at[r]) / max(outputs[r] - 1, 1)
                    continue
                version[r] += 1
                decoding[r] = True
                heapq.heappush(ends, (step + math.ceil(remaining - 1e-9), r, int(version[r])))
                rank.started.append(r)
                rank.decodes += 1
    return ServedRequest(arrivals, ttft, gap, tpot, np.array(durations),
                         np.array(streams, float), first_chunk, np.array(carried),
                         np.array(carrying))


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
