"""FleetPlan sections about capacity: how GPU nodes are bought, scaled and placed
(`NodeCapacity`), how long a cold start takes (`ColdStart`) and what the region costs over
a day (`Costs`). Plain data; `capacity`, `cold_start` and `costs` build them."""

from __future__ import annotations

from pydantic import Field

from llmfleet.data import Data


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


class ColdStartTerm(Data):
    name: str
    seconds: float
    source: str


class ColdStart(Data):
    """From a pending pod with no node to a ready replica."""

    weights_uri: str = Field(description="Where every pod streams the weights from.")
    load_format: str
    terms: list[ColdStartTerm]
    node_s: float = Field(description="Node launch and join: absent when a slot is free.")
    container_s: float = Field(
        description="Container start to ready: what the startup probe times."
    )
    total_s: float = Field(description="Node + image pull + container: the scale-up lead time.")
    startup_budget_s: int = Field(description="The startup probe's failures x period.")
    consolidate_after_s: int = Field(
        description="Karpenter waits this long before removing an empty node (>= total_s)."
    )
    growth_during_cold_start: float = Field(
        description="Traffic growth during one cold start, as a share of the peak."
    )
    headroom_carries_growth: bool


class Costs(Data):
    """Monthly USD (730 h) of one region: GPU nodes at the peak, the trough and over the day
    profile, and what runs beside them."""

    gpu_peak: float
    gpu_trough: float
    gpu_day_profile: float
    ebs_day_profile: float
    eks_control_plane: float
    nat_gateways: float
    nat_data: float
    total_day_profile: float
    output_tokens_per_month: float
    usd_per_million_output_tokens: float | None  # None: a standby without traffic
    assumptions: list[str]
