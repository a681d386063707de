"""Why a plan is infeasible in a region, and the nearest change that would make it feasible."""

from __future__ import annotations

import math

from llmfleet.catalog import hardware
from llmfleet.catalog.hardware import Instance
from llmfleet.errors import InfeasibleError
from llmfleet.plan.model import ResolvedModel
from llmfleet.plan.regions import Region
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.operating_point import Rejection
from llmfleet.units import GB, GIB


def infeasible(
    plan: CapacityPlan,
    model: ResolvedModel,
    region: Region,
    offered: list[Instance],
    rejected: list[tuple[Instance, int, Rejection]],
) -> InfeasibleError:
    arch = model.arch
    need_gib = arch.weight_bytes(plan.model.precision) / GIB
    summary = (
        f"{model.id} ({plan.model.precision}) has no feasible configuration in "
        f"{region.name} among {len(offered)} allowed instance types offered there."
    )
    if not offered:
        here = sorted(o.instance_type for o in hardware.offerings() if o.region == region.name)
        return InfeasibleError(
            summary,
            ["no allowed instance type is offered in this region"],
            f"allow one of: {', '.join(here)}",
        )
    reasons = sorted({f"{i.instance_type} TP {tp}: {r.reason}" for i, tp, r in rejected})[:12]
    kinds = {r.kind for _, _, r in rejected}
    if kinds == {"price"}:
        names = ", ".join(sorted({i.instance_type for i in offered}))
        return InfeasibleError(
            summary + " The catalog has no on-demand price for them there.",
            reasons,
            f"add plan.prices entries (instance_type, usd_per_hour, region: {region.name}) for "
            f"one of: {names}",
        )
    if kinds <= {"memory", "shape", "price"}:
        largest = max(offered, key=lambda i: i.gpu_count * i.gpu_memory_mib)
        have_gib = largest.gpu_count * largest.gpu_memory_mib / 1024
        hints = []
        fp8_gib = arch.weight_bytes("fp8") / GIB
        if plan.model.precision in ("bf16", "fp16") and fp8_gib < 0.8 * have_gib:
            hints.append(f"set model.precision: fp8 (weights {fp8_gib:.0f} GiB)")
        bigger = sorted(
            {
                o.instance_type
                for o in hardware.offerings()
                if o.region == region.name
                and hardware.instance(o.instance_type).gpu_count
                * hardware.instance(o.instance_type).gpu_memory_mib
                / 1024
                > 1.2 * need_gib
            },
            key=lambda n: hardware.instance(n).gpu_count * hardware.instance(n).gpu_memory_mib,
        )
        if bigger:
            hints.append(f"allow {bigger[0]}")
        summary += (
            f" Weights need {need_gib:.0f} GiB ({need_gib * GIB / GB:.0f} GB); the largest "
            f"allowed instance, {largest.instance_type}, holds {have_gib:.0f} GiB."
        )
        return InfeasibleError(summary, reasons, " or ".join(hints) or "allow a larger instance")
    floors = [r.best_ms for _, _, r in rejected if r.kind == "itl" and r.best_ms]
    if "itl" in kinds and floors and not any(r.kind == "ttft" for _, _, r in rejected):
        best = min(floors)
        return InfeasibleError(
            summary + f" The ITL floor (batch 1) is {best:.1f} ms on the fastest candidate.",
            reasons,
            f"relax slo.itl_ms to at least {math.ceil(best * 1.1)} ms, or allow fp8 "
            "or a GPU with more memory bandwidth",
        )
    ttft = [r.best_ms for _, _, r in rejected if r.kind == "ttft" and r.best_ms]
    best_ttft = min(ttft) if ttft else math.nan
    return InfeasibleError(
        summary,
        reasons,
        f"relax slo.ttft_ms to at least {math.ceil(best_ttft * 1.1)} ms or slo.itl_ms (a longer "
        "prefill chunk fits a looser ITL), or allow more GPUs per replica",
    )
