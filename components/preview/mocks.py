"""What the preview's mocks answer: each resource's inputs plus plausible, deterministic
computed outputs (ids, ARNs, endpoints; ACM validation records, the Ingress's load balancer,
Route53 record names), the program's invokes (the region's availability zones, the ELB
hosted zone, the Route53 zone lookup, the controller's load balancer and target group), and
`pulumi.StackReference` reads: the outputs each referenced stack would have
(`FleetMocks.stack_outputs`, e.g. what the region stacks' own preview exported), nothing for
a stack not given (not deployed).

ACM hands every certificate of a name the same validation record (it depends on the name and
the account, not on the certificate or its region), and so do the mocks.

`aws.get_availability_zones` answers with the region's zone IDs from the catalog (every zone
offering a catalog GPU instance) and the catalog account's names for them
(`hardware.zone_names`): names and IDs pair up but, as in a real account, a name says
nothing about the physical zone."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import pulumi

from llmfleet.catalog import hardware

MOCK_ACCOUNT = "123456789012"


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


STACK_REFERENCE = "pulumi:pulumi:StackReference"


class FleetMocks(pulumi.runtime.Mocks):
    """Returns each resource's inputs plus plausible, deterministic computed outputs.

    An auto-named resource's physical name is its logical name; ids are `{name}-{hash}`.
    `stack_outputs`: stack name (without org/project) -> the outputs a StackReference to it
    reads, and `secret_outputs` the names among them that are secret. `account`: the account
    the credentials belong to (the plan's account_id, as a deploy with the right credentials
    would see).
    """

    def __init__(
        self,
        stack_outputs: Mapping[str, Mapping[str, Any]] | None = None,
        secret_outputs: Mapping[str, list[str]] | None = None,
        account: str = MOCK_ACCOUNT,
    ) -> None:
        super().__init__()
        self.stack_outputs = dict(stack_outputs or {})
        self.secret_outputs = dict(secret_outputs or {})
        self.account = account

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        typ, name, inputs = args.typ, args.name, dict(args.inputs)
        if typ == STACK_REFERENCE:
            return self.stack_reference(str(args.resource_id or inputs.get("name", name)))
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

    def stack_reference(self, qualified: str) -> tuple[str, dict[str, Any]]:
        """A StackReference read: `org/project/stack`'s outputs, or none."""
        stack = qualified.split("/")[-1]
        return qualified, {
            "name": qualified,
            "outputs": dict(self.stack_outputs.get(stack, {})),
            "secretOutputNames": list(self.secret_outputs.get(stack, [])),
        }

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
                    "resourceRecordValue": f"_{short_hash('token' + d)}.mock.acm-validations.aws.",
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
ADDON_VERSION = "aws:eks/getAddonVersion:getAddonVersion"
MOCK_ELB_ACCOUNT = "999999999999"
"""Stands in for the region's Elastic Load Balancing account (aws.elb.getServiceAccount)."""


def availability_zones(region: str) -> dict[str, Any]:
    ids = hardware.zone_ids(region)
    names = hardware.zone_names(region, ids)
    return {"id": region, "names": names, "zoneIds": ids, "groupNames": [region] * len(ids)}


def _tags_key(args: dict[str, Any]) -> str:
    """A lookup by tags, as one string (the mocks' answer derives from it)."""
    tags = args.get("tags")
    if not tags:
        raise NotImplementedError("a load balancer or target group lookup without tags")
    return ",".join(f"{k}={v}" for k, v in sorted(tags.items()))


def _hex16(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _region_filter(args: dict[str, Any]) -> str:
    for f in args.get("filters", []):
        if f.get("name") == "region-name" and f.get("values"):
            return str(f["values"][0])
    raise NotImplementedError("getAvailabilityZones without a region-name filter")


def routing_call(token: str, args: dict[str, Any]) -> dict[str, Any]:
    """The invokes the program makes: the region's zones, ELB's hosted zone per region, a
    Route53 zone by name, an EKS add-on's default version."""
    if token == AVAILABILITY_ZONES:
        return availability_zones(_region_filter(args))
    if token == "aws:lb/getHostedZoneId:getHostedZoneId":
        return {"id": f"Z{short_hash(str(args.get('region', ''))).upper()}MOCK"}
    if token == "aws:route53/getZone:getZone":
        return {"zoneId": f"Z{short_hash(str(args['name'])).upper()}", **args}
    if token == ADDON_VERSION:  # EKS's default version of an add-on for a cluster version
        addon, version = str(args["addonName"]), str(args["kubernetesVersion"])
        return {"version": f"v{version}.0-{short_hash(addon + version)}-eksbuild.1", **args}
    if token == "aws:elb/getServiceAccount:getServiceAccount":
        return {"arn": f"arn:aws:iam::{MOCK_ELB_ACCOUNT}:root", "id": MOCK_ELB_ACCOUNT}
    if token == "aws:lb/getLoadBalancer:getLoadBalancer" and args.get("name"):
        name = str(args["name"])  # the Ingress names its ALB (load-balancer-name)
        return {"arnSuffix": f"app/{name}/{_hex16(name)}", **args}
    if token == "aws:lb/getLoadBalancer:getLoadBalancer":
        key = _tags_key(args)
        name = f"k8s-{short_hash('lb' + key)}"
        return {"arnSuffix": f"app/{name}/{_hex16(key)}", "name": name, **args}
    if token == "aws:lb/getTargetGroup:getTargetGroup":
        key = _tags_key(args)
        name = f"k8s-{short_hash('tg' + key)}"
        return {"arnSuffix": f"targetgroup/{name}/{_hex16(key)}", "name": name, **args}
    raise NotImplementedError(f"the program made an unexpected invoke: {token}")
