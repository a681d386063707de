"""Network: a new VPC for a region's cluster when the plan names no existing one.

Layout (pure: `subnet_layout`): the VPC CIDR is cut in quarters; each of the first
`az_count` quarters is one AZ's private subnet (nodes, pods and the EKS control-plane ENIs;
the VPC CNI gives every pod a VPC address, hence the large blocks); the last quarter holds
small public subnets that carry only the NAT gateways. No subnet assigns public IPs on
launch: the NAT gateways get theirs from Elastic IPs. Availability zones are the region's
fixed `a`, `b`, `c` rather than a data-source lookup, so a preview needs no AWS call and
is the same on every machine.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import pulumi
import pulumi_aws as aws

from llmfleet.errors import PlanError

AZ_SUFFIXES = ("a", "b", "c")
MAX_VPC_PREFIX = 20
"""Smallest VPC accepted (/20): private subnets of /22, public of /26."""
INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"
NatGateways = Literal["per_az", "single"]


@dataclass(frozen=True)
class SubnetSpec:
    availability_zone: str
    az_suffix: str
    cidr_block: str
    public: bool

    @property
    def tier(self) -> str:
        return "public" if self.public else "private"


def subnet_layout(
    vpc_cidr: str, region: str, az_count: int = 3, field_path: str = "vpc_cidr"
) -> list[SubnetSpec]:
    """Private and NAT-only public subnets, one of each per AZ, private first.

    Raises PlanError naming `field_path` when the CIDR is not an IPv4 network of /16 to /20.
    """
    if not 2 <= az_count <= len(AZ_SUFFIXES):
        raise PlanError("az_count", az_count, "EKS needs subnets in 2 or 3 availability zones")
    try:
        net = ipaddress.IPv4Network(vpc_cidr, strict=True)
    except ValueError as e:
        raise PlanError(
            field_path, vpc_cidr, f"not an IPv4 network in CIDR notation ({e})"
        ) from None
    if not 16 <= net.prefixlen <= MAX_VPC_PREFIX:
        raise PlanError(
            field_path,
            vpc_cidr,
            f"a VPC must be /16 to /{MAX_VPC_PREFIX} (AWS allows /16 at most; "
            "pods take VPC addresses, so smaller ones run out), e.g. 10.40.0.0/16",
        )
    quarters = list(net.subnets(prefixlen_diff=2))
    public_blocks = list(quarters[-1].subnets(prefixlen_diff=4))
    suffixes = AZ_SUFFIXES[:az_count]
    private = [
        SubnetSpec(f"{region}{s}", s, str(quarters[k]), public=False)
        for k, s in enumerate(suffixes)
    ]
    public = [
        SubnetSpec(f"{region}{s}", s, str(public_blocks[k]), public=True)
        for k, s in enumerate(suffixes)
    ]
    return private + public


def subnet_tags(spec: SubnetSpec, name: str) -> dict[str, str]:
    tags = {"Name": f"{name}-{spec.tier}-{spec.az_suffix}", "llmfleet.io/tier": spec.tier}
    if not spec.public:
        tags[INTERNAL_ELB_TAG] = "1"
    else:
        tags["llmfleet.io/purpose"] = "nat-gateway"
    return dict(sorted(tags.items()))


@dataclass(frozen=True)
class NetworkArgs:
    """vpc_cidr: the VPC's IPv4 CIDR, /16 to /20 (RegionPlan.vpc_cidr).
    region: AWS region; AZs are its `a`, `b`, `c`.
    az_count: 2 or 3 (default 3).
    nat_gateways: "per_az" (default: an AZ outage leaves the other AZs' egress up) or
        "single" (cheaper; every private subnet routes through the first AZ's NAT).
    field_path: how errors name vpc_cidr, e.g. "regions[us-east-1].vpc_cidr".
    """

    vpc_cidr: str
    region: str
    az_count: int = 3
    nat_gateways: NatGateways = "per_az"
    field_path: str = "vpc_cidr"
    tags: Mapping[str, str] = field(default_factory=dict)


class Network(pulumi.ComponentResource):
    """VPC, internet gateway, NAT-only public subnets with NAT gateways, private subnets.

    Children: the VPC `{name}`, `{name}-igw`, subnets `{name}-{tier}-{az}`, their route
    tables `...-rt` (one for all public subnets) and associations `...-rta`, NAT gateways
    `{name}-nat-{az}` with Elastic IPs `{name}-nat-{az}-eip`. The AWS provider is inherited
    from `opts`.
    """

    vpc: aws.ec2.Vpc
    private_subnets: list[aws.ec2.Subnet]
    public_subnets: list[aws.ec2.Subnet]
    nat_gateways: list[aws.ec2.NatGateway]

    def __init__(
        self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:Network", name, None, opts)
        if args.nat_gateways not in ("per_az", "single"):
            raise PlanError("nat_gateways", args.nat_gateways, "use 'per_az' or 'single'")
        layout = subnet_layout(args.vpc_cidr, args.region, args.az_count, args.field_path)
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
            (s.tier, s.az_suffix): aws.ec2.Subnet(
                f"{name}-{s.tier}-{s.az_suffix}",
                vpc_id=self.vpc.id,
                cidr_block=s.cidr_block,
                availability_zone=s.availability_zone,
                map_public_ip_on_launch=False,
                tags={**tags, **subnet_tags(s, name)},
                opts=child(),
            )
            for s in layout
        }
        self.private_subnets = [v for (tier, _), v in subnets.items() if tier == "private"]
        self.public_subnets = [v for (tier, _), v in subnets.items() if tier == "public"]
        suffixes = [s.az_suffix for s in layout if not s.public]

        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=self.vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}],
            tags={**tags, "Name": f"{name}-public"},
            opts=child(),
        )
        for s in suffixes:
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{s}-rta",
                subnet_id=subnets[("public", s)].id,
                route_table_id=public_rt.id,
                opts=child(),
            )

        nat_suffixes = suffixes if args.nat_gateways == "per_az" else suffixes[:1]
        nats = {}
        for s in nat_suffixes:
            eip = aws.ec2.Eip(
                f"{name}-nat-{s}-eip",
                domain="vpc",
                tags={**tags, "Name": f"{name}-nat-{s}"},
                opts=child(),
            )
            nats[s] = aws.ec2.NatGateway(
                f"{name}-nat-{s}",
                allocation_id=eip.allocation_id,
                subnet_id=subnets[("public", s)].id,
                connectivity_type="public",
                tags={**tags, "Name": f"{name}-nat-{s}"},
                opts=child(depends_on=[igw]),
            )
        self.nat_gateways = list(nats.values())

        for s in suffixes:
            nat = nats.get(s, self.nat_gateways[0])
            rt = aws.ec2.RouteTable(
                f"{name}-private-{s}-rt",
                vpc_id=self.vpc.id,
                routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}],
                tags={**tags, "Name": f"{name}-private-{s}"},
                opts=child(),
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{s}-rta",
                subnet_id=subnets[("private", s)].id,
                route_table_id=rt.id,
                opts=child(),
            )

        self.register_outputs(
            {
                "vpc_id": self.vpc.id,
                "private_subnet_ids": [s.id for s in self.private_subnets],
            }
        )
