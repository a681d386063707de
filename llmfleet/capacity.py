"""Capacity that exists: how a region's GPU nodes are bought (on-demand, an On-Demand
Capacity Reservation, Capacity Blocks for ML, or spot above an on-demand floor), where they
run (zone IDs), how far Karpenter may scale them, and the EC2 quotas that must allow it.

The floor (`floors.floors`) runs on an EKS managed node group of the GPU instance, which
holds its nodes whatever the pods do (a rollout or a crash loop never gives scarce P
capacity back). Karpenter's NodePool adds nodes above it up to the ceiling, the peak;
its `limits` stop it there. A static Karpenter NodePool (`replicas`) was not used for the
floor: in Karpenter 1.14 it is alpha behind the `staticCapacity` gate (off by default),
allows only `limits.nodes`, and one pool cannot both hold a floor and scale.
"""

from __future__ import annotations

import csv
from functools import cache

from llmfleet.catalog import DATA_DIR
from llmfleet.choice import Choice
from llmfleet.errors import PlanError
from llmfleet.fleet import MinDesiredMax
from llmfleet.fleet_capacity import ColdStart, NodeCapacity, Quota
from llmfleet.floors import Floors
from llmfleet.plan_capacity import CapacityPurchase

KARPENTER_CAPACITY_TYPES = {
    "on_demand": ["on-demand"],
    # Karpenter fills the reservation first, then falls back to on-demand (tasks/odcrs.md).
    "reservation": ["reserved", "on-demand"],
    "capacity_block": ["reserved", "on-demand"],
    "spot": ["spot", "on-demand"],
}
CAPACITY_BLOCK_LIMIT_NOTE = (
    "Capacity Blocks are not limited by the vCPU quota but per block (up to 64 instances, "
    "256 across blocks; EC2 User Guide, Capacity Blocks for ML)"
)


@cache
def capacity_block_offerings() -> frozenset[tuple[str, str]]:
    """(instance type, region) pairs that sell Capacity Blocks (capacity_blocks.csv)."""
    with open(DATA_DIR / "capacity_blocks.csv", newline="") as f:
        return frozenset((r["instance_type"], r["region"]) for r in csv.DictReader(f))


@cache
def _quota_rows() -> tuple[dict[str, str], ...]:
    with open(DATA_DIR / "service_quotas.csv", newline="") as f:
        return tuple(csv.DictReader(f))


def quota(instance_type: str, purchase: str, vcpus: int) -> Quota | None:
    """The vCPU quota for launching `instance_type` this way (P and G families only)."""
    letter = instance_type[0]
    for row in _quota_rows():
        if row["instance_family_letter"] == letter and row["purchase"] == purchase:
            return Quota(
                quota_code=row["quota_code"],
                quota_name=row["quota_name"],
                vcpus_needed=vcpus,
                source=row["source"],
            )
    return None


def check_purchase(choice: Choice, field: str) -> None:
    """A reservation for another instance type, Capacity Blocks where none are sold, or spot
    under a p99 SLO without an on-demand floor: PlanError with what would work."""
    cap: CapacityPurchase = choice.region.capacity
    chosen = choice.instance.instance_type
    region = choice.region.name
    if cap.instance_type is not None and cap.instance_type != chosen:
        raise PlanError(
            f"{field}.capacity.instance_type",
            cap.instance_type,
            f"the plan chose {chosen} in {region}; reserve {chosen}, or set "
            f"allowed.instance_types: [{cap.instance_type}] so the plan sizes on it",
        )
    if cap.type == "capacity_block" and (chosen, region) not in capacity_block_offerings():
        where = sorted(r for i, r in capacity_block_offerings() if i == chosen)
        sold = f"sold for {chosen} in {', '.join(where)}" if where else f"not sold for {chosen}"
        raise PlanError(
            f"{field}.capacity.type",
            cap.type,
            f"Capacity Blocks are {sold}, not in {region}; use reservation or on_demand here",
        )
    if cap.type == "spot" and not cap.on_demand_floor and choice.plan.slo.percentile >= 99:
        raise PlanError(
            f"{field}.capacity.on_demand_floor",
            cap.on_demand_floor,
            f"a p{choice.plan.slo.percentile:g} SLO on spot alone fails when EC2 reclaims the "
            "nodes; set on_demand_floor: true (the floor stays on-demand) or type: on_demand",
        )


