"""The GPU NodePool and EC2NodeClass of a region (Karpenter 1.14.1: karpenter.sh/v1 and
karpenter.k8s.aws/v1), built from the RegionPlan: rendered to `rendered/<env>/<region>/`
and deployed unchanged by `components.karpenter.Karpenter`.

- Requirements: the chosen instance type, the purchase's capacity types and the GPU zone
  IDs (`topology.k8s.aws/zone-id`, the same physical zones in every account).
- `limits: nvidia.com/gpu`: the GPUs above the floor up to the ceiling (the floor runs on
  the managed node group, see `llmfleet.capacity`).
- Disruption: only empty nodes go (`WhenEmpty`; a vLLM pod moved costs a full cold
  start), after `consolidateAfter` >= the predicted cold start (a node whose pod is still
  pulling or loading is not empty), one node at a time; the pods carry
  `karpenter.sh/do-not-disrupt`; `expireAfter: Never`, because an expiry drain ignores
  budgets and do-not-disrupt (kubernetes-sigs/karpenter#3185): AMI updates come as drift
  when the pinned alias changes, through the same budgets.
- EC2NodeClass: the AL2023 alias pinned to the newest EKS AMI release with an AL2023
  NVIDIA image for the plan's Kubernetes version (catalog/eks_amis.csv; Karpenter picks its
  NVIDIA variant for GPU instances), so a Kubernetes upgrade moves the alias with it;
  IMDSv2 with hop limit 1, an encrypted gp3 root volume of `node_volume_gib`, no public IP,
  subnets and security groups by the cluster's discovery tag, the reservations' ids when the
  region buys reserved capacity.
- Where a replica spans nodes (`RegionPlan.multi_node`, Karpenter >= 1.11): the cluster
  placement group by name (`placementGroupSelector`); where traffic crosses nodes over EFA
  (`RegionPlan.fabric`, transport efa) the node's EFA interfaces (`networkInterfaces`: ENA
  primary, an EFA-only interface per network card) and a NodeConfig that lifts the
  containers' RLIMIT_MEMLOCK (`userData`, `efa_user_data`); the NodePool's one zone is the
  fabric's."""

from __future__ import annotations

from typing import Any

import yaml

from llmfleet.catalog.kubernetes import ami_release, chart
from llmfleet.errors import PlanError
from llmfleet.fleetplan.fabric import Fabric
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan

KARPENTER_VERSION = chart("karpenter").version
"""Chart and controller (catalog/charts.csv, with its supported Kubernetes versions)."""


def ami_alias(kubernetes_version: str) -> str:
    """The AL2023 alias pinned to the newest catalog AMI release for the version: `@latest`
    would roll every GPU node on each AMI release, and a release without an image for the
    cluster's version would leave Karpenter with none (after a control-plane upgrade)."""
    release = ami_release(kubernetes_version)
    if release is None:
        raise PlanError("kubernetes_version", kubernetes_version,
                        "no AMI release in llmfleet/catalog/eks_amis.csv covers it")
    return release.alias

DISCOVERY_TAG = "karpenter.sh/discovery"
ROOT_DEVICE = "/dev/xvda"
IMDS_HOP_LIMIT = 1
"""As the managed node groups: no pod needs the instance role (EKS Pod Identity gives every
pod its own credentials), so the metadata service answers the node's namespace only."""
POOL_LABEL = "llmfleet.io/pool"


def cluster_name(fleet_name: str, region: str) -> str:
    """The EKS cluster's physical name (components.fleet names it so)."""
    return f"{fleet_name}-{region}"


def node_role_name(fleet_name: str, region: str) -> str:
    """IAM role of Karpenter's nodes (its own, with an EKS access entry)."""
    return f"{cluster_name(fleet_name, region)}-karpenter-node"


def resource_name(fleet: FleetPlan) -> str:
    return f"{fleet.name}-gpu"


def _duration(seconds: int) -> str:
    return f"{seconds // 60}m" if seconds % 60 == 0 else f"{seconds}s"


