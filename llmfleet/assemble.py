"""Plan -> FleetPlan: the optimizer chooses per region, the section builders assemble.

`build_fleet_plan` is the one entry point the CLI, the renderer's callers and the Pulumi
program use; the same plan always gives the same FleetPlan.
"""

from __future__ import annotations

from pathlib import Path

from llmfleet import fleet
from llmfleet.advice import rules_of_thumb
from llmfleet.calibration import Constants
from llmfleet.calibration import load as load_constants
from llmfleet.entry_point import entry_point
from llmfleet.lever_report import lever_report
from llmfleet.memory import kv_dtype_bytes
from llmfleet.models import ResolvedModel, resolve_model
from llmfleet.optimizer import Sizer, choose_region
from llmfleet.plan import CapacityPlan
from llmfleet.plan_checks import check_plan
from llmfleet.quotas import check_fleet_size
from llmfleet.region_plan import region_plan
from llmfleet.resilience import region_floors, resilience
from llmfleet.routing_plan import RegionFloor
from llmfleet.stack import REPO_ROOT
from llmfleet.units import GIB


def sizing_constants(plan: CapacityPlan, consts: Constants) -> Constants:
    """`confidence: pessimistic` slows the GPU part of every vLLM step to the p90 of the
    calibration's held-out measured/predicted ITL ratio."""
    if plan.confidence != "pessimistic":
        return consts
    factors = dict(consts.engine_step_factor)
    factors["vllm"] = factors.get("vllm", 1.0) * max(1.0, consts.ratio("itl_ms", "p90"))
    return consts.model_copy(update={"engine_step_factor": factors})


def model_summary(
    plan: CapacityPlan, model: ResolvedModel, levers: fleet.ChosenLevers | None = None
) -> fleet.ModelSummary:
    """The model as served: the levers the first region chose (the plan's own values when
    none are given)."""
    arch = model.arch
    precision = levers.precision if levers else plan.model.precision
    kv = levers.kv_cache_dtype if levers else plan.model.kv_cache_dtype
    return fleet.ModelSummary(
        id=model.id,
        hf_repo=model.hf_repo,
        source=model.source,
        params_b=round(arch.total_params / 1e9, 3),
        active_params_b=round(arch.active_params / 1e9, 3),
        precision=precision,
        kv_cache_dtype=kv,
        weights_gib=round(arch.weight_bytes(precision) / GIB, 2),
        kv_bytes_per_token=arch.kv_bytes_per_token(kv_dtype_bytes(kv)),
    )


def build_fleet_plan(
    plan: CapacityPlan, consts: Constants | None = None, base_dir: Path = REPO_ROOT
) -> fleet.FleetPlan:
    check_plan(plan)
    base = consts or load_constants()
    consts = sizing_constants(plan, base)
    pessimistic = sizing_constants(plan.model_copy(update={"confidence": "pessimistic"}), base)
    model = resolve_model(plan, base_dir)
    sizer = Sizer(plan, model, consts)
    searched = [choose_region(plan, model, region, consts, sizer) for region in plan.regions]
    # Stage 4: the search sized each region to survive the losses it absorbs; record the
    # floors, then give each region its entry point.
    choices = [choice for choice, _ in searched]
    floors = region_floors(plan, choices)
    regions = [
        _with_routing(plan, region_plan(choice, alts, consts, pessimistic, floor), floor)
        for choice, (_, alts), floor in zip(choices, searched, floors, strict=True)
    ]
    check_fleet_size(regions)
    gpus = fleet.MinDesiredMax(
        min=sum(r.nodes.min * r.gpus_per_node for r in regions),
        desired=sum(r.nodes.desired * r.gpus_per_node for r in regions),
        max=sum(r.nodes.max * r.gpus_per_node for r in regions),
    )
    return fleet.FleetPlan(
        name=plan.name,
        model=model_summary(plan, model, regions[0].levers),
        slo=plan.slo,
        traffic=plan.traffic,
        headroom=plan.headroom,
        confidence=plan.confidence,
        cluster=plan.cluster,
        kubernetes_version=plan.kubernetes_version,
        regions=regions,
        monthly_cost_usd=round(sum(r.monthly_cost_usd for r in regions), 2),
        monthly_cost_usd_at_trough=round(sum(r.monthly_cost_usd_at_trough for r in regions), 2),
        gpus=gpus,
        rules_of_thumb=rules_of_thumb(model, plan),
        levers_report=lever_report(plan, model, [c for c, _ in searched], sizer, consts),
        environment=plan.environment,
        routing=plan.routing,
        dns=plan.dns,
        api_key=plan.api_key,
        resilience=resilience(plan, regions, floors),
        startup=plan.startup,
        monthly_cost_usd_day_profile=round(sum(r.costs.total_day_profile for r in regions), 2),
    )


def _with_routing(plan: CapacityPlan, rp: fleet.RegionPlan, floor: RegionFloor) -> fleet.RegionPlan:
    """The region with its entry point, and why its floor rose (when it did)."""
    reasons = list(rp.reasons)
    if floor.worst_case_lost:
        reasons.append(
            f"warm floor {floor.warm_replicas} replicas: carries "
            f"{floor.worst_load_requests_per_s:g} req/s when {', '.join(floor.worst_case_lost)} "
            f"is lost (min/desired/max without resilience "
            f"{'/'.join(str(v) for v in floor.replicas_without_resilience.values())})"
        )
    return rp.model_copy(update={"entry_point": entry_point(plan, rp), "reasons": reasons})
