"""Each region's TLS entry point and its Route53 health check, decided in the core.

The AWS Load Balancer Controller turns the rendered Ingress into an internet-facing ALB in
the region's public subnets (tagged kubernetes.io/role/elb), with IP targets: the ALB's
nodes connect straight to the vLLM pods' VPC addresses. Its HTTPS listener takes the
region's ACM certificate, found by the Ingress's TLS hosts (the controller's certificate
discovery), so the rendered file holds no account-specific ARN. Only `/v1` (the OpenAI API)
and `/health` are routed; `/metrics` and the rest stay inside the cluster.

The health check reflects serving capacity, not only a live process: it goes through the
load balancer, and the controller registers only Ready pods as targets (without the
readiness-gate label, `pkg/backend/endpoint_resolver.go` of v2.14.0 keeps ready endpoints),
so with no Ready replica the ALB has no target and answers 503. Without API keys it asks
`/v1/models` for the served model's name (HTTPS_STR_MATCH: a server up but serving another
model fails too); with API keys vLLM refuses `/v1/*` without the key, which Route53 cannot
send, so it checks `/health` (HTTPS: any 2xx/3xx) through the same path."""

from __future__ import annotations

import json
import math

from pydantic import Field

from llmfleet.data import Data
from llmfleet.fleetplan.network import load_balancer_cidrs
from llmfleet.plan.routing import Dns
from llmfleet.plan.schema import CapacityPlan


class HealthCheck(Data):
    """The Route53 health check of one region's entry point (`components.GlobalEndpoint`)."""

    type: str = Field(description="HTTPS_STR_MATCH (model list) or HTTPS (status only).")
    fqdn: str = Field(description="The region's own name, resolving to its load balancer.")
    port: int
    resource_path: str
    search_string: str | None = Field(description="Text the response must contain.")
    request_interval_s: int
    failure_threshold: int
    reason: str


class CapacityCheck(Data):
    """Capacity-aware failover: a CloudWatch alarm in the region on the ALB's healthy
    targets, read by a CLOUDWATCH_METRIC Route53 health check; the routed record uses a
    CALCULATED check that needs both it and the endpoint check (`HealthCheck`) healthy."""

    min_healthy_targets: int = Field(
        description="Below this many healthy targets (Ready replicas) the region leaves DNS."
    )
    needed_at_peak: int = Field(
        description="Replicas the region's share of the peak needs at the SLO-limit rate."
    )
    namespace: str = Field(description="CloudWatch namespace of the metric.")
    metric_name: str
    statistic: str = Field(description="Minimum: the worst load balancer node's view.")
    comparison_operator: str
    period_s: int
    evaluation_periods: int
    datapoints_to_alarm: int
    treat_missing_data: str = Field(
        description="breaching: no datapoint means no registered target, i.e. no capacity."
    )
    insufficient_data_health_status: str = Field(
        description="Route53's view while CloudWatch cannot tell (a new alarm)."
    )
    detection_s: int = Field(
        description="Below-capacity detection: the ALB's 60 s reporting plus the alarm's "
        "breaching datapoints x period (CloudWatch and Route53 polling lags not included)."
    )
    reason: str


class EntryPoint(Data):
    """One region's public TLS entry point: an internet-facing ALB made by the AWS Load
    Balancer Controller from the rendered Ingress, with the region's ACM certificate."""

    hostname: str = Field(description="The global name (every region's certificate has it).")
    regional_hostname: str = Field(description="This region's own name (health check).")
    zone_name: str
    port: int = Field(description="HTTPS listener port.")
    ssl_policy: str
    idle_timeout_s: int = Field(description="ALB idle timeout: the longest silent response.")
    paths: list[str] = Field(description="Paths routed to vLLM; anything else gets a 404.")
    source_cidrs: list[str] = Field(
        description="Where the ALB's nodes connect from (its public subnets): the "
        "NetworkPolicy admits exactly these on the serving port."
    )
    ingress_annotations: dict[str, str]
    health_check: HealthCheck
    reasons: list[str]
    capacity_check: CapacityCheck | None = Field(
        default=None,
        description="The region leaves DNS below this many healthy targets (set by the "
        "FleetPlan's assembly, which knows the region's sizing).",
    )


HTTPS_PORT = 443
SSL_POLICY = "ELBSecurityPolicy-TLS13-1-2-2021-06"
"""TLS 1.3 and 1.2 only: the ELB policy AWS recommends for new HTTPS listeners."""
MAX_IDLE_TIMEOUT_S = 4000
"""The largest ALB idle timeout (idle_timeout.timeout_seconds: 1-4000)."""
PATHS = ["/v1", "/health"]
ALB = "alb.ingress.kubernetes.io"


def regional_hostname(region: str, dns: Dns) -> str:
    return f"{region}.{dns.record_name}"


def idle_timeout_s(plan: CapacityPlan) -> int:
    """A non-streamed response is silent until it ends: the TTFT target plus max_model_len
    tokens at the ITL target, within the ALB's 4000 s limit."""
    longest = (plan.slo.ttft_ms + plan.max_model_len * plan.slo.itl_ms) / 1000
    return min(MAX_IDLE_TIMEOUT_S, math.ceil(longest))


