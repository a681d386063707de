"""Which constraint stops a sized replica's rate (the one a rate 1 % higher breaks first),
with the figures the report shows beside it."""

from __future__ import annotations

from dataclasses import dataclass

from llmfleet.perf.latency import at_rate
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.operating_point import ReplicaSizing
from llmfleet.search.replica_slo import slo_of, ttft_prompt_tokens


@dataclass(frozen=True)
class BatchBound:
    """What stops a replica's rate at its operating point, and the floors beside it."""

    constraint: str  # ttft | itl | stall | slots | prefill | kv_cache | max_batch
    running: float  # mean sequences decoding at the SLO-limit rate
    slots: int
    chunk_tokens: int
    ttft_next_ms: float | None  # TTFT at the percentile a little above the rate
    itl_next_ms: float  # ITL (as slo.itl reads it) a little above the rate
    lone_prompt_ttft_ms: float  # the percentile's prompt alone: its chunked prefill
    lone_itl_ms: float  # ITL with one sequence running
    kv_sequences: int  # running sequences the KV pool holds


def batch_bound(plan: CapacityPlan, sizing: ReplicaSizing) -> BatchBound:
    """Which constraint stops `sizing`'s rate: the one a rate 1 % higher breaks first
    (the lane's stability, the slots, TTFT, then ITL), on the sizing's own engine."""
    slo, p = slo_of(plan), plan.slo.percentile
    table = sizing.point.table
    nxt = at_rate(table, sizing.capacity_requests_per_s * 1.01, p)
    ttft_next = nxt.ttft_at(p) * 1000 if nxt.stable else None
    itl_next = nxt.itl_s(slo.itl) * 1000
    if not nxt.stable:
        constraint = "prefill" if nxt.lane.utilisation >= 0.999 else "slots"
    elif nxt.slot_full_chance > slo.tail:
        kv_held = table.workload.sequences_in(table.engine.kv_cache_tokens)
        constraint = "kv_cache" if sizing.slots >= kv_held else "slots"
    elif nxt.ttft_over(slo.ttft_s) > slo.tail:
        constraint = "ttft"
    else:
        constraint = "itl"
    idle = at_rate(table, 1e-6, p)
    prompt = ttft_prompt_tokens(plan)
    bins = table.workload.prompts.tokens  # with a cache, each length's miss comes last
    k = int(min(reversed(range(len(bins))), key=lambda j: abs(bins[j] - prompt)))
    lone = float(idle.own_prefill_s[k]) + table.engine.step_model.ttft_overhead_s
    return BatchBound(
        constraint=constraint,
        running=sizing.running,
        slots=sizing.slots,
        chunk_tokens=sizing.chunk_tokens,
        ttft_next_ms=ttft_next,
        itl_next_ms=itl_next,
        lone_prompt_ttft_ms=lone * 1000,
        lone_itl_ms=idle.itl_s(slo.itl) * 1000,
        kv_sequences=table.cap,
    )
