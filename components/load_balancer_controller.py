"""LoadBalancerController: the AWS Load Balancer Controller in a region's cluster, which
turns the rendered Ingress into the region's internet-facing ALB.

Pinned: chart `aws-load-balancer-controller` 1.14.0 (app v2.14.0, built on Kubernetes
client libraries 0.33, so it serves EKS 1.33) from https://aws.github.io/eks-charts. IAM
by EKS Pod Identity: the `eks-pod-identity-agent` add-on, a role trusted by
`pods.eks.amazonaws.com`, the controller's official policy
(`policies/aws-load-balancer-controller-v2.14.0.json` = kubernetes-sigs/
aws-load-balancer-controller v2.14.0 `docs/install/iam_policy.json`, unchanged; the
commercial partition's, as every region of the catalog is) and an association with the
chart's service account. The chart gets the cluster name, region and VPC explicitly, so
the controller needs no instance metadata, and runs on the system pool.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import iam
from components.node_pool import pool_node_selector

POLICY_PATH = Path(__file__).parent / "policies" / "aws-load-balancer-controller-v2.14.0.json"
CHART = "aws-load-balancer-controller"
CHART_VERSION = "1.14.0"
REPOSITORY = "https://aws.github.io/eks-charts"
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "aws-load-balancer-controller"
POD_IDENTITY_ADDON = "eks-pod-identity-agent"


def controller_policy() -> str:
    """The controller's official IAM policy document, as shipped (keys sorted)."""
    return json.dumps(json.loads(POLICY_PATH.read_text()), sort_keys=True)


def chart_values(cluster_name: str, region: str, vpc_id: str) -> dict[str, Any]:
    return {
        "clusterName": cluster_name,
        "region": region,
        "vpcId": vpc_id,
        "replicaCount": 2,
        "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
        "nodeSelector": pool_node_selector("system"),
    }


@dataclass(frozen=True)
class LoadBalancerControllerArgs:
    """cluster_name, vpc_id: the region's cluster (InferenceCluster). region: its region.
    aws_provider, k8s_provider: the region's providers.
    depends_on: what the release waits for (the system node group its pods run on).
    """

    cluster_name: pulumi.Output[str]
    vpc_id: pulumi.Output[str]
    region: str
    aws_provider: aws.Provider
    k8s_provider: k8s.Provider
    depends_on: Sequence[pulumi.Resource] = ()


class LoadBalancerController(pulumi.ComponentResource):
    """Children `{name}-policy`, `{name}-role`, `{name}-attach`, `{name}-pod-identity-agent`,
    `{name}-association` and the Helm release `{name}` (`release`)."""

    release: k8s.helm.v3.Release

    def __init__(
        self,
        name: str,
        args: LoadBalancerControllerArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("llmfleet:index:LoadBalancerController", name, None, opts)
        aws_opts = pulumi.ResourceOptions(parent=self, provider=args.aws_provider)
        policy = aws.iam.Policy(
            f"{name}-policy",
            policy=controller_policy(),
            description="AWS Load Balancer Controller v2.14.0 (official policy)",
            opts=aws_opts,
        )
        role = aws.iam.Role(
            f"{name}-role", assume_role_policy=iam.pod_identity_trust(), opts=aws_opts
        )
        attach = aws.iam.RolePolicyAttachment(
            f"{name}-attach", role=role.name, policy_arn=policy.arn, opts=aws_opts
        )
        agent = aws.eks.Addon(
            f"{name}-pod-identity-agent",
            cluster_name=args.cluster_name,
            addon_name=POD_IDENTITY_ADDON,
            opts=aws_opts,
        )
        association = aws.eks.PodIdentityAssociation(
            f"{name}-association",
            cluster_name=args.cluster_name,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            role_arn=role.arn,
            opts=aws_opts,
        )
        values = pulumi.Output.all(args.cluster_name, args.vpc_id).apply(
            lambda a: chart_values(a[0], args.region, a[1])
        )
        self.release = k8s.helm.v3.Release(
            name,
            name=CHART,
            chart=CHART,
            version=CHART_VERSION,
            repository_opts={"repo": REPOSITORY},
            namespace=NAMESPACE,
            values=values,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.k8s_provider,
                depends_on=[*args.depends_on, attach, agent, association],
            ),
        )
        self.register_outputs({"release": self.release.status})
