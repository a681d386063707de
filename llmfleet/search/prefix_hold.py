"""What a sized replica's prefix cache holds of the prompts it serves, as the search sizes
with it (`perf.prefix_cache` is the physics; this applies it to a candidate).

The hit rate depends on the replica's own rate, KV pool and running batch and on how many
replicas share the traffic (round robin and least outstanding spread a conversation over
all of them), which the sizing decides. So a candidate is sized twice: first with the
shared prefix alone cached (every replica holds it whatever the balancing, a lower bound on
the hits), then with the cache the physics gives at that first sizing's SLO-limit rate, on
the replicas the largest region deploys at it. Both are conservative for the second pass:
the first pass's rate is the lower, so it deploys more replicas (round robin finds a
conversation's replica less often) and each replica's pool turns over at its highest rate.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmfleet.perf.prefix_cache import (
    BALANCE_REL_THRESHOLD,
    CACHE_THRESHOLD,
    ROUTER_REPLICAS,
    Balancing,
    Conversations,
    PrefixCache,
    balance_abs_threshold,
    imbalance_share,
    prefix_cache,
    running_kv_tokens,
)
from llmfleet.plan.schema import CapacityPlan


@dataclass(frozen=True)
class CacheHold:
    """What every prompt finds cached: the shared prefix (0 when the pool cannot hold it),
    and with chance `history_hit_rate` the earlier turns it resends."""

    shared_tokens: float
    history_hit_rate: float
    cache: PrefixCache | None = None
    """The physics behind it (None: an assumption, the first pass's or the ideal)."""
    replicas: int = 0
    """The replicas the physics assumed share the traffic (0: none assumed)."""
    balancing: str = "least_outstanding"


def reuses(plan: CapacityPlan) -> bool:
    """The plan's traffic shares prefixes (a shared prefix, or conversations)."""
    return plan.traffic.shared_prefix_tokens > 0 or plan.traffic.turns > 1


def conversations_of(plan: CapacityPlan) -> Conversations:
    t = plan.traffic
    return Conversations(
        prompt_mean_tokens=t.input_tokens.mean,
        output_mean_tokens=t.output_tokens.mean,
        shared_prefix_tokens=t.shared_prefix_tokens,
        turns=t.turns,
        think_time_s=t.think_time_s,
    )


def shared_only(plan: CapacityPlan) -> CacheHold:
    """The first pass: the shared prefix cached, no conversation found."""
    return CacheHold(float(plan.traffic.shared_prefix_tokens), 0.0)


def ideal(plan: CapacityPlan) -> CacheHold:
    """Everything a prompt resends cached: no replica does better (for capacity bounds)."""
    return CacheHold(float(plan.traffic.shared_prefix_tokens), 1.0 if plan.traffic.turns > 1
                     else 0.0)


def balancing_of(plan: CapacityPlan) -> Balancing:
    return "prefix_aware" if plan.edge.balancing == "prefix_aware" else "least_outstanding"


def hold_at(
    plan: CapacityPlan,
    *,
    replicas: int,
    requests_per_s_per_replica: float,
    running_sequences: float,
    context_tokens: float,
    kv_pool_tokens: float,
    max_num_seqs: int,
    in_flight_per_replica: float,
) -> CacheHold:
    """The cache of a replica serving `requests_per_s_per_replica` among `replicas` under
    the plan's balancing (with prefix_aware, the router's forced share from its in-flight
    counts, as `fleetplan.prefix_router` deploys it)."""
    balancing = balancing_of(plan)
    forced = 0.0
    if balancing == "prefix_aware":
        abs_threshold = balance_abs_threshold(max_num_seqs, plan.headroom, ROUTER_REPLICAS)
        forced = imbalance_share(replicas, in_flight_per_replica / ROUTER_REPLICAS,
                                 abs_threshold, BALANCE_REL_THRESHOLD)
    s = float(plan.traffic.shared_prefix_tokens)
    cache = prefix_cache(
        conversations_of(plan),
        balancing=balancing,
        replicas=max(1, replicas),
        requests_per_s_per_replica=requests_per_s_per_replica,
        kv_pool_tokens=kv_pool_tokens,
        running_kv_tokens=running_kv_tokens(running_sequences, context_tokens, s),
        router_replicas=ROUTER_REPLICAS,
        forced_share=forced,
        match_threshold=CACHE_THRESHOLD,
    )
    return CacheHold(
        shared_tokens=s if cache.shared_prefix_cached else 0.0,
        history_hit_rate=min(1.0, max(0.0, cache.history_hit_rate)),
        cache=cache,
        replicas=max(1, replicas),
        balancing=balancing,
    )
