"""Each region's TLS entry point and its Route53 health check, decided in the core.

The AWS Load Balancer Controller turns the rendered Ingress into an internet-facing ALB in
the region's public subnets (tagged kubernetes.io/role/elb), with IP targets: the ALB's
nodes connect straight to the vLLM pods' VPC addresses. Its HTTPS listener takes the
region's ACM certificate, found by the Ingress's TLS hosts (the controller's certificate
discovery), so the rendered file holds no account-specific ARN. Only `/v1` (the OpenAI API)
and `/health` are routed; `/metrics` and the rest stay inside the cluster.

Who may call it (`plan.edge`): with `edge.auth` the ALB authenticates every `/v1` request
(JWT validation or Cognito) before it reaches a pod, and `/health` moves to a second Ingress
of the same IngressGroup without authentication (Route53's checkers send no credentials);
with `edge.rate_limit` the region's AWS WAF web ACL (`components.edge`, found by name)
limits each client. Production requires both (`plan.checks.check_production`).

How requests spread and drain: least outstanding requests (a request that streams 900
tokens and one that streams 9 differ tenfold in length; round robin piles long ones onto
one replica), readiness gates (the namespace label makes the controller hold a new pod
NotReady until the ALB sees it healthy), a preStop pause long enough that the ALB stops
routing to a pod before vLLM stops accepting, and a deregistration delay that lets the
drain finish the streams in flight.

The health check reflects serving capacity, not only a live process: a CloudWatch alarm on
the ALB's healthy targets (`capacity_check`, read by a CLOUDWATCH_METRIC Route53 check) takes
a region out of DNS when fewer replicas are Ready than its share needs, and the endpoint
check goes through the load balancer, which answers 503 with no Ready replica. Without
authentication or API keys it asks `/v1/models` for the served model's name
(HTTPS_STR_MATCH: a server up but serving another model fails too); otherwise `/health`.
Every Ingress names its role in its tags (`llmfleet.io/serves`), so the capacity alarm's
lookup finds the API's target group, not the health Ingress's."""

from __future__ import annotations

import json
import math
from typing import Literal

from pydantic import Field

from llmfleet.data import Data
from llmfleet.fleetplan.network import load_balancer_cidrs
from llmfleet.fleetplan.serving import longest_request_s
from llmfleet.fleetplan.weights import account_of
from llmfleet.fleetplan.workload import bounded_name
from llmfleet.plan.edge import Edge
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


class RateRule(Data):
    """The region's AWS WAF web ACL with one rate-based rule (`components.edge`)."""

    web_acl_name: str = Field(description="REGIONAL web ACL, found by the Ingress by name.")
    requests: int = Field(description="Requests one client may send per window.")
    window_s: int
    per: str = Field(description="ip, or token (the Authorization header).")
    block_status: int = Field(description="What a limited client gets back.")


class LbAlarm(Data):
    """A CloudWatch alarm on the region's ALB (`components.alarms`), to its SNS topic."""

    name: str = Field(description="Alarm name suffix (the alarm is <lb name>-<name>).")
    kind: str = Field(description="5xx-share (metric math over the ALB's counts) or latency-p99.")
    threshold: float = Field(description="Percent of requests (5xx-share) or seconds (latency).")
    period_s: int
    evaluation_periods: int
    datapoints_to_alarm: int
    summary: str
    reason: str
    runbook_url: str


