"""The capacity plan: what the user wants, read from the stack's `llmfleet:plan` config.

Every model is strict (`extra="forbid"`, frozen) so a typo is an error, not a default.
"""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from llmfleet.architecture import KvCacheDtype, Precision
from llmfleet.plan_capacity import CapacityPurchase, DayProfile, Startup


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSpec(Strict):
    id: str | None = Field(
        default=None, description="Catalog id or alias, e.g. Llama-3.1-8B-Instruct."
    )
    config_path: str | None = Field(
        default=None, description="Path to a Hugging Face config.json, relative to the repo root."
    )
    hf_repo: str | None = Field(
        default=None,
        description="Checkpoint vLLM loads; defaults to the catalog model's repository.",
    )
    precision: Precision = Field(default="bf16", description="Serving precision of the weights.")
    kv_cache_dtype: KvCacheDtype = Field(
        default="auto", description="auto keeps 16-bit KV; fp8 halves it."
    )

    @model_validator(mode="after")
    def _one_source(self) -> ModelSpec:
        if (self.id is None) == (self.config_path is None):
            raise ValueError("give exactly one of model.id (a catalog model) or model.config_path")
        return self


class TokenLength(Strict):
    """Tokens per request. A lognormal through the mean and the highest percentile given
    gives any other percentile (`queueing.length_at_percentile`)."""

    mean: int = Field(gt=0, description="Mean tokens per request.")
    p95: int | None = Field(
        default=None, gt=0, description="95th percentile; defaults to the mean."
    )
    p99: int | None = Field(
        default=None,
        gt=0,
        description="99th percentile; fitted from the mean and p95 when absent.",
    )

    @model_validator(mode="after")
    def _percentiles_ordered(self) -> TokenLength:
        if self.p95 is not None and self.p95 < self.mean:
            raise ValueError(
                f"p95 ({self.p95}) is below the mean ({self.mean}); give p95 >= mean"
            )
        if self.p99 is not None and self.p99 < max(self.mean, self.p95 or 0):
            raise ValueError(
                f"p99 ({self.p99}) is below the mean or p95 ({self.mean}, {self.p95}); "
                "give p99 >= p95 >= mean"
            )
        return self

    @property
    def p95_or_mean(self) -> int:
        return self.p95 if self.p95 is not None else self.mean


class Traffic(Strict):
    peak_requests_per_s: float = Field(gt=0, description="Fleet-wide peak request rate.")
    trough_requests_per_s: float = Field(gt=0, description="Fleet-wide trough request rate.")
    input_tokens: TokenLength
    output_tokens: TokenLength

    @model_validator(mode="after")
    def _trough_below_peak(self) -> Traffic:
        if self.trough_requests_per_s > self.peak_requests_per_s:
            raise ValueError(
                f"trough_requests_per_s ({self.trough_requests_per_s}) exceeds "
                f"peak_requests_per_s ({self.peak_requests_per_s})"
            )
        return self


class Slo(Strict):
    ttft_ms: float = Field(
        gt=0,
        description="Time to first token at the percentile: the prompt at that percentile of "
        "the input lengths plus the queue wait at that percentile.",
    )
    itl_ms: float = Field(gt=0, description="Inter-token latency target (see `itl`).")
    itl: Literal["token_gap", "tpot"] = Field(
        default="token_gap",
        description="token_gap: every gap between two tokens of a stream, at the percentile "
        "(vLLM's benchmark `itl`; the seed's 'ms per token'); tpot: a request's mean time per "
        "output token at the percentile across requests (vLLM's `tpot`), a looser target.",
    )
    percentile: float = Field(
        default=99, gt=50, lt=100, description="Percentile both targets hold at."
    )


MAX_VPC_PREFIX = 20
"""Smallest new VPC accepted (/20): private subnets of /22, public of /26."""


class ExistingVpc(Strict):
    vpc_id: str = Field(description="Existing VPC to place the cluster in.")
    private_subnet_ids: list[str] = Field(min_length=2, description="Private subnets in 2+ AZs.")


