"""A plan's traffic and SLOs as the SLO model reads them (`perf.latency`): the prompt and
output lengths a replica serves, the targets in seconds at the percentile, and the replica at
a load.

The ITL target is, by default, the gap between two tokens of a stream at the SLO percentile
over every gap (vLLM's benchmark `itl`), with the longest stall bounded by `slo.max_stall_ms`;
`slo.itl: tpot` reads it as a request's mean time per output token at the percentile. TTFT
at the percentile is of the distribution of request handling, the waits and each prompt's
own chunked prefill; prompts longer than max_model_len are refused and count against it."""

from __future__ import annotations

from functools import lru_cache

from llmfleet.perf.latency import Point, at_rate
from llmfleet.perf.periods import Engine, table_for
from llmfleet.perf.workload import ServedTraffic, SloTargets, prompts_of, with_prefix_cache
from llmfleet.plan.schema import CapacityPlan
from llmfleet.plan.traffic import Traffic
from llmfleet.search.prefix_hold import CacheHold, conversations_of


def ttft_prompt_tokens(plan: CapacityPlan) -> int:
    """The prompt at the SLO percentile of the input lengths (what a reviewer compares a
    TTFT with; the SLO model integrates over every prompt length)."""
    prompt = plan.traffic.input_tokens.at_percentile(plan.slo.percentile)
    return max(1, min(prompt, plan.max_model_len - 1))


def workload_of(plan: CapacityPlan, hold: CacheHold | None = None) -> ServedTraffic:
    """The lengths one replica serves: prompts in quantile bins (those over max_model_len
    refused), outputs as their lognormal; with a `hold`, what its prefix cache holds of
    each prompt (`search.prefix_hold`)."""
    plain = _workload(plan.traffic, plan.max_model_len)
    if hold is None:
        return plain
    return with_prefix_cache(plain, conversations_of(plan), hold.shared_tokens,
                             hold.history_hit_rate)


@lru_cache(maxsize=64)
def _workload(traffic: Traffic, max_model_len: int) -> ServedTraffic:
    t = traffic
    prompts = prompts_of(t.input_tokens.mean, t.input_tokens.sigma, max_model_len - 1)
    return ServedTraffic(prompts, float(t.output_tokens.mean), t.output_tokens.sigma)


def slo_of(plan: CapacityPlan) -> SloTargets:
    s = plan.slo
    return SloTargets(s.percentile, s.ttft_ms / 1000, s.itl_ms / 1000, s.stall_ms / 1000, s.itl)


def point_at(engine: Engine, plan: CapacityPlan, requests_per_s: float) -> Point:
    """The replica of this engine serving `requests_per_s` (Poisson) under the plan's traffic."""
    return at_rate(table_for(engine, workload_of(plan)), requests_per_s, plan.slo.percentile)
