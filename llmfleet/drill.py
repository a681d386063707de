"""The failure drill: lose regions, re-route their users as the routing policy would, and
check every survivor against the SLO at the peak.

Per survivor: its load against the capacity of its max replicas at the rate a replica carries in a
loss (`ReplicaRecord.loss_requests_per_s`: below the SLO-limit rate, where arrivals would wait for a
batch slot), the replicas it must reach, TTFT and ITL predicted at the load per replica
(`replica_record.slo_at` on the region's replica record), and whether the replicas already
running when the loss hits (`resilience.warm_at_peak`) carry it until new nodes join. The drill
passes when every survivor holds the SLO at the replicas it reaches and its warm replicas
suffice."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from llmfleet.catalog import geo
from llmfleet.errors import PlanError
from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan
from llmfleet.fleetplan.replica_record import slo_at
from llmfleet.fleetplan.resilience import warm_at_peak
from llmfleet.plan.model import resolve_model
from llmfleet.plan.schema import CapacityPlan
from llmfleet.plan.stacks import global_stack, region_stack, splits
from llmfleet.search.region_losses import Absorption, reroute


class SurvivorResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    region: str
    load_requests_per_s: float
    capacity_requests_per_s: float  # max replicas x the rate one carries in a loss
    replicas_must_reach: int
    replicas_max: int
    replicas_warm: int
    warm_floor_holds: bool
    ttft_ms: float | None  # None: overloaded, arrivals wait for a batch slot or forever
    itl_at_percentile_ms: float | None = Field(
        description="ITL at the SLO percentile as slo.itl defines it (None: overloaded)."
    )
    slo_holds: bool

    @computed_field  # type: ignore[prop-decorator]
    @property
    def itl_ms(self) -> float | None:
        """Alias of itl_at_percentile_ms (the key before #31; docs/cli.md#aliases)."""
        return self.itl_at_percentile_ms


class OperatorStep(BaseModel):
    """What an operator does with one stack while the regions are lost."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stack: str
    action: Literal["up", "none", "leave", "retire"]
    change: str
    command: str | None
class ReroutedUsers(BaseModel):
    """A lost region's users at the survivor that absorbs them: the TTFT they see is the
    survivor's plus the detour (`geo.first_token_detour_ms`: a new connection's TCP and TLS
    handshakes and the request, one round trip each over the great-circle distance)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lost: str
    absorbed_by: str
    round_trip_ms: float | None  # None: failover (the secondary's distance is not routed by)
    added_ttft_ms: float | None
    ttft_seen_ms: float | None  # None: the survivor is overloaded
    within_slo: bool | None


class DrillReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    stack_name: str
    lost: list[str]
    survive_region_losses: int
    absorptions: list[Absorption]
    survivors: list[SurvivorResult]
    slo_ttft_ms: float
    slo_itl_ms: float
    recovery_s: int | None
    passed: bool
    operator_commands: list[OperatorStep] = []
    rerouted: bool = True  # False: no global name (plan.dns), nothing moves the users
    rerouted_users: list[ReroutedUsers] = []


def parse_lost(plan: CapacityPlan, lose: str) -> list[str]:
    """`--lose` as region names of the plan: known, distinct, leaving a survivor."""
    names = [r.name for r in plan.regions]
    lost = [n.strip() for n in lose.split(",") if n.strip()]
    unknown = [n for n in lost if n not in names]
    if not lost or unknown:
        raise PlanError("--lose", lose, f"name regions of the plan: {', '.join(names)}")
    if len(set(lost)) != len(lost):
        raise PlanError("--lose", lose, "name each region once")
    if len(lost) >= len(names):
        raise PlanError("--lose", lose, f"leave at least one of {', '.join(names)} serving")
    return [n for n in names if n in lost]


