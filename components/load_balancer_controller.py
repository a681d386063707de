"""LoadBalancerController: the AWS Load Balancer Controller in a region's cluster, which
turns the rendered Ingresses into the region's internet-facing ALB.

Pinned: the chart `aws-load-balancer-controller` at the version of catalog/charts.csv
(3.5.0 = app v3.5.0, built on Kubernetes client libraries 0.36; JWT validation at the ALB
needs v2.15.0 or later) from https://aws.github.io/eks-charts. Its CRDs (TargetGroupBinding,
IngressClassParams, ...) sit in the chart's `crds/`, which Helm installs once and never
upgrades: they are applied from the chart's tag (`cluster_addons.crd_files`) and the release
skips them.

IAM by EKS Pod Identity, through the cluster's one `eks-pod-identity-agent` add-on
(`InferenceCluster.pod_identity_agent`, which the association waits for): a role trusted by
`pods.eks.amazonaws.com` with the controller's official policy
(`policies/aws-load-balancer-controller-v3.5.0.json` = kubernetes-sigs/
aws-load-balancer-controller v3.5.0 `docs/install/iam_policy.json`, unchanged; the same
document as v2.14.0's) plus `wafv2:ListWebACLs`, which the annotation
`alb.ingress.kubernetes.io/wafv2-acl-name` needs ("The controller role must allow access to
wafv2:ListWebACLs", the v3.5.0 annotation docs) and the official policy lacks.

The chart gets the cluster name, region and VPC explicitly, so the controller needs no
instance metadata, and runs on the system pool. Its Service mutating webhook is off
(`enableServiceMutatorWebhook: false`): it is registered for every Service CREATE and fails
closed, so while the controller's pods are not yet serving, every other release creating a
Service in the same `pulumi up` fails (aws-load-balancer-controller#4140); llmfleet makes no
`type: LoadBalancer` Service for it to default. The Ingress validating webhook and the pod
readiness-gate webhook stay; what needs them waits for `release`.
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
from components.cluster_addons import crd_files
from components.node_pool import pool_node_selector
from llmfleet.catalog.kubernetes import chart

COMPONENT = "aws-load-balancer-controller"
POLICY_PATH = Path(__file__).parent / "policies" / "aws-load-balancer-controller-v3.5.0.json"
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "aws-load-balancer-controller"


def controller_policy() -> str:
    """The controller's official IAM policy document, as shipped (keys sorted)."""
    return json.dumps(json.loads(POLICY_PATH.read_text()), sort_keys=True)


def waf_lookup_policy() -> str:
    """What `wafv2-acl-name` needs beyond the official policy: finding a web ACL by name
    (ListWebACLs has no resource-level permissions)."""
    doc = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "FindWebAclByName",
                "Effect": "Allow",
                "Action": "wafv2:ListWebACLs",
                "Resource": "*",
            }
        ],
    }
    return json.dumps(doc, sort_keys=True)


def chart_values(cluster_name: str, region: str, vpc_id: str) -> dict[str, Any]:
    return {
        "clusterName": cluster_name,
        "region": region,
        "vpcId": vpc_id,
        "replicaCount": 2,
        "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
        "nodeSelector": pool_node_selector("system"),
        "enableServiceMutatorWebhook": False,
    }


@dataclass(frozen=True)
class LoadBalancerControllerArgs:
    """cluster_name, vpc_id: the region's cluster (InferenceCluster). region: its region.
    aws_provider, k8s_provider: the region's providers.
    pod_identity_agent: the cluster's agent add-on (InferenceCluster.pod_identity_agent).
    depends_on: what the release waits for (the system node group its pods run on).
    """

    cluster_name: pulumi.Output[str]
    vpc_id: pulumi.Output[str]
    region: str
    aws_provider: aws.Provider
    k8s_provider: k8s.Provider
    pod_identity_agent: pulumi.Resource
    depends_on: Sequence[pulumi.Resource] = ()


class LoadBalancerController(pulumi.ComponentResource):
    """Children `{name}-policy`, `{name}-role`, `{name}-attach`, `{name}-waf-lookup`,
    `{name}-association`, the CRDs `{name}-crds-*` and the Helm release `{name}`
    (`release`)."""

    release: k8s.helm.v3.Release

    def __init__(
        self,
        name: str,
        args: LoadBalancerControllerArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("llmfleet:index:LoadBalancerController", name, None, opts)
        pinned = chart(COMPONENT)
        aws_opts = pulumi.ResourceOptions(parent=self, provider=args.aws_provider)
        policy = aws.iam.Policy(
            f"{name}-policy",
            policy=controller_policy(),
            description=f"AWS Load Balancer Controller {pinned.app_version} (official policy)",
            opts=aws_opts,
        )
        role = aws.iam.Role(
            f"{name}-role", assume_role_policy=iam.pod_identity_trust(), opts=aws_opts
        )
        attach = aws.iam.RolePolicyAttachment(
            f"{name}-attach", role=role.name, policy_arn=policy.arn, opts=aws_opts
        )
        waf = aws.iam.RolePolicy(
            f"{name}-waf-lookup", role=role.id, policy=waf_lookup_policy(), opts=aws_opts
        )
        association = aws.eks.PodIdentityAssociation(
            f"{name}-association",
            cluster_name=args.cluster_name,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            role_arn=role.arn,
            opts=pulumi.ResourceOptions.merge(
                aws_opts, pulumi.ResourceOptions(depends_on=[args.pod_identity_agent])
            ),
        )
        k8s_opts = pulumi.ResourceOptions(
            parent=self, provider=args.k8s_provider, depends_on=list(args.depends_on)
        )
        crds = crd_files(name, COMPONENT, k8s_opts)
        values = pulumi.Output.all(args.cluster_name, args.vpc_id).apply(
            lambda a: chart_values(a[0], args.region, a[1])
        )
        self.release = k8s.helm.v3.Release(
            name,
            name=COMPONENT,
            chart=pinned.chart,
            version=pinned.version,
            repository_opts={"repo": pinned.repository},
            namespace=NAMESPACE,
            skip_crds=True,
            values=values,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.k8s_provider,
                depends_on=[*args.depends_on, attach, waf, association, *crds],
            ),
        )
        self.register_outputs({"release": self.release.status})
