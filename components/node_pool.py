"""NodePool: one EKS managed node group of a region's cluster, sized by the FleetPlan.

Two kinds of pool per region, both built by the same pure functions from a `PoolSpec`:

- "gpu" (`gpu_pool`): the always-on floor of the vLLM replicas' nodes
  (`RegionPlan.capacity.floor_nodes`, on-demand; Karpenter's NodePool adds nodes above it,
  `components.karpenter`). The EKS-optimised AL2023 NVIDIA AMI, the region's instance type,
  root volume `RegionPlan.node_volume_gib`. Labelled with `RegionPlan.workload.node_labels`
  (the vLLM pods' nodeSelector, which Karpenter's nodes carry too) and tainted
  `nvidia.com/gpu=true:NoSchedule`, so only pods that tolerate the GPU taint (the vLLM
  replicas, the NVIDIA device plugin) land on it. Fleet places it in the private subnets
  of `RegionPlan.node_zone_ids` only: the zones that offer the instance type.
- "system" (`system_pool`): untainted general-purpose nodes for CoreDNS, KEDA, the
  Prometheus stack and the operators, from `RegionPlan.system_pool` (instance type, nodes,
  volume) on the standard AL2023 x86_64 AMI, in all of the cluster's private subnets.

Every node carries `llmfleet.io/pool: <kind>` (`pool_node_selector(kind)` selects it) and
`llmfleet.io/fleet`. Both pools share the node role and the same launch template policy,
which carries what the node group API cannot: IMDSv2 with hop limit 1 (only the node's own
network namespace reaches the instance metadata: every pod gets its credentials from EKS Pod
Identity, the load balancer controller gets its region and VPC as chart values and
Karpenter its region as AWS_REGION, so no pod needs the instance role), an encrypted gp3
root volume, and a primary network interface without a public IP that keeps the EKS cluster
security group.

Every node group follows the control plane (`version` = the cluster's: without it the
provider neither sets nor tracks it, so a control-plane upgrade would leave the nodes
behind) and repairs itself (`node_repair_config`: EKS replaces a node the node monitoring
agent or the kubelet reports unhealthy, e.g. a GPU with an XID error). The
managed `ami_type` picks the image, so the launch template sets none and EKS keeps merging
its own bootstrap user data.

An update of the GPU floor (a new AMI, a Kubernetes upgrade) replaces one replica's nodes
at a time and `pulumi up` waits for every round (`RegionPlan.node_update`: each round a drain
sized for the longest request plus a cold start), far past the provider's 60 minutes.

`pulumi up` sets `desired_size` once and then ignores drift in it (a hand scale-up during an
incident is not undone by the next deploy). Min and max stay under Pulumi's control.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
import pulumi_aws as aws

from llmfleet.data import MinDesiredMax
from llmfleet.fleetplan import workload
from llmfleet.fleetplan.fabric import Fabric
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.outputs.karpenter_manifests import efa_user_data

PoolKind = Literal["gpu", "system"]
AMI_TYPE = "AL2023_x86_64_NVIDIA"
"""GPU pool: EKS-optimised Amazon Linux 2023 with the NVIDIA driver and container toolkit."""
SYSTEM_AMI_TYPE = "AL2023_x86_64_STANDARD"
"""System pool: EKS-optimised Amazon Linux 2023 for x86_64 instances (m6i and the like)."""
ROOT_DEVICE_NAME = "/dev/xvda"
"""Root device of the AL2023 EKS AMIs; a mapping on another name adds a second volume."""
LABEL_PREFIX = workload.NODE_LABEL_PREFIX
POOL_LABEL = f"{LABEL_PREFIX}/pool"
"""Node label naming the pool a node belongs to: "gpu" or "system"."""
IMDS_HOP_LIMIT = 1
DESIRED_SIZE_PATH = "scalingConfig.desiredSize"
"""Engine property path (wire names) of the node group's desired size, for ignore_changes."""


@dataclass(frozen=True)
class PoolSpec:
    """One pool's decisions, read from the RegionPlan (`gpu_pool`, `system_pool`).

    kind: "gpu" or "system". description: for the launch template. ami_type: the EKS
    managed AMI type. labels: Kubernetes node labels (sorted). taints: node group taints
    (none for the system pool).
    """

    kind: PoolKind
    region: str
    description: str
    instance_type: str
    nodes: MinDesiredMax
    volume_gib: int
    ami_type: str
    labels: Mapping[str, str]
    taints: Sequence[Mapping[str, str]] = ()
    update_max_unavailable: int = 1
    """Nodes an update replaces at a time (the GPU floor: `RegionPlan.node_update`)."""
    update_timeout_s: int | None = None
    """How long `pulumi up` waits for an update (None: the provider's 60 minutes)."""


def pool_node_selector(kind: PoolKind) -> dict[str, str]:
    """The nodeSelector that places a pod on the nodes of pool `kind`."""
    return {POOL_LABEL: kind}


