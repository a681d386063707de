"""Assembles one region's section of the FleetPlan from the search's `Choice`: the predicted
figures, the memory budget, zones and volumes, the system pool, and the reasons. Each
section has one builder; `serving`, `autoscaling` and `workload` build theirs."""

from __future__ import annotations

import math

from llmfleet import catalog, fleet
from llmfleet.alerts import region_alerts
from llmfleet.autoscaling import autoscaling
from llmfleet.calibration import Constants
from llmfleet.capacity import node_capacity, replicas_filling_slots
from llmfleet.choice import Choice
from llmfleet.cold_start import cold_start
from llmfleet.costs import costs
from llmfleet.curves import batch_curve
from llmfleet.errors import PlanError
from llmfleet.floors import floors
from llmfleet.lever_section import chosen_levers, download_gib
from llmfleet.risk import risk
from llmfleet.routing_plan import RegionFloor
from llmfleet.serving import serving
from llmfleet.sizing import itl_percentile_s, predict_at, ttft_prompt_tokens
from llmfleet.workload import workload
from llmfleet.zones import cluster_zone_ids, node_zone_ids

IMAGE_AND_OS_GIB = 100
VOLUME_STEP_GIB = 50
MIN_CLUSTER_ZONES = 2
"""EKS requires subnets in at least two availability zones."""
MAX_ZONES = 3
"""Three quarters of a new VPC are private subnets (one per zone); the fourth the public."""
# Cluster services need somewhere untainted to run: two general-purpose nodes in two zones
# (KEDA and the Prometheus stack ask for about 2 vCPU and 4 GiB together; m6i.xlarge has
# 4 vCPU and 16 GiB). It is not a GPU instance, so the price catalog does not cover it.
SYSTEM_INSTANCE_TYPE = "m6i.xlarge"
SYSTEM_NODES = fleet.MinDesiredMax(min=2, desired=2, max=3)
SYSTEM_VOLUME_GIB = 50


def cluster_zones(region: str, node_zones: list[str]) -> list[str]:
    """EKS needs subnets in two zones or more: the GPU zones first, then others of the region."""
    others = [z for z in catalog.zones(region) if z not in node_zones]
    return (node_zones + others)[: max(MIN_CLUSTER_ZONES, min(MAX_ZONES, len(node_zones)))]


def node_volume_gib(weights_gib: float, replicas_per_node: int) -> int:
    """Root volume: image and OS plus each replica's weight cache (+20 %), in 50 GiB steps."""
    volume = IMAGE_AND_OS_GIB + math.ceil(weights_gib * replicas_per_node * 1.2)
    return math.ceil(volume / VOLUME_STEP_GIB) * VOLUME_STEP_GIB


def _round(x: float, nd: int = 2) -> float:
    return round(x, nd)


def predicted(choice: Choice, consts: Constants) -> fleet.Predicted:
    """Per replica at the region's peak; ranges from the calibration's held-out errors."""
    plan, s = choice.plan, choice.sizing
    o = plan.traffic.output_tokens.mean
    at_peak, ttft_s = predict_at(choice.step_model, plan, s, choice.peak_requests_per_s_per_replica)
    itl_ms = itl_percentile_s(plan, at_peak) * 1000
    values = {
        "ttft_ms": ttft_s * 1000,
        "itl_ms": itl_ms,
        "output_tokens_per_s": s.capacity_rps * o,
        "kv_cache_tokens": float(s.memory.kv_cache_tokens),
    }
    ranges = {
        k: (_round(v * consts.ratio(k, "p10"), 1), _round(v * consts.ratio(k, "p90"), 1))
        for k, v in sorted(values.items())
    }
    return fleet.Predicted(
        ttft_ms=_round(ttft_s * 1000, 1),
        ttft_prompt_tokens=ttft_prompt_tokens(plan),
        itl_ms=_round(itl_ms, 2),
        token_gap_ms=_round(at_peak.longest_gap_s * 1000, 2),
        tpot_ms=_round(at_peak.tpot_percentile_s(o, plan.slo.percentile) * 1000, 2),
        decode_only_itl_ms=_round(at_peak.decode_only_s * 1000, 2),
        mixed_step_ms=_round(at_peak.mixed_s * 1000, 2),
        mixed_step_share=_round(min(1.0, at_peak.mixed_share), 4),
        output_tokens_per_s=_round(s.capacity_rps * o, 1),
        requests_per_s=_round(s.capacity_rps, 3),
        requests_per_s_at_peak=_round(choice.peak_requests_per_s_per_replica, 3),
        kv_cache_tokens=s.memory.kv_cache_tokens,
        max_concurrency=_round(s.memory.max_concurrency),
        ranges=ranges,
    )


