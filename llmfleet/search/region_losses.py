"""What each region must carry when regions are lost, before any instance is chosen.

For every allowed set of lost regions the peak is re-routed as the routing policy would
(latency: a lost region's users go to the nearest survivor, `catalog.geo`; failover:
everyone goes to the secondary when the primary is lost). A region's worst load depends
only on the plan, so the search prices each candidate with the replicas it needs to survive
a loss (`raise_replicas`), and stage 4 (`fleetplan.resilience`) reports the same figures."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from pydantic import Field

from llmfleet.catalog import geo
from llmfleet.data import Data, MinDesiredMax
from llmfleet.plan.schema import CapacityPlan


class Absorption(Data):
    lost: str
    absorbed_by: str
    requests_per_s: float = Field(description="The lost region's peak re-routed.")
    distance_km: float | None = Field(description="Between the two regions (latency routing).")





def loss_sets(plan: CapacityPlan) -> list[tuple[str, ...]]:
    """Every set of 1..survive_region_losses lost regions, in plan order."""
    names = [r.name for r in plan.regions]
    return [c for k in range(1, plan.survive_region_losses + 1) for c in combinations(names, k)]


def primary(plan: CapacityPlan) -> str | None:
    if plan.routing.policy != "failover":
        return None
    return plan.routing.primary or plan.regions[0].name


def reroute(plan: CapacityPlan, lost: Sequence[str]) -> tuple[dict[str, float], list[Absorption]]:
    """Peak requests/s per surviving region after `lost` drop out, and who absorbed whom."""
    peak = plan.traffic.peak_requests_per_s
    share = {r.name: r.traffic_share for r in plan.regions}
    survivors = [r.name for r in plan.regions if r.name not in lost]
    load = {s: peak * share[s] for s in survivors}
    moved: list[Absorption] = []
    first = primary(plan)
    for gone in (r.name for r in plan.regions if r.name in lost):
        if share[gone] == 0 or not survivors:
            continue
        if first is not None:
            to, km = survivors[0], None
        else:
            to = geo.nearest(gone, survivors)
            km = round(geo.distance_km(gone, to), 0)
        load[to] += peak * share[gone]
        moved.append(
            Absorption(
                lost=gone,
                absorbed_by=to,
                requests_per_s=round(peak * share[gone], 4),
                distance_km=km,
            )
        )
    return load, moved


@dataclass(frozen=True)
class LossDemand:
    """The most a region carries in any loss, and what it keeps warm for it."""

    worst_rps: float  # its peak plus the most it absorbs
    warm_rps: float  # its peak plus routing.warm_share of what it absorbs
    worst_lost: tuple[str, ...]  # () when it absorbs nothing


def loss_demands(plan: CapacityPlan) -> dict[str, LossDemand]:
    lost_sets = loss_sets(plan)
    scenarios = [reroute(plan, lost)[0] for lost in lost_sets]
    out: dict[str, LossDemand] = {}
    for region in plan.regions:
        own = plan.traffic.peak_requests_per_s * region.traffic_share
        worst, warm = own, own
        worst_lost: tuple[str, ...] = ()
        for load, lost in zip(scenarios, lost_sets, strict=True):
            if region.name in load and load[region.name] > worst + 1e-9:
                worst, worst_lost = load[region.name], lost
                warm = max(warm, own + plan.routing.warm_share * (load[region.name] - own))
        out[region.name] = LossDemand(worst, warm, worst_lost)
    return out


def replicas_at_limit(load_rps: float, requests_per_s_per_replica: float) -> int:
    """Replicas a load needs at this rate per replica (in a loss: the rate a replica
    carries once the headroom is spent, `ReplicaSizing.loss_requests_per_s`)."""
    return max(1, math.ceil(load_rps / requests_per_s_per_replica - 1e-9))


def raise_replicas(
    replicas: MinDesiredMax, loss_requests_per_s: float, load: LossDemand
) -> MinDesiredMax:
    """`replicas` (sized for the region's own trough and peak) with the warm floor for its
    worst loss under min and desired, and the whole worst load under max, each replica at
    the rate it carries in a loss."""
    if not load.worst_lost:
        return replicas
    warm = replicas_at_limit(load.warm_rps, loss_requests_per_s)
    needed = replicas_at_limit(load.worst_rps, loss_requests_per_s)
    return MinDesiredMax(
        min=max(replicas.min, warm),
        desired=max(replicas.desired, warm),
        max=max(replicas.max, needed, warm),
    )



