"""Capacity that exists: how a region's GPU nodes are bought (on-demand, an On-Demand
Capacity Reservation, Capacity Blocks for ML, or spot above an on-demand floor), which of
them always run (the floor), where they run (zone IDs), how far Karpenter may scale them,
the EC2 quotas that must allow it, and the system nodes beside them.

The floor runs on an EKS managed node group of the GPU instance, which holds its nodes
whatever the pods do (a rollout or a crash loop never gives scarce P capacity back).
Karpenter's NodePool adds nodes above it up to the ceiling, the peak; its `limits` stop it
there. A static Karpenter NodePool (`replicas`) was not used for the floor: in Karpenter
1.14 it is alpha behind the `staticCapacity` gate (off by default), allows only
`limits.nodes`, and one pool cannot both hold a floor and scale.

Zones are by ID: an ID (use1-az4) names the same physical zone in every account, a name
(us-east-1a) does not. The FleetPlan lists IDs; the deploy resolves them to the account's
names (`aws.get_availability_zones`) and places subnets by ID."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import Field

from llmfleet.catalog import hardware
from llmfleet.catalog.hardware import _quota_rows, capacity_block_offerings
from llmfleet.data import Data, MinDesiredMax
from llmfleet.errors import PlanError
from llmfleet.fleetplan.cold_start import ColdStart
from llmfleet.plan.regions import CapacityPurchase, Region
from llmfleet.search.choice import Choice
from llmfleet.search.replicas import LossSizing


class Quota(Data):
    """An EC2 service quota the region needs raised before `pulumi up`."""

    quota_code: str
    quota_name: str
    vcpus_needed: int = Field(description="vCPUs of the GPU ceiling bought this way.")
    source: str


class NodeCapacity(Data):
    """GPU nodes: an always-on floor (an EKS managed node group) and a Karpenter NodePool
    above it up to the ceiling."""

    purchase: str = Field(description="on_demand, reservation, capacity_block or spot.")
    karpenter_capacity_types: list[str] = Field(
        description="Values of karpenter.sh/capacity-type the NodePool may launch."
    )
    reservation_ids: list[str]
    floor_nodes: int = Field(
        description="Always-on GPU nodes in the managed node group (0: the reservation holds "
        "the floor)."
    )
    ceiling_nodes: int = Field(description="GPU nodes at the ceiling (floor + Karpenter).")
    karpenter_gpu_limit: int = Field(
        description="NodePool limits nvidia.com/gpu: (ceiling - floor) x GPUs per node."
    )
    node_zone_ids: list[str] = Field(description="Zone IDs GPU nodes may run in.")
    single_zone: bool = Field(description="The instance is offered in one zone only here.")
    free_slots_at_ceiling: int = Field(
        description="Replica slots left empty on the ceiling's nodes (TP leaves them)."
    )
    max_surge: int = Field(description="Surge pods a rollout may add (spare slots only).")
    price_usd_per_hour: float
    price_source: str
    quotas: list[Quota]
    notes: list[str]


class SystemPool(Data):
    """Untainted CPU nodes for cluster services (CoreDNS, KEDA, Prometheus, the operators)."""

    instance_type: str
    nodes: MinDesiredMax
    volume_gib: int
    priced: bool = Field(description="False: not in the price catalog, not in monthly_cost_usd.")
    reason: str


# Cluster services need somewhere untainted to run: two general-purpose nodes in two zones
# (KEDA and the Prometheus stack ask for about 2 vCPU and 4 GiB together; m6i.xlarge has
# 4 vCPU and 16 GiB). It is not a GPU instance, so the price catalog does not cover it.
SYSTEM_INSTANCE_TYPE = "m6i.xlarge"


SYSTEM_NODES = MinDesiredMax(min=2, desired=2, max=3)


SYSTEM_VOLUME_GIB = 50


def build_system_pool() -> SystemPool:
    return SystemPool(
        instance_type=SYSTEM_INSTANCE_TYPE,
        nodes=SYSTEM_NODES,
        volume_gib=SYSTEM_VOLUME_GIB,
        priced=False,
        reason="untainted nodes for CoreDNS, KEDA and the Prometheus stack, one per zone "
        "for availability; general-purpose instances are outside the GPU price catalog, "
        "so their cost is not in monthly_cost_usd",
    )


MIN_GPU_ZONES = 2
"""Serving must not hang on one data centre: two zones or more wherever offered."""
MAX_ZONES = 3
"""A new VPC's private subnets are three quarters of its CIDR, one per zone."""
MIN_CLUSTER_ZONES = 2
"""EKS requires subnets in at least two availability zones."""


