"""Per region inputs: where it runs (a new VPC or an existing one), its traffic share, its GPU
zones and how its GPU nodes are bought (on-demand, reservation, Capacity Blocks, spot).
Cross-field checks that need the catalog or the chosen instance are in
`fleetplan.capacity`."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from llmfleet.data import Data

MAX_VPC_PREFIX = 20
"""Smallest new VPC accepted (/20): private subnets of /22, public of /26."""


class ExistingVpc(Data):
    vpc_id: str = Field(description="Existing VPC to place the cluster in.")
    private_subnet_ids: list[str] = Field(min_length=2, description="Private subnets in 2+ AZs.")
    load_balancer_cidrs: list[str] | None = Field(
        default=None,
        description="CIDRs of the public subnets (tagged kubernetes.io/role/elb) where the "
        "load balancer's nodes live; the NetworkPolicy admits them. Required with `dns`.",
    )

    @field_validator("load_balancer_cidrs")
    @classmethod
    def _lb_cidrs(cls, cidrs: list[str] | None) -> list[str] | None:
        for cidr in cidrs or []:
            try:
                ipaddress.IPv4Network(cidr, strict=True)
            except ValueError:
                raise ValueError(
                    f"{cidr!r} is not an IPv4 CIDR block such as 10.0.48.0/20"
                ) from None
        return cidrs


PurchaseType = Literal["on_demand", "reservation", "capacity_block", "spot"]


RESERVATION_ID = re.compile(r"^cr-[0-9a-z]+$")
"""The EC2NodeClass CRD's pattern for a capacity reservation id (karpenter.k8s.aws/v1)."""


class CapacityPurchase(Data):
    """How a region's GPU nodes are bought. The always-on floor is on-demand (or the
    reservation); the burst above it is bought as `type` says."""

    type: PurchaseType = Field(
        default="on_demand",
        description="on_demand; reservation (On-Demand Capacity Reservations, ids given); "
        "capacity_block (Capacity Blocks for ML, ids given); spot (burst only, see "
        "on_demand_floor).",
    )
    reservation_ids: list[str] = Field(
        default_factory=list,
        description="cr-... ids of the reservations or Capacity Blocks Karpenter launches into.",
    )
    instance_type: str | None = Field(
        default=None,
        description="The instance type the reservations hold; must be the one llmfleet chooses "
        "(restrict allowed.instance_types to it).",
    )
    reserved_nodes: int = Field(
        default=0, ge=0, description="Instances the reservations hold (billed used or not)."
    )
    usd_per_hour: float | None = Field(
        default=None,
        gt=0,
        description="Price per instance-hour for spot or a Capacity Block. llmfleet ships no "
        "sourced spot discount or Capacity Block price, so it is required for those two.",
    )
    placement_group: str | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="type reservation, for a replica across nodes: the cluster placement "
        "group the reservations were created in. A reservation serves a cluster placement "
        "group only when created in it, and EC2 creates it there only once the group exists "
        "(aws ec2 create-placement-group --strategy cluster, then create-capacity-reservation "
        "--placement-group-arn): you create both, the GPU nodes join this group and llmfleet "
        "creates none.",
    )
    on_demand_floor: bool = Field(
        default=True,
        description="spot: keep the always-on floor on on-demand nodes. Without it a p99 "
        "SLO is refused: one spot reclaim can take every node.",
    )

    @field_validator("reservation_ids")
    @classmethod
    def _ids(cls, ids: list[str]) -> list[str]:
        bad = [i for i in ids if not RESERVATION_ID.match(i)]
        if bad:
            raise ValueError(f"{', '.join(bad)}: a reservation id looks like cr-0123456789abcdef0")
        return ids

    @model_validator(mode="after")
    def _consistent(self) -> CapacityPurchase:
        reserved = self.type in ("reservation", "capacity_block")
        if reserved and not (self.reservation_ids and self.instance_type and self.reserved_nodes):
            raise ValueError(
                f"type {self.type} needs reservation_ids, instance_type and reserved_nodes"
            )
        if not reserved and (self.reservation_ids or self.reserved_nodes):
            raise ValueError(
                "reservation_ids and reserved_nodes apply to type reservation or capacity_block"
            )
        if self.placement_group is not None and self.type != "reservation":
            raise ValueError(
                f"placement_group applies to type reservation (this is {self.type}): "
                + ("EC2 places a Capacity Block's instances close together itself"
                   if self.type == "capacity_block"
                   else "on demand, llmfleet creates the group its GPU nodes join")
            )
        if self.type in ("spot", "capacity_block") and self.usd_per_hour is None:
            raise ValueError(
                f"type {self.type} needs usd_per_hour: llmfleet has no sourced {self.type} "
                "price (see the EC2 console or aws ec2 describe-spot-price-history)"
            )
        return self


class Region(Data):
    name: str = Field(description="AWS region, e.g. us-east-1.")
    traffic_share: float = Field(
        ge=0,
        le=1,
        description="Share of the fleet's traffic served here (0 only for a failover secondary).",
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
    retire: bool = Field(
        default=False,
        description="Take the region out of the fleet (docs/day2.md): the global stack stops "
        "routing to it first, then its stack turns the load balancer's deletion protection "
        "off and lets its weight bucket go, then `pulumi destroy`; `llmfleet rollout` prints "
        "the steps. The other regions must carry its users (routing.survive_region_losses).",
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