class EntryPoint(Data):
    """One region's public TLS entry point: an internet-facing ALB made by the AWS Load
    Balancer Controller from the rendered Ingress, with the region's ACM certificate."""

    hostname: str = Field(description="The global name (every region's certificate has it).")
    regional_hostname: str = Field(description="This region's own name (health check).")
    zone_name: str
    port: int = Field(description="HTTPS listener port.")
    ssl_policy: str
    idle_timeout_s: int = Field(description="ALB idle timeout: the longest silent response.")
    load_balancer_name: str = Field(description="The ALB's name (32 characters at most).")
    group_name: str = Field(description="IngressGroup: the API and health Ingresses share one ALB.")
    paths: list[str] = Field(description="Paths routed to vLLM; anything else gets a 404.")
    health_paths: list[str] = Field(
        description="Paths of the unauthenticated health Ingress (empty: no auth, one Ingress)."
    )
    auth: str | None = Field(description="jwt, cognito, or None (edge.auth).")
    rate_rule: RateRule | None = Field(description="The WAF rate limit (edge.rate_limit).")
    deregistration_delay_s: int = Field(
        description="How long the ALB keeps a draining target's requests in flight: the "
        "preStop pause plus vLLM's shutdown timeout."
    )
    access_logs_bucket: str | None = Field(
        description="The region's log bucket (ALB access logs); None without an account id."
    )
    deletion_protection: bool = Field(description="On in production: the ALB survives deletes.")
    source_cidrs: list[str] = Field(
        description="Where the ALB's nodes connect from (its public subnets): the "
        "NetworkPolicy admits exactly these on the serving port."
    )
    ingress_annotations: dict[str, str]
    health_annotations: dict[str, str] = Field(
        description="The health Ingress's annotations (empty: no separate health Ingress)."
    )
    health_check: HealthCheck
    alarms: list[LbAlarm] = Field(description="CloudWatch alarms on the ALB's own metrics.")
    reasons: list[str]
    capacity_check: CapacityCheck | None = Field(
        default=None,
        description="The region leaves DNS below this many healthy targets (set by the "
        "FleetPlan's assembly, which knows the region's sizing).",
    )
    capacity_target: Literal["api", "health"] = Field(
        default="api",
        description="Whose target group counts the Ready vLLM replicas for the capacity "
        "alarm: the API Ingress's, or, behind a prefix-aware router (whose pods are the API's "
        "targets), the health Ingress's.",
    )


HTTPS_PORT = 443
SSL_POLICY = "ELBSecurityPolicy-TLS13-1-2-2021-06"
"""TLS 1.3 and 1.2 only: the ELB policy AWS recommends for new HTTPS listeners."""
MAX_IDLE_TIMEOUT_S = 4000
"""The largest ALB idle timeout (idle_timeout.timeout_seconds: 1-4000)."""
MAX_DEREGISTRATION_DELAY_S = 3600
"""deregistration_delay.timeout_seconds: 0-3600 (the controller's annotation docs)."""
LB_NAME_MAX = 32
"""The controller refuses a load-balancer-name longer than 32 characters."""
PATHS = ["/v1", "/health"]
HEALTH_PATH = "/health"
ROUTER_READINESS_PATH = "/readiness"
"""vllm-router's readiness: 200 with one healthy engine (its /health is 503 while any one
engine is unhealthy: fleetplan.prefix_router)."""
ALB = "alb.ingress.kubernetes.io"
RATE_LIMITED_STATUS = 429
SERVES_TAG = "llmfleet.io/serves"
"""On the API Ingress's target group (`=api`); the health Ingress tags its own with another
key, so a lookup by the API's tags finds one target group (the controller tags a target
group with its own Ingress's `alb.ingress.kubernetes.io/tags`; the ALB gets the group's
merged)."""
ACCESS_LOG_PREFIX = "alb"


def regional_hostname(region: str, dns: Dns) -> str:
    return f"{region}.{dns.record_name}"


def load_balancer_name(fleet: str, region: str) -> str:
    """`<fleet>-<region>`, cut to 32 characters with a hash of the whole kept unique."""
    return bounded_name(f"{fleet}-{region}", LB_NAME_MAX)


def logs_bucket(fleet: str, region: str, account_id: str) -> str:
    """The region's log bucket: ALB access logs and VPC flow logs (`components.logs`)."""
    return f"{fleet}-logs-{region}-{account_id}"