class Region(Strict):
    name: str = Field(description="AWS region, e.g. us-east-1.")
    traffic_share: float = Field(
        gt=0, le=1, description="Share of the fleet's traffic served here."
    )
    network: ExistingVpc | None = Field(
        default=None, description="Existing VPC; a new one if absent."
    )
    vpc_cidr: str = Field(
        default="10.40.0.0/16", description="CIDR of the new VPC when no network is given."
    )
    capacity: CapacityPurchase = Field(
        default_factory=CapacityPurchase, description="How GPU nodes are bought here."
    )
    node_zone_ids: list[str] | None = Field(
        default=None,
        description="Zone IDs (e.g. use1-az4) for GPU nodes; default: every zone offering "
        "the chosen instance (up to three).",
    )

    @field_validator("vpc_cidr")
    @classmethod
    def _vpc_cidr(cls, cidr: str) -> str:
        try:
            net = ipaddress.IPv4Network(cidr, strict=True)
        except ValueError as e:
            raise ValueError(
                f"not an IPv4 network in CIDR notation ({e}), e.g. 10.40.0.0/16"
            ) from None
        if not 16 <= net.prefixlen <= MAX_VPC_PREFIX:
            raise ValueError(
                f"a VPC must be /16 to /{MAX_VPC_PREFIX} (AWS allows /16 at most; "
                "pods take VPC addresses, so smaller ones run out), e.g. 10.40.0.0/16"
            )
        return cidr


class Allowed(Strict):
    instance_types: list[str] | None = Field(default=None, description="Only these instance types.")
    gpus: list[str] | None = Field(default=None, description="Only instances with these GPUs.")


class ClusterAccess(Strict):
    endpoint_public_access: bool = Field(
        default=True,
        description="Public Kubernetes API endpoint (IAM-authenticated). Needed when "
        "`pulumi up` runs outside the VPC; turn off once it runs inside or over a VPN.",
    )
    public_access_cidrs: list[str] = Field(
        default_factory=lambda: ["0.0.0.0/0"],
        min_length=1,
        description="Who may reach the public endpoint; narrow it to your CI and office.",
    )
    nat_gateways: Literal["per_az", "single"] = Field(
        default="per_az", description="New VPCs: a NAT gateway per zone, or one (cheaper)."
    )

    @model_validator(mode="after")
    def _cidrs(self) -> ClusterAccess:
        for cidr in self.public_access_cidrs:
            try:
                ipaddress.ip_network(cidr)
            except ValueError:
                raise ValueError(f"{cidr!r} is not a CIDR block such as 203.0.113.0/24") from None
        return self


class PriceOverride(Strict):
    instance_type: str
    usd_per_hour: float = Field(gt=0)
    region: str | None = Field(default=None, description="One region, or every region if absent.")


class CapacityPlan(Strict):
    name: str = Field(
        min_length=1,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="DNS-safe name of the service; prefixes every resource.",
    )
    model: ModelSpec
    max_model_len: int = Field(gt=0, description="Longest prompt + output a request may have.")
    traffic: Traffic
    slo: Slo
    regions: list[Region] = Field(min_length=1)
    allowed: Allowed = Field(default_factory=Allowed)
    headroom: float = Field(
        default=0.20,
        ge=0,
        lt=0.9,
        description="Share of capacity kept free for spikes (seed: 20-25 %).",
    )
    gpu_memory_utilization: float = Field(default=0.90, gt=0.1, le=0.98)
    prices: list[PriceOverride] = Field(default_factory=list)
    confidence: Literal["expected", "pessimistic"] = Field(
        default="expected",
        description="pessimistic sizes with the GPU part of every step at the p90 of the "
        "calibration's measured/predicted ITL ratio",
    )
    cluster: ClusterAccess = Field(default_factory=ClusterAccess)
    kubernetes_version: str = Field(default="1.33", pattern=r"^1\.\d+$")
    startup: Startup = Field(default_factory=Startup)
    day_profile: DayProfile = Field(default_factory=DayProfile)

    @model_validator(mode="after")
    def _regions(self) -> CapacityPlan:
        names = [r.name for r in self.regions]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"regions are listed twice: {', '.join(dupes)}")
        total = sum(r.traffic_share for r in self.regions)
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"regions[].traffic_share must sum to 1.0, not {total:g}")
        needed = self.traffic.input_tokens.mean + self.traffic.output_tokens.mean
        if needed > self.max_model_len:
            raise ValueError(
                f"max_model_len ({self.max_model_len}) is below a mean request (input "
                f"{self.traffic.input_tokens.mean} + output {self.traffic.output_tokens.mean})"
            )
        return self