def memory(choice: Choice) -> fleet.Memory:
    mem = choice.sizing.memory
    return fleet.Memory(
        gpu_total_gib=_round(mem.total_gib),
        weights_gib_per_gpu=_round(mem.weights_gib_per_gpu),
        activation_gib=_round(mem.activation_gib),
        non_torch_gib=_round(mem.non_torch_gib),
        kv_cache_gib_per_gpu=_round(mem.kv_cache_gib_per_gpu),
        kv_bytes_per_token=mem.kv_bytes_per_token,
    )


def system_pool() -> fleet.SystemPool:
    return fleet.SystemPool(
        instance_type=SYSTEM_INSTANCE_TYPE,
        nodes=SYSTEM_NODES,
        volume_gib=SYSTEM_VOLUME_GIB,
        priced=False,
        reason="untainted nodes for CoreDNS, KEDA and the Prometheus stack, one per zone "
        "for availability; general-purpose instances are outside the GPU price catalog, "
        "so their cost is not in monthly_cost_usd",
    )


def reasons(choice: Choice, stage4: RegionFloor | None = None) -> list[str]:
    plan, s, inst, mem = choice.plan, choice.sizing, choice.instance, choice.sizing.memory
    p = plan.slo.percentile
    itl_name = "longest token gap" if plan.slo.itl == "token_gap" else f"TPOT p{p:g}"
    limit_itl_ms = itl_percentile_s(plan, s.steps) * 1000
    given = {95: plan.traffic.input_tokens.p95, 99: plan.traffic.input_tokens.p99}.get(int(p))
    prompt_from = "as given" if given else "lognormal through the plan's mean and percentiles"
    own = stage4.replicas_without_resilience["desired"] if stage4 else choice.replicas.desired
    return [
        f"{inst.instance_type} at TP {choice.tp}: weights {mem.weights_gib_per_gpu:.1f} GiB per "
        f"GPU, KV pool {mem.kv_cache_gib_per_gpu:.1f} GiB per GPU = {mem.kv_cache_tokens:,} tokens",
        f"at the SLO limit a replica runs {s.batch} sequences with {s.chunk_tokens}-token prefill "
        f"chunks in {min(1.0, s.steps.mixed_share):.0%} of steps: decode step "
        f"{s.steps.decode_only_s * 1000:.1f} ms, mixed step {s.steps.mixed_s * 1000:.1f} ms, "
        f"{itl_name} {limit_itl_ms:.1f} ms <= {plan.slo.itl_ms:g} ms",
        f"TTFT p{p:g} is for the p{p:g} prompt ({ttft_prompt_tokens(plan):,} tokens, "
        f"{prompt_from}) plus the prefill-queue wait at that percentile",
        f"one replica sustains {s.capacity_rps:.2f} req/s inside TTFT {plan.slo.ttft_ms:g} ms and "
        f"ITL {plan.slo.itl_ms:g} ms; with {plan.headroom:.0%} headroom {own} replicas carry "
        f"the peak {choice.peak_requests_per_s:.2f} req/s"
        + (
            f"; {choice.replicas.desired} run for the region losses it survives (below), "
            f"{choice.peak_requests_per_s_per_replica:.2f} req/s each at its own peak"
            if choice.replicas.desired > own
            else f" ({choice.peak_requests_per_s_per_replica:.2f} each)"
        ),
        f"{choice.replicas_per_node} replica(s) per {inst.gpu_count}-GPU node -> "
        f"{choice.nodes.desired} nodes at ${choice.price_usd_per_hour:.3f}/h "
        f"({choice.price_source})",
    ]