def idle_timeout_s(plan: CapacityPlan) -> int:
    """A non-streamed response is silent until it ends: the longest request max_model_len
    allows (`serving.longest_request_s`), within the ALB's 4000 s limit."""
    return min(MAX_IDLE_TIMEOUT_S, math.ceil(longest_request_s(plan)))


def health_check(plan: CapacityPlan, dns: Dns, region: str, served_model: str) -> HealthCheck:
    common = {
        "fqdn": regional_hostname(region, dns),
        "port": HTTPS_PORT,
        "request_interval_s": dns.health_check_interval_s,
        "failure_threshold": dns.failure_threshold,
    }
    if plan.api_key is None and plan.edge.auth is None:
        return HealthCheck(
            type="HTTPS_STR_MATCH",
            resource_path="/v1/models",
            search_string=served_model,
            reason="through the ALB, which answers 503 when no vLLM replica is Ready (only "
            "Ready pods are targets); the model list must name the served model",
            **common,
        )
    why = "the ALB authenticates /v1/*" if plan.edge.auth else "vLLM refuses /v1/* without the key"
    return HealthCheck(
        type="HTTPS",
        resource_path=HEALTH_PATH,
        search_string=None,
        reason=f"through the ALB, which answers 503 when no vLLM replica is Ready; {HEALTH_PATH}, "
        f"since {why} and Route53 cannot send credentials",
        **common,
    )


def auth_annotations(edge: Edge) -> dict[str, str]:
    """The controller's authentication annotations for `edge.auth` (v3.5.0 annotation docs)."""
    auth = edge.auth
    if auth is None:
        return {}
    if auth.jwt is not None:
        config: dict[str, object] = {"jwksEndpoint": auth.jwt.jwks_url, "issuer": auth.jwt.issuer}
        if auth.jwt.scopes:
            config["additionalClaims"] = [
                {"name": "scope", "format": "space-separated-values", "values": auth.jwt.scopes}
            ]
        return {f"{ALB}/jwt-validation": json.dumps(config, separators=(",", ":"))}
    assert auth.cognito is not None
    idp = {
        "userPoolARN": auth.cognito.user_pool_arn,
        "userPoolClientID": auth.cognito.user_pool_client_id,
        "userPoolDomain": auth.cognito.user_pool_domain,
    }
    return {
        f"{ALB}/auth-type": "cognito",
        f"{ALB}/auth-idp-cognito": json.dumps(idp, separators=(",", ":")),
        f"{ALB}/auth-on-unauthenticated-request": "authenticate",
        f"{ALB}/auth-scope": "openid",
    }


FAST_BURN = 14.4
"""The SRE workbook's fast burn (as the TTFT/ITL alerts, fleetplan.alerts): the error
budget spent 14.4 times as fast as the SLO allows."""
ALARM_PERIOD_S = 60
ALARM_PERIODS = 5


def runbook(alerting_url: str, anchor: str) -> str:
    return f"{alerting_url}#{anchor}"


def lb_alarms(plan: CapacityPlan) -> list[LbAlarm]:
    """The ALB's 5xx share and its p99 response time, against the plan's SLO."""
    budget = 1 - plan.slo.percentile / 100
    share = round(min(100.0, FAST_BURN * budget * 100), 2)
    p99_output = plan.traffic.output_tokens.at_percentile(99)
    longest_s = round((plan.slo.ttft_ms + p99_output * plan.slo.itl_ms) / 1000, 1)
    window = f"{ALARM_PERIODS} x {ALARM_PERIOD_S} s"
    return [
        LbAlarm(
            name="5xx-share",
            kind="5xx-share",
            threshold=share,
            period_s=ALARM_PERIOD_S,
            evaluation_periods=ALARM_PERIODS,
            datapoints_to_alarm=ALARM_PERIODS,
            summary=f"over {share:g} % of the ALB's requests answered 5xx ({window})",
            reason=f"{FAST_BURN:g}x the SLO's error budget of {budget:.1%}: the load balancer's "
            "own view, which sees what Prometheus cannot (no target, 502 on a drained pod)",
            runbook_url=runbook(plan.alerts.runbook_url, "albhigh5xxshare"),
        ),
        LbAlarm(
            name="latency-p99",
            kind="latency-p99",
            threshold=longest_s,
            period_s=ALARM_PERIOD_S,
            evaluation_periods=ALARM_PERIODS,
            datapoints_to_alarm=ALARM_PERIODS,
            summary=f"p99 target response time over {longest_s:g} s ({window})",
            reason=f"a p99 request at the SLO: TTFT {plan.slo.ttft_ms:g} ms + {p99_output} "
            f"output tokens x {plan.slo.itl_ms:g} ms (a streamed response's headers come far "
            "sooner, so this fires on stalled or queued requests)",
            runbook_url=runbook(plan.alerts.runbook_url, "albslowresponses"),
        ),
    ]


