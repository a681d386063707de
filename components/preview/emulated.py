"""Replay the preview's AWS resources into moto (an AWS emulator, in-process and offline) and
report what its APIs refuse.

moto 5.2.5 validates what it emulates: EC2 (a subnet outside its VPC or overlapping another:
InvalidSubnet.Range / InvalidSubnet.Conflict; an unknown zone ID), IAM (policy documents:
MalformedPolicyDocument; a role or policy name twice: EntityAlreadyExists), S3 (bucket name
length: InvalidBucketName; a name twice outside us-east-1: BucketAlreadyOwnedByYou), SQS
(queue names and attributes), SNS, Route 53 (a record outside its zone, an identical record
created twice: InvalidChangeBatch), and botocore checks every request against the service's
model (types, lengths) before sending it. What moto does not emulate or check (EKS add-ons,
access entries and Pod Identity, WAF rules, Route 53 records that differ only in value,
IAM role-name length) is `limits`' table.

Names: an explicit name is replayed as given; an auto-named resource as Pulumi would name it
(the logical name and a 7-character suffix)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import boto3
from botocore.exceptions import ClientError, ParamValidationError
from moto import mock_aws

from components.preview.graph import Graph, Resource

SUFFIX = "-abcdefg"
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}
"""moto needs credentials to sign with; these never leave the process."""


@contextmanager
def _emulated() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in (*FAKE_CREDENTIALS, "AWS_DEFAULT_REGION")}
    os.environ.update(FAKE_CREDENTIALS)
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
    try:
        with mock_aws():
            yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _name(r: Resource, field: str = "name") -> str:
    given = (r.get("inputs") or {}).get(field)
    return str(given) if given is not None else f"{r['name']}{SUFFIX}"


def _doc(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


class _Replay:
    def __init__(self, graph: Graph) -> None:
        self.g = graph
        self.found: list[tuple[str, str]] = []
        self.vpcs: dict[str, str] = {}

    def call(self, r: Resource, fn: Any, **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except ClientError as e:
            err = e.response.get("Error", {})
            self.found.append((r["name"], f"{err.get('Code')}: {err.get('Message')}"))
        except ParamValidationError as e:
            self.found.append((r["name"], f"ParamValidationError: {' '.join(str(e).split())}"))
        return None

    def client(self, service: str, r: Resource | None = None) -> Any:
        region = (self.g.region_of(r) if r is not None else None) or "us-east-1"
        return boto3.client(service, region_name=region)

    def ordered(self, typ: str) -> list[Resource]:
        return sorted(self.g.of_type(typ), key=lambda r: str(r["urn"]))

    def ec2(self) -> None:
        for vpc in self.ordered("aws:ec2/vpc:Vpc"):
            made = self.call(vpc, self.client("ec2", vpc).create_vpc,
                             CidrBlock=vpc["inputs"]["cidrBlock"])
            if made:
                self.vpcs[str(vpc["id"])] = made["Vpc"]["VpcId"]
        for subnet in self.ordered("aws:ec2/subnet:Subnet"):
            inputs = subnet["inputs"]
            vpc_id = self.vpcs.get(str(inputs.get("vpcId")))
            if vpc_id is None:
                continue  # an existing VPC's subnet: not ours to check
            where = {"AvailabilityZoneId": inputs["availabilityZoneId"]} if inputs.get(
                "availabilityZoneId") else {}
            self.call(subnet, self.client("ec2", subnet).create_subnet, VpcId=vpc_id,
                      CidrBlock=inputs["cidrBlock"], **where)

    def iam(self) -> None:
        iam = self.client("iam")
        for role in self.ordered("aws:iam/role:Role"):
            self.call(role, iam.create_role, RoleName=_name(role),
                      AssumeRolePolicyDocument=_doc(role["inputs"]["assumeRolePolicy"]))
        roles = {str(r["id"]): _name(r) for r in self.g.of_type("aws:iam/role:Role")}
        for policy in self.ordered("aws:iam/rolePolicy:RolePolicy"):
            role_name = roles.get(str(policy["inputs"].get("role")))
            if role_name is not None:
                self.call(policy, iam.put_role_policy, RoleName=role_name,
                          PolicyName=_name(policy), PolicyDocument=_doc(policy["inputs"]["policy"]))
        for policy in self.ordered("aws:iam/policy:Policy"):
            self.call(policy, iam.create_policy, PolicyName=_name(policy),
                      PolicyDocument=_doc(policy["inputs"]["policy"]))

    def s3(self) -> None:
        for bucket in self.ordered("aws:s3/bucket:Bucket"):
            s3 = self.client("s3", bucket)
            region = self.g.region_of(bucket) or "us-east-1"
            where = ({} if region == "us-east-1"
                     else {"CreateBucketConfiguration": {"LocationConstraint": region}})
            self.call(bucket, s3.create_bucket, Bucket=_name(bucket, "bucket"), **where)

    def queues_and_topics(self) -> None:
        for queue in self.ordered("aws:sqs/queue:Queue"):
            inputs = queue["inputs"]
            attributes = {}
            if inputs.get("messageRetentionSeconds") is not None:
                attributes["MessageRetentionPeriod"] = str(inputs["messageRetentionSeconds"])
            self.call(queue, self.client("sqs", queue).create_queue, QueueName=_name(queue),
                      Attributes=attributes)
        for topic in self.ordered("aws:sns/topic:Topic"):
            self.call(topic, self.client("sns", topic).create_topic, Name=_name(topic))

    def route53(self) -> None:
        records = self.ordered("aws:route53/record:Record")
        zones: dict[str, list[str]] = {}
        for rec in records:
            zones.setdefault(str(rec["inputs"]["zoneId"]), []).append(
                str(rec["inputs"]["name"]).rstrip(".").lower())
        r53 = self.client("route53")
        moto_zone = {}
        for zone_id, names in sorted(zones.items()):
            made = r53.create_hosted_zone(Name=_common_suffix(names), CallerReference=zone_id)
            moto_zone[zone_id] = made["HostedZone"]["Id"]
        for rec in records:
            change = _record_change(rec["inputs"])
            # allow_overwrite makes the provider UPSERT (identity-once reports the sharing)
            action = "UPSERT" if rec["inputs"].get("allowOverwrite") else "CREATE"
            self.call(rec, r53.change_resource_record_sets,
                      HostedZoneId=moto_zone[str(rec["inputs"]["zoneId"])],
                      ChangeBatch={"Changes": [{"Action": action, "ResourceRecordSet": change}]})


def _common_suffix(names: list[str]) -> str:
    """The zone the records share: their longest common domain suffix (at least two labels)."""
    split = [n.split(".") for n in names]
    common: list[str] = []
    for labels in zip(*(reversed(s) for s in split), strict=False):
        if len(set(labels)) != 1:
            break
        common.insert(0, labels[0])
    return ".".join(common) if len(common) >= 2 else names[0]


def _record_change(inputs: Mapping[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"Name": str(inputs["name"]), "Type": str(inputs["type"])}
    if inputs.get("setIdentifier"):
        record["SetIdentifier"] = str(inputs["setIdentifier"])
    for policy in inputs.get("latencyRoutingPolicies") or []:
        record["Region"] = policy["region"]
    for policy in inputs.get("failoverRoutingPolicies") or []:
        record["Failover"] = policy["type"]
    if inputs.get("healthCheckId"):
        record["HealthCheckId"] = str(inputs["healthCheckId"])
    aliases = inputs.get("aliases") or []
    if aliases:
        a = aliases[0]
        record["AliasTarget"] = {"HostedZoneId": str(a["zoneId"]), "DNSName": str(a["name"]),
                                 "EvaluateTargetHealth": bool(a.get("evaluateTargetHealth"))}
    else:
        record["TTL"] = int(inputs.get("ttl") or 60)
        record["ResourceRecords"] = [{"Value": str(v)} for v in inputs.get("records") or []]
    return record


def replay(graph: Graph) -> list[tuple[str, str]]:
    """(resource name, the emulated API's error) for every AWS resource moto refuses."""
    replay_ = _Replay(graph)
    with _emulated():
        replay_.ec2()
        replay_.iam()
        replay_.s3()
        replay_.queues_and_topics()
        replay_.route53()
    return replay_.found
