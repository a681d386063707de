"""How each region's cluster is reached and started: the Kubernetes API endpoint's access,
NAT gateways, the image and the traffic growth a cold start must ride out."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field, field_validator

from llmfleet.data import Data

ROLE_ARN = r"^arn:aws(-cn|-us-gov)?:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]+$"


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
    deploy_role_arn: str | None = Field(
        default=None,
        pattern=ROLE_ARN,
        description="An IAM role that runs `pulumi up` besides the one that created the "
        "cluster (EKS gives the creator its own access entry; list the other one: CI when a "
        "person created the cluster, or the reverse). It gets an access entry with "
        "AmazonEKSClusterAdminPolicy.",
    )
    break_glass_role_arn: str | None = Field(
        default=None,
        pattern=ROLE_ARN,
        description="The IAM role an operator assumes when CI and the deploy roles cannot "
        "reach the cluster: an access entry with AmazonEKSClusterAdminPolicy. Required in "
        "production.",
    )

    @field_validator("public_access_cidrs")
    @classmethod
    def _cidrs(cls, cidrs: list[str]) -> list[str]:
        for cidr in cidrs:
            try:
                network = ipaddress.ip_network(cidr)
            except ValueError:
                raise ValueError(f"{cidr!r} is not a CIDR block such as 52.94.0.0/22") from None
            if network.prefixlen and not network.is_global:
                raise ValueError(
                    f"{cidr} is not a public address range (a documentation, private or "
                    "reserved block, RFC 5737/1918/6598): no deployer's traffic comes from it, "
                    "so `pulumi up` would build the AWS half and then time out on every "
                    "Kubernetes resource; give your CI runners' and office egress CIDRs "
                    "(`curl https://checkip.amazonaws.com` from each), or "
                    "cluster.endpoint_public_access: false when deploys run inside the VPC"
                )
        return cidrs


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
        description="AWS account of the ECR pull-through cache of Docker Hub: the program "
        "creates its (empty) credentials secret ecr-pullthroughcache/<name>-docker-hub, and the "
        "cache rule once `pull_through_ready`. Without it nodes pull the image from Docker "
        "Hub through the NAT gateways.",
    )
    pull_through_ready: bool = Field(
        default=False,
        description="true once the pull-through cache's secret holds a Docker Hub username "
        "and access token: only then is the cache rule created (ECR reads the secret when it "
        "creates one) and do the pods pull through it; until then from Docker Hub directly.",
    )
    image: str | None = Field(
        default=None,
        description="The serving image, a key of llmfleet/catalog/images.csv (which says "
        "whether it carries the EFA NCCL plugin); default: the pinned vLLM release's "
        "upstream image.",
    )
    require_efa: bool = Field(
        default=False,
        description="true: a replica across nodes or disaggregated pools must carry their "
        "cross-node traffic over EFA; the plan is refused when the image has no EFA NCCL "
        "plugin (otherwise NCCL and NIXL use TCP sockets, priced as such).",
    )
