"""Stage 2's autoscaling section: KEDA triggers on signals vLLM exports, with thresholds
taken from the operating point.

Each threshold is what the performance model predicts at the load a replica was sized for
(capacity x (1 - headroom)): scale-out starts when a replica leaves that load, before the
SLO is at risk. Every signal resolves at its threshold: gauges (waiting requests, KV use)
and a mean from a histogram's `_sum` and `_count` are exact; the one quantile (TTFT at the
SLO percentile, a guard) sits where the release's bucket bounds can resolve it, with
`--custom-histogram-buckets` adding the bound when they cannot."""

from __future__ import annotations

import math

from pydantic import Field

from llmfleet.catalog.vllm_release import bucket_family, default_buckets, quantile_problem
from llmfleet.data import Data, MinDesiredMax
from llmfleet.perf.latency import at_rate
from llmfleet.search.choice import Choice


class Trigger(Data):
    """One KEDA prometheus trigger, AverageValue: the HPA wants ceil(query / threshold)
    replicas. Every query reads a signal the pinned vLLM exports at a resolution that can
    cross the threshold (checked by `render`)."""

    name: str
    metric: str = Field(description="The vllm:* metric family the query reads.")
    query: str = Field(description="PromQL over this namespace's and model's series.")
    threshold: float = Field(description="Per replica, in the metric's unit.")
    quantile: float | None = Field(
        default=None, description="histogram_quantile's q (0-1) when the query takes one."
    )
    reason: str


class Autoscaling(Data):
    """KEDA ScaledObject settings. The replica bounds are `RegionPlan.replicas` (min, max;
    the fallback holds the desired count)."""

    polling_interval_s: int
    cooldown_period_s: int
    scale_down_stabilization_s: int
    fallback_failure_threshold: int = Field(
        description="Failed Prometheus polls in a row before KEDA holds the desired replicas."
    )
    triggers: list[Trigger]
    reasons: list[str]


POLLING_INTERVAL_S = 15
COOLDOWN_PERIOD_S = 300
SCALE_DOWN_STABILIZATION_S = 600
"""The least scale-down window: twice the controller's 300 s default (kube-controller-manager
--horizontal-pod-autoscaler-downscale-stabilization); longer where a replica takes longer
to come back (`stabilization_s`)."""
DAY_S = 86_400
FALLBACK_FAILURE_THRESHOLD = 3
RATE_WINDOW = "2m"
TTFT_METRIC = "vllm:time_to_first_token_seconds"


def selector(namespace: str, served_model_name: str) -> str:
    return f'{{namespace="{namespace}",model_name="{served_model_name}"}}'


def _per_replica(expr: str, sel: str) -> str:
    """A fleet-wide mean or quantile times the replicas reporting it (AverageValue), and 0
    when idle (NaN) instead of a failed poll that would trigger the fallback."""
    return f"({expr} * count(vllm:kv_cache_usage_perc{sel})) > 0 or vector(0)"


def queue_depth_threshold(mean_waiting: float, polling_interval_s: int) -> int:
    """The waiting count one replica exceeds by chance at most about once a day of polls at
    the load it was sized for, at least 1. A queue's length has a geometric tail: with mean
    L, P(N >= k) = q^k, q = L / (1 + L); k = ceil(ln(poll / day) / ln q). A threshold at the
    mean instead is crossed every few polls, and AverageValue turns two waiting requests
    over two replicas at a threshold of 0.5 into four replicas: the fleet flaps."""
    if mean_waiting <= 0:
        return 1
    q = mean_waiting / (1 + mean_waiting)
    return max(1, math.ceil(math.log(polling_interval_s / DAY_S) / math.log(q) - 1e-9))


def stabilization_s(container_s: float) -> int:
    """The scale-down window: at least a container's start (weights streamed, engine up) on
    the node Karpenter keeps (consolidateAfter >= a whole cold start), rounded up to a
    minute, so only a dip that outlasts bringing a replica back removes one."""
    return max(SCALE_DOWN_STABILIZATION_S, 60 * math.ceil(container_s / 60))


def custom_buckets(choice: Choice) -> dict[str, list[float]] | None:
    """Bounds for families whose defaults cannot resolve a threshold: the guard's TTFT."""
    threshold = choice.plan.slo.ttft_ms / 1000
    if quantile_problem(TTFT_METRIC, threshold) is None:
        return None
    family = bucket_family(TTFT_METRIC)
    assert family is not None
    return {family: sorted({*default_buckets(family), threshold})}


