"""GPU zones by zone ID: an ID (use1-az4) names the same physical zone in every account,
a name (us-east-1a) does not. The FleetPlan lists IDs; the deploy resolves them to the
account's names (`aws.get_availability_zones`) and places subnets by ID."""

from __future__ import annotations

from llmfleet import catalog
from llmfleet.errors import PlanError
from llmfleet.plan import Region

MIN_GPU_ZONES = 2
"""Serving must not hang on one data centre: two zones or more wherever offered."""
MAX_ZONES = 3
"""A new VPC's private subnets are three quarters of its CIDR, one per zone."""
MIN_CLUSTER_ZONES = 2
"""EKS requires subnets in at least two availability zones."""


def node_zone_ids(region: Region, field: str, instance_type: str) -> list[str]:
    """The GPU zones: the plan's `node_zone_ids` (each must offer the instance), or every
    zone offering it, up to three. PlanError names the field and the zones that would do."""
    offered = catalog.zone_ids(region.name, instance_type)
    if region.node_zone_ids is None:
        return offered[:MAX_ZONES]
    for k, zone_id in enumerate(region.node_zone_ids):
        catalog.check_zone_id(region.name, zone_id, f"{field}.node_zone_ids[{k}]")
        if zone_id not in offered:
            raise PlanError(
                f"{field}.node_zone_ids[{k}]",
                zone_id,
                f"{zone_id} does not offer {instance_type}; zones that do: {', '.join(offered)}",
            )
    chosen = list(dict.fromkeys(region.node_zone_ids))
    if len(chosen) > MAX_ZONES:
        raise PlanError(f"{field}.node_zone_ids", chosen, f"name at most {MAX_ZONES} zones")
    if len(chosen) < min(MIN_GPU_ZONES, len(offered)):
        raise PlanError(
            f"{field}.node_zone_ids",
            chosen,
            f"GPU nodes need {MIN_GPU_ZONES} zones where offered; {instance_type} is offered "
            f"in {', '.join(offered)}",
        )
    return chosen


def cluster_zone_ids(region: str, node_zone_ids: list[str]) -> list[str]:
    """The cluster's subnet zones: the GPU zones first, topped up with other zones of the
    region to 2 (EKS's minimum) or to as many GPU zones as there are (at most 3)."""
    others = [z for z in catalog.zone_ids(region) if z not in node_zone_ids]
    wanted = max(MIN_CLUSTER_ZONES, min(MAX_ZONES, len(node_zone_ids)))
    return (node_zone_ids + others)[:wanted]
