"""GpuNodePool: one EKS managed node group of GPU nodes for a region, sized by the FleetPlan.

The node group runs the EKS-optimised AL2023 NVIDIA AMI (`ami_type`, so the launch template
sets no image and EKS keeps merging its own bootstrap user data), on-demand, with the
instance type and min/desired/max nodes of the region's `RegionPlan`. Every node is
labelled and tainted `nvidia.com/gpu=true:NoSchedule` so only pods that tolerate the GPU
taint (the vLLM replicas, the NVIDIA device plugin) land on it.

The launch template carries what the node group API cannot: IMDSv2 with hop limit 2 (pods
behind the node's network namespace need the second hop), an encrypted gp3 root volume
sized for the image and the model weights, and a primary network interface without a
public IP that keeps the EKS cluster security group.

After creation the cluster autoscaler owns `desired_size`: `pulumi up` sets it once and
then ignores drift in it, so a deploy never scales a busy fleet back to the plan's number.
Min and max stay under Pulumi's control.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from llmfleet import serving
from llmfleet.fleet import RegionPlan

AMI_TYPE = "AL2023_x86_64_NVIDIA"
"""EKS-optimised Amazon Linux 2023 with the NVIDIA driver and container toolkit."""
ROOT_DEVICE_NAME = "/dev/xvda"
"""Root device of the AL2023 EKS AMIs; a mapping on another name adds a second volume."""
GPU_TAINT_KEY = serving.GPU_TAINT_KEY
LABEL_PREFIX = serving.NODE_LABEL_PREFIX
IMDS_HOP_LIMIT = 2
DESIRED_SIZE_PATH = "scalingConfig.desiredSize"
"""Engine property path (wire names) of the node group's desired size, for ignore_changes."""


@dataclass(frozen=True)
class GpuNodePoolArgs:
    """What a GpuNodePool needs; every number comes from `region_plan`.

    region_plan: the region's decisions: instance type, nodes (min/desired/max), GPU,
        root volume size.
    cluster_name: name of the EKS cluster the nodes join.
    cluster_security_group_id: the security group EKS created for the cluster. The
        launch template's network interface carries it (EKS adds it only when a launch
        template names no security group), so nodes and control plane can talk.
    node_role_arn: IAM role of the nodes (see InferenceCluster.node_role).
    subnet_ids: private subnets for the nodes; never public ones.
    fleet_name: the FleetPlan's name, for labels and tags.
    tags: extra AWS tags for the node group and the instances, volumes and ENIs it launches.
    depends_on: resources the node group must wait for, e.g. the node role's policy
        attachments (nodes cannot join a cluster before their role may).
    """

    region_plan: RegionPlan
    cluster_name: pulumi.Input[str]
    cluster_security_group_id: pulumi.Input[str]
    node_role_arn: pulumi.Input[str]
    subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    fleet_name: str
    tags: Mapping[str, str] = field(default_factory=dict)
    depends_on: Sequence[pulumi.Resource] = ()


def node_labels(region_plan: RegionPlan, fleet_name: str) -> dict[str, str]:
    """Kubernetes labels of every node in the pool (sorted keys): the core's
    `serving.node_labels`, the same function that gives the vLLM pods their nodeSelector."""
    return serving.node_labels(
        fleet_name, region_plan.gpu, region_plan.instance_type, region_plan.gpus_per_node
    )


def node_taints() -> list[dict[str, str]]:
    """Only pods that tolerate nvidia.com/gpu may schedule on a GPU node."""
    return [{"key": GPU_TAINT_KEY, "value": serving.GPU_TAINT_VALUE, "effect": "NO_SCHEDULE"}]


def launch_template_args(
    region_plan: RegionPlan,
    cluster_security_group_id: pulumi.Input[str],
    tags: Mapping[str, str],
) -> dict[str, Any]:
    """Keyword arguments of the node pool's `aws.ec2.LaunchTemplate`.

    No `image_id`, `instance_type`, `user_data`, `iam_instance_profile` or subnet: the
    managed node group sets those (EKS rejects a launch template that sets some of them).
    """
    propagated = dict(sorted(tags.items()))
    return {
        "description": f"GPU nodes {region_plan.instance_type} in {region_plan.region}",
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
                    "volume_size": region_plan.node_volume_gib,
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


def node_group_args(
    region_plan: RegionPlan,
    *,
    cluster_name: pulumi.Input[str],
    node_role_arn: pulumi.Input[str],
    subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]],
    launch_template_id: pulumi.Input[str],
    launch_template_version: pulumi.Input[str],
    fleet_name: str,
    tags: Mapping[str, str],
) -> dict[str, Any]:
    """Keyword arguments of the pool's `aws.eks.NodeGroup`.

    No `disk_size` (the launch template sizes the root volume; EKS rejects both) and no
    `version`/`release_version` (the node group follows the cluster's version).
    """
    nodes = region_plan.nodes
    return {
        "cluster_name": cluster_name,
        "node_role_arn": node_role_arn,
        "subnet_ids": subnet_ids,
        "ami_type": AMI_TYPE,
        "capacity_type": "ON_DEMAND",
        "instance_types": [region_plan.instance_type],
        "scaling_config": {
            "min_size": nodes.min,
            "desired_size": nodes.desired,
            "max_size": nodes.max,
        },
        "update_config": {"max_unavailable": 1},
        "labels": node_labels(region_plan, fleet_name),
        "taints": node_taints(),
        "launch_template": {"id": launch_template_id, "version": launch_template_version},
        "tags": dict(sorted(tags.items())),
    }


class GpuNodePool(pulumi.ComponentResource):
    """A region's GPU nodes: a launch template and an EKS managed node group.

    Children: `launch_template` (`{name}-lt`) and `node_group` (`{name}`).
    """

    launch_template: aws.ec2.LaunchTemplate
    node_group: aws.eks.NodeGroup

    def __init__(
        self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:GpuNodePool", name, None, opts)
        plan = args.region_plan
        tags = {
            **args.tags,
            f"{LABEL_PREFIX}/fleet": args.fleet_name,
            f"{LABEL_PREFIX}/region": plan.region,
        }

        self.launch_template = aws.ec2.LaunchTemplate(
            f"{name}-lt",
            **launch_template_args(plan, args.cluster_security_group_id, tags),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.node_group = aws.eks.NodeGroup(
            name,
            **node_group_args(
                plan,
                cluster_name=args.cluster_name,
                node_role_arn=args.node_role_arn,
                subnet_ids=args.subnet_ids,
                launch_template_id=self.launch_template.id,
                launch_template_version=self.launch_template.latest_version.apply(str),
                fleet_name=args.fleet_name,
                tags=tags,
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=list(args.depends_on),
                ignore_changes=[DESIRED_SIZE_PATH],
            ),
        )
        self.register_outputs(
            {
                "node_group_name": self.node_group.node_group_name,
                "launch_template_id": self.launch_template.id,
            }
        )
