"""The plan's stage-4 fields: how users are routed over regions (`Routing`), the global
name and its health checks (`Dns`), and API keys (`ApiKey`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from llmfleet.data import Data

HEALTH_CHECK_INTERVALS_S = (10, 30)
"""Route53 offers these request intervals only, fixed at creation (RequestInterval)."""
DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
DNS_NAME = rf"^{DNS_LABEL}(\.{DNS_LABEL})+$"


class Dns(Data):
    """The global name and its Route53 health checks (`components.GlobalEndpoint`)."""

    zone_name: str = Field(
        pattern=DNS_NAME, description="Public Route53 hosted zone, e.g. example.com."
    )
    zone_id: str | None = Field(
        default=None,
        pattern=r"^Z[A-Z0-9]{1,31}$",
        description="The zone's id; looked up by zone_name when absent.",
    )
    record_name: str = Field(
        pattern=DNS_NAME, description="The global name clients use, inside the zone."
    )
    record_type: Literal["alias", "cname"] = Field(
        default="alias",
        description="alias: A records aliasing each region's load balancer (Route53 answers "
        "them with the load balancer's own 60 s TTL); cname: CNAMEs with ttl_s.",
    )
    ttl_s: int | None = Field(
        default=None, ge=1, le=86400, description="TTL of cname records (default 60)."
    )
    health_check_interval_s: int = Field(
        default=30, description="Route53 health-check request interval: 10 or 30."
    )
    failure_threshold: int = Field(
        default=3, description="Failed checks in a row before a region is unhealthy: 1-10."
    )

    @field_validator("health_check_interval_s")
    @classmethod
    def _interval(cls, seconds: int) -> int:
        if seconds not in HEALTH_CHECK_INTERVALS_S:
            raise ValueError(
                f"Route53 health checks run every 10 or 30 s only, not {seconds}; use 10 "
                "(fast, costs more) or 30"
            )
        return seconds

    @field_validator("failure_threshold")
    @classmethod
    def _threshold(cls, n: int) -> int:
        if not 1 <= n <= 10:
            raise ValueError(f"Route53 takes a failure threshold of 1 to 10, not {n}; e.g. 3")
        return n

    @model_validator(mode="after")
    def _inside_zone(self) -> Dns:
        if not (
            self.record_name == self.zone_name or self.record_name.endswith("." + self.zone_name)
        ):
            raise ValueError(
                f"record_name {self.record_name!r} is outside the zone {self.zone_name!r}; "
                f"use a name ending in .{self.zone_name}, e.g. llm.{self.zone_name}"
            )
        if self.ttl_s is not None and self.record_type == "alias":
            raise ValueError(
                "ttl_s applies to cname records only: Route53 answers alias records with the "
                "load balancer's TTL (60 s); drop ttl_s or set record_type: cname"
            )
        return self


class ApiKey(Data):
    """vLLM API keys: the pods read VLLM_API_KEY from this Secret (vLLM's `--api-key` is
    the same setting; the environment keeps the key out of the rendered ConfigMap)."""

    secret_name: str = Field(
        pattern=r"^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$",
        description="Secret in the fleet's namespace that the user creates.",
    )
    secret_key: str = Field(default="key", min_length=1, description="Key holding the API key.")


class Routing(Data):
    """How the global name spreads users over regions, and how many region losses the
    fleet is sized to survive (`llmfleet.resilience`)."""

    policy: Literal["latency", "failover"] = Field(
        default="latency",
        description="latency: every region serves its users, a lost region's users go to "
        "the next-nearest healthy region; failover: a primary serves everyone, a secondary "
        "stands by (exactly two regions).",
    )
    primary: str | None = Field(
        default=None, description="failover: the primary region (default: the first listed)."
    )
    warm_share: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="Share of the load a region takes over after a loss that it keeps "
        "running (the warm floor); the rest cold-starts. failover: the standby's size as a "
        "share of the whole peak.",
    )
    survive_region_losses: int | None = Field(
        default=None,
        ge=0,
        description="Region losses the survivors carry the whole peak through (default 1 "
        "with two or more regions, 0 with one).",
    )


class Rollout(Data):
    """The order `pulumi up` reaches an environment's region stacks (`<env>.<region>`): the
    first region is the canary, gated on its replicas turning Ready and its SLO burn-rate
    alerts staying quiet before the next region starts; `<env>.global` goes last."""

    order: list[str] | None = Field(
        default=None,
        description="Every region of the plan once, canary first (default: by traffic "
        "share, smallest first, so a bad change reaches the fewest users; ties keep the "
        "plan's order).",
    )
