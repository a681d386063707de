"""Day-2 alerts of a region's fleet, with thresholds from the plan: SLO burn rates on vLLM's
latency histograms, KV cache near full, preemptions, replicas at the ceiling, and a fleet
with no ready replica.

Burn rate (the Google SRE workbook's multiwindow, multi-burn-rate alerts): a p99 SLO allows
1 % of requests (TTFT) or token gaps (ITL) above the target, the error budget. Burning it
14.4 times as fast as allowed for an hour spends 2 % of a 30-day budget; 6 times for six
hours, 5 %. Each alert needs a long window (the burn is real) and a short one (it is still
happening). The share of slow events is read from the histogram's cumulative buckets: the
count at or below the target over the total, interpolated linearly inside the bucket that
holds the target as `histogram_quantile` does (exact when the target is a bucket bound)."""

from __future__ import annotations

from pydantic import Field

from llmfleet.catalog.vllm_release import bucket_family, default_buckets
from llmfleet.data import Data, MinDesiredMax
from llmfleet.fleetplan.autoscaling import selector
from llmfleet.fleetplan.serving import Serving
from llmfleet.fleetplan.workload import Workload
from llmfleet.plan.schema import CapacityPlan


class AlertRule(Data):
    """One Prometheus alerting rule (PrometheusRule); its threshold comes from the plan."""

    name: str = Field(description="The alert's name (CamelCase, as Prometheus shows it).")
    severity: str = Field(description="critical pages someone; warning opens a ticket.")
    expr: str = Field(description="PromQL; the alert fires while it returns a series.")
    for_duration: str = Field(description="How long expr must hold before the alert fires.")
    summary: str
    reason: str = Field(description="Why this threshold: the plan's number it comes from.")
    runbook_url: str = Field(
        default="", description="What to do: `<alerts.runbook_url>#<alert name, lower case>`."
    )


class Alerts(Data):
    """Day-2 alerts of a region's vLLM fleet: SLO burn rates, KV pressure, preemptions,
    the replica ceiling and a fleet with nothing ready."""

    error_budget: float = Field(description="1 - slo.percentile / 100: the share of slow "
                                "requests (TTFT) or token gaps (ITL) the SLO allows.")
    rules: list[AlertRule]
    notes: list[str] = Field(description="What is deliberately not alerted on here, and why.")


BURN_WINDOWS: tuple[tuple[str, float, str, str, str], ...] = (
    ("Fast", 14.4, "1h", "5m", "critical"),
    ("Slow", 6.0, "6h", "30m", "warning"),
)
"""(name, burn rate, long window, short window, severity): the SRE workbook's page tiers."""
KV_NEAR_FULL = 0.95
"""KV use at which vLLM is about to preempt running requests (it preempts when a step cannot
allocate a block)."""
KV_FOR = "10m"
PREEMPTION_FOR = "15m"
CEILING_FOR = "15m"
NOT_READY_FOR = "5m"
TTFT_METRIC = "vllm:time_to_first_token_seconds"
ITL_METRICS = {
    "token_gap": "vllm:inter_token_latency_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
}
"""The histogram each slo.itl definition is measured on: every gap, or a request's mean."""


def _le(bound: float) -> str:
    """A bucket's `le` matcher: Prometheus clients write 1.0 or 1 for whole bounds."""
    if bound.is_integer():
        return f'le=~"{int(bound)}|{int(bound)}.0"'
    return f'le="{bound!r}"'


def _bounds(metric: str, custom: dict[str, list[float]] | None) -> list[float]:
    family = bucket_family(metric)
    assert family is not None, metric
    return (custom or {}).get(family) or default_buckets(family)


def good_share(metric: str, sel: str, threshold_s: float, window: str,
               custom: dict[str, list[float]] | None) -> str:
    """PromQL: the share of observations at or below `threshold_s` over `window`."""
    bounds = _bounds(metric, custom)

    def rate(le: float) -> str:
        inner = sel[:-1] + f",{_le(le)}}}"
        return f"sum(rate({metric}_bucket{inner}[{window}]))"

    total = f"sum(rate({metric}_count{sel}[{window}]))"
    upper = min((b for b in bounds if b >= threshold_s), default=bounds[-1])
    lower = max((b for b in bounds if b < threshold_s), default=0.0)
    if upper <= threshold_s:  # a bound at the target, or a target above every bound
        return f"({rate(upper)} / {total})"
    fraction = round((threshold_s - lower) / (upper - lower), 6)
    below = rate(lower) if lower > 0 else "0"
    return f"(({below} + {fraction:g} * ({rate(upper)} - {below})) / {total})"


