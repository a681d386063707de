"""One replica under a load (offline, a fixed concurrency, or an arrival rate): its steady
state, or, above its capacity, its overload. An open-loop rate in steady state is the SLO
model's (`perf.latency`), the one the search sizes with; a closed loop and a finite run
keep the flow balance below.

Flow balance: a request spends `output` decode steps and contributes `input` prefill
tokens, so a step that runs D decodes also carries D * input / output prefill tokens
on average. The token budget (max_num_batched_tokens), max_num_seqs and the KV pool cap D."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, computed_field

from llmfleet.catalog import model_facts
from llmfleet.perf import overload
from llmfleet.perf.chunked import MixedSteps, mixed_steps, prefill_s
from llmfleet.perf.latency import at_rate, saturation_rate
from llmfleet.perf.memory import MemoryBudget
from llmfleet.perf.periods import Engine, table_for
from llmfleet.perf.prefix_cache import (
    BALANCE_REL_THRESHOLD,
    CACHE_THRESHOLD,
    HEADROOM_DEFAULT,
    Balancing,
    Conversations,
    PrefixCache,
    balance_abs_threshold,
    imbalance_share,
    prefix_cache,
    running_kv_tokens,
)
from llmfleet.perf.queueing import running_batch
from llmfleet.perf.step import StepModel, step_time
from llmfleet.perf.workload import Prompts, ServedTraffic, with_prefix_cache

Mode = Literal["offline", "concurrency", "rate"]


# "fixed": every request generates its output length (random datasets with ignore_eos);
# "sharegpt": lengths spread as ShareGPT's do around their mean (a dataset workload).
OutputLengths = Literal["fixed", "sharegpt"]


@dataclass(frozen=True)
class ReplicaGroup:
    """Replicas behind one entry point sharing a rate, and what their prompts share."""

    replicas: int
    balancing: Balancing
    conversations: Conversations
    router_replicas: int = 1


class Load(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input_tokens: int = Field(gt=0)
    output_tokens: int = Field(gt=0)
    concurrency: float | None = Field(default=None, gt=0)
    request_rate: float | None = Field(default=None, gt=0)
    num_requests: int | None = Field(default=None, gt=0, description="Requests the run sends.")
    output_lengths: OutputLengths = "fixed"
    fleet: ReplicaGroup | None = Field(
        default=None, description="A replica among many, request_rate its share (steady)."
    )

    @property
    def mode(self) -> Mode:
        if self.concurrency is not None:
            return "concurrency"
        if self.request_rate is not None:
            return "rate"
        return "offline"


class Prediction(BaseModel):
    model_config = ConfigDict(frozen=True)

    mode: Mode
    batch_size: float
    prefill_tokens_per_step: float
    step_bound: str
    ttft_ms: float | None  # None: the KV pool cannot hold one request
    itl_ms: float | None = Field(
        description="A request's mean gap between tokens (its TPOT): a mean, not the SLO's "
        "token gap at a percentile; mean_itl_ms says so in its key."
    )
    e2e_latency_ms: float | None  # a request's mean latency: TTFT + (output - 1) * ITL
    output_tokens_per_s: float
    total_tokens_per_s: float
    requests_per_s: float
    saturated: bool
    overloaded: bool = False  # above capacity (overload.py): TTFT for a run of N, or None
    capacity_requests_per_s: float | None = None
    ttft_reason: str | None = None
    prefix_cache_hit_rate: float | None = None  # cached share of prompt tokens (a fleet's)
    cached_tokens_per_prompt: float | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def mean_itl_ms(self) -> float | None:
        """A request's mean gap between tokens (itl_ms, the key before #31, is its alias;
        docs/cli.md#aliases): a mean, where plan --json's itl_at_percentile_ms is the SLO's
        figure at its percentile."""
        return self.itl_ms


def _decode_cap(mem: MemoryBudget, load: Load, max_num_seqs: int, budget_tokens: int) -> float:
    """Most sequences that can decode together: seq limit, KV pool, token budget."""
    i, o = load.input_tokens, load.output_tokens
    kv_seqs = mem.kv_cache_tokens / (i + o / 2)
    budget_seqs = budget_tokens * o / (i + o)
    return max(0.0, min(float(max_num_seqs), kv_seqs, budget_seqs))


def _steps(step_model: StepModel, load: Load, decode: float, budget_tokens: int) -> MixedSteps:
    chunk = max(1.0, budget_tokens - decode)
    return mixed_steps(step_model, decode, load.input_tokens, load.output_tokens, chunk)


def predict(
    step_model: StepModel,
    mem: MemoryBudget,
    load: Load,
    max_num_seqs: int,
    max_num_batched_tokens: int,
) -> Prediction:
    """Mean TTFT, mean ITL (TPOT) and throughput of one replica in steady state."""
    i, o = load.input_tokens, load.output_tokens
    cap = _decode_cap(mem, load, max_num_seqs, max_num_batched_tokens)
    saturated, rate_cap = False, None
    if load.mode == "offline":
        decode = overload.run_batch(cap, load.num_requests)
        saturated = True
    elif load.mode == "concurrency":
        assert load.concurrency is not None
        decode = min(load.concurrency, cap)
        saturated = load.concurrency > cap
    else:
        assert load.request_rate is not None
        if load.fleet is not None:  # the steady state of a replica among many
            return _steady(step_model, mem, load, max_num_seqs, max_num_batched_tokens, None)
        rate_cap, over = overload.assess(
            step_model, i, o, load.request_rate, load.num_requests, cap, max_num_batched_tokens
        )
        if over is not None:
            return Prediction(mode="rate", **overload.fields(step_model, over))
        if load.num_requests is None:  # the steady state: the SLO model's means
            return _steady(step_model, mem, load, max_num_seqs, max_num_batched_tokens,
                           rate_cap)
        run_cap = overload.run_batch(cap, load.num_requests)  # at most the run's requests
        decode, saturated = _rate_fixed_point(step_model, load, run_cap, max_num_batched_tokens)
    decode = max(decode, 1e-9)
    steps = _steps(step_model, load, decode, max_num_batched_tokens)
    t, tpot = steps.mean_token_s, steps.others(decode).mean_token_s  # the run's; a request's
    req_s = decode / (o * t)
    out_s = decode / t
    chunk = max(1, int(max_num_batched_tokens - decode))
    service = prefill_s(step_model, decode, i + o / 2, i, chunk)
    rho = min(steps.mixed_share, 0.999)
    if load.mode == "offline":
        # Every request queued at once: the first `cap` start together, the rest as slots free.
        n = load.num_requests or 0
        burst = min(n or cap, cap) * i / chunk * steps.mixed_s / 2
        backlog = (n - cap) ** 2 / (2 * n * req_s) if n > cap else 0.0
        ttft = service + burst + backlog
        if n and load.output_lengths == "sharegpt":
            out_s = n * o / _burst_duration_s(step_model, load, n, decode, req_s, chunk, steps)
    elif load.mode == "concurrency":
        assert load.concurrency is not None
        # A client's request queues behind the other clients' prefills, never its own.
        others = min(steps.others(decode).mixed_share, 0.999)
        ttft = service * (1 + others / (2 * (1 - others)))
        # While the other clients' requests run, a new one waits for the step under way.
        ttft += min(1.0, max(0.0, decode - 1)) * steps.others(decode).residual_s
        if load.num_requests:
            n = load.num_requests
            # A benchmark of n requests from C clients starts with all C at once: that
            # first wave waits for each other's prefill like a burst; the rest arrive as
            # earlier requests finish.
            wave = min(load.concurrency, cap, float(n))
            first = service + wave * i / chunk * steps.mixed_s / 2
            ttft = (wave * first + (n - wave) * ttft) / n
        ttft += max(0.0, load.concurrency - cap) / req_s
    else:
        ttft = service * (1 + rho / (2 * (1 - rho))) + steps.arrival_wait_s(decode)
    ttft += step_model.ttft_overhead_s
    bound = step_time(step_model, decode, i + o / 2, chunk if rho > 0.5 else 0, i / 2).bound
    return Prediction(
        mode=load.mode,
        batch_size=decode,
        prefill_tokens_per_step=decode * i / o,
        step_bound=bound,
        ttft_ms=ttft * 1000,
        itl_ms=tpot * 1000,
        e2e_latency_ms=(ttft + (o - 1) * tpot) * 1000,
        output_tokens_per_s=out_s,
        total_tokens_per_s=out_s * (i + o) / o,
        requests_per_s=out_s / o,
        saturated=saturated,
        capacity_requests_per_s=rate_cap,
    )


def _steady(
    step_model: StepModel,
    mem: MemoryBudget,
    load: Load,
    max_num_seqs: int,
    budget_tokens: int,
    capacity: float | None,
) -> Prediction:
    """Poisson arrivals at `load.request_rate`, in steady state: the means of the SLO model
    the search sizes with (`perf.latency`: the running batch by Little's law, the prefill
    lane's and the slots' waits, each prompt's own chunked prefill; periods with and without
    a chunk by their share of time), on the engine of these flags (max_num_seqs per
    data-parallel rank) and the KV pool of `mem`."""
    i, o = load.input_tokens, load.output_tokens
    rate = load.request_rate
    assert rate is not None
    sigma = _sharegpt_sigma() if load.output_lengths == "sharegpt" else 0.0
    prompts = Prompts(np.array([float(i)]), np.array([1.0]), 0.0, float(i))
    workload = ServedTraffic(prompts, float(o), sigma)
    slots = max_num_seqs * step_model.parallel.dp
    engine = Engine(step_model, slots, budget_tokens, mem.kv_cache_tokens)
    cache = None
    if load.fleet is not None:
        workload, cache = _cached_workload(engine, workload, load.fleet, rate, max_num_seqs)
    table = table_for(engine, workload)
    if cache is not None:
        capacity = saturation_rate(table, 50.0)
    cached = {} if cache is None else {
        "prefix_cache_hit_rate": round(cache.hit_rate, 4),
        "cached_tokens_per_prompt": round(cache.cached_tokens_per_prompt, 1),
    }
    point = at_rate(table, rate, 50.0)
    if not point.stable:
        top = saturation_rate(table, 50.0)
        return Prediction(
            mode="rate", batch_size=float(table.cap), prefill_tokens_per_step=0.0,
            step_bound="compute", ttft_ms=None, itl_ms=None, e2e_latency_ms=None,
            output_tokens_per_s=top * o, total_tokens_per_s=top * (i + o),
            requests_per_s=top, saturated=True, overloaded=True, capacity_requests_per_s=top,
            ttft_reason=f"arrival rate {rate:g} req/s exceeds the {top:.3g} req/s the prefill "
            "lane and the slots keep up with: the queue and TTFT grow without bound",
            **cached,
        )
    token_s = point.token_s
    ttft = point.ttft_mean_s
    bound = step_time(step_model, point.running, workload.context_tokens,
                      point.chunk_tokens if point.mixed_time_share > 0.5 else 0, i / 2).bound
    return Prediction(
        mode="rate",
        batch_size=point.running,
        prefill_tokens_per_step=point.running * i / o,
        step_bound=bound,
        ttft_ms=ttft * 1000,
        itl_ms=token_s * 1000,
        e2e_latency_ms=(ttft + (o - 1) * token_s) * 1000,
        output_tokens_per_s=rate * o,
        total_tokens_per_s=rate * (i + o),
        requests_per_s=rate,
        saturated=point.running >= table.cap - 0.5,
        capacity_requests_per_s=capacity,
        **cached,
    )


def _cached_workload(engine: Engine, plain: ServedTraffic, fleet: ReplicaGroup, rate: float,
                     max_num_seqs: int) -> tuple[ServedTraffic, PrefixCache]:
    """The prompt as a replica among `fleet.replicas` finds it in its prefix cache at `rate`
    (`perf.prefix_cache`): its running batch and requests in flight from the replica with
    the shared prefix alone cached, the router's forced share from those in flight."""
    c = fleet.conversations
    s = c.shared_prefix_tokens
    first = at_rate(table_for(engine, with_prefix_cache(plain, c, s, 0.0)), rate, 50.0)
    if first.stable:
        running = first.running
        in_flight = rate * (first.ttft_mean_s + plain.output_mean * first.token_s)
    else:
        running = in_flight = float(first.table.cap)
    forced = 0.0
    if fleet.balancing == "prefix_aware":
        threshold = balance_abs_threshold(max_num_seqs, HEADROOM_DEFAULT, fleet.router_replicas)
        forced = imbalance_share(fleet.replicas, in_flight / fleet.router_replicas, threshold,
                                 BALANCE_REL_THRESHOLD)
    cache = prefix_cache(
        c, balancing=fleet.balancing, replicas=fleet.replicas,
        requests_per_s_per_replica=rate, kv_pool_tokens=engine.kv_cache_tokens,
        running_kv_tokens=running_kv_tokens(running, plain.context_tokens, s),
        router_replicas=fleet.router_replicas, forced_share=forced,
        match_threshold=CACHE_THRESHOLD,
    )
    shared = s if cache.shared_prefix_cached else 0.0
    return with_prefix_cache(plain, c, shared, cache.history_hit_rate), cache


