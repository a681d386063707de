"""What a sized fleet asks of the AWS account: On-Demand vCPU quotas per region, and a
sanity limit on fleets larger than AWS sells in one region.

EC2 limits running On-Demand instances per region by vCPUs of an instance family group
(Service Quotas, "Running On-Demand P instances" for p4d/p5/p6, "Running On-Demand G and VT
instances" for g5/g6/g6e); new accounts start far below one GPU node's vCPUs, so every plan
names what to request before `pulumi up`.
"""

from __future__ import annotations

from llmfleet import catalog, fleet
from llmfleet.errors import PlanError

QUOTA_BY_FAMILY = {
    "p": "Running On-Demand P instances",
    "g": "Running On-Demand G and VT instances",
}
MAX_GPUS_PER_REGION = 20_000
"""Sanity limit: AWS describes its largest EC2 UltraClusters (P5) as up to 20,000 GPUs; a
plan asking more of one region has almost certainly mistyped its traffic."""


def quota_name(instance_type: str) -> str:
    return QUOTA_BY_FAMILY.get(instance_type[0], "Running On-Demand Standard instances")


def quota_needs(regions: list[fleet.RegionPlan]) -> list[fleet.QuotaNeed]:
    """Per region, the vCPUs its GPU nodes need at their maximum; refuses a region beyond
    MAX_GPUS_PER_REGION."""
    needs = []
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
        vcpus = catalog.instance(r.instance_type).vcpus * r.nodes.max
        needs.append(
            fleet.QuotaNeed(
                region=r.region,
                quota=quota_name(r.instance_type),
                instance_type=r.instance_type,
                nodes=r.nodes.max,
                vcpus=vcpus,
            )
        )
    return needs
