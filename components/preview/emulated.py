"""Replay the preview's AWS resources into moto (an AWS emulator, in-process and offline) and
report what its APIs refuse.

moto 5.2.5 validates what it emulates: EC2 (a subnet outside its VPC or overlapping another:
InvalidSubnet.Range / InvalidSubnet.Conflict; a VPC larger than /16: InvalidVpc.Range; an
unknown zone ID), IAM (policy documents: MalformedPolicyDocument; a role or policy name twice:
EntityAlreadyExists), S3 (bucket name length: InvalidBucketName; a name twice outside
us-east-1: BucketAlreadyOwnedByYou), SQS (queue names and attributes), SNS (topic names),
Route 53 (a record outside its zone, an identical record created twice: InvalidChangeBatch).
What moto does not emulate or check (EKS add-ons, access entries and Pod Identity, WAF rules,
Route 53 records that differ only in value, name lengths and characters) is `limits`' table.

The replay calls moto's service backends (`moto.<service>.models`, per account and region)
directly, where those checks live, rather than each API through boto3: a request through
botocore and moto's HTTP layer cost about 10 ms, and botocore's own validation of a request
(types and minimum lengths) adds nothing `limits.NAME_LIMITS` does not check. `mock_aws`
gives every replay empty backends.

Names: an explicit name is replayed as given; an auto-named resource as Pulumi would name it
(the logical name and a 7-character suffix)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from moto import mock_aws
from moto.core.exceptions import ServiceException
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.ec2.models import ec2_backends
from moto.iam.models import iam_backends
from moto.route53.models import route53_backends
from moto.s3.exceptions import BucketAlreadyOwnedByYou
from moto.s3.models import s3_backends
from moto.sns.models import sns_backends
from moto.sqs.models import sqs_backends

from components.preview.graph import Graph, Resource

SUFFIX = "-abcdefg"
PARTITION = "aws"
"""The key of moto's global services (IAM, S3, Route 53): the partition."""
LEGACY_REGION = "us-east-1"
"""S3's first region: CreateBucket of a bucket its owner already holds there answers 200."""
NO_DEFAULT_AMIS = {"MOTO_EC2_LOAD_DEFAULT_AMIS": "false"}
"""moto's EC2 loads a few thousand public AMIs per region unless told not to; no check
reads them."""


@contextmanager
def _emulated() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in NO_DEFAULT_AMIS}
    os.environ.update(NO_DEFAULT_AMIS)
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

    def refused(self, r: Resource, error: ServiceException) -> None:
        self.found.append((r["name"], f"{error.code}: {error.message}"))

    def call(self, r: Resource, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """fn's result, or None with the error the API would answer recorded."""
        try:
            return fn(*args, **kwargs)
        except ServiceException as e:
            self.refused(r, e)
        return None

    def region(self, r: Resource) -> str:
        return self.g.region_of(r) or LEGACY_REGION

    def ordered(self, typ: str) -> list[Resource]:
        return sorted(self.g.of_type(typ), key=lambda r: str(r["urn"]))

    def ec2(self) -> None:
        for vpc in self.ordered("aws:ec2/vpc:Vpc"):
            ec2 = ec2_backends[DEFAULT_ACCOUNT_ID][self.region(vpc)]
            made = self.call(vpc, ec2.create_vpc, vpc["inputs"]["cidrBlock"])
            if made:
                self.vpcs[str(vpc["id"])] = made.id
        for subnet in self.ordered("aws:ec2/subnet:Subnet"):
            inputs = subnet["inputs"]
            vpc_id = self.vpcs.get(str(inputs.get("vpcId")))
            if vpc_id is None:
                continue  # an existing VPC's subnet: not ours to check
            ec2 = ec2_backends[DEFAULT_ACCOUNT_ID][self.region(subnet)]
            self.call(subnet, ec2.create_subnet, vpc_id, inputs["cidrBlock"],
                      availability_zone_id=inputs.get("availabilityZoneId"))

    def iam(self) -> None:
        iam = iam_backends[DEFAULT_ACCOUNT_ID][PARTITION]
        for role in self.ordered("aws:iam/role:Role"):
            self.call(role, iam.create_role, _name(role), _doc(role["inputs"]["assumeRolePolicy"]),
                      path="/", permissions_boundary=None, description="", tags=[],
                      max_session_duration="3600")
        roles = {str(r["id"]): _name(r) for r in self.g.of_type("aws:iam/role:Role")}
        for policy in self.ordered("aws:iam/rolePolicy:RolePolicy"):
            role_name = roles.get(str(policy["inputs"].get("role")))
            if role_name is not None:
                self.call(policy, iam.put_role_policy, role_name, _name(policy),
                          _doc(policy["inputs"]["policy"]))
        for policy in self.ordered("aws:iam/policy:Policy"):
            self.call(policy, iam.create_policy, description="", path="/",
                      policy_document=_doc(policy["inputs"]["policy"]),
                      policy_name=_name(policy), tags=[])

    def s3(self) -> None:
        s3 = s3_backends[DEFAULT_ACCOUNT_ID][PARTITION]
        for bucket in self.ordered("aws:s3/bucket:Bucket"):
            name, region = _name(bucket, "bucket"), self.region(bucket)
            owned = s3.buckets.get(name)
            if owned is None:
                self.call(bucket, s3.create_bucket, name, region)
            elif not region == owned.region_name == LEGACY_REGION:
                self.refused(bucket, BucketAlreadyOwnedByYou(bucket_name=name))

    def queues_and_topics(self) -> None:
        for queue in self.ordered("aws:sqs/queue:Queue"):
            inputs = queue["inputs"]
            attributes = {}
            if inputs.get("messageRetentionSeconds") is not None:
                attributes["MessageRetentionPeriod"] = str(inputs["messageRetentionSeconds"])
            sqs = sqs_backends[DEFAULT_ACCOUNT_ID][self.region(queue)]
            self.call(queue, sqs.create_queue, _name(queue), **attributes)
        for topic in self.ordered("aws:sns/topic:Topic"):
            sns = sns_backends[DEFAULT_ACCOUNT_ID][self.region(topic)]
            self.call(topic, sns.create_topic, _name(topic))

    def route53(self) -> None:
        records = self.ordered("aws:route53/record:Record")
        zones: dict[str, list[str]] = {}
        for rec in records:
            zones.setdefault(str(rec["inputs"]["zoneId"]), []).append(
                str(rec["inputs"]["name"]).rstrip(".").lower())
        r53 = route53_backends[DEFAULT_ACCOUNT_ID][PARTITION]
        moto_zone = {}
        for zone_id, names in sorted(zones.items()):
            made = r53.create_hosted_zone(f"{_common_suffix(names)}.", private_zone=False,
                                          caller_reference=zone_id)
            moto_zone[zone_id] = made.id
        for rec in records:
            change = _record_change(rec["inputs"])
            # allow_overwrite makes the provider UPSERT (identity-once reports the sharing)
            action = "UPSERT" if rec["inputs"].get("allowOverwrite") else "CREATE"
            self.call(rec, r53.change_resource_record_sets,
                      moto_zone[str(rec["inputs"]["zoneId"])],
                      [{"Action": action, "ResourceRecordSet": change}])


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