def drill(
    plan: CapacityPlan,
    lost: Sequence[str],
    environment: str | None = None,
    fleet: FleetPlan | None = None,
) -> DrillReport:
    """`environment`: the stack name the plan is read from (default: the plan's name), which
    names the stacks in `operator_commands`; `fleet`: the plan's FleetPlan (built when not
    given). Every survivor is predicted from its replica record: the drill never searches."""
    fp = fleet or build_fleet_plan(plan)
    model = resolve_model(plan)
    load, moved = reroute(plan, lost)
    slo = plan.slo
    survivors = []
    for region in (r for r in plan.regions if r.name in load):
        rp = fp.region(region.name)
        record = rp.replica
        capacity = record.loss_requests_per_s
        rps = load[region.name]
        must = max(1, math.ceil(rps / capacity - 1e-9))
        reach = min(must, rp.replicas.max)
        per_replica = rps / reach
        ttft_ms = itl_ms = None
        pre, split = record.prefill, rp.disaggregation
        per_prefill = rps / split.prefill.replicas.max if split else 0.0
        prefill_fits = pre is None or per_prefill <= pre.capacity_requests_per_s * (1 + 1e-9)
        if per_replica <= capacity * (1 + 1e-9) and prefill_fits:
            # disaggregated: its prefill pool at its ceiling too
            point, pair = slo_at(record, plan, model, per_replica, per_prefill)
            ttft_s = pair.ttft_at() if pair else point.ttft_at()
            ttft_ms, itl_ms = ttft_s * 1000, point.itl_s(plan.slo.itl) * 1000
        holds = ttft_ms is not None and ttft_ms <= slo.ttft_ms and (itl_ms or 0) <= slo.itl_ms
        warm = warm_at_peak(plan, rp)
        survivors.append(
            SurvivorResult(
                region=region.name,
                load_requests_per_s=round(rps, 3),
                capacity_requests_per_s=round(rp.replicas.max * capacity, 3),
                replicas_must_reach=must,
                replicas_max=rp.replicas.max,
                replicas_warm=warm,
                warm_floor_holds=warm >= must,
                ttft_ms=None if ttft_ms is None else round(ttft_ms, 1),
                itl_at_percentile_ms=None if itl_ms is None else round(itl_ms, 2),
                slo_holds=holds,
            )
        )
    scenario = next((s for s in fp.resilience.scenarios if s.lost == list(lost)), None)
    recovery = scenario.recovery_s if scenario else None
    if recovery is None and fp.resilience.recovery is not None:
        rec = fp.resilience.recovery
        short = any(not s.warm_floor_holds for s in survivors)
        recovery = rec.detection_s + rec.ttl_s + (rec.cold_start_s if short else 0)
    env = environment or plan.name
    order = [r for r in fp.rollout.order if r in load]
    by_region = {s.region: s for s in survivors}
    rerouted = plan.dns is not None
    seen = [_seen(a, survivors, slo.ttft_ms) for a in moved]
    return DrillReport(
        stack_name=plan.name,
        lost=list(lost),
        survive_region_losses=plan.survive_region_losses,
        absorptions=moved,
        survivors=survivors,
        slo_ttft_ms=slo.ttft_ms,
        slo_itl_ms=slo.itl_ms,
        recovery_s=recovery,
        passed=rerouted and all(s.slo_holds and s.warm_floor_holds for s in survivors),
        operator_commands=operator_steps(plan, env, list(lost), [by_region[r] for r in order]),
        rerouted=rerouted,
        rerouted_users=seen,
    )


def _seen(a: Absorption, survivors: list[SurvivorResult], slo_ttft_ms: float) -> ReroutedUsers:
    """The TTFT a lost region's users see at the survivor absorbing them."""
    ttft = next(s.ttft_ms for s in survivors if s.region == a.absorbed_by)
    rtt = added = None
    if a.distance_km is not None:
        rtt = round(geo.round_trip_ms(a.lost, a.absorbed_by), 1)
        added = round(geo.first_token_detour_ms(a.lost, a.absorbed_by), 1)
    total = None if ttft is None else round(ttft + (added or 0.0), 1)
    return ReroutedUsers(
        lost=a.lost,
        absorbed_by=a.absorbed_by,
        round_trip_ms=rtt,
        added_ttft_ms=added,
        ttft_seen_ms=total,
        within_slo=None if total is None else total <= slo_ttft_ms,
    )


ROUTE53_HOME = "us-east-1"
"""Route53's control plane (record changes, zone lookups) is served from us-east-1."""


def operator_steps(
    plan: CapacityPlan,
    env: str,
    lost: list[str],
    survivors: list[SurvivorResult],
) -> list[OperatorStep]:
    """Per stack, what to run while `lost` is down: each survivor's own stack (it reads
    nothing of a lost region), in rollout order; the lost regions' and the global stack
    left alone."""
    if not splits(plan):
        return []
    steps = []
    warm = plan.routing.warm_share
    route53_note = ""
    if plan.dns is not None and plan.dns.zone_id is None and ROUTE53_HOME in lost:
        route53_note = (
            f" (it looks the zone {plan.dns.zone_name} up in Route53, whose control plane is "
            f"in {ROUTE53_HOME}: set dns.zone_id to skip that call)"
        )
    if len(lost) > plan.survive_region_losses:
        fix = f"routing.survive_region_losses: {len(lost)} (now {plan.survive_region_losses})"
    else:
        fix = "more capacity (traffic.peak_requests_per_s or headroom)"
    for s in survivors:
        stack = region_stack(env, s.region)
        up = f"pulumi up -s {stack}"
        if s.replicas_must_reach > s.replicas_max:
            steps.append(OperatorStep(
                stack=stack, action="up", command=up,
                change=f"its max of {s.replicas_max} replicas cannot reach the "
                f"{s.replicas_must_reach} its {s.load_requests_per_s:g} req/s need: the plan "
                f"does not carry this loss; give it {fix} in stacks/Pulumi.{env}.yaml, "
                f"`llmfleet drill` again, then {up}",
            ))
        elif not s.warm_floor_holds and warm < 1:
            steps.append(OperatorStep(
                stack=stack, action="up", command=up,
                change=f"warm {s.replicas_warm} of the {s.replicas_must_reach} replicas its "
                f"{s.load_requests_per_s:g} req/s need; KEDA adds the rest after a cold start. "
                f"To hold them warm while the loss lasts: routing.warm_share: 1.0 (now "
                f"{warm:g}) in stacks/Pulumi.{env}.yaml, `llmfleet diff` (the same instance "
                f"type?), then {up}",
            ))
        elif not s.warm_floor_holds:
            steps.append(OperatorStep(
                stack=stack, action="none", command=None,
                change=f"warm {s.replicas_warm} of the {s.replicas_must_reach} replicas its "
                f"{s.load_requests_per_s:g} req/s need; KEDA adds the rest within its max of "
                f"{s.replicas_max} after a cold start (warm_share is already 1: no stack "
                "change makes it sooner)",
            ))
        else:
            steps.append(OperatorStep(
                stack=stack, action="none", command=None,
                change=f"no change: its {s.replicas_warm} warm replicas carry "
                f"{s.load_requests_per_s:g} req/s; for any fix meanwhile, {up} touches "
                f"{s.region} only{route53_note}",
            ))
    for region in lost:
        steps.append(OperatorStep(
            stack=region_stack(env, region), action="leave", command=None,
            change=f"{region} is lost: no `pulumi up` or `refresh` of this stack until it is "
            "back; no other stack touches its resources",
        ))
    for r in plan.regions:
        if r.retire and r.name not in lost:
            steps.append(OperatorStep(
                stack=region_stack(env, r.name), action="retire",
                command=f"llmfleet rollout --stack {env}",
                change=f"{r.name} is retiring (regions[].retire): the global stack first "
                f"(Route53 stops routing to it), then pulumi up -s {region_stack(env, r.name)} "
                f"(deletion protection off), then pulumi destroy -s "
                f"{region_stack(env, r.name)}; `llmfleet rollout` prints every step",
            ))
    if plan.dns is not None:
        steps.append(OperatorStep(
            stack=global_stack(env), action="leave", command=None,
            change=f"Route53's health checks already route {', '.join(lost)}'s users to the "
            "survivors; nothing here needs an `up` (its Route53 changes go through "
            "us-east-1's control plane)",
        ))
    return steps


