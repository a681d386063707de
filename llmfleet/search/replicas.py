"""How many replicas and nodes a region runs: its trough (min) and peak (desired, max) with
the plan's headroom, raised for the region losses it must survive (`region_losses`), packed
onto nodes; and what stage 4 did to each chosen region (`LossSizing`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import Field

from llmfleet.data import Data, MinDesiredMax
from llmfleet.plan.regions import Region
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.choice import Choice
from llmfleet.search.cost import on_demand_monthly_usd
from llmfleet.search.region_losses import (
    LossDemand,
    loss_demands,
    raise_replicas,
    replicas_at_limit,
)


def replicas_for(
    plan: CapacityPlan, region: Region, capacity_requests_per_s: float
) -> MinDesiredMax:
    """Replicas that carry the region's trough (min) and peak (desired = max) with headroom."""
    usable = capacity_requests_per_s * (1 - plan.headroom)
    peak = plan.traffic.peak_requests_per_s * region.traffic_share
    trough = plan.traffic.trough_requests_per_s * region.traffic_share
    desired = max(1, math.ceil(peak / usable - 1e-9))
    low = max(1, math.ceil(trough / usable - 1e-9))
    return MinDesiredMax(min=low, desired=desired, max=desired)


def deployed_replicas(
    plan: CapacityPlan,
    region: Region,
    capacity_requests_per_s: float,
    loads: dict[str, LossDemand] | None = None,
    loss_requests_per_s: float | None = None,
) -> MinDesiredMax:
    """Replicas for the region's trough and peak, raised for the worst region loss it must
    survive (stage 4) at `loss_requests_per_s` a replica (default: the SLO-limit rate, a
    lower bound on the replicas): every candidate, lever and risk figure is priced as it
    would run."""
    load = (loads if loads is not None else loss_demands(plan))[region.name]
    in_loss = capacity_requests_per_s if loss_requests_per_s is None else loss_requests_per_s
    return raise_replicas(replicas_for(plan, region, capacity_requests_per_s), in_loss, load)


def nodes_for(
    replicas: MinDesiredMax, per_node: int, nodes_per_replica: int = 1
) -> MinDesiredMax:
    """Nodes that host these replicas: `per_node` to a node, or `nodes_per_replica` whole
    nodes each when a replica spans nodes."""

    def n(r: int) -> int:
        return math.ceil(r / per_node) * nodes_per_replica

    return MinDesiredMax(min=n(replicas.min), desired=n(replicas.desired), max=n(replicas.max))


class LossSizing(Data):
    region: str
    capacity_requests_per_s_per_replica: float = Field(description="At the SLO limit.")
    loss_requests_per_s_per_replica: float = Field(
        description="What a replica carries in a loss: its SLO-limit rate, at which an "
        "arrival already finds every slot taken no more often than 1 - p/100 (perf.slots)."
    )
    worst_load_requests_per_s: float = Field(description="Its peak plus the most it absorbs.")
    worst_case_lost: list[str]
    replicas_needed: int = Field(description="Replicas at the loss rate for the worst load.")
    warm_replicas: int = Field(description="The warm floor: replicas.min keeps at least these.")
    replicas_without_resilience: dict[str, int]
    nodes_without_resilience: dict[str, int]
    monthly_cost_usd_without_resilience: float


def loss_sizing(plan: CapacityPlan, choices: Sequence[Choice]) -> list[LossSizing]:
    """What stage 4 did to each chosen region: the search priced every candidate with the
    replicas it needs to survive a loss (region_losses.raise_replicas), so the choice carries
    the raised counts; this records them beside the counts without resilience."""
    loads = loss_demands(plan)
    floors: list[LossSizing] = []
    for c in choices:
        load, cap = loads[c.region.name], c.sizing.capacity_requests_per_s
        in_loss = c.sizing.loss_requests_per_s
        own = replicas_for(plan, c.region, cap)
        own_nodes = nodes_for(own, c.replicas_per_node, c.nodes_per_replica)
        if c.prefill is not None:  # disaggregated: the prefill pool's nodes too
            pre = c.prefill
            gpn = c.instance.gpu_count
            pre_nodes = nodes_for(
                replicas_for(plan, c.region, pre.capacity_requests_per_s),
                pre.shape.replicas_per_node(gpn), pre.shape.nodes_per_replica(gpn),
            )
            own_nodes = MinDesiredMax(
                min=own_nodes.min + pre_nodes.min,
                desired=own_nodes.desired + pre_nodes.desired,
                max=own_nodes.max + pre_nodes.max,
            )
        floors.append(
            LossSizing(
                region=c.region.name,
                capacity_requests_per_s_per_replica=round(cap, 3),
                loss_requests_per_s_per_replica=round(in_loss, 3),
                worst_load_requests_per_s=round(load.worst_rps, 4),
                worst_case_lost=list(load.worst_lost),
                replicas_needed=replicas_at_limit(load.worst_rps, in_loss),
                warm_replicas=c.replicas.min,
                replicas_without_resilience=own.model_dump(),
                nodes_without_resilience=own_nodes.model_dump(),
                monthly_cost_usd_without_resilience=round(
                    on_demand_monthly_usd(own_nodes.desired, c.price_usd_per_hour), 2
                ),
            )
        )
    return floors
