"""`llmfleet preview` as text: the fleet in a few lines, then the resource tree."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from llmfleet.fleetplan.fleet import FleetPlan

KEY_INPUTS: dict[str, tuple[str, ...]] = {
    "pulumi:providers:aws": ("region",),
    "aws:ec2/vpc:Vpc": ("cidrBlock",),
    "aws:ec2/subnet:Subnet": ("availabilityZoneId", "cidrBlock", "mapPublicIpOnLaunch"),
    "aws:ec2/natGateway:NatGateway": ("connectivityType",),
    "aws:ec2/routeTable:RouteTable": ("routes",),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": ("policyArn",),
    "aws:kms/key:Key": ("enableKeyRotation", "deletionWindowInDays"),
    "aws:cloudwatch/logGroup:LogGroup": ("name", "retentionInDays"),
    "aws:eks/cluster:Cluster": (
        "version",
        "vpcConfig.endpointPrivateAccess",
        "vpcConfig.endpointPublicAccess",
        "encryptionConfig.resources",
        "enabledClusterLogTypes",
    ),
    "aws:ec2/launchTemplate:LaunchTemplate": (
        "metadataOptions.httpTokens",
        "metadataOptions.httpPutResponseHopLimit",
        "blockDeviceMappings.0.ebs",
        "networkInterfaces.0.associatePublicIpAddress",
    ),
    "aws:eks/addon:Addon": ("addonName", "configurationValues", "resolveConflictsOnUpdate"),
    "kubernetes:helm.sh/v3:Release": ("chart", "version", "namespace"),
    "kubernetes:apps/v1:Deployment": ("metadata.namespace", "metadata.name"),
    "kubernetes:keda.sh/v1alpha1:ScaledObject": ("spec.minReplicaCount", "spec.maxReplicaCount"),
    "kubernetes:karpenter.sh/v1:NodePool": ("spec.limits", "spec.disruption.consolidateAfter"),
    "aws:eks/nodeGroup:NodeGroup": (
        "instanceTypes",
        "amiType",
        "capacityType",
        "scalingConfig",
        "taints",
        "subnetIds",
    ),
}
"""Per resource type, the inputs format_preview shows (dotted paths; digits index lists)."""


def _dig(value: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, Mapping) and part in value:
            value = value[part]
        else:
            return None
    return value


def _compact(value: Any) -> str:
    return (
        value
        if isinstance(value, str)
        else json.dumps(value, sort_keys=True, separators=(",", ":"))
    )


def fleet_summary(fleet_plan: FleetPlan) -> list[str]:
    """The fleet, then per region its GPU nodes and system pool (min/desired/max)."""
    lines = [
        f"fleet {fleet_plan.name}: {fleet_plan.model.id} ({fleet_plan.model.precision}), "
        f"{len(fleet_plan.regions)} region(s), Kubernetes {fleet_plan.kubernetes_version}, "
        f"${fleet_plan.billed_monthly_cost_usd:,.2f}/month at desired nodes "
        f"(${fleet_plan.billed_monthly_cost_usd_at_trough:,.2f} at the trough)"
    ]
    for r in fleet_plan.regions:
        lines.append(
            f"  {r.region}: {r.instance_type} ({r.gpus_per_node} x {r.gpu}), "
            f"TP {r.tensor_parallel_size}, "
            f"nodes {r.nodes.min}/{r.nodes.desired}/{r.nodes.max}, "
            f"replicas {r.replicas.min}/{r.replicas.desired}/{r.replicas.max} (min/desired/max), "
            f"${r.billed_monthly_cost_usd:,.2f}/month"
        )
        sp, cap = r.system_pool, r.capacity
        lines.append(
            f"    GPU nodes in zone IDs {', '.join(r.node_zone_ids)} of the cluster's "
            f"{', '.join(r.cluster_zone_ids)}: floor {cap.floor_nodes} node(s) "
            f"({cap.purchase}), Karpenter up to {cap.ceiling_nodes} (nvidia.com/gpu <= "
            f"{cap.karpenter_gpu_limit}); system pool {sp.instance_type}, "
            f"nodes {sp.nodes.min}/{sp.nodes.desired}/{sp.nodes.max}"
            + ("" if sp.priced else " (not priced)")
        )
    return lines


def format_preview(resources: list[dict[str, Any]], fleet_plan: FleetPlan) -> str:
    """A fleet summary per region, then the resource tree grouped by parent, with the key
    inputs of each resource (KEY_INPUTS)."""

    def order(r: dict[str, Any]) -> tuple[int, str, str]:
        kind = 0 if r["type"].startswith("pulumi:providers:") else 2 if r["id"] is None else 1
        return kind, r["type"], r["name"]

    children: dict[tuple[str | None, str | None], list[dict[str, Any]]] = {}
    for r in resources:
        children.setdefault((r["parent_type"], r["parent"]), []).append(r)
    lines = fleet_summary(fleet_plan) + ["", f"{len(resources)} resources:"]

    def walk(parent: tuple[str | None, str | None], indent: str) -> None:
        kids = sorted(children.get(parent, []), key=order)
        for k, r in enumerate(kids):
            last = k == len(kids) - 1
            shown = [
                f"{path}={_compact(v)}"
                for path in KEY_INPUTS.get(r["type"], ())
                if (v := _dig(r["inputs"], path)) is not None
            ]
            lines.append(
                f"{indent}{'└─ ' if last else '├─ '}{r['type']}  {r['name']}"
                + (f"  {'  '.join(shown)}" if shown else "")
            )
            walk((r["type"], r["name"]), indent + ("   " if last else "│  "))

    walk((None, None), "")
    return "\n".join(lines) + "\n"


def format_findings(findings: list[Any]) -> str:
    """The checks' findings, one per line under a count (empty: none)."""
    if not findings:
        return ""
    lines = [f"{len(findings)} finding(s) where AWS or Kubernetes would fail (llmfleet preview "
             "checks):"]
    lines += [f"  [{f.check}] {f.resource}: {f.message}" for f in findings]
    return "\n".join(lines) + "\n"
