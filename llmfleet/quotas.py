"""A sanity limit on fleets larger than AWS sells in one region. The EC2 vCPU quotas a
fleet needs are per region in `RegionPlan.capacity.quotas` (capacity.py)."""

from __future__ import annotations

from llmfleet import fleet
from llmfleet.errors import PlanError

MAX_GPUS_PER_REGION = 20_000
"""Sanity limit: AWS describes its largest EC2 UltraClusters (P5) as up to 20,000 GPUs; a
plan asking more of one region has almost certainly mistyped its traffic."""


def check_fleet_size(regions: list[fleet.RegionPlan]) -> None:
    """Refuse a region beyond MAX_GPUS_PER_REGION: no account gets that capacity. (The vCPU
    quotas each region needs are `RegionPlan.capacity.quotas`.)"""
    for r in regions:
        gpus = r.nodes.max * r.gpus_per_node
        if gpus > MAX_GPUS_PER_REGION:
            raise PlanError(
                "traffic.peak_requests_per_s",
                r.peak_requests_per_s / r.traffic_share,
                f"sizes {gpus:,} GPUs in {r.region} ({r.nodes.max:,} x {r.instance_type}); "
                f"beyond {MAX_GPUS_PER_REGION:,} GPUs in one region (AWS's largest "
                "UltraClusters) no account gets the capacity. Check the units (fleet-wide "
                "requests per second), or split the traffic across more regions",
            )