def nodepool(fleet: FleetPlan, region: RegionPlan) -> dict[str, Any]:
    cap, cold = region.capacity, region.cold_start
    labels = {**region.workload.node_labels, POOL_LABEL: "gpu"}
    requirements = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In",
         "values": [region.instance_type]},
        {"key": "karpenter.sh/capacity-type", "operator": "In",
         "values": cap.karpenter_capacity_types},
        {"key": "topology.k8s.aws/zone-id", "operator": "In", "values": cap.node_zone_ids},
    ]  # fmt: skip
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": resource_name(fleet), "labels": dict(region.workload.labels)},
        "spec": {
            "template": {
                "metadata": {"labels": dict(sorted(labels.items()))},
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": resource_name(fleet),
                    },
                    "requirements": requirements,
                    "taints": [
                        {
                            "key": region.workload.gpu_taint_key,
                            "value": region.workload.gpu_taint_value,
                            "effect": "NoSchedule",
                        }
                    ],
                    "expireAfter": "Never",
                    # A drained node waits for its pods' own grace (the longest request's drain).
                    "terminationGracePeriod": _duration(
                        max(cold.consolidate_after_s, region.serving.termination_grace_s)
                    ),
                },
            },
            "limits": {"nvidia.com/gpu": str(cap.karpenter_gpu_limit)},
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": _duration(cold.consolidate_after_s),
                "budgets": [{"nodes": "1"}],
            },
        },
    }


def ec2nodeclass(fleet: FleetPlan, region: RegionPlan) -> dict[str, Any]:
    cluster = cluster_name(fleet.name, region.region)
    discovery = [{"tags": {DISCOVERY_TAG: cluster}}]
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": ami_alias(fleet.kubernetes_version)}],
        "role": node_role_name(fleet.name, region.region),
        "subnetSelectorTerms": discovery,
        "securityGroupSelectorTerms": discovery,
        "associatePublicIPAddress": False,
        "metadataOptions": {
            "httpEndpoint": "enabled",
            "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": IMDS_HOP_LIMIT,
            "httpTokens": "required",
        },
        "blockDeviceMappings": [
            {
                "deviceName": ROOT_DEVICE,
                "rootVolume": True,
                "ebs": {
                    "volumeSize": f"{region.node_volume_gib}Gi",
                    "volumeType": "gp3",
                    "encrypted": True,
                    "deleteOnTermination": True,
                },
            }
        ],
        "tags": {"llmfleet.io/fleet": fleet.name, POOL_LABEL: "gpu"},
    }
    if region.capacity.reservation_ids:
        spec["capacityReservationSelectorTerms"] = [
            {"id": rid} for rid in region.capacity.reservation_ids
        ]
    if region.multi_node is not None and region.multi_node.placement_group is not None:
        spec["placementGroupSelector"] = {"name": region.multi_node.placement_group}
    fabric = region.fabric
    if fabric is not None and fabric.network_interfaces:
        spec["networkInterfaces"] = [
            {
                "networkCardIndex": n.network_card_index,
                "deviceIndex": n.device_index,
                "interfaceType": n.interface_type,
            }
            for n in fabric.network_interfaces
        ]
        spec["userData"] = efa_user_data(fabric)
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": resource_name(fleet), "labels": dict(region.workload.labels)},
        "spec": spec,
    }


USER_DATA_BOUNDARY = "LLMFLEET"


def efa_user_data(fabric: Fabric) -> str:
    """The EFA nodes' user data: a MIME part with an AL2023 NodeConfig whose containerd base
    runtime spec lifts RLIMIT_MEMLOCK for every container (libfabric registers its buffers;
    a non-root process gains nothing from IPC_LOCK). EKS's managed node groups and Karpenter
    both merge a NodeConfig part with their own (awslabs/amazon-eks-ami nodeadm
    doc/examples.md, 'Modifying container RLIMITs')."""
    node_config = {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"containerd": {"baseRuntimeSpec": {"process": {
            "rlimits": fabric.memlock_rlimits
        }}}},
    }
    return (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{USER_DATA_BOUNDARY}"\n\n'
        f"--{USER_DATA_BOUNDARY}\n"
        "Content-Type: application/node.eks.aws\n\n"
        + yaml.safe_dump(node_config, sort_keys=True)
        + f"\n--{USER_DATA_BOUNDARY}--\n"
    )


def karpenter_manifests(fleet: FleetPlan, region: RegionPlan) -> dict[str, dict[str, Any]]:
    """File stem -> document, in apply order (the NodePool names the class)."""
    return {
        "karpenter-ec2nodeclass": ec2nodeclass(fleet, region),
        "karpenter-nodepool": nodepool(fleet, region),
    }
