"""MultiNode: what a region needs when a replica spans nodes (`RegionPlan.multi_node`).

Children:
- `{name}-pg`: the cluster placement group every GPU node joins (`multi_node.placement_group`,
  strategy cluster; Karpenter's EC2NodeClass selects it by name, the floor's launch
  template names it);
- `{name}-efa-device-plugin`: the EFA device plugin (eks-charts `aws-efa-k8s-device-plugin`),
  which advertises `vpc.amazonaws.com/efa` on the GPU nodes (EKS user guide, "device
  management EFA": the EKS AL2023 accelerated AMIs carry the EFA host software, not the
  plugin); it tolerates the GPU taint and runs on the region's instance type only;
- `{name}-lws`: the LeaderWorkerSet controller and its CRD (the pinned OCI chart
  `oci://registry.k8s.io/lws/charts/lws`) on the system nodes; the rendered
  LeaderWorkerSet waits for it.

The GPU floor of such a region is a `components.node_pool.NodePool` given the multi-node
section and this placement group (`NodePoolArgs.efa`): its launch template also carries the
node's EFA interfaces (ENA primary, an EFA-only interface per network card) and the
placement group. Every number comes from the FleetPlan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.node_pool import (
    pool_node_selector,
)
from llmfleet.fleetplan import workload
from llmfleet.fleetplan.multi_node import (
    EFA_DEVICE_PLUGIN_VERSION,
    LWS_CHART,
    LWS_NAMESPACE,
    LWS_VERSION,
    MultiNode,
)
from llmfleet.fleetplan.region import RegionPlan

EFA_DEVICE_PLUGIN_CHART = "aws-efa-k8s-device-plugin"
EKS_CHARTS = "https://aws.github.io/eks-charts"


def efa_device_plugin_args(region_plan: RegionPlan) -> dict[str, Any]:
    """Keyword arguments of the EFA device plugin's Helm release (values keys of the chart's
    values.yaml: tolerations, supportedInstanceLabels)."""
    return {
        "name": "aws-efa-k8s-device-plugin",
        "chart": EFA_DEVICE_PLUGIN_CHART,
        "version": EFA_DEVICE_PLUGIN_VERSION,
        "repository_opts": {"repo": EKS_CHARTS},
        "namespace": "kube-system",
        "values": {
            "tolerations": [
                {"key": workload.GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
            ],
            "supportedInstanceLabels": {
                "keys": ["node.kubernetes.io/instance-type"],
                "values": [region_plan.instance_type],
            },
        },
    }


def lws_args() -> dict[str, Any]:
    """Keyword arguments of the LeaderWorkerSet controller's Helm release (its chart ships the
    CRD in crds/; the controller runs on the system nodes)."""
    return {
        "name": "lws",
        "chart": LWS_CHART,
        "version": LWS_VERSION,
        "namespace": LWS_NAMESPACE,
        "create_namespace": True,
        "values": {"nodeSelector": pool_node_selector("system")},
    }


def placement_group_args(multi: MultiNode) -> dict[str, Any]:
    return {"name": multi.placement_group, "strategy": multi.placement_strategy}


@dataclass(frozen=True)
class MultiNodeArgs:
    """region_plan: the region (its `multi_node` section must be set).
    k8s_provider: the region's cluster provider.
    system_nodes: what the controller waits for (its pods have nowhere to run before). The
        device plugin is a DaemonSet on GPU nodes: ready with none, so it waits for nothing
        and the GPU floor (in the placement group created here) follows it.
    """

    region_plan: RegionPlan
    k8s_provider: k8s.Provider
    system_nodes: Sequence[pulumi.Resource] = ()
    tags: Mapping[str, str] = field(default_factory=dict)


class MultiNodeSupport(pulumi.ComponentResource):
    """Children `{name}-pg`, `{name}-efa-device-plugin`, `{name}-lws` (see the module);
    `releases` maps release names to them."""

    placement_group: aws.ec2.PlacementGroup
    releases: dict[str, k8s.helm.v3.Release]

    def __init__(
        self, name: str, args: MultiNodeArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:MultiNodeSupport", name, None, opts)
        multi = args.region_plan.multi_node
        assert multi is not None, "MultiNodeSupport needs RegionPlan.multi_node"
        self.placement_group = aws.ec2.PlacementGroup(
            f"{name}-pg",
            **placement_group_args(multi),
            tags=dict(sorted(args.tags.items())),
            opts=pulumi.ResourceOptions(parent=self),
        )
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider)
        lws = k8s.helm.v3.Release(
            f"{name}-lws",
            **lws_args(),
            opts=pulumi.ResourceOptions.merge(
                k8s_opts, pulumi.ResourceOptions(depends_on=list(args.system_nodes))
            ),
        )
        plugin = k8s.helm.v3.Release(
            f"{name}-efa-device-plugin", **efa_device_plugin_args(args.region_plan), opts=k8s_opts
        )
        self.releases = {"lws": lws, "aws-efa-k8s-device-plugin": plugin}
        self.register_outputs(
            {"placement_group": self.placement_group.name, "releases": sorted(self.releases)}
        )
