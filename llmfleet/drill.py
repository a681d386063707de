"""The failure drill: lose regions, re-route their users as the routing policy would, and
check every survivor against the SLO at the peak.

Per survivor: its load against the capacity of its max replicas at the SLO-limit rate, the
replicas it must reach, TTFT and ITL predicted at the load per replica (`sizing.predict_at`
on the region's chosen operating point), and whether the replicas already running when the
loss hits (`resilience.warm_at_peak`) carry it until new nodes join. The drill passes when
every survivor holds the SLO at the replicas it reaches and its warm replicas suffice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from llmfleet.catalog.constants import fitted
from llmfleet.errors import PlanError
from llmfleet.fleetplan.fleet import build_fleet_plan, sizing_constants
from llmfleet.fleetplan.resilience import warm_at_peak
from llmfleet.plan.model import resolve_model
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.disagg import disaggregated_at
from llmfleet.search.optimizer import choose_region
from llmfleet.search.region_losses import Absorption, reroute
from llmfleet.search.replica_slo import itl_percentile_s, predict_at


class SurvivorResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    region: str
    load_requests_per_s: float
    capacity_requests_per_s: float  # max replicas x the SLO-limit rate of one
    replicas_must_reach: int
    replicas_max: int
    replicas_warm: int
    warm_floor_holds: bool
    ttft_ms: float | None  # None: overloaded, the queue grows without bound
    itl_ms: float | None
    slo_holds: bool


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


def drill(plan: CapacityPlan, lost: Sequence[str]) -> DrillReport:
    fp = build_fleet_plan(plan)
    consts = sizing_constants(plan, fitted())
    model = resolve_model(plan)
    load, moved = reroute(plan, lost)
    slo = plan.slo
    survivors = []
    for region in (r for r in plan.regions if r.name in load):
        rp = fp.region(region.name)
        choice, _ = choose_region(plan, model, region, consts)
        capacity = choice.sizing.capacity_requests_per_s
        rps = load[region.name]
        must = max(1, math.ceil(rps / capacity - 1e-9))
        reach = min(must, rp.replicas.max)
        per_replica = rps / reach
        ttft_ms = itl_ms = None
        pre = choice.prefill
        per_prefill = rps / pre.replicas.max if pre else 0.0
        prefill_fits = pre is None or per_prefill <= pre.capacity_requests_per_s * (1 + 1e-9)
        if per_replica <= capacity * (1 + 1e-9) and prefill_fits:
            sizing = choice.sizing
            if pre is not None:  # disaggregated: its prefill pool at its ceiling too
                itl_s, ttft_s = disaggregated_at(choice, per_replica, per_prefill)
                ttft_ms, itl_ms = ttft_s * 1000, itl_s * 1000
            else:
                steps, ttft_s = predict_at(
                    choice.step_model, plan, sizing.batch, sizing.chunk_tokens, per_replica
                )
                ttft_ms, itl_ms = ttft_s * 1000, itl_percentile_s(plan, steps) * 1000
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
                itl_ms=None if itl_ms is None else round(itl_ms, 2),
                slo_holds=holds,
            )
        )
    scenario = next((s for s in fp.resilience.scenarios if s.lost == list(lost)), None)
    recovery = scenario.recovery_s if scenario else None
    if recovery is None and fp.resilience.recovery is not None:
        rec = fp.resilience.recovery
        short = any(not s.warm_floor_holds for s in survivors)
        recovery = rec.detection_s + rec.ttl_s + (rec.cold_start_s if short else 0)
    return DrillReport(
        stack_name=plan.name,
        lost=list(lost),
        survive_region_losses=plan.survive_region_losses,
        absorptions=moved,
        survivors=survivors,
        slo_ttft_ms=slo.ttft_ms,
        slo_itl_ms=slo.itl_ms,
        recovery_s=recovery,
        passed=all(s.slo_holds and s.warm_floor_holds for s in survivors),
    )


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
            pred = "overloaded: more load than its max replicas carry at the SLO"
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
    if report.recovery_s is not None:
        lines.append(f"  recovery: about {report.recovery_s} s until the survivors serve them")
    else:
        lines.append("  recovery: no global name (plan.dns): nothing re-routes the users")
    lines.append("PASS: the SLO holds" if report.passed else "FAIL: the SLO breaks")
    return "\n".join(lines) + "\n"
