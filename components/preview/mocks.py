"""What the preview's mocks answer: each resource's inputs plus plausible, deterministic
computed outputs (ids, ARNs, endpoints; ACM validation records, the Ingress's load balancer,
Route53 record names), and the program's invokes (the region's availability zones, the ELB
hosted zone, the Route53 zone lookup).

`aws.get_availability_zones` answers with the region's zone IDs from the catalog (every zone
offering a catalog GPU instance) and the catalog account's names for them
(`hardware.zone_names`): names and IDs pair up but, as in a real account, a name says
nothing about the physical zone."""

from __future__ import annotations

import hashlib
from typing import Any

import pulumi

from llmfleet.catalog import hardware

MOCK_ACCOUNT = "123456789012"


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


class FleetMocks(pulumi.runtime.Mocks):
    """Returns each resource's inputs plus plausible, deterministic computed outputs.

    An auto-named resource's physical name is its logical name; ids are `{name}-{hash}`.
    `account`: the account the credentials belong to (the plan's account_id, as a deploy
    with the right credentials would see).
    """

    def __init__(self, account: str = MOCK_ACCOUNT) -> None:
        self.account = account

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        typ, name, inputs = args.typ, args.name, dict(args.inputs)
        rid = f"{name}-{short_hash(typ + name)}"
        out = dict(inputs)
        if typ.startswith("aws:"):
            service = typ.split(":")[1].split("/")[0]
            out.setdefault("arn", f"arn:aws:{service}:mock:{self.account}:{rid}")
            out.setdefault("name", name)
        if typ == "aws:iam/role:Role":
            # As in AWS: a role's id is its name and its ARN ends in role/<name>.
            rid = out["name"]
            out["arn"] = f"arn:aws:iam::{self.account}:role/{rid}"
        elif typ == "aws:sns/topic:Topic":
            out["arn"] = f"arn:aws:sns:mock:{self.account}:{out['name']}"
        elif typ == "aws:eks/cluster:Cluster":
            out["endpoint"] = f"https://{short_hash(name).upper()}.gr7.mock.eks.amazonaws.com"
            out["certificateAuthority"] = {"data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="}
            out["vpcConfig"] = {
                **inputs.get("vpcConfig", {}),
                "clusterSecurityGroupId": f"sg-{short_hash(name)}",
            }
        elif typ == "aws:eks/nodeGroup:NodeGroup":
            out.setdefault("nodeGroupName", name)
        elif typ == "aws:ec2/launchTemplate:LaunchTemplate":
            out["latestVersion"] = 1
        elif typ == "aws:ec2/eip:Eip":
            out["allocationId"] = f"eipalloc-{short_hash(name)}"
        elif typ == "aws:kms/key:Key":
            out["keyId"] = rid
        elif typ == "aws:sqs/queue:Queue":
            out["url"] = f"https://sqs.mock.amazonaws.com/{MOCK_ACCOUNT}/{out['name']}"
        elif typ == "aws:s3/bucket:Bucket":
            out["arn"] = f"arn:aws:s3:::{out.get('bucket', name)}"
        return rid, {**out, **routing_outputs(typ, name, rid, inputs)}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
        """The invokes the program makes (zones, the caller's account, stage 4's zone and
        ELB lookups)."""
        if args.token == CALLER_IDENTITY:
            return {"accountId": self.account, "arn": f"arn:aws:iam::{self.account}:user/mock",
                    "id": self.account, "userId": "MOCKUSER"}, []
        return routing_call(args.token, dict(args.args)), []


def routing_outputs(typ: str, name: str, rid: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Computed outputs a stage-4 resource has after creation (empty for the others)."""
    if typ == "aws:acm/certificate:Certificate":
        names = [inputs["domainName"], *inputs.get("subjectAlternativeNames", [])]
        return {
            "domainValidationOptions": [
                {
                    "domainName": d,
                    "resourceRecordName": f"_{short_hash(d)}.{d}.",
                    "resourceRecordType": "CNAME",
                    # ACM's token depends on the account and the name, not the certificate or
                    # region ("the CNAME validation token works for any AWS Region", ACM
                    # user guide, dns-validation): every region's certificate gets it.
                    "resourceRecordValue": f"_{short_hash('acm' + d)}.mock.acm-validations.aws.",
                }
                for d in names
            ]
        }
    if typ == "aws:route53/record:Record":
        return {"fqdn": str(inputs.get("name", name)).rstrip(".")}
    if typ == "kubernetes:networking.k8s.io/v1:Ingress":
        host = f"k8s-{short_hash(name)}.{short_hash(rid)}.mock.elb.amazonaws.com"
        return {"status": {"loadBalancer": {"ingress": [{"hostname": host}]}}}
    return {}


AVAILABILITY_ZONES = "aws:index/getAvailabilityZones:getAvailabilityZones"
CALLER_IDENTITY = "aws:index/getCallerIdentity:getCallerIdentity"
MOCK_ELB_ACCOUNT = "999999999999"
"""Stands in for the region's Elastic Load Balancing account (aws.elb.getServiceAccount)."""


def availability_zones(region: str) -> dict[str, Any]:
    ids = hardware.zone_ids(region)
    names = hardware.zone_names(region, ids)
    return {"id": region, "names": names, "zoneIds": ids, "groupNames": [region] * len(ids)}


def _region_filter(args: dict[str, Any]) -> str:
    for f in args.get("filters", []):
        if f.get("name") == "region-name" and f.get("values"):
            return str(f["values"][0])
    raise NotImplementedError("getAvailabilityZones without a region-name filter")


def routing_call(token: str, args: dict[str, Any]) -> dict[str, Any]:
    """The invokes the program makes: the region's zones, ELB's hosted zone per region, a
    Route53 zone by name."""
    if token == AVAILABILITY_ZONES:
        return availability_zones(_region_filter(args))
    if token == "aws:lb/getHostedZoneId:getHostedZoneId":
        return {"id": f"Z{short_hash(str(args.get('region', ''))).upper()}MOCK"}
    if token == "aws:route53/getZone:getZone":
        return {"zoneId": f"Z{short_hash(str(args['name'])).upper()}", **args}
    if token == "aws:elb/getServiceAccount:getServiceAccount":
        return {"arn": f"arn:aws:iam::{MOCK_ELB_ACCOUNT}:root", "id": MOCK_ELB_ACCOUNT}
    if token == "aws:lb/getLoadBalancer:getLoadBalancer":
        name = str(args["name"])
        suffix = f"app/{name}/{short_hash(name)}{short_hash(name[::-1])}"
        return {"name": name, "arnSuffix": suffix, "arn": f"arn:aws:elasticloadbalancing:mock:"
                f"{MOCK_ACCOUNT}:loadbalancer/{suffix}"}
    raise NotImplementedError(f"the program made an unexpected invoke: {token}")
