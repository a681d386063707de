"""The search: per region, try every allowed (instance type, TP) and keep the cheapest.

Candidates are the allowed instance types offered in the region with a price; each is
sized by `sizing.size_replica`; replicas cover the region's peak share with headroom; nodes
pack replicas; the cheapest monthly cost wins (ties: fewer GPUs, then more spare capacity,
then name). The search only chooses: `assemble` turns the choice into a FleetPlan.
"""

from __future__ import annotations

import math

from llmfleet import catalog, fleet
from llmfleet.advice import infeasible
from llmfleet.calibration import Constants
from llmfleet.catalog import Instance
from llmfleet.choice import Choice
from llmfleet.models import ResolvedModel
from llmfleet.perf import StepModel
from llmfleet.plan import CapacityPlan, Region
from llmfleet.sizing import Rejection, size_replica

TP_DEGREES = (1, 2, 4, 8)


def allowed_instances(plan: CapacityPlan) -> list[Instance]:
    table = catalog.instances()
    names = list(table)
    if plan.allowed.instance_types is not None:
        names = [
            catalog.instance(n, f"allowed.instance_types[{k}]").instance_type
            for k, n in enumerate(plan.allowed.instance_types)
        ]
    if plan.allowed.gpus is not None:
        gpus = {catalog.gpu(g, f"allowed.gpus[{k}]").gpu for k, g in enumerate(plan.allowed.gpus)}
        names = [n for n in names if table[n].gpu in gpus]
    return [table[n] for n in sorted(names)]


def price_for(plan: CapacityPlan, instance_type: str, region: str) -> tuple[float, str] | None:
    for scope in (region, None):
        for o in plan.prices:
            if o.instance_type == instance_type and o.region == scope:
                return o.usd_per_hour, "plan.prices override"
    off = catalog.offering(instance_type, region)
    if off and off.on_demand_usd_per_hour is not None:
        return off.on_demand_usd_per_hour, f"on-demand list price {off.price_as_of} [catalog]"
    return None


def replicas_for(plan: CapacityPlan, region: Region, capacity_rps: float) -> fleet.MinDesiredMax:
    """Replicas that carry the region's trough (min) and peak (desired = max) with headroom."""
    usable = capacity_rps * (1 - plan.headroom)
    peak = plan.traffic.peak_requests_per_s * region.traffic_share
    trough = plan.traffic.trough_requests_per_s * region.traffic_share
    desired = max(1, math.ceil(peak / usable - 1e-9))
    low = max(1, math.ceil(trough / usable - 1e-9))
    return fleet.MinDesiredMax(min=low, desired=desired, max=desired)


def nodes_for(replicas: fleet.MinDesiredMax, per_node: int) -> fleet.MinDesiredMax:
    def n(r: int) -> int:
        return math.ceil(r / per_node)

    return fleet.MinDesiredMax(
        min=n(replicas.min), desired=n(replicas.desired), max=n(replicas.max)
    )


def choose_region(
    plan: CapacityPlan, model: ResolvedModel, region: Region, consts: Constants
) -> tuple[Choice, list[fleet.Alternative]]:
    """The cheapest feasible candidate of `region`, and every candidate as an alternative."""
    catalog.check_region(region.name, f"regions[{plan.regions.index(region)}].name")
    options: list[Choice] = []
    rejected: list[tuple[Instance, int, Rejection]] = []
    offered = [i for i in allowed_instances(plan) if catalog.offering(i.instance_type, region.name)]
    for inst in offered:
        price = price_for(plan, inst.instance_type, region.name)
        gpu = catalog.gpu(inst.gpu)
        for tp in (t for t in TP_DEGREES if t <= inst.gpu_count):
            if price is None:
                why = f"no on-demand price in {region.name}; add a plan.prices override"
                rejected.append((inst, tp, Rejection(why, "price")))
                continue
            result = size_replica(model.arch, gpu, inst, tp, plan, consts)
            if isinstance(result, Rejection):
                rejected.append((inst, tp, result))
                continue
            replicas = replicas_for(plan, region, result.capacity_rps)
            step_model = StepModel(
                model.arch, gpu, tp, plan.model.precision, plan.model.kv_cache_dtype, consts
            )
            options.append(
                Choice(
                    plan=plan,
                    model=model,
                    region=region,
                    instance=inst,
                    step_model=step_model,
                    sizing=result,
                    price_usd_per_hour=price[0],
                    price_source=price[1],
                    replicas=replicas,
                    nodes=nodes_for(replicas, inst.gpu_count // tp),
                )
            )
    if not options:
        raise infeasible(plan, model, region, offered, rejected)
    options.sort(key=lambda o: o.rank)
    return options[0], _alternatives(options, rejected)


def _alternatives(
    options: list[Choice], rejected: list[tuple[Instance, int, Rejection]]
) -> list[fleet.Alternative]:
    best = options[0].monthly_cost_usd
    return [
        fleet.Alternative(
            instance_type=o.instance.instance_type,
            tensor_parallel_size=o.tp,
            feasible=True,
            monthly_cost_usd=round(o.monthly_cost_usd, 2),
            reason="chosen: cheapest feasible"
            if k == 0
            else f"{o.monthly_cost_usd / best:.2f}x the cost "
            f"({o.nodes.desired} x {o.instance.instance_type})",
        )
        for k, o in enumerate(options)
    ] + [
        fleet.Alternative(
            instance_type=i.instance_type,
            tensor_parallel_size=tp,
            feasible=False,
            monthly_cost_usd=None,
            reason=r.reason,
            no_price=r.kind == "price",
        )
        for i, tp, r in rejected
    ]
