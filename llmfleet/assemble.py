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
from llmfleet.memory import kv_dtype_bytes
from llmfleet.models import ResolvedModel, resolve_model
from llmfleet.optimizer import choose_region
from llmfleet.plan import CapacityPlan
from llmfleet.region_plan import region_plan
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


def model_summary(plan: CapacityPlan, model: ResolvedModel) -> fleet.ModelSummary:
    arch = model.arch
    return fleet.ModelSummary(
        id=model.id,
        hf_repo=model.hf_repo,
        source=model.source,
        params_b=round(arch.total_params / 1e9, 3),
        active_params_b=round(arch.active_params / 1e9, 3),
        precision=plan.model.precision,
        kv_cache_dtype=plan.model.kv_cache_dtype,
        weights_gib=round(arch.weight_bytes(plan.model.precision) / GIB, 2),
        kv_bytes_per_token=arch.kv_bytes_per_token(kv_dtype_bytes(plan.model.kv_cache_dtype)),
    )


def build_fleet_plan(
    plan: CapacityPlan, consts: Constants | None = None, base_dir: Path = REPO_ROOT
) -> fleet.FleetPlan:
    base = consts or load_constants()
    consts = sizing_constants(plan, base)
    pessimistic = sizing_constants(plan.model_copy(update={"confidence": "pessimistic"}), base)
    model = resolve_model(plan, base_dir)
    regions = [
        region_plan(*choose_region(plan, model, region, consts), consts, pessimistic)
        for region in plan.regions
    ]
    gpus = fleet.MinDesiredMax(
        min=sum(r.nodes.min * r.gpus_per_node for r in regions),
        desired=sum(r.nodes.desired * r.gpus_per_node for r in regions),
        max=sum(r.nodes.max * r.gpus_per_node for r in regions),
    )
    return fleet.FleetPlan(
        name=plan.name,
        model=model_summary(plan, model),
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
        startup=plan.startup,
        monthly_cost_usd_day_profile=round(sum(r.costs.total_day_profile for r in regions), 2),
    )