def burn_rules(name: str, what: str, metric: str, sel: str, threshold_s: float,
               budget: float, custom: dict[str, list[float]] | None) -> list[AlertRule]:
    rules = []
    for tier, burn, long_w, short_w, severity in BURN_WINDOWS:
        limit = burn * budget
        if limit >= 1:
            continue  # every event slow would still not burn this fast: nothing to alert on
        long_bad = f"(1 - {good_share(metric, sel, threshold_s, long_w, custom)})"
        short_bad = f"(1 - {good_share(metric, sel, threshold_s, short_w, custom)})"
        rules.append(
            AlertRule(
                name=f"{name}BudgetBurn{tier}",
                severity=severity,
                expr=f"{long_bad} > {limit:g} and {short_bad} > {limit:g}",
                for_duration="2m",
                summary=f"{what} above {threshold_s * 1000:g} ms for more than {limit:.1%} of "
                f"events over {long_w} and {short_w} ({burn:g}x the error budget)",
                reason=f"the SLO allows {budget:.1%} of events above {threshold_s * 1000:g} ms; "
                f"{burn:g}x that rate over {long_w} spends "
                f"{burn * _hours(long_w) / (30 * 24):.0%} of a 30-day budget",
            )
        )
    return rules


def _hours(window: str) -> float:
    unit = {"m": 1 / 60, "h": 1.0, "d": 24.0}[window[-1]]
    return float(window[:-1]) * unit


def build_alerts(plan: CapacityPlan, replicas: MinDesiredMax, serving: Serving,
                  workload: Workload) -> Alerts:
    """The region's alerting rules; every threshold is a number of the plan."""
    slo = plan.slo
    budget = round(1 - slo.percentile / 100, 6)
    sel = selector(workload.namespace, serving.vllm.served_model_name)
    custom = serving.vllm.custom_histogram_buckets
    deploy = f'{{namespace="{workload.namespace}",deployment="{workload.name}"}}'
    spec_replicas = f"kube_deployment_spec_replicas{deploy}"
    available = f"max(kube_deployment_status_replicas_available{deploy})"
    if workload.kind != "Deployment":  # kube-state-metrics knows no LeaderWorkerSet: its HPA
        ns, name = workload.namespace, workload.name
        hpa = f'{{namespace="{ns}",horizontalpodautoscaler="keda-hpa-{name}"}}'
        spec_replicas = f"kube_horizontalpodautoscaler_status_current_replicas{hpa}"
        available = f'(sum(up{{namespace="{ns}",job="{name}"}}) or vector(0))'
    itl_what = "token gaps" if slo.itl == "token_gap" else "requests' mean time per token"
    rules = burn_rules("Ttft", "TTFT", TTFT_METRIC, sel, slo.ttft_ms / 1000, budget, custom)
    rules += burn_rules("Itl", f"ITL ({itl_what})", ITL_METRICS[slo.itl], sel,
                        slo.itl_ms / 1000, budget, custom)
    ceiling: list[AlertRule] = []
    notes: list[str] = []
    if replicas.min < replicas.max:
        ceiling.append(
            AlertRule(
                name="ReplicasAtCeiling",
                severity="warning",
                expr=f"max({spec_replicas}) >= {replicas.max}",
                for_duration=CEILING_FOR,
                summary=f"the fleet runs at its maximum of {replicas.max} replicas",
                reason=f"max replicas ({replicas.max}, KEDA's maxReplicaCount) carry the "
                f"planned peak with {plan.headroom:.0%} headroom; beyond it the SLO is at risk "
                "and the plan's traffic.peak_requests_per_s is too low",
            )
        )
    else:
        notes.append(
            f"no ReplicasAtCeiling alert: min = max = {replicas.max} replicas (a warm floor "
            "for a lost region's users), so the fleet always runs at its ceiling"
        )
    rules += [
        AlertRule(
            name="KvCacheNearFull",
            severity="warning",
            expr=f"max(vllm:kv_cache_usage_perc{sel}) > {KV_NEAR_FULL:g}",
            for_duration=KV_FOR,
            summary=f"a replica's KV cache is over {KV_NEAR_FULL:.0%} full",
            reason="a full KV cache preempts running requests (recomputed later: latency "
            "spikes); the autoscaler should have added replicas well before",
        ),
        AlertRule(
            name="Preemptions",
            severity="warning",
            expr=f"sum(rate(vllm:num_preemptions_total{sel}[5m])) > 0",
            for_duration=PREEMPTION_FOR,
            summary="vLLM keeps preempting requests for lack of KV blocks",
            reason="the plan sizes replicas so the KV pool holds the sized load; steady "
            "preemptions mean requests are longer or more numerous than planned",
        ),
        *ceiling,
        AlertRule(
            name="NoReadyReplica",
            severity="critical",
            expr=f"{available} < 1",
            for_duration=NOT_READY_FOR,
            summary="no vLLM replica in this region is ready: the region serves nothing",
            reason="what a region's health check would see; with failover, the other regions "
            "carry its traffic meanwhile",
        ),
    ]
    rules = [
        r.model_copy(update={"runbook_url": f"{plan.alerts.runbook_url}#{r.name.lower()}"})
        for r in rules
    ]
    return Alerts(
        error_budget=budget,
        rules=rules,
        notes=notes + [
            "the load balancer's 5xx share and p99 response time are CloudWatch alarms "
            "(entry_point.alarms) to the region's SNS topic, beside these; NoReadyReplica is "
            "the in-cluster view of what the region's Route53 health check sees",
            "burn rates read the histograms' buckets; a target between two bounds is "
            "interpolated inside that bucket, as histogram_quantile does",
        ],
    )