def build_autoscaling(
    choice: Choice,
    replicas: MinDesiredMax,
    namespace: str,
    served_model_name: str,
    container_s: float,
) -> Autoscaling:
    """Triggers whose thresholds are the signals at the load a replica was sized for;
    `replicas` are the ScaledObject's bounds (RegionPlan.replicas), which the reasons say."""
    plan, sizing = choice.plan, choice.sizing
    rate = sizing.capacity_requests_per_s * (1 - plan.headroom)
    at = at_rate(sizing.point.table, rate, plan.slo.percentile)
    ttft_s = at.ttft_at()
    running = at.running
    context = at.table.workload.context_tokens
    kv_use = min(running * context / sizing.memory.kv_cache_tokens, 0.95)
    lane, wait_mean_s = at.lane, at.lane.wait_chance * at.lane.wait_s
    wait_mean_s += at.slot_full_chance * at.slot_wait_s
    queued = rate * wait_mean_s  # Little's law
    limit_ttft = sizing.point.ttft_at()
    assert lane.stable
    p, sel, w = plan.slo.percentile, selector(namespace, served_model_name), RATE_WINDOW
    queue_depth = queue_depth_threshold(queued, POLLING_INTERVAL_S)
    queue_wait = round(max(wait_mean_s, 0.001), 4)
    triggers = [
        Trigger(
            name="request-rate",
            metric="vllm:request_success_total",
            query=f"sum(rate(vllm:request_success_total{sel}[{w}]))",
            threshold=round(rate, 3),
            reason=f"each replica was sized for {rate:.2f} req/s (its SLO-limit rate "
            f"{sizing.capacity_requests_per_s:.2f} less {plan.headroom:.0%} headroom); "
            "completions equal arrivals at a steady load, so this trigger asks for the fleet's "
            "rate over that, the sized count at any load (the queue and KV signals grow faster "
            "than the load: alone they would shrink a fleet below the sized count at a low load "
            f"and scale it back out when its replicas pass {rate:.2f} req/s)",
        ),
        Trigger(
            name="queue-depth",
            metric="vllm:num_requests_waiting",
            query=f"sum(vllm:num_requests_waiting{sel})",
            threshold=queue_depth,
            reason=f"{queued:.2f} requests wait per replica at the sized load (Little's law: "
            f"{rate:.2f} req/s x {wait_mean_s * 1000:.0f} ms mean wait); a queue's length has "
            f"a geometric tail, so one replica holds {queue_depth} or more by chance at most "
            f"about once a day of {POLLING_INTERVAL_S} s polls: above that the queue is load",
        ),
        Trigger(
            name="kv-cache-usage",
            metric="vllm:kv_cache_usage_perc",
            query=f"sum(avg_over_time(vllm:kv_cache_usage_perc{sel}[{w}]))",
            threshold=round(kv_use, 3),
            reason=f"{running:.1f} running sequences at the sized load, each holding its "
            f"prompt and half its output weighted by how long it runs ({context:,.0f} tokens "
            f"on average), fill {kv_use:.1%} of {sizing.memory.kv_cache_tokens:,} KV tokens: "
            "KV use grows faster than the load (a period lengthens with the batch), so this "
            "trigger asks for the sized count at the sized load and more beyond it (a p95 "
            f"context here would ask for too few); averaged over {w}, as a running count "
            "swings by its square root from scrape to scrape",
        ),
        Trigger(
            name="queue-wait-mean",
            metric="vllm:request_queue_time_seconds",
            query=_per_replica(
                f"(sum(rate(vllm:request_queue_time_seconds_sum{sel}[{w}])) / "
                f"sum(rate(vllm:request_queue_time_seconds_count{sel}[{w}])))",
                sel,
            ),
            threshold=queue_wait,
            reason=f"the mean wait before a prompt's first chunk (the prefill lane and a "
            f"batch slot) at the sized load is {wait_mean_s * 1000:.1f} ms; a mean from _sum "
            "and _count resolves any value, "
            "where a quantile of this family's buckets (lowest bound 0.3 s) could not",
        ),
        Trigger(
            name="ttft-slo-guard",
            metric=TTFT_METRIC,
            query=_per_replica(
                f"histogram_quantile({p / 100:g}, sum by (le) "
                f"(rate({TTFT_METRIC}_bucket{sel}[{w}])))",
                sel,
            ),
            threshold=plan.slo.ttft_ms / 1000,
            quantile=round(p / 100, 4),
            reason=f"scale out as soon as the fleet's p{p:g} TTFT crosses the SLO "
            f"({plan.slo.ttft_ms:g} ms), whatever the queue signals say",
        ),
    ]
    return Autoscaling(
        polling_interval_s=POLLING_INTERVAL_S,
        cooldown_period_s=COOLDOWN_PERIOD_S,
        scale_down_stabilization_s=stabilization_s(container_s),
        fallback_failure_threshold=FALLBACK_FAILURE_THRESHOLD,
        triggers=triggers,
        reasons=[
            f"a replica sustains {sizing.capacity_requests_per_s:.2f} req/s at the SLO; with "
            f"{plan.headroom:.0%} headroom it is sized for {rate:.2f} req/s (TTFT "
            f"{ttft_s * 1000:.0f} ms there; at capacity {limit_ttft * 1000:.0f} ms)",
            "each trigger fires at its value at that load, so scale-out starts when a replica "
            "leaves the load it was sized for, before the headroom is consumed",
            f"min {replicas.min} replicas carry the trough, {replicas.desired} the peak, max "
            f"{replicas.max} fill the ceiling's nodes (minReplicaCount, maxReplicaCount); if "
            f"Prometheus is unreachable KEDA holds {replicas.desired} (the peak size)",
        ],
    )
