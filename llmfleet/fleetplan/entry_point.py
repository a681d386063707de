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
