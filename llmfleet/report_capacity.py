"""The capacity part of `llmfleet plan`'s text: per region the floor and ceiling, zones by
ID, the cold start and the costs over the day, and the EC2 quotas to request first."""

from __future__ import annotations

from llmfleet.fleet import FleetPlan


def capacity_lines(fp: FleetPlan) -> list[str]:
    lines = ["", "Capacity (Karpenter above an always-on floor; zones by ID):"]
    for r in fp.regions:
        cap, cold, cost = r.capacity, r.cold_start, r.costs
        zones = ", ".join(cap.node_zone_ids) + (" (ONE ZONE ONLY)" if cap.single_zone else "")
        lines += [
            f"  {r.region}: {cap.purchase}; floor {cap.floor_nodes} node(s), ceiling "
            f"{cap.ceiling_nodes} (Karpenter nvidia.com/gpu <= {cap.karpenter_gpu_limit}); "
            f"GPU zones {zones}",
            f"    cold start {cold.total_s:.0f} s (node {cold.node_s:.0f} s, container "
            f"{cold.container_s:.0f} s; startup probe {cold.startup_budget_s} s); weights "
            f"{cold.weights_uri}",
            f"    $/month: GPUs {cost.gpu_peak:,.0f} at peak, {cost.gpu_trough:,.0f} at trough, "
            f"{cost.gpu_day_profile:,.0f} over the day; all-in {cost.total_day_profile:,.0f}"
            + (
                f" = ${cost.usd_per_million_output_tokens:.2f} per million output tokens"
                if cost.usd_per_million_output_tokens is not None
                else " (no traffic of its own: a standby)"
            ),
        ]
    lines += ["", "Service quotas to request before `pulumi up` (EC2, per region):"]
    for r in fp.regions:
        for q in r.capacity.quotas:
            lines.append(
                f"  {r.region}: {q.quota_name} ({q.quota_code}) >= {q.vcpus_needed:,} vCPUs"
            )
        if not r.capacity.quotas:
            lines.append(f"  {r.region}: none counted in vCPUs ({r.capacity.purchase})")
    return lines
