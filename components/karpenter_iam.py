"""IAM for Karpenter, as pure JSON builders: the controller's least-privilege policy (the
statements of Karpenter 1.14.1's getting-started CloudFormation template,
website/content/en/docs/getting-started/getting-started-with-karpenter/cloudformation.yaml
@v1.14.1, scoped to one cluster and region) and the interruption queue's policy (its
role trusts EKS Pod Identity: `iam.pod_identity_trust`). `components.karpenter` creates
the resources."""

from __future__ import annotations

import json
from typing import Any

from components.iam import partition

INTERRUPTION_EVENTS = {
    "scheduled-change": ("aws.health", "AWS Health Event"),
    "spot-interruption": ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
    "rebalance": ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
    "instance-state-change": ("aws.ec2", "EC2 Instance State-change Notification"),
    "reservation-interruption": (
        "aws.ec2",
        "EC2 Capacity Reservation Instance Interruption Warning",
    ),
}
"""EventBridge rules that feed the interruption queue (same template)."""


def _stmt(sid: str, actions: list[str], resources: Any, **condition: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"Sid": sid, "Effect": "Allow", "Action": actions, "Resource": resources}
    if condition:
        out["Condition"] = condition
    return out


def controller_policy(
    cluster: str, region: str, account: str, node_role_arn: str, queue_arn: str
) -> str:
    """What the controller may do: launch and tag instances for its NodePools, delete only
    what it launched, pass only its node role, manage instance profiles of its
    EC2NodeClasses, describe the region, read its interruption queue."""
    p = partition(region)
    ec2 = f"arn:{p}:ec2:{region}"
    owned = {f"aws:ResourceTag/kubernetes.io/cluster/{cluster}": "owned"}
    req_owned = {
        f"aws:RequestTag/kubernetes.io/cluster/{cluster}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": cluster,
    }
    nodepool_req = {"aws:RequestTag/karpenter.sh/nodepool": "*"}
    nodepool_res = {"aws:ResourceTag/karpenter.sh/nodepool": "*"}
    launched = [
        f"{ec2}:*:{kind}/*"
        for kind in (
            "fleet", "instance", "volume", "network-interface", "launch-template",
            "spot-instances-request",
        )
    ]  # fmt: skip
    profile = f"arn:{p}:iam::{account}:instance-profile/*"
    region_tag = {"aws:RequestTag/topology.kubernetes.io/region": region}
    nodeclass_req = {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"}
    nodeclass_res = {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"}
    statements = [
        _stmt(
            "AllowScopedEC2InstanceAccessActions",
            ["ec2:RunInstances", "ec2:CreateFleet"],
            [
                f"{ec2}::image/*",
                f"{ec2}::snapshot/*",
                f"{ec2}:*:security-group/*",
                f"{ec2}:*:subnet/*",
                f"{ec2}:*:capacity-reservation/*",
                f"{ec2}:*:placement-group/*",
            ],
        ),
        _stmt(
            "AllowScopedEC2LaunchTemplateAccessActions",
            ["ec2:RunInstances", "ec2:CreateFleet"],
            f"{ec2}:*:launch-template/*",
            StringEquals=owned,
            StringLike=nodepool_res,
        ),
        _stmt(
            "AllowScopedEC2InstanceActionsWithTags",
            ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            launched,
            StringEquals=req_owned,
            StringLike=nodepool_req,
        ),
        _stmt(
            "AllowScopedResourceCreationTagging",
            ["ec2:CreateTags"],
            launched,
            StringEquals={
                **req_owned,
                "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
            },
            StringLike=nodepool_req,
        ),
        _stmt(
            "AllowScopedResourceTagging",
            ["ec2:CreateTags"],
            f"{ec2}:*:instance/*",
            StringEquals=owned,
            StringLike=nodepool_res,
            StringEqualsIfExists={"aws:RequestTag/eks:eks-cluster-name": cluster},
            **{
                "ForAllValues:StringEquals": {
                    "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                }
            },
        ),
        _stmt(
            "AllowScopedDeletion",
            ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            [f"{ec2}:*:instance/*", f"{ec2}:*:launch-template/*"],
            StringEquals=owned,
            StringLike=nodepool_res,
        ),
        _stmt(
            "AllowPassingInstanceRole",
            ["iam:PassRole"],
            node_role_arn,
            StringEquals={"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]},
        ),
        _stmt(
            "AllowScopedInstanceProfileCreationActions",
            ["iam:CreateInstanceProfile"],
            profile,
            StringEquals={**req_owned, **region_tag},
            StringLike=nodeclass_req,
        ),
        _stmt(
            "AllowScopedInstanceProfileTagActions",
            ["iam:TagInstanceProfile"],
            profile,
            StringEquals={
                **owned,
                "aws:ResourceTag/topology.kubernetes.io/region": region,
                **req_owned,
                **region_tag,
            },
            StringLike={**nodeclass_res, **nodeclass_req},
        ),
        _stmt(
            "AllowScopedInstanceProfileActions",
            [
                "iam:AddRoleToInstanceProfile",
                "iam:RemoveRoleFromInstanceProfile",
                "iam:DeleteInstanceProfile",
            ],
            profile,
            StringEquals={**owned, "aws:ResourceTag/topology.kubernetes.io/region": region},
            StringLike=nodeclass_res,
        ),
        _stmt(
            "AllowAPIServerEndpointDiscovery",
            ["eks:DescribeCluster"],
            f"arn:{p}:eks:{region}:{account}:cluster/{cluster}",
        ),
        _stmt(
            "AllowInterruptionQueueActions",
            ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            queue_arn,
        ),
        _stmt(
            "AllowRegionalReadActions",
            [
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribePlacementGroups",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
            ],
            "*",
            StringEquals={"aws:RequestedRegion": region},
        ),
        _stmt(
            "AllowSSMReadActions",
            ["ssm:GetParameter"],
            f"arn:{p}:ssm:{region}::parameter/aws/service/*",
        ),
        _stmt("AllowPricingReadActions", ["pricing:GetProducts"], "*"),
        _stmt("AllowUnscopedInstanceProfileListAction", ["iam:ListInstanceProfiles"], "*"),
        _stmt("AllowInstanceProfileReadActions", ["iam:GetInstanceProfile"], profile),
    ]
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)


def queue_policy(queue_arn: str) -> str:
    """EventBridge (and SQS) may send to the interruption queue; nothing over plain HTTP."""
    doc = {
        "Version": "2012-10-17",
        "Id": "EC2InterruptionPolicy",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
            },
            {
                "Sid": "DenyHTTP",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "sqs:*",
                "Resource": queue_arn,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
        ],
    }
    return json.dumps(doc, sort_keys=True)


def event_pattern(source: str, detail_type: str) -> str:
    return json.dumps({"source": [source], "detail-type": [detail_type]}, sort_keys=True)
