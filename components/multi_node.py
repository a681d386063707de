"""MultiNodeSupport: what a region needs when its GPU nodes carry traffic between them
(`RegionPlan.fabric`: a replica across nodes, `RegionPlan.multi_node`, or disaggregated pools).

Children:
- `{name}-pg` (a replica across nodes on demand): the cluster placement group every GPU node
  joins (`multi_node.placement_group`, strategy cluster; Karpenter's EC2NodeClass selects it
  by name, the floor's launch template names it). Reserved nodes join the group their
  reservations were created in, which the plan names, and Capacity Blocks none
  (`multi_node.placement_group_created` false: `fleetplan.multi_node.placement`);
- `{name}-efa-device-plugin` (over EFA only): the EFA device plugin (eks-charts
  `aws-efa-k8s-device-plugin`), which advertises `vpc.amazonaws.com/efa` on the GPU nodes
  (EKS user guide, "device management EFA": the EKS AL2023 accelerated AMIs carry the EFA host
  software, not the plugin); it tolerates the GPU taint and runs on the region's instance
  type only. Over TCP (an image without the EFA NCCL plugin) no EFA is deployed at all;
- `{name}-lws` (a replica across nodes): the LeaderWorkerSet controller (the pinned OCI chart
  `oci://registry.k8s.io/lws/charts/lws`, catalog/charts.csv) on the system nodes, and
  `{name}-lws-crds-*`: its CRDs from the chart's tag (server-side apply; the release skips
  its crds/, which Helm would never upgrade); the rendered LeaderWorkerSet waits for both.

The GPU floor of such a region is a `components.node_pool.NodePool` given the fabric and the
placement group (`NodePoolArgs.fabric`): with EFA its launch template also carries the node's
EFA interfaces (ENA primary, an EFA-only interface per network card) and the NodeConfig that
lifts RLIMIT_MEMLOCK. Every number comes from the FleetPlan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.cluster_addons import crd_files
from components.node_pool import pool_node_selector
from llmfleet.catalog.kubernetes import chart
from llmfleet.fleetplan import workload
from llmfleet.fleetplan.multi_node import LWS_NAMESPACE, MultiNode
from llmfleet.fleetplan.region import RegionPlan

EFA_DEVICE_PLUGIN = "aws-efa-k8s-device-plugin"
LWS = "lws"
"""Components of catalog/charts.csv (their versions, windows and CRD handling)."""


def efa_device_plugin_args(region_plan: RegionPlan) -> dict[str, Any]:
    """Keyword arguments of the EFA device plugin's Helm release (values keys of the chart's
    values.yaml: tolerations, supportedInstanceLabels)."""
    pin = chart(EFA_DEVICE_PLUGIN)
    return {
        "name": EFA_DEVICE_PLUGIN,
        "chart": pin.chart,
        "version": pin.version,
        "repository_opts": {"repo": pin.repository},
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
    """Keyword arguments of the LeaderWorkerSet controller's Helm release: its chart keeps
    the CRDs in crds/, which Helm installs once and never upgrades, so the release skips them
    and `crd_files` applies them from the pinned tag (an upgrade upgrades them first); the
    controller runs on the system nodes."""
    pin = chart(LWS)
    return {
        "name": LWS,
        "chart": pin.chart,
        "version": pin.version,
        "namespace": LWS_NAMESPACE,
        "create_namespace": True,
        "skip_crds": True,
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
    """Children `{name}-pg`, `{name}-efa-device-plugin`, `{name}-lws` and its CRDs, each
    where the region needs it (see the module); `releases` maps release names to them."""

    placement_group: aws.ec2.PlacementGroup | None
    releases: dict[str, k8s.helm.v3.Release]
    crds: list[k8s.yaml.v2.ConfigFile]

    def __init__(
        self, name: str, args: MultiNodeArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:MultiNodeSupport", name, None, opts)
        rp = args.region_plan
        assert rp.fabric is not None, "MultiNodeSupport needs RegionPlan.fabric"
        multi = rp.multi_node
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider)
        self.placement_group = None
        self.releases = {}
        self.crds = []
        if multi is not None and multi.placement_group_created:
            self.placement_group = aws.ec2.PlacementGroup(
                f"{name}-pg",
                **placement_group_args(multi),
                tags=dict(sorted(args.tags.items())),
                opts=pulumi.ResourceOptions(parent=self),
            )
        if multi is not None:
            self.crds = crd_files(f"{name}-lws", LWS, k8s_opts)
            self.releases[LWS] = k8s.helm.v3.Release(
                f"{name}-lws",
                **lws_args(),
                opts=pulumi.ResourceOptions.merge(
                    k8s_opts,
                    pulumi.ResourceOptions(depends_on=[*args.system_nodes, *self.crds]),
                ),
            )
        if rp.fabric.transport == "efa":
            self.releases[EFA_DEVICE_PLUGIN] = k8s.helm.v3.Release(
                f"{name}-efa-device-plugin", **efa_device_plugin_args(rp), opts=k8s_opts
            )
        self.register_outputs({
            "placement_group": multi.placement_group if multi is not None else None,
            "releases": sorted(self.releases),
        })
