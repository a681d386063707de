"""Karpenter: node autoscaling of a region's GPU capacity above its always-on floor.

Children:
- `{name}-node-role` (explicit name `karpenter_manifests.node_role_name`) with the managed
  node policies and an EKS access entry (type EC2_LINUX), so Karpenter's nodes may join;
- `{name}-controller`: the controller's role, trusted by EKS Pod Identity, with the
  least-privilege inline policy (`karpenter_iam.controller_policy`) and a
  `PodIdentityAssociation` for kube-system/karpenter;
- the interruption queue `{name}-interruptions` (SQS, SSE, 5-minute retention, its
  policy) and one EventBridge rule + target per interruption event (spot warnings,
  rebalance, health events, instance state changes, reservation interruptions), so nodes
  are drained before EC2 takes them;
- the Helm release `{name}-crds`: the `karpenter-crd` chart of the same version, whose CRDs
  are templates, so `helm upgrade` upgrades them (the `karpenter` chart's own `crds/` are
  installed once and never upgraded: Karpenter's v1.14 upgrade guide recommends this chart);
- the Helm release `{name}-chart`: the controller (catalog/charts.csv; `skip_crds`) on the
  system node group (the chart's `nodeSelector`), never on the nodes it manages, with its
  region as AWS_REGION (no instance metadata: the nodes' hop limit is 1);
- the region's EC2NodeClass and NodePool, exactly as rendered
  (`llmfleet.outputs.karpenter_manifests`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
from pulumi_kubernetes.apiextensions import CustomResource

from components import iam, karpenter_iam
from components.documents import resource_kwargs
from components.node_pool import pool_node_selector
from llmfleet.catalog.kubernetes import chart
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.fleetplan.workload import bounded_name
from llmfleet.outputs import karpenter_manifests

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "karpenter"
EVENT_RULE_NAME_MAX = 64
"""EventBridge PutRule: Name 1-64 characters."""
CONTROLLER_RESOURCES = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}
"""The chart sets none and its values.yaml suggests 1 CPU / 1 GiB."""


def chart_values(cluster_name: str, queue_name: str, region: str) -> dict[str, Any]:
    """Values of the chart (keys of charts/karpenter/values.yaml @v1.14.1)."""
    return {
        "settings": {"clusterName": cluster_name, "interruptionQueue": queue_name},
        "serviceAccount": {"name": SERVICE_ACCOUNT},
        "nodeSelector": {"kubernetes.io/os": "linux", **pool_node_selector("system")},
        "controller": {
            "resources": CONTROLLER_RESOURCES,
            "env": [{"name": "AWS_REGION", "value": region}],
        },
    }


@dataclass(frozen=True)
class KarpenterArgs:
    """fleet_plan, region_plan: the region's NodePool and EC2NodeClass source.
    cluster: the region's EKS cluster (its name and ARN; the account comes from the ARN).
    k8s_provider: the cluster's Kubernetes provider.
    depends_on: what the chart waits for: the system node group (its pods run there) and
        the Pod Identity agent add-on.
    """

    fleet_plan: FleetPlan
    region_plan: RegionPlan
    cluster: aws.eks.Cluster
    k8s_provider: k8s.Provider
    depends_on: Sequence[pulumi.Resource] = ()


class Karpenter(pulumi.ComponentResource):
    """Attributes: `node_role`, `crds`, `release`, `node_class`, `node_pool` (see the
    module)."""

    node_role: aws.iam.Role
    crds: k8s.helm.v3.Release
    release: k8s.helm.v3.Release
    node_class: CustomResource
    node_pool: CustomResource

    def __init__(
        self, name: str, args: KarpenterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:Karpenter", name, None, opts)
        fp, rp = args.fleet_plan, args.region_plan
        region = rp.region
        cluster = karpenter_manifests.cluster_name(fp.name, region)
        aws_opts = pulumi.ResourceOptions(parent=self)

        self.node_role = aws.iam.Role(
            f"{name}-node-role",
            name=karpenter_manifests.node_role_name(fp.name, region),
            assume_role_policy=iam.assume_role_policy("ec2", region),
            description=f"Karpenter's GPU nodes of {cluster}",
            opts=aws_opts,
        )
        attachments = [
            aws.iam.RolePolicyAttachment(
                f"{name}-node-{policy}",
                role=self.node_role.name,
                policy_arn=iam.managed_policy_arn(policy, region),
                opts=aws_opts,
            )
            for policy in iam.NODE_POLICIES
        ]
        access = aws.eks.AccessEntry(
            f"{name}-node-access",
            cluster_name=args.cluster.name,
            principal_arn=self.node_role.arn,
            type="EC2_LINUX",
            opts=aws_opts,
        )

        queue = aws.sqs.Queue(
            f"{name}-interruptions",
            name=cluster,
            message_retention_seconds=300,
            sqs_managed_sse_enabled=True,
            opts=aws_opts,
        )
        aws.sqs.QueuePolicy(
            f"{name}-interruptions-policy",
            queue_url=queue.url,
            policy=queue.arn.apply(karpenter_iam.queue_policy),
            opts=aws_opts,
        )
        for event, (source, detail) in karpenter_iam.INTERRUPTION_EVENTS.items():
            rule = aws.cloudwatch.EventRule(
                f"{name}-{event}",
                # named, not auto-named: PutRule takes 64 characters, and a long fleet and
                # region name plus the event and Pulumi's suffix would not fit
                name=bounded_name(f"{name}-{event}", EVENT_RULE_NAME_MAX),
                event_pattern=karpenter_iam.event_pattern(source, detail),
                opts=aws_opts,
            )
            aws.cloudwatch.EventTarget(
                f"{name}-{event}", rule=rule.name, arn=queue.arn, opts=aws_opts
            )

        controller = aws.iam.Role(
            f"{name}-controller",
            assume_role_policy=iam.pod_identity_trust(),
            description=f"Karpenter controller of {cluster}",
            opts=aws_opts,
        )
        account = args.cluster.arn.apply(lambda arn: arn.split(":")[4])
        policy = aws.iam.RolePolicy(
            f"{name}-controller",
            role=controller.id,
            policy=pulumi.Output.all(account, self.node_role.arn, queue.arn).apply(
                lambda a: karpenter_iam.controller_policy(cluster, region, a[0], a[1], a[2])
            ),
            opts=aws_opts,
        )
        association = aws.eks.PodIdentityAssociation(
            f"{name}-controller",
            cluster_name=args.cluster.name,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            role_arn=controller.arn,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on)),
        )

        crd_chart = chart("karpenter-crd")
        self.crds = k8s.helm.v3.Release(
            f"{name}-crds",
            name="karpenter-crd",
            chart=crd_chart.chart,
            version=crd_chart.version,
            namespace=NAMESPACE,
            opts=pulumi.ResourceOptions(
                parent=self, provider=args.k8s_provider, depends_on=list(args.depends_on)
            ),
        )
        k8s_opts = pulumi.ResourceOptions(
            parent=self,
            provider=args.k8s_provider,
            depends_on=[*args.depends_on, association, policy, access, *attachments, self.crds],
        )
        controller_chart = chart("karpenter")
        self.release = k8s.helm.v3.Release(
            f"{name}-chart",
            name="karpenter",
            chart=controller_chart.chart,
            version=controller_chart.version,
            namespace=NAMESPACE,
            skip_crds=True,
            values=queue.name.apply(lambda q: chart_values(cluster, q, region)),
            opts=k8s_opts,
        )
        docs = karpenter_manifests.karpenter_manifests(fp, rp)
        cr_opts = pulumi.ResourceOptions(
            parent=self, provider=args.k8s_provider, depends_on=[self.release]
        )
        self.node_class = CustomResource(
            f"{name}-ec2nodeclass", **resource_kwargs(docs["karpenter-ec2nodeclass"]), opts=cr_opts
        )
        self.node_pool = CustomResource(
            f"{name}-nodepool",
            **resource_kwargs(docs["karpenter-nodepool"]),
            opts=pulumi.ResourceOptions.merge(
                cr_opts, pulumi.ResourceOptions(depends_on=[self.node_class])
            ),
        )
        self.register_outputs(
            {
                "node_role_arn": self.node_role.arn,
                "interruption_queue": queue.name,
                "gpu_limit": rp.capacity.karpenter_gpu_limit,
            }
        )
