"""Why a plan is infeasible in a region, and the nearest change that would make it feasible.

Each (instance type, TP) is judged by the lever setting (precision, KV dtype, speculation)
that came closest to the plan: the one whose binding constraint is the least far past its
limit (`Rejection.over`), not the first or last tried. The nearest change is always a
change: an instance type the plan does not already allow, a precision it does not already
try, an SLO looser than the one it has."""

from __future__ import annotations

import math

from llmfleet.catalog import hardware
from llmfleet.catalog.hardware import Instance
from llmfleet.errors import InfeasibleError
from llmfleet.plan.model import ResolvedModel
from llmfleet.plan.regions import Region
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.levers import Levers
from llmfleet.search.operating_point import Rejection
from llmfleet.units import GB, GIB

Rejected = tuple[Instance, int, Levers, Rejection]


def closest_per_candidate(
    rejected: list[tuple[tuple[Instance, int, Levers], Rejection]], order: dict[Levers, int]
) -> list[Rejected]:
    """One rejection per (instance type, TP): the lever setting that came closest (ties: the
    plainer levers, listed first in the lever space)."""
    best: dict[tuple[str, int], Rejected] = {}
    for (inst, tp, lv), r in rejected:
        key = (inst.instance_type, tp)
        held = best.get(key)
        if held is None or (r.over, order.get(lv, 0)) < (held[3].over, order.get(held[2], 0)):
            best[key] = (inst, tp, lv, r)
    return list(best.values())


def infeasible(
    plan: CapacityPlan,
    model: ResolvedModel,
    region: Region,
    offered: list[Instance],
    rejected: list[Rejected],
    levers: list[Levers],
) -> InfeasibleError:
    precisions = list(dict.fromkeys(lv.precision for lv in levers))
    summary = (
        f"{model.id} ({', '.join(precisions)}) has no feasible configuration in "
        f"{region.name} among {len(offered)} allowed instance types offered there."
    )
    if not offered:
        here = sorted(o.instance_type for o in hardware.offerings() if o.region == region.name)
        return InfeasibleError(
            summary,
            ["no allowed instance type is offered in this region"],
            f"allow one of: {', '.join(here)}",
        )
    ranked = sorted(rejected, key=lambda c: (c[3].over, c[0].instance_type, c[1]))
    many = len(levers) > 1
    reasons = [
        f"{i.instance_type} TP {tp}" + (f" ({lv.label})" if many else "") + f": {r.reason}"
        for i, tp, lv, r in ranked
    ][:12]
    if {r.kind for *_, r in rejected} == {"price"}:
        names = ", ".join(sorted({i.instance_type for i in offered}))
        return InfeasibleError(
            summary + " The catalog has no on-demand price for them there.",
            reasons,
            f"add plan.prices entries (instance_type, usd_per_hour, region: {region.name}) for "
            f"one of: {names}",
        )
    inst, tp, lv, r = next(c for c in ranked if c[3].kind != "price")
    sized_names = {i.instance_type for i, *_, u in rejected if u.kind != "price"}
    sized = [i for i in offered if i.instance_type in sized_names] or offered
    if r.kind == "itl" and r.best_ms and r.gap_ms == r.best_ms:
        summary += f" The ITL floor (batch 1) is {r.best_ms:.1f} ms on the fastest candidate."
    elif math.isfinite(r.over):
        summary += (
            f" The closest, {inst.instance_type} TP {tp}"
            + (f" ({lv.label})" if many else "")
            + f", misses by {r.over - 1:.0%}."
        )
    if r.kind == "memory" and "exceed" in r.reason:
        smallest = min(precisions, key=lambda p: model.arch.weight_bytes(p))
        need_gib = model.arch.weight_bytes(smallest) / GIB
        largest = max(sized, key=lambda i: i.gpu_count * i.gpu_memory_mib)
        summary += (
            f" Weights need {need_gib:.0f} GiB ({need_gib * GIB / GB:.0f} GB); the largest "
            f"allowed instance, {largest.instance_type}, holds "
            f"{largest.gpu_count * largest.gpu_memory_mib / 1024:.0f} GiB."
        )
    others = _not_allowed(region, offered)
    hints = _hints(plan, model, region, sized, others, precisions, (inst, tp, lv, r))
    unpriced = sorted({i.instance_type for i, *_, u in rejected if u.kind == "price"})
    if unpriced:
        hints.append(
            f"add plan.prices for {', '.join(unpriced)} (allowed and offered in {region.name} "
            "without a known price, so not sized)"
        )
    nearest = " or ".join(hints) or _fallback(region, others)
    if r.kind in ("itl", "ttft") and not _faster(others, inst, tp) and not unpriced:
        nearest += (
            f"; no instance type offered in {region.name} beyond those allowed has a faster "
            f"GPU than {inst.gpu} ({tp} or more of it)"
        )
    return InfeasibleError(summary, reasons, nearest)


def _not_allowed(region: Region, offered: list[Instance]) -> list[Instance]:
    """Instance types priced in the region that the plan does not allow (a real change)."""
    allowed = {i.instance_type for i in offered}
    return sorted(
        (
            hardware.instance(o.instance_type)
            for o in hardware.offerings()
            if o.region == region.name
            and o.on_demand_usd_per_hour is not None
            and o.instance_type not in allowed
        ),
        key=lambda i: (i.gpu_count * i.gpu_memory_mib, i.instance_type),
    )


def _fallback(region: Region, others: list[Instance]) -> str:
    if others:
        return f"allow one of the other instance types offered in {region.name}: " + ", ".join(
            i.instance_type for i in others
        )
    return (
        f"every instance type offered in {region.name} is allowed already: relax the SLO, "
        "shorten max_model_len, or serve this region from another"
    )


