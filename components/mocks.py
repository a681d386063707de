"""Pulumi mocks for the offline preview (`components.preview`): deterministic computed
outputs for the resources the program creates, and answers to the one invoke it makes.

An auto-named resource's physical name is its logical name; ids are `{name}-{hash}`.
`aws.get_availability_zones` answers with the region's zone IDs from the catalog (every
zone offering a catalog GPU instance) and a mock account's names: the k-th ID in zone-ID
order is `<region>` plus the k-th letter, so names and IDs pair up but, as in a real
account, a name says nothing about the physical zone.
"""

from __future__ import annotations

import hashlib
import string
from typing import Any

import pulumi

from llmfleet import catalog

MOCK_ACCOUNT = "123456789012"
AVAILABILITY_ZONES = "aws:index/getAvailabilityZones:getAvailabilityZones"


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def availability_zones(region: str) -> dict[str, Any]:
    ids = catalog.zone_ids(region)
    names = [f"{region}{string.ascii_lowercase[k]}" for k in range(len(ids))]
    return {"id": region, "names": names, "zoneIds": ids, "groupNames": [region] * len(ids)}


def _region_filter(args: dict[str, Any]) -> str:
    for f in args.get("filters", []):
        if f.get("name") == "region-name" and f.get("values"):
            return str(f["values"][0])
    raise NotImplementedError("getAvailabilityZones without a region-name filter")


class FleetMocks(pulumi.runtime.Mocks):
    """Returns each resource's inputs plus plausible, deterministic computed outputs."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        typ, name, inputs = args.typ, args.name, dict(args.inputs)
        rid = f"{name}-{_short_hash(typ + name)}"
        out = dict(inputs)
        if typ.startswith("aws:"):
            service = typ.split(":")[1].split("/")[0]
            out.setdefault("arn", f"arn:aws:{service}:mock:{MOCK_ACCOUNT}:{rid}")
            out.setdefault("name", name)
        if typ == "aws:iam/role:Role":
            # As in AWS: a role's id is its name and its ARN ends in role/<name>.
            rid = out["name"]
            out["arn"] = f"arn:aws:iam::{MOCK_ACCOUNT}:role/{rid}"
        elif typ == "aws:eks/cluster:Cluster":
            out["endpoint"] = f"https://{_short_hash(name).upper()}.gr7.mock.eks.amazonaws.com"
            out["certificateAuthority"] = {"data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="}
            out["vpcConfig"] = {
                **inputs.get("vpcConfig", {}),
                "clusterSecurityGroupId": f"sg-{_short_hash(name)}",
            }
        elif typ == "aws:eks/nodeGroup:NodeGroup":
            out.setdefault("nodeGroupName", name)
        elif typ == "aws:ec2/launchTemplate:LaunchTemplate":
            out["latestVersion"] = 1
        elif typ == "aws:ec2/eip:Eip":
            out["allocationId"] = f"eipalloc-{_short_hash(name)}"
        elif typ == "aws:kms/key:Key":
            out["keyId"] = rid
        elif typ == "aws:sqs/queue:Queue":
            out["url"] = f"https://sqs.mock.amazonaws.com/{MOCK_ACCOUNT}/{out['name']}"
        elif typ == "aws:s3/bucket:Bucket":
            out["arn"] = f"arn:aws:s3:::{out.get('bucket', name)}"
        return rid, out

    def call(
        self, args: pulumi.runtime.MockCallArgs
    ) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        if args.token == AVAILABILITY_ZONES:
            return availability_zones(_region_filter(dict(args.args))), []
        raise NotImplementedError(f"the program made an unexpected invoke: {args.token}")
