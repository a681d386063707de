"""The FleetPlan's routing sections: each region's TLS entry point and health check, the
loss scenarios with who absorbs whom, the warm floors they need, and the recovery time.

Plain data like `fleet.py` (which holds these under `FleetPlan.resilience` and
`RegionPlan.entry_point`); `entry_point.py` and `resilience.py` decide the numbers.
"""

from __future__ import annotations

from pydantic import Field

from llmfleet.data import Data


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


class Absorption(Data):
    lost: str
    absorbed_by: str
    requests_per_s: float = Field(description="The lost region's peak re-routed.")
    distance_km: float | None = Field(description="Between the two regions (latency routing).")


class LossScenario(Data):
    lost: list[str]
    absorptions: list[Absorption]
    load_requests_per_s: dict[str, float] = Field(description="Per survivor, at the peak.")
    cold_start: bool = Field(description="A survivor's warm floor is short of its load.")
    recovery_s: int | None = Field(
        description="Detection + TTL (+ cold start when a warm floor is short); None "
        "without a global name: nothing re-routes."
    )


class RegionFloor(Data):
    region: str
    capacity_requests_per_s_per_replica: float = Field(description="At the SLO limit.")
    worst_load_requests_per_s: float = Field(description="Its peak plus the most it absorbs.")
    worst_case_lost: list[str]
    replicas_needed: int = Field(description="Replicas at the SLO limit for the worst load.")
    warm_replicas: int = Field(description="The warm floor: replicas.min keeps at least these.")
    replicas_without_resilience: dict[str, int]
    nodes_without_resilience: dict[str, int]
    monthly_cost_usd_without_resilience: float


class Recovery(Data):
    detection_s: int = Field(description="Health-check interval x failure threshold.")
    ttl_s: int = Field(description="Resolvers may keep the old answer this long.")
    cold_start_s: int = Field(description="A pod's start-up budget, paid where a floor is short.")
    worst_s: int = Field(description="The slowest loss scenario's recovery.")
    explanation: str


class Resilience(Data):
    policy: str
    primary: str | None
    survive_region_losses: int
    warm_share: float
    scenarios: list[LossScenario]
    regions: list[RegionFloor]
    recovery: Recovery | None
    monthly_cost_usd_without_resilience: float
    flags: list[str] = Field(description="What the plan's routing cannot protect against.")
    reasons: list[str]
