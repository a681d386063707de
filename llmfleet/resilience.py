"""Sizing that survives a lost region: for every allowed set of lost regions, re-route the
peak as the routing policy would, and raise each survivor's warm floor (replicas.min, and
with it the node floor) so it carries its share plus what it absorbs at the SLO.

Latency routing sends a lost region's users to the nearest surviving region (`geo`);
failover sends everyone to the secondary when the primary is lost. A region's floor carries
its own peak plus `warm_share` of the worst load it absorbs, at the replica's SLO-limit
rate (the plan's headroom is spent during a loss); its max covers all of the worst load.
Recovery = health-check interval x failure threshold + TTL, plus a cold start wherever a
floor is short. The choice of instance is the region's own (cheapest for its share); only
its replica counts change.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from itertools import combinations

from llmfleet import fleet, geo
from llmfleet.choice import Choice
from llmfleet.optimizer import nodes_for
from llmfleet.plan import CapacityPlan
from llmfleet.routing_plan import Absorption, LossScenario, Recovery, RegionFloor, Resilience

ALIAS_TTL_S = 60
"""Route53 answers an alias to an Elastic Load Balancer with the load balancer's TTL, 60 s
(Route53 developer guide, "Choosing between alias and non-alias records")."""
CNAME_TTL_S = 60


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


def _replicas(load_rps: float, capacity_rps: float) -> int:
    return max(1, math.ceil(load_rps / capacity_rps - 1e-9))


def warm_at_peak(plan: CapacityPlan, region: fleet.RegionPlan) -> int:
    """Replicas running when a loss hits at the peak: the warm floor, or what the region
    runs for its own peak (the KEDA target keeps the headroom), whichever is more."""
    usable = region.predicted.requests_per_s * (1 - plan.headroom)
    return max(region.replicas.min, _replicas(region.peak_requests_per_s, usable))


def replicas_for_load(load_rps: float, region: fleet.RegionPlan) -> int:
    """Replicas a load needs at the SLO-limit rate of one replica."""
    return _replicas(load_rps, region.predicted.requests_per_s)


def cold_start_s(region: fleet.RegionPlan) -> int:
    """Seconds a new replica takes to serve; the one place a cold-start figure is read."""
    return region.serving.startup_budget_s


def raise_floors(
    plan: CapacityPlan, choices: Sequence[Choice]
) -> tuple[list[Choice], list[RegionFloor]]:
    """Each choice with its replicas and nodes raised for the worst loss it survives."""
    raised: list[Choice] = []
    floors: list[RegionFloor] = []
    scenarios = [reroute(plan, lost) + (lost,) for lost in loss_sets(plan)]
    for c in choices:
        name, cap = c.region.name, c.sizing.capacity_rps
        own = c.peak_requests_per_s
        worst, warm_load = own, own
        worst_lost: tuple[str, ...] = ()
        for load, _, lost in scenarios:
            if name in load and load[name] > worst + 1e-9:
                worst, worst_lost = load[name], lost
                warm_load = max(warm_load, own + plan.routing.warm_share * (load[name] - own))
        needed = _replicas(worst, cap)
        warm = _replicas(warm_load, cap) if worst_lost else c.replicas.min
        r = c.replicas
        replicas = fleet.MinDesiredMax(
            min=max(r.min, warm), desired=max(r.desired, warm), max=max(r.max, needed, warm)
        )
        raised.append(
            dataclasses.replace(
                c, replicas=replicas, nodes=nodes_for(replicas, c.replicas_per_node)
            )
        )
        floors.append(
            RegionFloor(
                region=name,
                capacity_requests_per_s_per_replica=round(cap, 3),
                worst_load_requests_per_s=round(worst, 4),
                worst_case_lost=list(worst_lost),
                replicas_needed=needed,
                warm_replicas=replicas.min,
                replicas_without_resilience=r.model_dump(),
                nodes_without_resilience=c.nodes.model_dump(),
                monthly_cost_usd_without_resilience=round(c.monthly_cost_usd, 2),
            )
        )
    return raised, floors


def recovery(plan: CapacityPlan, regions: Sequence[fleet.RegionPlan]) -> Recovery | None:
    if plan.dns is None:
        return None
    dns = plan.dns
    ttl = ALIAS_TTL_S if dns.record_type == "alias" else (dns.ttl_s or CNAME_TTL_S)
    detection = dns.health_check_interval_s * dns.failure_threshold
    cold = max(cold_start_s(r) for r in regions)
    return Recovery(
        detection_s=detection,
        ttl_s=ttl,
        cold_start_s=cold,
        worst_s=detection + ttl,
        explanation=f"Route53 marks a region unhealthy after {dns.failure_threshold} failed "
        f"checks {dns.health_check_interval_s} s apart ({detection} s), then resolvers drop "
        f"its answer within the {ttl} s TTL; a survivor whose warm floor is short adds a "
        f"cold start (up to {cold} s, the pods' start-up budget) for the rest",
    )


def scenario(
    plan: CapacityPlan,
    lost: Sequence[str],
    regions: Sequence[fleet.RegionPlan],
    rec: Recovery | None,
) -> LossScenario:
    """One loss: the survivors' loads, and whether a warm floor falls short of one."""
    load, moved = reroute(plan, lost)
    by_name = {r.region: r for r in regions}
    short = any(
        warm_at_peak(plan, by_name[name]) < replicas_for_load(rps, by_name[name])
        for name, rps in load.items()
    )
    seconds = None
    if rec is not None:
        seconds = rec.detection_s + rec.ttl_s + (rec.cold_start_s if short else 0)
    return LossScenario(
        lost=list(lost),
        absorptions=moved,
        load_requests_per_s={k: round(v, 4) for k, v in load.items()},
        cold_start=short,
        recovery_s=seconds,
    )


