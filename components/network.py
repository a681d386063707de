"""Network: a new VPC for a region's cluster when the plan names no existing one.

Zones come from the plan: `RegionPlan.availability_zones` (2 or 3 zone names, the zones
that offer the GPU instance first), so a preview needs no AWS call and the node subnets are
where the instance is offered. Layout (pure: `subnet_layout`): the VPC CIDR is cut in
quarters; the k-th zone of the plan gets the k-th quarter as its private subnet (nodes,
pods and the EKS control-plane ENIs; the VPC CNI gives every pod a VPC address, hence the
large blocks); the last quarter holds small public subnets, one per zone, that carry only
the NAT gateways and internet-facing load balancers (tagged kubernetes.io/role/elb for the
AWS Load Balancer Controller). No subnet assigns public IPs on launch: the NAT gateways get
theirs from Elastic IPs. Resource names end in the zone's letter (`...-private-c` for us-east-1c).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import pulumi
import pulumi_aws as aws

from llmfleet.errors import PlanError
from llmfleet.region_plan import MAX_ZONES, MIN_CLUSTER_ZONES

INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"
ELB_TAG = "kubernetes.io/role/elb"
"""Where the AWS Load Balancer Controller puts internet-facing load balancers (subnet
auto-discovery); the public subnets carry it."""
NatGateways = Literal["per_az", "single"]
T = TypeVar("T")


@dataclass(frozen=True)
class SubnetSpec:
    availability_zone: str
    zone_suffix: str
    """What the zone name adds to the region's ("c" for us-east-1c); resource names use it."""
    cidr_block: str
    public: bool

    @property
    def tier(self) -> str:
        return "public" if self.public else "private"


def zone_suffix(zone: str, region: str) -> str:
    return zone.removeprefix(region)


def check_zones(zones: Sequence[str], region: str, field_path: str) -> None:
    """2 or 3 distinct zone names of `region`; PlanError naming `field_path` otherwise."""
    listed = list(zones)
    if not MIN_CLUSTER_ZONES <= len(listed) <= MAX_ZONES:
        raise PlanError(
            field_path,
            listed,
            f"EKS needs subnets in {MIN_CLUSTER_ZONES} to {MAX_ZONES} availability zones of "
            f"{region}",
        )
    if len(set(listed)) != len(listed):
        raise PlanError(field_path, listed, "name each availability zone once")
    foreign = [z for z in listed if not (z.startswith(region) and zone_suffix(z, region))]
    if foreign:
        raise PlanError(
            field_path, listed, f"{', '.join(foreign)} is not a zone of {region}, e.g. {region}a"
        )


def subnet_layout(
    vpc_cidr: str,
    region: str,
    zones: Sequence[str],
    zones_field_path: str = "availability_zones",
) -> list[SubnetSpec]:
    """Private and NAT-only public subnets, one of each per zone in `zones` order, private
    first.

    The plan validated the CIDR (`plan.Region`, /16 to /20); raises PlanError naming
    `zones_field_path` when `zones` are not 2-3 distinct zones of `region`.
    """
    check_zones(zones, region, zones_field_path)
    net = ipaddress.IPv4Network(vpc_cidr, strict=True)
    quarters = list(net.subnets(prefixlen_diff=2))
    public_blocks = list(quarters[-1].subnets(prefixlen_diff=4))
    private = [
        SubnetSpec(z, zone_suffix(z, region), str(quarters[k]), public=False)
        for k, z in enumerate(zones)
    ]
    public = [
        SubnetSpec(z, zone_suffix(z, region), str(public_blocks[k]), public=True)
        for k, z in enumerate(zones)
    ]
    return private + public


