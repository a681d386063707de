"""Stage 4's section of the FleetPlan: every allowed set of lost regions re-routed
(`search.region_losses`), each survivor's warm floor (replicas.min, and with it the node
floor) carrying its share plus `warm_share` of what it absorbs with the plan's headroom
spent, each replica at the rate it carries in a loss (`Predicted.requests_per_s_in_loss`:
its SLO-limit rate, where max_num_seqs is already sized so that an arrival finds every slot
taken at most 1 - p of the time, `perf.slots`), its max covering all of the worst load, and
the recovery time.

The search already priced every candidate with those raised replicas, so a region's
instance is the cheapest that survives the loss, not the cheapest for its own share; this
module reports the floors beside the counts and cost without resilience. Recovery =
health-check interval x failure threshold + TTL, plus a cold start wherever a floor is short."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from llmfleet.data import Data
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.region_losses import Absorption, loss_sets, primary, replicas_at_limit, reroute
from llmfleet.search.replicas import LossSizing


class LossScenario(Data):
    lost: list[str]
    absorptions: list[Absorption]
    load_requests_per_s: dict[str, float] = Field(description="Per survivor, at the peak.")
    cold_start: bool = Field(description="A survivor's warm floor is short of its load.")
    recovery_s: int | None = Field(
        description="Detection + TTL (+ cold start when a warm floor is short); None "
        "without a global name: nothing re-routes."
    )


class Recovery(Data):
    detection_s: int = Field(description="Health-check interval x failure threshold.")
    below_capacity_detection_s: int | None = Field(
        default=None,
        description="A region with fewer healthy targets than its capacity check's floor "
        "(EntryPoint.capacity_check): the ALB's reporting plus the alarm's breaching minutes.",
    )
    ttl_s: int = Field(description="Resolvers may keep the old answer this long.")
    cold_start_s: int = Field(description="A pod's start-up budget, paid where a floor is short.")
    worst_s: int = Field(description="The slowest loss scenario's recovery.")
    explanation: str


class Resilience(Data):
    policy: str
    primary: str | None
    survive_region_losses: int
    warm_share: float
    scenarios: list[LossScenario]
    regions: list[LossSizing]
    recovery: Recovery | None
    monthly_cost_usd_without_resilience: float
    flags: list[str] = Field(description="What the plan's routing cannot protect against.")
    reasons: list[str]


ALIAS_TTL_S = 60
"""Route53 answers an alias to an Elastic Load Balancer with the load balancer's TTL, 60 s
(Route53 developer guide, "Choosing between alias and non-alias records")."""


CNAME_TTL_S = 60


def warm_at_peak(plan: CapacityPlan, region: RegionPlan) -> int:
    """Replicas running when a loss hits at the peak: the warm floor, or what the region
    runs for its own peak (the KEDA target keeps the headroom), whichever is more."""
    usable = region.predicted.requests_per_s * (1 - plan.headroom)
    return max(region.replicas.min, replicas_at_limit(region.peak_requests_per_s, usable))


def replicas_for_load(load_rps: float, region: RegionPlan) -> int:
    """Replicas a load needs in a loss, at the rate one replica carries there."""
    return replicas_at_limit(load_rps, region.predicted.requests_per_s_in_loss)


def cold_start_s(region: RegionPlan) -> int:
    """Seconds a new replica takes to serve; the one place a cold-start figure is read."""
    return region.cold_start.startup_budget_s


def recovery(plan: CapacityPlan, regions: Sequence[RegionPlan]) -> Recovery | None:
    """Detection reads the regions' own health checks (`EntryPoint.health_check`), the one
    home of the interval and threshold Route53 runs."""
    checks = [r.entry_point.health_check for r in regions if r.entry_point is not None]
    if plan.dns is None or not checks:
        return None
    dns, check = plan.dns, checks[0]
    capacity = [
        r.entry_point.capacity_check.detection_s
        for r in regions
        if r.entry_point is not None and r.entry_point.capacity_check is not None
    ]
    below = max(capacity) if capacity else None
    ttl = ALIAS_TTL_S if dns.record_type == "alias" else (dns.ttl_s or CNAME_TTL_S)
    detection = check.request_interval_s * check.failure_threshold
    cold = max(cold_start_s(r) for r in regions)
    return Recovery(
        detection_s=detection,
        below_capacity_detection_s=below,
        ttl_s=ttl,
        cold_start_s=cold,
        worst_s=detection + ttl,
        explanation=f"Route53 marks a region unhealthy after {check.failure_threshold} failed "
        f"checks {check.request_interval_s} s apart ({detection} s), then resolvers drop "
        f"its answer within the {ttl} s TTL; a survivor whose warm floor is short adds a "
        f"cold start (up to {cold} s, the pods' start-up budget) for the rest",
    )


def scenario(
    plan: CapacityPlan,
    lost: Sequence[str],
    regions: Sequence[RegionPlan],
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


def build_resilience(
    plan: CapacityPlan, regions: Sequence[RegionPlan], floors: Sequence[LossSizing]
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


def _reasons(plan: CapacityPlan, floors: Sequence[LossSizing]) -> list[str]:
    if plan.survive_region_losses == 0:
        return ["no region loss is planned for: every region is sized for its own share"]
    out = [
        f"every set of up to {plan.survive_region_losses} lost region(s) is re-routed "
        + (
            "to the nearest surviving region (latency routing)"
            if primary(plan) is None
            else f"to the secondary when the primary {primary(plan)} is lost (failover)"
        )
        + "; survivors carry the whole peak with the headroom spent, each replica at its "
        "SLO-limit rate, where an arrival finds every slot (max_num_seqs) taken no more often "
        f"than {1 - plan.slo.percentile / 100:.0%} of the time"
    ]
    for f in floors:
        if f.worst_case_lost:
            r = f.replicas_without_resilience
            out.append(
                f"{f.region}: worst load {f.worst_load_requests_per_s:g} req/s when "
                f"{', '.join(f.worst_case_lost)} is lost = {f.replicas_needed} replicas at "
                f"{f.loss_requests_per_s_per_replica:g} req/s each (SLO limit "
                f"{f.capacity_requests_per_s_per_replica:g}); warm floor "
                f"{f.warm_replicas} (was min {r['min']}, desired {r['desired']})"
            )
    return out