def _sharegpt_sigma() -> float:
    """The lognormal sigma with ShareGPT's output lengths' coefficient of variation."""
    shape = model_facts.sharegpt_length_shape()
    mean = sum(shape) / len(shape)
    cv2 = sum((v - mean) ** 2 for v in shape) / len(shape) / (mean * mean)
    return math.sqrt(math.log1p(cv2))


def _burst_duration_s(
    step_model: StepModel,
    load: Load,
    n: int,
    running: float,
    req_s: float,
    chunk: int,
    steps: MixedSteps,
) -> float:
    """How long a burst of n requests with ShareGPT-spread output lengths takes to finish.

    While requests wait, `running` decode in steady state; the last wave then prefills and
    drains, and its longest requests decode on at a shrinking batch: with lengths spread
    as ShareGPT's, the batch after k steps is running x P(length > k), down to the
    expected longest of `running` requests. Its throughput is below running / step.
    """
    i, o = load.input_tokens, load.output_tokens
    context = i + o / 2
    last = 1 / (running + 1)  # the survival at the expected longest of `running`
    drain, survival, length = 0.0, 1.0, _length_at(1.0)
    while survival > last:
        nxt = max(survival / 2, last)
        nxt_length = _length_at(nxt)
        batch = max(1.0, running * math.sqrt(survival * nxt))  # the octave's geometric middle
        drain += o * (nxt_length - length) * step_time(step_model, batch, context).total_s
        survival, length = nxt, nxt_length
    queued = max(0.0, n - running) / req_s
    prefill = running * i / chunk * steps.mixed_s
    return queued + prefill + drain


def _length_at(survival: float) -> float:
    """The ShareGPT output length (over the mean) that a share `survival` of requests exceed."""

    shape = model_facts.sharegpt_length_shape()
    return shape[min(len(shape) - 1, int(len(shape) * (1 - survival)))]


def _rate_fixed_point(
    step_model: StepModel, load: Load, cap: float, budget_tokens: int
) -> tuple[float, bool]:
    """Running decodes D = rate * output * mean_step(D) (Little's law), by bisection."""
    o, rate = load.output_tokens, load.request_rate
    assert rate is not None
    if cap < rate * o * _steps(step_model, load, cap, budget_tokens).mean_token_s:
        return cap, True
    token_s = lambda d: _steps(step_model, load, d, budget_tokens).mean_token_s  # noqa: E731
    return running_batch(rate, o, cap, token_s, 1e-9, halvings=60), False