def resilience(
    plan: CapacityPlan, regions: Sequence[fleet.RegionPlan], floors: Sequence[RegionFloor]
) -> Resilience:
    """The FleetPlan's resilience section, from the assembled regions and their floors."""
    rec = recovery(plan, regions)
    scenarios = [scenario(plan, lost, regions, rec) for lost in loss_sets(plan)]
    if rec is not None and scenarios:
        rec = rec.model_copy(update={"worst_s": max(s.recovery_s or 0 for s in scenarios)})
    flags = [
        f"{r.region}: every GPU node sits in one zone ({', '.join(r.capacity.node_zone_ids)}), "
        "the only one offering the instance there; a zone outage takes the whole region"
        for r in regions
        if r.capacity.single_zone
    ]
    if plan.dns is None and len(plan.regions) > 1:
        flags.append("no dns: nothing re-routes users when a region is lost")
    if plan.survive_region_losses == 0 and len(plan.regions) > 1:
        flags.append("survive_region_losses 0: a lost region's users get no capacity elsewhere")
    without = sum(f.monthly_cost_usd_without_resilience for f in floors)
    return Resilience(
        policy=plan.routing.policy,
        primary=primary(plan),
        survive_region_losses=plan.survive_region_losses,
        warm_share=plan.routing.warm_share,
        scenarios=scenarios,
        regions=list(floors),
        recovery=rec,
        monthly_cost_usd_without_resilience=round(without, 2),
        flags=flags,
        reasons=_reasons(plan, list(floors)),
    )


def _reasons(plan: CapacityPlan, floors: Sequence[RegionFloor]) -> list[str]:
    if plan.survive_region_losses == 0:
        return ["no region loss is planned for: every region is sized for its own share"]
    out = [
        f"every set of up to {plan.survive_region_losses} lost region(s) is re-routed "
        + (
            "to the nearest surviving region (latency routing)"
            if primary(plan) is None
            else f"to the secondary when the primary {primary(plan)} is lost (failover)"
        )
        + "; survivors carry the whole peak at the SLO-limit rate per replica (the headroom "
        "is spent during a loss)"
    ]
    for f in floors:
        if f.worst_case_lost:
            r = f.replicas_without_resilience
            out.append(
                f"{f.region}: worst load {f.worst_load_requests_per_s:g} req/s when "
                f"{', '.join(f.worst_case_lost)} is lost = {f.replicas_needed} replicas at "
                f"{f.capacity_requests_per_s_per_replica:g} req/s each; warm floor "
                f"{f.warm_replicas} (was min {r['min']}, desired {r['desired']})"
            )
    return out