def _hints(
    plan: CapacityPlan,
    model: ResolvedModel,
    region: Region,
    offered: list[Instance],
    others: list[Instance],
    precisions: list[str],
    closest: Rejected,
) -> list[str]:
    inst, tp, lv, r = closest
    gpu = hardware.gpu(inst.gpu)
    if r.kind in ("shape", "lever"):
        return _support_hints(plan, model, region, others, r)
    if r.kind == "memory":
        return _memory_hints(plan, model, region, offered, others, precisions, r)
    faster = _faster(others, inst, tp)
    hints = _relax(plan, r)
    if "fp8" not in precisions and gpu.has_fp8:
        hints.append(_allow_fp8(plan))
    if faster:
        cheapest = min(faster, key=lambda o: (_price(o, region), o.instance_type))
        hints.append(f"allow {cheapest.instance_type} ({cheapest.gpu_count} x {cheapest.gpu})")
    return hints


def _faster(others: list[Instance], inst: Instance, tp: int) -> list[Instance]:
    """Instance types with a faster GPU than `inst`'s (more memory bandwidth and more tensor
    FLOP/s per GPU) and at least `tp` of them. More GPUs of a slower part are no faster
    option: a step waits on its slowest GPU, plus the all-reduces between them."""
    gpu = hardware.gpu(inst.gpu)
    return [
        o
        for o in others
        if hardware.gpu(o.gpu).hbm_bandwidth_gb_s > gpu.hbm_bandwidth_gb_s
        and hardware.gpu(o.gpu).bf16_dense_tflops > gpu.bf16_dense_tflops
        and o.gpu_count >= tp
    ]


def _price(inst: Instance, region: Region) -> float:
    offering = hardware.offering(inst.instance_type, region.name)
    price = offering.on_demand_usd_per_hour if offering else None
    return price if price is not None else math.inf


def _relax(plan: CapacityPlan, r: Rejection) -> list[str]:
    """The least SLO change that lets the closest candidate run one sequence: TTFT alone
    (keeping the ITL target, with a chunk that meets it), ITL alone, or else both."""
    slo = plan.slo
    one = r.one_sequence or ((r.gap_ms or math.inf, r.ttft_ms or math.inf),)
    keep_itl = [t for g, t in one if g <= slo.itl_ms and math.isfinite(t)]
    keep_ttft = [g for g, t in one if t <= slo.ttft_ms]
    hints = []
    if keep_itl:
        hints.append(f"relax slo.ttft_ms to at least {math.ceil(min(keep_itl) * 1.1)} ms")
    if keep_ttft:
        hints.append(f"relax slo.itl_ms to at least {math.ceil(min(keep_ttft) * 1.1)} ms")
    if not hints:
        g, t = min(one, key=lambda p: max(p[0] / slo.itl_ms, p[1] / slo.ttft_ms))
        hints.append(
            f"relax slo.ttft_ms to at least {math.ceil(t * 1.1)} ms and slo.itl_ms to at "
            f"least {math.ceil(g * 1.1)} ms"
        )
    return hints


def _support_hints(
    plan: CapacityPlan,
    model: ResolvedModel,
    region: Region,
    others: list[Instance],
    r: Rejection,
) -> list[str]:
    """Every candidate needs a GPU feature or shape the allowed ones lack."""
    hints = []
    if "FP8" in r.reason:
        fp8 = [o for o in others if hardware.gpu(o.gpu).has_fp8]
        if fp8:
            hints.append(f"allow {fp8[0].instance_type} ({fp8[0].gpu}, with FP8 support)")
        if plan.model.pins_precision and plan.model.precision == "fp8":
            hints.append("set model.precision: bf16")
        if plan.model.pins_kv_cache_dtype and plan.model.kv_cache_dtype == "fp8":
            hints.append("set model.kv_cache_dtype: auto")
        if not fp8 and not hints:
            sixteen = model.native_precision in ("bf16", "fp16")
            hints.append(
                f"{region.name} sells no GPU with FP8 support: "
                + (
                    "serve 16-bit weights (model.precision: bf16) and KV (auto)"
                    if sixteen
                    else f"{model.id} is published in {model.native_precision} only; serve "
                    f"{region.name}'s users from another region"
                )
            )
    return hints


def _memory_hints(
    plan: CapacityPlan,
    model: ResolvedModel,
    region: Region,
    offered: list[Instance],
    others: list[Instance],
    precisions: list[str],
    r: Rejection,
) -> list[str]:
    arch = model.arch
    smallest = min(precisions, key=lambda p: arch.weight_bytes(p))
    need_gib = arch.weight_bytes(smallest) / GIB
    largest = max(offered, key=lambda i: i.gpu_count * i.gpu_memory_mib)
    have_gib = largest.gpu_count * largest.gpu_memory_mib / 1024
    hints = []
    if "max_model_len" in r.reason and math.isfinite(r.over):
        fits = int(plan.max_model_len / r.over) // 16 * 16
        hints.append(f"lower max_model_len to {fits:,} or less (the KV pool's sequence)")
    fp8_gib = arch.weight_bytes("fp8") / GIB
    if "fp8" not in precisions and fp8_gib < 0.8 * have_gib:
        hints.append(f"{_allow_fp8(plan)} (weights {fp8_gib:.0f} GiB)")
    bigger = [o for o in others if o.gpu_count * o.gpu_memory_mib / 1024 > 1.2 * need_gib]
    if bigger:
        hints.append(f"allow {bigger[0].instance_type}")
    if not hints:
        hints.append(
            f"no instance type offered in {region.name} holds the weights: serve this region "
            "from another, or a smaller precision"
        )
    return hints


def _allow_fp8(plan: CapacityPlan) -> str:
    if plan.model.pins_precision:
        return "set model.precision: fp8"
    return "add fp8 to allowed.precisions"
