"""How each region's cluster is reached and started: the Kubernetes API endpoint's access,
NAT gateways, the image and the traffic growth a cold start must ride out."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field, model_validator

from llmfleet.data import Data


class ClusterAccess(Data):
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


class Startup(Data):
    """What a cold start must carry and what it pulls."""

    traffic_growth_per_min: float = Field(
        default=0.01,
        gt=0,
        lt=1,
        description="Fastest growth of the request rate, as a share of the peak per minute "
        "(default 1 %: trough to peak in no less than (1 - trough/peak) x 100 minutes). "
        "The headroom must carry this growth for one cold start.",
    )
    image_digest: str | None = Field(
        default=None,
        pattern=r"^sha256:[0-9a-f]{64}$",
        description="Digest of the pinned vLLM image (docker buildx imagetools inspect "
        "vllm/vllm-openai:<tag>); without it the image is pinned by tag only.",
    )
    ecr_account_id: str | None = Field(
        default=None,
        pattern=r"^[0-9]{12}$",
        description="AWS account of the ECR pull-through cache; without it nodes pull the "
        "image from Docker Hub through the NAT gateways.",
    )