def region_plan(
    choice: Choice,
    alternatives: list[fleet.Alternative],
    consts: Constants,
    pessimistic: Constants,
    stage4: RegionFloor | None = None,
) -> fleet.RegionPlan:
    """The region's section of the FleetPlan, from the search's choice (and, when stage 4
    raised its floor, why)."""
    plan, region, inst = choice.plan, choice.region, choice.instance
    field = f"regions[{plan.regions.index(region)}]"
    weights_gib = download_gib(choice)
    node_zones = catalog.zones(region.name, inst.instance_type)[:MAX_ZONES]
    gpu_zone_ids = node_zone_ids(region, field, inst.instance_type)
    zone_ids = cluster_zone_ids(region.name, gpu_zone_ids)
    floor = floors(choice, stage4)
    cold = cold_start(choice, weights_gib)
    work = workload(plan, inst)
    capacity = node_capacity(
        choice, floor, gpu_zone_ids, field, cold, work.pdb_max_unavailable
    )
    if not cold.headroom_carries_growth:
        raise PlanError(
            "headroom",
            plan.headroom,
            f"traffic may grow {cold.growth_during_cold_start:.1%} of the peak during one "
            f"{cold.total_s / 60:.1f}-minute cold start in {region.name} "
            f"(startup.traffic_growth_per_min {plan.startup.traffic_growth_per_min:g}); "
            f"raise headroom to {cold.growth_during_cold_start:.2f} or more",
        )
    replicas = replicas_filling_slots(choice, floor)
    serve = serving(choice, weights_gib, cold)
    expected = predicted(choice, consts)
    volume = node_volume_gib(weights_gib, choice.replicas_per_node)
    cost = costs(choice, capacity, floor, system_pool(), volume, weights_gib, len(zone_ids))
    return fleet.RegionPlan(
        region=region.name,
        traffic_share=region.traffic_share,
        peak_requests_per_s=_round(choice.peak_requests_per_s, 4),
        trough_requests_per_s=_round(choice.trough_requests_per_s, 4),
        instance_type=inst.instance_type,
        gpu=inst.gpu,
        gpus_per_node=inst.gpu_count,
        replicas_per_node=choice.replicas_per_node,
        replicas=replicas,
        nodes=fleet.MinDesiredMax(
            min=floor.nodes, desired=choice.nodes.desired, max=choice.nodes.max
        ),
        price_usd_per_hour=choice.price_usd_per_hour,
        price_source=choice.price_source,
        monthly_cost_usd=cost.gpu_peak,
        monthly_cost_usd_at_trough=cost.gpu_trough,
        predicted=expected,
        risk=risk(choice, expected, pessimistic),
        batch_curve=batch_curve(
            choice.step_model,
            plan,
            choice.sizing.chunk_tokens,
            choice.sizing.batch,
            choice.sizing.memory.kv_cache_tokens
            // (plan.traffic.input_tokens.mean + plan.traffic.output_tokens.mean),
        ),
        memory=memory(choice),
        serving=serve,
        autoscaling=autoscaling(choice, work.namespace, serve.vllm.served_model_name),
        workload=work,
        system_pool=system_pool(),
        node_zones=node_zones,
        availability_zones=cluster_zones(region.name, node_zones),
        node_volume_gib=volume,
        vpc_id=region.network.vpc_id if region.network else None,
        private_subnet_ids=region.network.private_subnet_ids if region.network else None,
        vpc_cidr=region.vpc_cidr,
        reasons=reasons(choice, stage4),
        alternatives=alternatives,
        levers=chosen_levers(choice),
        alerts=region_alerts(plan, choice.replicas, serve, work),
        node_zone_ids=gpu_zone_ids,
        cluster_zone_ids=zone_ids,
        capacity=capacity,
        cold_start=cold,
        costs=cost,
    )
