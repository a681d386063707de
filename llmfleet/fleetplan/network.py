"""A new VPC cut into subnets, decided once here: the Pulumi `Network` creates them and the
entry point admits the public ones.

The VPC CIDR is cut in quarters; the k-th cluster zone (`RegionPlan.cluster_zone_ids`, the
GPU zones first) gets the k-th quarter as its private subnet (nodes, pods and the EKS
control-plane ENIs; the VPC CNI gives every pod a VPC address, hence the large blocks); the
last quarter holds small public subnets, one per zone, that carry the NAT gateways and
internet-facing load balancers. An existing VPC (`regions[].network`) is not cut: its
subnets and load balancer CIDRs come from the plan.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from llmfleet.catalog import hardware
from llmfleet.data import Data
from llmfleet.errors import PlanError
from llmfleet.fleetplan.capacity import MAX_ZONES, MIN_CLUSTER_ZONES
from llmfleet.plan.regions import Region


class SubnetPlan(Data):
    zone_id: str
    cidr_block: str
    public: bool

    @property
    def tier(self) -> str:
        return "public" if self.public else "private"


def _quarters(vpc_cidr: str) -> list[ipaddress.IPv4Network]:
    return list(ipaddress.IPv4Network(vpc_cidr, strict=True).subnets(prefixlen_diff=2))


def check_zones(zone_ids: Sequence[str], region: str, field: str) -> None:
    """2 to 3 distinct zone IDs of the region: EKS's minimum, the layout's maximum."""
    known = hardware.zone_ids(region)
    listed = list(zone_ids)
    if not MIN_CLUSTER_ZONES <= len(listed) <= MAX_ZONES:
        raise PlanError(
            field,
            listed,
            f"EKS needs subnets in {MIN_CLUSTER_ZONES} to {MAX_ZONES} availability zones of "
            f"{region}",
        )
    if len(set(listed)) != len(listed):
        raise PlanError(field, listed, "name each availability zone once")
    foreign = [z for z in listed if z not in known]
    if foreign:
        raise PlanError(
            field,
            listed,
            f"{', '.join(foreign)} is not a zone ID of {region}; its zone IDs: {', '.join(known)}",
        )


def subnet_layout(
    vpc_cidr: str, region: str, zone_ids: Sequence[str], field: str = "cluster_zone_ids"
) -> list[SubnetPlan]:
    """Private and NAT-only public subnets, one of each per zone in `zone_ids` order,
    private first. The plan validated the CIDR (`plan.regions.Region`, /16 to /20)."""
    check_zones(zone_ids, region, field)
    quarters = _quarters(vpc_cidr)
    public_blocks = list(quarters[-1].subnets(prefixlen_diff=4))
    private = [SubnetPlan(zone_id=z, cidr_block=str(quarters[k]), public=False)
               for k, z in enumerate(zone_ids)]
    public = [SubnetPlan(zone_id=z, cidr_block=str(public_blocks[k]), public=True)
              for k, z in enumerate(zone_ids)]
    return private + public


def load_balancer_cidrs(region: Region) -> list[str]:
    """Where the load balancer's nodes live: the plan's load_balancer_cidrs in an existing
    VPC; in a new one the last quarter of the VPC CIDR, which `subnet_layout` cuts into the
    public subnets."""
    if region.network is not None:
        return list(region.network.load_balancer_cidrs or [])
    return [str(_quarters(region.vpc_cidr)[-1])]