def drill_text(report: DrillReport) -> str:
    lines = [
        f"Drill {report.stack_name}: lose {', '.join(report.lost)} (the plan survives "
        f"{report.survive_region_losses} loss(es))"
    ]
    for a in report.absorptions:
        far = f", {a.distance_km:,.0f} km away" if a.distance_km is not None else ""
        lines.append(f"  {a.lost}'s {a.requests_per_s:g} req/s go to {a.absorbed_by}{far}")
    for s in report.survivors:
        if s.ttft_ms is None:
            pred = "overloaded: more load than its max replicas carry inside the SLO"
        else:
            pred = (
                f"TTFT {s.ttft_ms:.0f}/{report.slo_ttft_ms:g} ms, ITL "
                f"{s.itl_ms:.1f}/{report.slo_itl_ms:g} ms"
            )
        lines.append(
            f"  {s.region}: load {s.load_requests_per_s:g} of {s.capacity_requests_per_s:g} "
            f"req/s; must reach {s.replicas_must_reach} replicas (max {s.replicas_max}); {pred}; "
            f"warm {s.replicas_warm} replicas: "
            + ("holds until new nodes join" if s.warm_floor_holds else "SHORT, cold start needed")
            + ("" if s.slo_holds else "; SLO BREAKS")
        )
    for u in report.rerouted_users:
        if not report.rerouted or u.added_ttft_ms is None or u.ttft_seen_ms is None:
            continue
        over = "" if u.within_slo else f", over the {report.slo_ttft_ms:g} ms SLO"
        lines.append(
            f"  {u.lost}'s users at {u.absorbed_by} see TTFT about {u.ttft_seen_ms:.0f} ms: "
            f"+{u.added_ttft_ms:.0f} ms for a new connection's TCP and TLS handshakes and the "
            f"request ({geo.HANDSHAKE_ROUND_TRIPS + 1} round trips of {u.round_trip_ms:.0f} ms "
            f"at fibre speed){over}"
        )
    if report.recovery_s is not None:
        lines.append(f"  recovery: about {report.recovery_s} s until the survivors serve them")
    else:
        lines.append("  recovery: no global name (plan.dns): nothing re-routes the users")
    if report.operator_commands:
        lines.append(
            f"  operator, while {', '.join(report.lost)} "
            f"{'is' if len(report.lost) == 1 else 'are'} lost (a stack per region: nothing "
            "below touches a lost region):"
        )
        for step in report.operator_commands:
            verb = {"up": "run", "none": "keep", "leave": "leave", "retire": "retire"}[step.action]
            lines.append(f"    {verb} {step.stack}: {step.change}")
    if not report.rerouted:
        lines.append(
            f"FAIL: not re-routed: {', '.join(report.lost)}'s users are not moved to a survivor "
            "without a global name; add plan.dns"
        )
    elif report.passed:
        slow = [u.lost for u in report.rerouted_users if u.within_slo is False]
        lines.append(
            "PASS: the SLO holds"
            + (
                f" at the servers, where vLLM measures TTFT; with the detour {', '.join(slow)}'s"
                " users wait longer (above)"
                if slow
                else ""
            )
        )
    else:
        lines.append("FAIL: the SLO breaks")
    return "\n".join(lines) + "\n"