def node_taints(region_plan: RegionPlan) -> list[dict[str, str]]:
    """Only pods that tolerate the workload's GPU taint may schedule on a GPU node (the
    node group API spells the effect NO_SCHEDULE)."""
    w = region_plan.workload
    return [{"key": w.gpu_taint_key, "value": w.gpu_taint_value, "effect": "NO_SCHEDULE"}]


def gpu_pool(region_plan: RegionPlan) -> PoolSpec:
    """The region's always-on GPU floor: `capacity.floor_nodes` nodes (min = desired = max;
    Karpenter adds the rest), the instance type and root volume of the RegionPlan."""
    labels = {**region_plan.workload.node_labels, **pool_node_selector("gpu")}
    floor = region_plan.capacity.floor_nodes
    return PoolSpec(
        kind="gpu",
        region=region_plan.region,
        description=f"GPU floor nodes {region_plan.instance_type} in {region_plan.region}",
        instance_type=region_plan.instance_type,
        nodes=MinDesiredMax(min=floor, desired=floor, max=floor),
        volume_gib=region_plan.node_volume_gib,
        ami_type=AMI_TYPE,
        labels=dict(sorted(labels.items())),
        taints=node_taints(region_plan),
        update_max_unavailable=region_plan.node_update.max_unavailable,
        update_timeout_s=region_plan.node_update.timeout_s,
    )


def system_pool(region_plan: RegionPlan, fleet_name: str) -> PoolSpec:
    """The region's system pool: `RegionPlan.system_pool`, untainted."""
    sp = region_plan.system_pool
    labels = {f"{LABEL_PREFIX}/fleet": fleet_name, **pool_node_selector("system")}
    return PoolSpec(
        kind="system",
        region=region_plan.region,
        description=f"System nodes {sp.instance_type} in {region_plan.region}",
        instance_type=sp.instance_type,
        nodes=sp.nodes,
        volume_gib=sp.volume_gib,
        ami_type=SYSTEM_AMI_TYPE,
        labels=dict(sorted(labels.items())),
    )


def launch_template_args(
    pool: PoolSpec,
    cluster_security_group_id: pulumi.Input[str],
    tags: Mapping[str, str],
) -> dict[str, Any]:
    """Keyword arguments of the pool's `aws.ec2.LaunchTemplate`.

    No `image_id`, `instance_type`, `user_data`, `iam_instance_profile` or subnet: the
    managed node group sets those (EKS rejects a launch template that sets some of them).
    """
    propagated = dict(sorted(tags.items()))
    return {
        "description": pool.description,
        "update_default_version": True,
        "metadata_options": {
            "http_endpoint": "enabled",
            "http_tokens": "required",
            "http_put_response_hop_limit": IMDS_HOP_LIMIT,
            "instance_metadata_tags": "disabled",
        },
        "block_device_mappings": [
            {
                "device_name": ROOT_DEVICE_NAME,
                "ebs": {
                    "volume_size": pool.volume_gib,
                    "volume_type": "gp3",
                    "encrypted": "true",
                    "delete_on_termination": "true",
                },
            }
        ],
        "network_interfaces": [
            {
                "device_index": 0,
                "associate_public_ip_address": "false",
                "delete_on_termination": "true",
                "security_groups": [cluster_security_group_id],
            }
        ],
        "tag_specifications": [
            {"resource_type": kind, "tags": propagated}
            for kind in ("instance", "volume", "network-interface")
        ],
        "tags": propagated,
    }


def efa_launch_template_args(
    base: dict[str, Any],
    fabric: Fabric,
    cluster_security_group_id: pulumi.Input[str],
    placement_group: pulumi.Input[str] | None,
) -> dict[str, Any]:
    """A launch template's arguments (`launch_template_args`) for nodes whose traffic crosses
    to others: with EFA (`fabric.network_interfaces`) the node's EFA interfaces (every one in
    the cluster security group, which admits all traffic among its members, as EFA requires)
    and the NodeConfig lifting RLIMIT_MEMLOCK (`karpenter_manifests.efa_user_data`, base64); and the
    placement group of a replica across nodes."""
    out = dict(base)
    if fabric.network_interfaces:
        interfaces = []
        for n in fabric.network_interfaces:
            spec: dict[str, Any] = {
                "network_card_index": n.network_card_index,
                "device_index": n.device_index,
                "delete_on_termination": "true",
                "security_groups": [cluster_security_group_id],
            }
            if n.interface_type == "interface":
                spec["associate_public_ip_address"] = "false"
            else:
                spec["interface_type"] = n.interface_type
            interfaces.append(spec)
        out["network_interfaces"] = interfaces
        out["user_data"] = base64.b64encode(efa_user_data(fabric).encode()).decode()
    if placement_group is not None:
        out["placement"] = {"group_name": placement_group}
    return out