def subnets_in_zones(subnets: Mapping[str, T], zones: Sequence[str], field_path: str) -> list[T]:
    """The subnets (by zone name) of `zones`, in `zones` order.

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


def subnet_tags(spec: SubnetSpec, name: str) -> dict[str, str]:
    tags = {"Name": f"{name}-{spec.tier}-{spec.zone_suffix}", "llmfleet.io/tier": spec.tier}
    if not spec.public:
        tags[INTERNAL_ELB_TAG] = "1"
    else:
        tags["llmfleet.io/purpose"] = "nat-gateway-and-load-balancers"
        tags[ELB_TAG] = "1"
    return dict(sorted(tags.items()))


@dataclass(frozen=True)
class NetworkArgs:
    """vpc_cidr: the VPC's IPv4 CIDR, /16 to /20 (RegionPlan.vpc_cidr).
    region: AWS region.
    availability_zones: 2 or 3 zone names of `region` (RegionPlan.availability_zones); one
        private and one public subnet each, CIDR quarters in this order.
    nat_gateways: "per_az" (default: a zone outage leaves the other zones' egress up) or
        "single" (cheaper; every private subnet routes through the first zone's NAT).
    zones_field_path: how errors name availability_zones, e.g.
        "regions[us-east-1].availability_zones".
    """

    vpc_cidr: str
    region: str
    availability_zones: Sequence[str]
    nat_gateways: NatGateways = "per_az"
    zones_field_path: str = "availability_zones"
    tags: Mapping[str, str] = field(default_factory=dict)


class Network(pulumi.ComponentResource):
    """VPC, internet gateway, NAT-only public subnets with NAT gateways, private subnets.

    Children: the VPC `{name}`, `{name}-igw`, subnets `{name}-{tier}-{zone letter}`, their
    route tables `...-rt` (one for all public subnets) and associations `...-rta`, NAT
    gateways `{name}-nat-{zone letter}` with Elastic IPs `{name}-nat-{zone letter}-eip`.
    `private_subnets` and `public_subnets` map zone name to subnet, in the plan's zone
    order. The AWS provider is inherited from `opts`.
    """

    vpc: aws.ec2.Vpc
    private_subnets: dict[str, aws.ec2.Subnet]
    public_subnets: dict[str, aws.ec2.Subnet]
    nat_gateways: list[aws.ec2.NatGateway]

    def __init__(
        self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:Network", name, None, opts)
        if args.nat_gateways not in ("per_az", "single"):
            raise PlanError("nat_gateways", args.nat_gateways, "use 'per_az' or 'single'")
        layout = subnet_layout(
            args.vpc_cidr,
            args.region,
            args.availability_zones,
            args.zones_field_path,
        )
        tags = dict(sorted(args.tags.items()))

        def child(depends_on: list[pulumi.Resource] | None = None) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, depends_on=depends_on)

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
            (s.tier, s.availability_zone): aws.ec2.Subnet(
                f"{name}-{s.tier}-{s.zone_suffix}",
                vpc_id=self.vpc.id,
                cidr_block=s.cidr_block,
                availability_zone=s.availability_zone,
                map_public_ip_on_launch=False,
                tags={**tags, **subnet_tags(s, name)},
                opts=child(),
            )
            for s in layout
        }
        self.private_subnets = {z: v for (tier, z), v in subnets.items() if tier == "private"}
        self.public_subnets = {z: v for (tier, z), v in subnets.items() if tier == "public"}
        suffixes = {s.availability_zone: s.zone_suffix for s in layout if not s.public}

        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=self.vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}],
            tags={**tags, "Name": f"{name}-public"},
            opts=child(),
        )
        for zone, s in suffixes.items():
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{s}-rta",
                subnet_id=self.public_subnets[zone].id,
                route_table_id=public_rt.id,
                opts=child(),
            )

        nat_zones = list(suffixes) if args.nat_gateways == "per_az" else list(suffixes)[:1]
        nats = {}
        for zone in nat_zones:
            s = suffixes[zone]
            eip = aws.ec2.Eip(
                f"{name}-nat-{s}-eip",
                domain="vpc",
                tags={**tags, "Name": f"{name}-nat-{s}"},
                opts=child(),
            )
            nats[zone] = aws.ec2.NatGateway(
                f"{name}-nat-{s}",
                allocation_id=eip.allocation_id,
                subnet_id=self.public_subnets[zone].id,
                connectivity_type="public",
                tags={**tags, "Name": f"{name}-nat-{s}"},
                opts=child(depends_on=[igw]),
            )
        self.nat_gateways = list(nats.values())

        for zone, s in suffixes.items():
            nat = nats.get(zone, self.nat_gateways[0])
            rt = aws.ec2.RouteTable(
                f"{name}-private-{s}-rt",
                vpc_id=self.vpc.id,
                routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}],
                tags={**tags, "Name": f"{name}-private-{s}"},
                opts=child(),
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{s}-rta",
                subnet_id=self.private_subnets[zone].id,
                route_table_id=rt.id,
                opts=child(),
            )

        self.register_outputs(
            {
                "vpc_id": self.vpc.id,
                "private_subnet_ids": [s.id for s in self.private_subnets.values()],
                "availability_zones": list(self.private_subnets),
            }
        )