def build_entry_point(
    plan: CapacityPlan,
    region_name: str,
    served: str,
    *,
    prestop_sleep_s: int,
    shutdown_timeout_s: int,
) -> EntryPoint | None:
    """The region's entry point, or None when the plan has no global name."""
    if plan.dns is None:
        return None
    dns = plan.dns
    region = next(r for r in plan.regions if r.name == region_name)
    idle = idle_timeout_s(plan)
    lb_name = load_balancer_name(plan.name, region_name)
    dereg = min(MAX_DEREGISTRATION_DELAY_S, prestop_sleep_s + shutdown_timeout_s)
    production = plan.environment == "production"
    # A retiring region's ALB must be deletable: the controller deletes it (and the security
    # groups it made) when its Ingress goes, which deletion protection refuses.
    protected = production and not region.retire
    account = account_of(plan)
    logs = logs_bucket(plan.name, region_name, account)
    lb_attributes = {
        "idle_timeout.timeout_seconds": str(idle),
        "routing.http.drop_invalid_header_fields.enabled": "true",
        "deletion_protection.enabled": "true" if protected else "false",
        "access_logs.s3.enabled": "true" if logs else "false",
    }
    if logs:
        lb_attributes["access_logs.s3.bucket"] = logs
        lb_attributes["access_logs.s3.prefix"] = ACCESS_LOG_PREFIX
    tg_attributes = {
        "load_balancing.algorithm.type": "least_outstanding_requests",
        "deregistration_delay.timeout_seconds": str(dereg),
    }
    rate = plan.edge.rate_limit
    rate_rule = (
        RateRule(
            web_acl_name=lb_name,
            requests=rate.requests,
            window_s=rate.window_s,
            per=rate.per,
            block_status=RATE_LIMITED_STATUS,
        )
        if rate is not None
        else None
    )
    group = f"{plan.name}"
    routed = plan.edge.balancing == "prefix_aware"
    split = plan.edge.auth is not None or routed  # /health on an Ingress of its own
    target = {
        f"{ALB}/target-type": "ip",
        f"{ALB}/backend-protocol": "HTTP",
        f"{ALB}/healthcheck-path": HEALTH_PATH,
        f"{ALB}/success-codes": "200",
        f"{ALB}/target-group-attributes": _string_map(tg_attributes),
        f"{ALB}/group.name": group,
    }
    shared = {  # "Exclusive" annotations: the same value on every Ingress of the group
        f"{ALB}/scheme": "internet-facing",
        f"{ALB}/load-balancer-name": lb_name,
        f"{ALB}/listen-ports": json.dumps([{"HTTPS": HTTPS_PORT}], separators=(",", ":")),
        f"{ALB}/ssl-policy": SSL_POLICY,
        f"{ALB}/load-balancer-attributes": _string_map(lb_attributes),
    }
    if rate_rule is not None:  # absent: the controller leaves the ALB's WAF setting alone
        shared[f"{ALB}/wafv2-acl-name"] = rate_rule.web_acl_name
    tags = f"llmfleet.io/fleet={plan.name},llmfleet.io/region={region_name}"
    api = {**shared, **target, **auth_annotations(plan.edge), f"{ALB}/group.order": "10",
           f"{ALB}/tags": f"{tags},{SERVES_TAG}=api"}
    if routed:  # the API's targets are the router's pods, ready with one healthy engine
        api[f"{ALB}/healthcheck-path"] = ROUTER_READINESS_PATH
    health = (
        {**shared, **target, f"{ALB}/group.order": "1",
         f"{ALB}/tags": f"{tags},{SERVES_TAG}-health=true"}
        if split
        else {}
    )
    reasons = [
        "an internet-facing ALB (AWS Load Balancer Controller) with IP targets: TLS ends "
        f"at the ALB ({SSL_POLICY}) with the region's ACM certificate for "
        f"{dns.record_name} and {regional_hostname(region_name, dns)}",
        f"the NetworkPolicy admits {', '.join(load_balancer_cidrs(region))} (the public "
        "subnets holding the ALB's nodes, which connect to pod IPs) on the serving port; "
        "nothing else outside the monitoring namespace",
        f"idle timeout {idle} s: a non-streamed response is silent for up to TTFT "
        f"{plan.slo.ttft_ms:g} ms + {plan.max_model_len:,} tokens x {plan.slo.itl_ms:g} ms",
        "least outstanding requests: a new request goes to the replica with the fewest in "
        "flight, not the next in turn (requests differ tenfold in length)"
        if not routed
        else "prefix-aware: /v1 goes to the cache-aware router's pods (least outstanding "
        f"requests among them; healthy on {ROUTER_READINESS_PATH}), which pick the vLLM "
        f"replica; {HEALTH_PATH} goes to the vLLM pods, so the capacity alarm counts them",
        f"deregistration delay {dereg} s = preStop {prestop_sleep_s} s + vLLM's shutdown "
        f"timeout {shutdown_timeout_s} s: streams in flight finish while the pod drains",
    ]
    if plan.edge.auth is not None:
        reasons.append(
            f"{plan.edge.auth.kind} authentication at the ALB on /v1; {HEALTH_PATH} is a "
            "second Ingress of the same group without it (Route53 sends no credentials)"
        )
    if rate_rule is not None:
        reasons.append(
            f"AWS WAF web ACL {rate_rule.web_acl_name}: {rate_rule.requests} requests per "
            f"{rate_rule.window_s} s per {rate_rule.per}, then {RATE_LIMITED_STATUS}"
        )
    if logs:
        reasons.append(f"access logs in s3://{logs}/{ACCESS_LOG_PREFIX}/")
    if region.retire:
        reasons.append(
            "retiring (regions[].retire): deletion protection off, so `pulumi destroy` can "
            "delete the Ingress and the controller its ALB and security groups"
        )
    return EntryPoint(
        hostname=dns.record_name,
        regional_hostname=regional_hostname(region_name, dns),
        zone_name=dns.zone_name,
        port=HTTPS_PORT,
        ssl_policy=SSL_POLICY,
        idle_timeout_s=idle,
        load_balancer_name=lb_name,
        group_name=group,
        paths=["/v1"] if split else list(PATHS),
        health_paths=[HEALTH_PATH] if split else [],
        auth=plan.edge.auth.kind if plan.edge.auth else None,
        rate_rule=rate_rule,
        deregistration_delay_s=dereg,
        access_logs_bucket=logs,
        deletion_protection=protected,
        source_cidrs=load_balancer_cidrs(region),
        ingress_annotations=dict(sorted(api.items())),
        health_annotations=dict(sorted(health.items())),
        health_check=health_check(plan, dns, region_name, served),
        alarms=lb_alarms(plan),
        reasons=reasons,
        capacity_target="health" if routed else "api",
    )


def _string_map(values: dict[str, str]) -> str:
    """The controller's stringMap annotation format: k1=v1,k2=v2 (sorted)."""
    return ",".join(f"{k}={v}" for k, v in sorted(values.items()))


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
