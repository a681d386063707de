"""The fake engine a preview runs against: Pulumi's MockMonitor plus what it leaves out.

A resource's parent: MockResourceArgs does not carry it, and a URN encodes only the parent's
*type* chain (`...::llmfleet:index:Fleet$aws:eks/cluster:Cluster::name`), not its name. The
monitor below records the `parent` URN of each RegisterResource request (the URN's last
`::` segment is the parent's name), its provider reference, ignoreChanges and dependencies,
and the stack's outputs.
"""

from __future__ import annotations

import hashlib
from threading import Lock
from typing import Any

import pulumi
from pulumi.runtime import mocks, rpc

STACK_TYPE = "pulumi:pulumi:Stack"
MOCK_ACCOUNT = "123456789012"


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def urn_name(urn: str) -> str:
    return urn.split("::")[-1]


def urn_type(urn: str) -> str:
    return urn.split("::")[2].split("$")[-1]


class FleetMocks(pulumi.runtime.Mocks):
    """Returns each resource's inputs plus plausible, deterministic computed outputs.

    An auto-named resource's physical name is its logical name; ids are `{name}-{hash}`.
    """

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        typ, name, inputs = args.typ, args.name, dict(args.inputs)
        rid = f"{name}-{short_hash(typ + name)}"
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
        from components.preview.routing import routing_outputs  # it imports short_hash

        return rid, {**out, **routing_outputs(typ, name, rid, inputs)}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
        """The invokes the program makes (zones, and stage 4's zone and ELB lookups)."""
        from components.preview.routing import routing_call

        return routing_call(args.token, dict(args.args)), []


class RecordingMonitor(mocks.MockMonitor):
    """MockMonitor that also records what a preview shows and MockResourceArgs leaves out:
    each registration's inputs, parent, provider and options, and the stack's outputs."""

    def __init__(self, mocks_: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks_)
        self.requests: dict[str, dict[str, Any]] = {}
        self.stack_outputs: dict[str, Any] = {}
        self._lock = Lock()

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type != STACK_TYPE:
            record = {
                "id": response.id if request.custom else None,
                "inputs": rpc.deserialize_properties(request.object),
                "parent": request.parent,
                "provider": request.provider,
                "ignore_changes": list(request.ignoreChanges),
                "depends_on": sorted(request.dependencies),
            }
            with self._lock:
                self.requests[response.urn] = record
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:  # noqa: N802
        if urn_type(request.urn) == STACK_TYPE:
            outputs = rpc.deserialize_properties(request.outputs)
            with self._lock:
                self.stack_outputs = outputs
        return super().RegisterResourceOutputs(request)  # type: ignore[no-untyped-call]