def health_check(plan: CapacityPlan, dns: Dns, region: str, served_model: str) -> HealthCheck:
    common = {
        "fqdn": regional_hostname(region, dns),
        "port": HTTPS_PORT,
        "request_interval_s": dns.health_check_interval_s,
        "failure_threshold": dns.failure_threshold,
    }
    if plan.api_key is None:
        return HealthCheck(
            type="HTTPS_STR_MATCH",
            resource_path="/v1/models",
            search_string=served_model,
            reason="through the ALB, which answers 503 when no vLLM replica is Ready (only "
            "Ready pods are targets); the model list must name the served model",
            **common,
        )
    return HealthCheck(
        type="HTTPS",
        resource_path="/health",
        search_string=None,
        reason="through the ALB, which answers 503 when no vLLM replica is Ready; /health, "
        "since vLLM refuses /v1/* without the API key and Route53 cannot send one",
        **common,
    )


def build_entry_point(plan: CapacityPlan, region_name: str, served: str) -> EntryPoint | None:
    """The region's entry point, or None when the plan has no global name."""
    if plan.dns is None:
        return None
    dns = plan.dns
    region = next(r for r in plan.regions if r.name == region_name)
    idle = idle_timeout_s(plan)
    annotations = {
        f"{ALB}/scheme": "internet-facing",
        f"{ALB}/target-type": "ip",
        f"{ALB}/listen-ports": json.dumps([{"HTTPS": HTTPS_PORT}], separators=(",", ":")),
        f"{ALB}/ssl-policy": SSL_POLICY,
        f"{ALB}/backend-protocol": "HTTP",
        f"{ALB}/healthcheck-path": "/health",
        f"{ALB}/success-codes": "200",
        f"{ALB}/load-balancer-attributes": f"idle_timeout.timeout_seconds={idle}",
        f"{ALB}/tags": f"llmfleet.io/fleet={plan.name},llmfleet.io/region={region_name}",
    }
    return EntryPoint(
        hostname=dns.record_name,
        regional_hostname=regional_hostname(region_name, dns),
        zone_name=dns.zone_name,
        port=HTTPS_PORT,
        ssl_policy=SSL_POLICY,
        idle_timeout_s=idle,
        paths=list(PATHS),
        source_cidrs=load_balancer_cidrs(region),
        ingress_annotations=dict(sorted(annotations.items())),
        health_check=health_check(plan, dns, region_name, served),
        reasons=[
            "an internet-facing ALB (AWS Load Balancer Controller) with IP targets: TLS ends "
            f"at the ALB ({SSL_POLICY}) with the region's ACM certificate for "
            f"{dns.record_name} and {regional_hostname(region_name, dns)}",
            f"the NetworkPolicy admits {', '.join(load_balancer_cidrs(region))} (the public "
            "subnets holding the ALB's nodes, which connect to pod IPs) on the serving port; "
            "nothing else outside the monitoring namespace",
            f"idle timeout {idle} s: a non-streamed response is silent for up to TTFT "
            f"{plan.slo.ttft_ms:g} ms + {plan.max_model_len:,} tokens x {plan.slo.itl_ms:g} ms",
        ],
    )


ALB_METRIC_INTERVAL_S = 60
"""ELB reports ALB metrics to CloudWatch in 60-second intervals (ALB CloudWatch metrics doc);
Route53 alarms take standard resolution only, so 60 s is also the shortest period."""
CAPACITY_PERIODS = 3
"""Three breaching minutes in a row: a replica's restart or a node replacement (one target
for a minute or two) does not move a region's users."""


def build_capacity_check(
    region: str,
    peak_requests_per_s: float,
    replica_requests_per_s: float,
    replicas_min: int,
    max_unavailable: int,
) -> CapacityCheck:
    """The healthy-target floor below which a region leaves DNS: what its share of the peak
    needs at the SLO-limit rate of a replica, capped where a normal day would cross it (the
    trough's replicas.min less what a rollout or the PodDisruptionBudget may take), at least 1."""
    needed = max(1, math.ceil(peak_requests_per_s / replica_requests_per_s - 1e-9))
    normal_low = replicas_min - max_unavailable
    floor = max(1, min(needed, normal_low))
    detection = ALB_METRIC_INTERVAL_S + CAPACITY_PERIODS * ALB_METRIC_INTERVAL_S
    why = (
        f"{region}'s share of the peak ({peak_requests_per_s:g} req/s) needs {needed} "
        f"replica(s) at {replica_requests_per_s:g} req/s each (the SLO limit)"
    )
    if floor < needed:
        why += (
            f"; capped at {floor}: KEDA runs {replicas_min} at the trough and a rollout or "
            f"node drain may take {max_unavailable}, so a higher floor would move its users "
            "every night (above it, a region short of replicas keeps its users until KEDA's new "
            "replicas join)"
        )
    return CapacityCheck(
        min_healthy_targets=floor,
        needed_at_peak=needed,
        namespace="AWS/ApplicationELB",
        metric_name="HealthyHostCount",
        statistic="Minimum",
        comparison_operator="LessThanThreshold",
        period_s=ALB_METRIC_INTERVAL_S,
        evaluation_periods=CAPACITY_PERIODS,
        datapoints_to_alarm=CAPACITY_PERIODS,
        treat_missing_data="breaching",
        insufficient_data_health_status="LastKnownStatus",
        detection_s=detection,
        reason=why + f"; unhealthy after {CAPACITY_PERIODS} minutes below {floor} healthy "
        "target(s) (HealthyHostCount, Minimum over the ALB's nodes), about "
        f"{detection} s with the ALB's 60 s reporting",
    )