def replicas_filling_slots(choice: Choice, floor: Floors) -> MinDesiredMax:
    """KEDA's bounds: the floor, the peak, and up to every slot of the ceiling's nodes (a
    slot TP leaves free on a node paid for is used rather than idle)."""
    slots = choice.nodes.max * choice.replicas_per_node
    return MinDesiredMax(min=floor.replicas, desired=choice.replicas.desired, max=slots)


def price(choice: Choice) -> tuple[float, str]:
    """Price per burst node: the purchase's own, never the on-demand list for spot or a
    Capacity Block (no sourced price for those; the plan gives it)."""
    cap = choice.region.capacity
    if cap.usd_per_hour is not None:
        return cap.usd_per_hour, f"{cap.type} price given in the plan (regions[].capacity)"
    if cap.type == "reservation":
        return choice.price_usd_per_hour, "On-Demand Capacity Reservation: the on-demand rate"
    return choice.price_usd_per_hour, choice.price_source


def quotas(choice: Choice, floor_nodes: int) -> tuple[list[Quota], list[str]]:
    cap, inst = choice.region.capacity, choice.instance
    ceiling = choice.nodes.max
    on_demand_nodes = {"spot": floor_nodes, "capacity_block": 0}.get(cap.type, ceiling)
    wanted = [quota(inst.instance_type, "on_demand", on_demand_nodes * inst.vcpus)]
    if cap.type == "spot":
        wanted.append(quota(inst.instance_type, "spot", (ceiling - floor_nodes) * inst.vcpus))
    notes = [CAPACITY_BLOCK_LIMIT_NOTE] if cap.type == "capacity_block" else []
    return [q for q in wanted if q is not None and q.vcpus_needed > 0], notes


def disruption_note(choice: Choice, cold: ColdStart, max_unavailable: int) -> str:
    """Does the PodDisruptionBudget fit a node replacement: with `max_unavailable` replicas
    down for one cold start, do the rest still carry the peak inside the SLO?"""
    left = choice.replicas.desired - max_unavailable
    if choice.peak_requests_per_s <= 0:  # a failover standby serves nothing until a loss
        return (
            f"PodDisruptionBudget (maxUnavailable {max_unavailable}): the region serves no "
            "traffic of its own; a node replacement only delays a failover"
        )
    share = left * choice.sizing.capacity_rps / choice.peak_requests_per_s
    fits = "fits" if share >= 1 else "does NOT fit at the peak (schedule disruptions off-peak)"
    return (
        f"PodDisruptionBudget (maxUnavailable {max_unavailable}) {fits}: during a node "
        f"replacement ({cold.total_s:.0f} s, one cold start) {left} replica(s) carry "
        f"{share:.0%} of the peak inside the SLO"
    )


def node_capacity(
    choice: Choice,
    floor: Floors,
    node_zone_ids: list[str],
    field: str,
    cold: ColdStart,
    pdb_max_unavailable: int,
) -> NodeCapacity:
    check_purchase(choice, field)
    cap, inst = choice.region.capacity, choice.instance
    reserved = cap.type in ("reservation", "capacity_block")
    floor_nodes = 0 if reserved else floor.nodes
    ceiling = choice.nodes.max
    free_slots = ceiling * choice.replicas_per_node - choice.replicas.desired
    usd, source = price(choice)
    quota_list, notes = quotas(choice, floor_nodes)
    notes.append(f"floor: {floor.reason}")
    notes.append(disruption_note(choice, cold, pdb_max_unavailable))
    if reserved:
        notes.append(
            f"the reservation ({cap.reserved_nodes} node(s)) holds the floor: no floor node group"
        )
    if len(node_zone_ids) == 1:
        notes.append(
            f"{inst.instance_type} is offered in one zone of {choice.region.name} only "
            f"({node_zone_ids[0]}): a zone outage takes every GPU node of the region"
        )
    return NodeCapacity(
        purchase=cap.type,
        karpenter_capacity_types=KARPENTER_CAPACITY_TYPES[cap.type],
        reservation_ids=list(cap.reservation_ids),
        floor_nodes=floor_nodes,
        ceiling_nodes=ceiling,
        karpenter_gpu_limit=(ceiling - floor_nodes) * inst.gpu_count,
        node_zone_ids=node_zone_ids,
        single_zone=len(node_zone_ids) == 1,
        free_slots_at_ceiling=free_slots,
        max_surge=1 if free_slots > 0 else 0,
        price_usd_per_hour=usd,
        price_source=source,
        quotas=quota_list,
        notes=notes,
    )
