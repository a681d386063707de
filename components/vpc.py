"""Network: a new VPC for a region's cluster when the plan names no existing one.

Zones come from the plan by zone ID: `RegionPlan.cluster_zone_ids` (2 or 3 IDs, the GPU
zones first), so every subnet lands in the same physical zone in any account (a zone *name*
maps to another zone in each account). Subnets are placed with `availability_zone_id`; the
account's zone names are read at deploy time (`aws.get_availability_zones`) to check that
every planned ID is available to the account and to show the names (`zone_names`).
The subnets are the plan's (`RegionPlan.subnets`, cut in `llmfleet.fleetplan.network`): a
private one per zone, and small public ones that carry the NAT gateways and internet-facing
load balancers (tagged kubernetes.io/role/elb for the AWS Load Balancer Controller). No
subnet assigns public IPs on launch. Private subnets carry the cluster's Karpenter discovery tag
(`discovery_tags`), and an S3 gateway endpoint on their route tables carries weight
streaming and ECR image layers without NAT charges. Resource names end in the zone ID
(`...-private-use1-az4`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import pulumi
import pulumi_aws as aws

from llmfleet.errors import PlanError, ProgramError
from llmfleet.fleetplan.network import SubnetPlan

INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"
ELB_TAG = "kubernetes.io/role/elb"
"""Where the AWS Load Balancer Controller puts internet-facing load balancers (subnet
auto-discovery); the public subnets carry it."""
NatGateways = Literal["per_az", "single"]
T = TypeVar("T")


def zone_names(zone_ids: Sequence[str], names: Sequence[str], ids: Sequence[str]) -> dict[str, str]:
    """Planned zone ID -> the account's zone name, from `aws.get_availability_zones`
    (`names` and `zone_ids` pair up); ProgramError when the account lacks a planned zone."""
    by_id = dict(zip(ids, names, strict=True))
    missing = [z for z in zone_ids if z not in by_id]
    if missing:
        raise ProgramError(
            f"zone ID(s) {', '.join(missing)} are not available to this account (available: "
            f"{', '.join(sorted(by_id))}); set regions[].node_zone_ids to available zones"
        )
    return {z: by_id[z] for z in zone_ids}


def subnets_in_zones(subnets: Mapping[str, T], zones: Sequence[str], field_path: str) -> list[T]:
    """The subnets (by zone ID) of `zones`, in `zones` order.

    Raises PlanError naming `field_path` when a zone has no subnet: a node group placed in
    fewer zones than planned would silently lose capacity.
    """
    missing = [z for z in zones if z not in subnets]
    if missing or not zones:
        raise PlanError(
            field_path,
            list(zones),
            f"no subnet in {', '.join(missing) or 'any zone'}; the cluster's subnets are in "
            f"{', '.join(subnets)}",
        )
    return [subnets[z] for z in zones]


def subnet_tags(
    spec: SubnetPlan, name: str, discovery_tags: Mapping[str, str] | None = None
) -> dict[str, str]:
    tags = {"Name": f"{name}-{spec.tier}-{spec.zone_id}", "llmfleet.io/tier": spec.tier}
    if not spec.public:
        tags[INTERNAL_ELB_TAG] = "1"
        tags.update(discovery_tags or {})
    else:
        tags["llmfleet.io/purpose"] = "nat-gateway-and-load-balancers"
        tags[ELB_TAG] = "1"
    return dict(sorted(tags.items()))


@dataclass(frozen=True)
class NetworkArgs:
    """vpc_cidr: the VPC's IPv4 CIDR, /16 to /20 (RegionPlan.vpc_cidr).
    region: AWS region.
    subnets: the plan's private and public subnet per zone (RegionPlan.subnets), private
        first, zones in RegionPlan.cluster_zone_ids order.
    nat_gateways: "per_az" (default: a zone outage leaves the other zones' egress up) or
        "single" (cheaper; every private subnet routes through the first zone's NAT).
    discovery_tags: tags on the private subnets that Karpenter's EC2NodeClass selects.
    """

    vpc_cidr: str
    region: str
    subnets: Sequence[SubnetPlan]
    nat_gateways: NatGateways = "per_az"
    discovery_tags: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)


class Network(pulumi.ComponentResource):
    """VPC, internet gateway, NAT-only public subnets with NAT gateways, private subnets, an
    S3 gateway endpoint.

    Children: the VPC `{name}`, `{name}-igw`, subnets `{name}-{tier}-{zone id}`, their route
    tables `...-rt` (one for all public subnets) and associations `...-rta`, NAT gateways
    `{name}-nat-{zone id}` with Elastic IPs `...-eip`, `{name}-s3` (gateway endpoint).
    `private_subnets` and `public_subnets` map zone ID to subnet, in the plan's order;
    `zone_names` (an Output) maps each zone ID to the account's zone name. The AWS provider
    is inherited from `opts`.
    """

    vpc: aws.ec2.Vpc
    private_subnets: dict[str, aws.ec2.Subnet]
    public_subnets: dict[str, aws.ec2.Subnet]
    nat_gateways: list[aws.ec2.NatGateway]
    zone_names: pulumi.Output[dict[str, str]]

    def __init__(
        self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:Network", name, None, opts)
        if args.nat_gateways not in ("per_az", "single"):
            raise PlanError("nat_gateways", args.nat_gateways, "use 'per_az' or 'single'")
        layout = list(args.subnets)
        tags = dict(sorted(args.tags.items()))
        zone_ids = [s.zone_id for s in layout if not s.public]

        def child(depends_on: list[pulumi.Resource] | None = None) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, depends_on=depends_on)

        available = aws.get_availability_zones_output(
            state="available",
            filters=[{"name": "region-name", "values": [args.region]}],
            opts=pulumi.InvokeOutputOptions(parent=self),
        )
        self.zone_names = pulumi.Output.all(available.names, available.zone_ids).apply(
            lambda a: zone_names(zone_ids, a[0], a[1])
        )
        self.vpc = aws.ec2.Vpc(
            name,
            cidr_block=args.vpc_cidr,
            enable_dns_support=True,
            enable_dns_hostnames=True,
            tags={**tags, "Name": name},
            opts=child(),
        )
        igw = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=self.vpc.id, tags={**tags, "Name": f"{name}-igw"}, opts=child()
        )

        subnets = {
            (s.tier, s.zone_id): aws.ec2.Subnet(
                f"{name}-{s.tier}-{s.zone_id}",
                vpc_id=self.vpc.id,
                cidr_block=s.cidr_block,
                availability_zone_id=s.zone_id,
                map_public_ip_on_launch=False,
                tags={**tags, **subnet_tags(s, name, args.discovery_tags)},
                opts=child(),
            )
            for s in layout
        }
        self.private_subnets = {z: v for (tier, z), v in subnets.items() if tier == "private"}
        self.public_subnets = {z: v for (tier, z), v in subnets.items() if tier == "public"}

        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=self.vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}],
            tags={**tags, "Name": f"{name}-public"},
            opts=child(),
        )
        for zone in zone_ids:
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{zone}-rta",
                subnet_id=self.public_subnets[zone].id,
                route_table_id=public_rt.id,
                opts=child(),
            )

        nat_zones = zone_ids if args.nat_gateways == "per_az" else zone_ids[:1]
        nats = {}
        for zone in nat_zones:
            eip = aws.ec2.Eip(
                f"{name}-nat-{zone}-eip",
                domain="vpc",
                tags={**tags, "Name": f"{name}-nat-{zone}"},
                opts=child(),
            )
            nats[zone] = aws.ec2.NatGateway(
                f"{name}-nat-{zone}",
                allocation_id=eip.allocation_id,
                subnet_id=self.public_subnets[zone].id,
                connectivity_type="public",
                tags={**tags, "Name": f"{name}-nat-{zone}"},
                opts=child(depends_on=[igw]),
            )
        self.nat_gateways = list(nats.values())

        private_rts = []
        for zone in zone_ids:
            nat = nats.get(zone, self.nat_gateways[0])
            rt = aws.ec2.RouteTable(
                f"{name}-private-{zone}-rt",
                vpc_id=self.vpc.id,
                routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}],
                tags={**tags, "Name": f"{name}-private-{zone}"},
                opts=child(),
            )
            private_rts.append(rt)
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{zone}-rta",
                subnet_id=self.private_subnets[zone].id,
                route_table_id=rt.id,
                opts=child(),
            )
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=self.vpc.id,
            service_name=f"com.amazonaws.{args.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[rt.id for rt in private_rts],
            tags={**tags, "Name": f"{name}-s3"},
            opts=child(),
        )

        self.register_outputs(
            {
                "vpc_id": self.vpc.id,
                "private_subnet_ids": [s.id for s in self.private_subnets.values()],
                "zone_ids": zone_ids,
                "zone_names": self.zone_names,
            }
        )