def node_zone_ids(region: Region, field: str, instance_type: str) -> list[str]:
    """The GPU zones: the plan's `node_zone_ids` (each must offer the instance), or every
    zone offering it, up to three. PlanError names the field and the zones that would do."""
    offered = hardware.zone_ids(region.name, instance_type)
    if region.node_zone_ids is None:
        return offered[:MAX_ZONES]
    for k, zone_id in enumerate(region.node_zone_ids):
        hardware.check_zone_id(region.name, zone_id, f"{field}.node_zone_ids[{k}]")
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
    others = [z for z in hardware.zone_ids(region) if z not in node_zone_ids]
    wanted = max(MIN_CLUSTER_ZONES, min(MAX_ZONES, len(node_zone_ids)))
    return (node_zone_ids + others)[:wanted]


@dataclass(frozen=True)
class AlwaysOn:
    replicas: int
    nodes: int
    reason: str


def build_always_on(choice: Choice, stage4: LossSizing | None = None) -> AlwaysOn:
    """The replicas that carry the region's trough rate with the plan's headroom (the
    optimizer's `replicas.min`), on as few nodes as hold them; or, when stage 4 raised that
    minimum to keep a lost region's share warm (`stage4`, already in `choice.replicas`), the
    warm floor, and the reason says so."""
    replicas = choice.replicas.min
    nodes = math.ceil(replicas / choice.replicas_per_node) * choice.nodes_per_replica
    if choice.prefill is not None:  # the prefill pool's floor runs beside the decode pool's
        nodes += choice.prefill.nodes.min
    trough = stage4.replicas_without_resilience["min"] if stage4 is not None else replicas
    if stage4 is not None and replicas > trough:
        reason = (
            f"stage 4 keeps {replicas} replica(s) warm, above the {trough} the trough "
            f"({choice.trough_requests_per_s:.2f} req/s) needs: with "
            f"{', '.join(stage4.worst_case_lost)} lost this region carries "
            f"{stage4.worst_load_requests_per_s:g} req/s, and routing.warm_share "
            f"{choice.plan.routing.warm_share:.0%} of the extra is held warm; on {nodes} node(s)"
        )
    else:
        reason = (
            f"the trough ({choice.trough_requests_per_s:.2f} req/s) needs {replicas} "
            f"replica(s) with {choice.plan.headroom:.0%} headroom, on {nodes} node(s)"
        )
    return AlwaysOn(replicas=replicas, nodes=nodes, reason=reason)


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


def replicas_filling_slots(choice: Choice, floor: AlwaysOn) -> MinDesiredMax:
    """KEDA's bounds: the floor, the peak, and up to every slot of the ceiling's nodes (a
    slot TP leaves free on a node paid for is used rather than idle)."""
    slots = choice.serving_nodes.max * choice.replicas_per_node // choice.nodes_per_replica
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
    share = left * choice.sizing.capacity_requests_per_s / choice.peak_requests_per_s
    fits = "fits" if share >= 1 else "does NOT fit at the peak (schedule disruptions off-peak)"
    whole = (
        f" (a replica spans {choice.nodes_per_replica} nodes: one pod disrupted restarts its "
        "whole LeaderWorkerSet group, and the budget counts pods, so one group at a time)"
        if choice.nodes_per_replica > 1
        else ""
    )
    return (
        f"PodDisruptionBudget (maxUnavailable {max_unavailable}) {fits}: during a node "
        f"replacement ({cold.total_s:.0f} s, one cold start) {left} replica(s) carry "
        f"{share:.0%} of the peak inside the SLO{whole}"
    )


def build_node_capacity(
    choice: Choice,
    floor: AlwaysOn,
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
    serving = choice.serving_nodes.max
    slots = serving * choice.replicas_per_node // choice.nodes_per_replica
    free_slots = slots - choice.replicas.desired
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


MAX_GPUS_PER_REGION = 20_000
"""Sanity limit: AWS describes its largest EC2 UltraClusters (P5) as up to 20,000 GPUs; a
plan asking more of one region has almost certainly mistyped its traffic."""


def check_region_size(region: str, instance_type: str, gpus_per_node: int, ceiling_nodes: int,
                      fleet_peak_requests_per_s: float) -> None:
    """Refuse a region beyond MAX_GPUS_PER_REGION: no account gets that capacity. (The vCPU
    quotas each region needs are `NodeCapacity.quotas`.)"""
    gpus = ceiling_nodes * gpus_per_node
    if gpus > MAX_GPUS_PER_REGION:
        raise PlanError(
            "traffic.peak_requests_per_s",
            fleet_peak_requests_per_s,
            f"sizes {gpus:,} GPUs in {region} ({ceiling_nodes:,} x {instance_type}); "
            f"beyond {MAX_GPUS_PER_REGION:,} GPUs in one region (AWS's largest "
            "UltraClusters) no account gets the capacity. Check the units (fleet-wide "
            "requests per second), or split the traffic across more regions",
        )