def node_group_args(
    pool: PoolSpec,
    *,
    cluster_name: pulumi.Input[str],
    node_role_arn: pulumi.Input[str],
    subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]],
    launch_template_id: pulumi.Input[str],
    launch_template_version: pulumi.Input[str],
    tags: Mapping[str, str],
    kubernetes_version: pulumi.Input[str] | None = None,
) -> dict[str, Any]:
    """Keyword arguments of the pool's `aws.eks.NodeGroup`.

    No `disk_size` (the launch template sizes the root volume; EKS rejects both), no
    `release_version` (the latest AMI of the version) and no `taints` when the pool has
    none. `version`: the cluster's, so the nodes follow a control-plane upgrade.
    """
    args: dict[str, Any] = {
        "cluster_name": cluster_name,
        "node_role_arn": node_role_arn,
        "subnet_ids": subnet_ids,
        "ami_type": pool.ami_type,
        "capacity_type": "ON_DEMAND",
        "instance_types": [pool.instance_type],
        "scaling_config": {
            "min_size": pool.nodes.min,
            "desired_size": pool.nodes.desired,
            "max_size": pool.nodes.max,
        },
        "update_config": {"max_unavailable": pool.update_max_unavailable},
        "node_repair_config": {"enabled": True},
        "labels": dict(pool.labels),
        "launch_template": {"id": launch_template_id, "version": launch_template_version},
        "tags": dict(sorted(tags.items())),
    }
    if kubernetes_version is not None:
        args["version"] = kubernetes_version
    if pool.taints:
        args["taints"] = [dict(t) for t in pool.taints]
    return args


@dataclass(frozen=True)
class NodePoolArgs:
    """What a NodePool needs; every number comes from `pool` (see `gpu_pool`, `system_pool`).

    pool: the pool's instance type, nodes, volume, AMI type, labels and taints.
    cluster_name: name of the EKS cluster the nodes join.
    cluster_security_group_id: the security group EKS created for the cluster. The
        launch template's network interface carries it (EKS adds it only when a launch
        template names no security group), so nodes and control plane can talk.
    node_role_arn: IAM role of the nodes (see InferenceCluster.node_role).
    subnet_ids: private subnets for the nodes; never public ones. For the GPU pool only
        those in zones that offer the instance type (InferenceCluster.gpu_subnet_ids).
    fleet_name: the FleetPlan's name, for tags.
    tags: extra AWS tags for the node group and the instances, volumes and ENIs it launches.
    depends_on: resources the node group must wait for, e.g. the node role's policy
        attachments (nodes cannot join a cluster before their role may) and the VPC CNI
        add-on (nodes start with network policy enforcement on).
    """

    pool: PoolSpec
    cluster_name: pulumi.Input[str]
    cluster_security_group_id: pulumi.Input[str]
    node_role_arn: pulumi.Input[str]
    subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    fleet_name: str
    tags: Mapping[str, str] = field(default_factory=dict)
    depends_on: Sequence[pulumi.Resource] = ()
    kubernetes_version: pulumi.Input[str] | None = None
    """The cluster's version (`aws.eks.Cluster.version`): the nodes follow the control plane."""
    fabric: Fabric | None = None
    """A region whose GPU nodes carry traffic between them: with EFA the launch template adds
    the EFA interfaces and the NodeConfig (`efa_launch_template_args`)."""
    placement_group: pulumi.Input[str] | None = None
    """A replica across nodes: the cluster placement group every node joins."""


class NodePool(pulumi.ComponentResource):
    """A pool of a region's nodes: a launch template and an EKS managed node group.

    Children: `launch_template` (`{name}-lt`) and `node_group` (`{name}`).
    """

    launch_template: aws.ec2.LaunchTemplate
    node_group: aws.eks.NodeGroup

    def __init__(
        self, name: str, args: NodePoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:NodePool", name, None, opts)
        pool = args.pool
        tags = {
            **args.tags,
            f"{LABEL_PREFIX}/fleet": args.fleet_name,
            f"{LABEL_PREFIX}/region": pool.region,
            POOL_LABEL: pool.kind,
        }

        template = launch_template_args(pool, args.cluster_security_group_id, tags)
        if args.fabric is not None:
            template = efa_launch_template_args(
                template, args.fabric, args.cluster_security_group_id, args.placement_group
            )
        self.launch_template = aws.ec2.LaunchTemplate(
            f"{name}-lt", **template, opts=pulumi.ResourceOptions(parent=self)
        )
        self.node_group = aws.eks.NodeGroup(
            name,
            **node_group_args(
                pool,
                cluster_name=args.cluster_name,
                node_role_arn=args.node_role_arn,
                subnet_ids=args.subnet_ids,
                launch_template_id=self.launch_template.id,
                launch_template_version=self.launch_template.latest_version.apply(str),
                tags=tags,
                kubernetes_version=args.kubernetes_version,
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=list(args.depends_on),
                ignore_changes=[DESIRED_SIZE_PATH],
                custom_timeouts=pulumi.CustomTimeouts(update=f"{pool.update_timeout_s}s")
                if pool.update_timeout_s
                else None,
            ),
        )
        self.register_outputs(
            {
                "node_group_name": self.node_group.node_group_name,
                "launch_template_id": self.launch_template.id,
            }
        )
