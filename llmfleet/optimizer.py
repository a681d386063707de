"""Plan -> FleetPlan: try every allowed (instance type, TP) per region and keep the cheapest.

Per region: candidates are the allowed instance types offered there with a price; each is
sized by `sizing.size_replica`; replicas cover the region's peak share with headroom;
nodes pack replicas; the cheapest monthly cost wins (ties: fewer GPUs, then name).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from llmfleet import catalog, fleet
from llmfleet.advice import infeasible, rules_of_thumb
from llmfleet.calibration import Constants
from llmfleet.calibration import load as load_constants
from llmfleet.catalog import Instance
from llmfleet.curves import batch_curve
from llmfleet.memory import kv_dtype_bytes
from llmfleet.models import ResolvedModel, resolve_model
from llmfleet.perf import Engine
from llmfleet.plan import CapacityPlan, Region
from llmfleet.serving import serving
from llmfleet.sizing import Rejection, ReplicaSizing, predict_at, size_replica
from llmfleet.stack import REPO_ROOT
from llmfleet.units import GIB, HOURS_PER_MONTH

TP_DEGREES = (1, 2, 4, 8)
IMAGE_AND_OS_GIB = 100
VOLUME_STEP_GIB = 50
MAX_ZONES = 3
# Cluster services need somewhere untainted to run: two general-purpose nodes in two zones
# (KEDA and the Prometheus stack ask for about 2 vCPU and 4 GiB together; m6i.xlarge has
# 4 vCPU and 16 GiB). It is not a GPU instance, so the price catalog does not cover it.
SYSTEM_INSTANCE_TYPE = "m6i.xlarge"
SYSTEM_NODES = fleet.MinDesiredMax(min=2, desired=2, max=3)
SYSTEM_VOLUME_GIB = 50
MIN_CLUSTER_ZONES = 2


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


@dataclass(frozen=True)
class Option:
    instance: Instance
    tp: int
    sizing: ReplicaSizing
    price: float
    price_source: str
    replicas: fleet.MinDesiredMax
    nodes: fleet.MinDesiredMax

    @property
    def monthly_cost(self) -> float:
        return self.nodes.desired * self.price * HOURS_PER_MONTH

    @property
    def key(self) -> tuple[float, int, float, str, int]:
        """Cheapest; then fewest GPUs; then most spare capacity on the nodes paid for."""
        gpus = self.nodes.desired * self.instance.gpu_count
        slots = self.nodes.desired * (self.instance.gpu_count // self.tp)
        spare = slots * self.sizing.capacity_rps
        return (
            round(self.monthly_cost, 6),
            gpus,
            -round(spare, 6),
            self.instance.instance_type,
            self.tp,
        )


def _replicas(plan: CapacityPlan, region: Region, capacity_rps: float) -> fleet.MinDesiredMax:
    usable = capacity_rps * (1 - plan.headroom)
    peak = plan.traffic.peak_requests_per_s * region.traffic_share
    trough = plan.traffic.trough_requests_per_s * region.traffic_share
    desired = max(1, math.ceil(peak / usable - 1e-9))
    low = max(1, math.ceil(trough / usable - 1e-9))
    return fleet.MinDesiredMax(min=low, desired=desired, max=desired)


def _nodes(replicas: fleet.MinDesiredMax, per_node: int) -> fleet.MinDesiredMax:
    def n(r: int) -> int:
        return math.ceil(r / per_node)

    return fleet.MinDesiredMax(
        min=n(replicas.min), desired=n(replicas.desired), max=n(replicas.max)
    )


def plan_region(
    plan: CapacityPlan, model: ResolvedModel, region: Region, consts: Constants
) -> tuple[Option, list[fleet.Alternative]]:
    catalog.check_region(region.name, f"regions[{plan.regions.index(region)}].name")
    options: list[Option] = []
    rejected: list[tuple[Instance, int, Rejection]] = []
    offered = [i for i in allowed_instances(plan) if catalog.offering(i.instance_type, region.name)]
    for inst in offered:
        price = price_for(plan, inst.instance_type, region.name)
        gpu = catalog.gpu(inst.gpu)
        for tp in (t for t in TP_DEGREES if t <= inst.gpu_count):
            if price is None:
                rejected.append(
                    (
                        inst,
                        tp,
                        Rejection(
                            f"no on-demand price in {region.name}; add a plan.prices override",
                            "price",
                        ),
                    )
                )
                continue
            result = size_replica(model.arch, gpu, inst, tp, plan, consts)
            if isinstance(result, Rejection):
                rejected.append((inst, tp, result))
                continue
            replicas = _replicas(plan, region, result.capacity_rps)
            per_node = inst.gpu_count // tp
            options.append(
                Option(inst, tp, result, price[0], price[1], replicas, _nodes(replicas, per_node))
            )
    if not options:
        raise infeasible(plan, model, region, offered, rejected)
    options.sort(key=lambda o: o.key)
    alternatives = [
        fleet.Alternative(
            instance_type=o.instance.instance_type,
            tensor_parallel_size=o.tp,
            feasible=True,
            monthly_cost_usd=round(o.monthly_cost, 2),
            reason="chosen: cheapest feasible"
            if k == 0
            else f"{o.monthly_cost / options[0].monthly_cost:.2f}x the cost "
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
        )
        for i, tp, r in rejected
    ]
    return options[0], alternatives


def cluster_zones(region: str, node_zones: list[str]) -> list[str]:
    """EKS needs subnets in two zones or more: the GPU zones first, then others of the region."""
    others = [z for z in catalog.zones(region) if z not in node_zones]
    return (node_zones + others)[: max(MIN_CLUSTER_ZONES, min(MAX_ZONES, len(node_zones)))]


def _ranges(consts: Constants, values: dict[str, float]) -> dict[str, tuple[float, float]]:
    return {
        k: (_round(v * consts.ratio(k, "p10"), 1), _round(v * consts.ratio(k, "p90"), 1))
        for k, v in sorted(values.items())
    }


def _round(x: float, nd: int = 2) -> float:
    return round(x, nd)


def build_fleet_plan(
    plan: CapacityPlan, consts: Constants | None = None, base_dir: Path = REPO_ROOT
) -> fleet.FleetPlan:
    consts = consts or load_constants()
    if plan.confidence == "pessimistic":
        factors = dict(consts.engine_step_factor)
        factors["vllm"] = factors.get("vllm", 1.0) * max(1.0, consts.ratio("itl_ms", "p90"))
        consts = consts.model_copy(update={"engine_step_factor": factors})
    model = resolve_model(plan, base_dir)
    arch = model.arch
    regions = []
    for region in plan.regions:
        best, alternatives = plan_region(plan, model, region, consts)
        regions.append(_region_plan(plan, model, region, best, alternatives, consts))
    weights_gib = arch.weight_bytes(plan.model.precision) / GIB
    gpus = fleet.MinDesiredMax(
        min=sum(r.nodes.min * r.gpus_per_node for r in regions),
        desired=sum(r.nodes.desired * r.gpus_per_node for r in regions),
        max=sum(r.nodes.max * r.gpus_per_node for r in regions),
    )
    return fleet.FleetPlan(
        name=plan.name,
        model=fleet.ModelSummary(
            id=model.id,
            hf_repo=model.hf_repo,
            source=model.source,
            params_b=_round(arch.total_params / 1e9, 3),
            active_params_b=_round(arch.active_params / 1e9, 3),
            precision=plan.model.precision,
            kv_cache_dtype=plan.model.kv_cache_dtype,
            weights_gib=_round(weights_gib),
            kv_bytes_per_token=arch.kv_bytes_per_token(kv_dtype_bytes(plan.model.kv_cache_dtype)),
        ),
        slo={
            "ttft_ms": plan.slo.ttft_ms,
            "itl_ms": plan.slo.itl_ms,
            "percentile": plan.slo.percentile,
        },
        traffic={
            "peak_requests_per_s": plan.traffic.peak_requests_per_s,
            "trough_requests_per_s": plan.traffic.trough_requests_per_s,
            "input_tokens_mean": plan.traffic.input_tokens.mean,
            "input_tokens_p95": plan.traffic.input_tokens.p95_or_mean,
            "output_tokens_mean": plan.traffic.output_tokens.mean,
            "output_tokens_p95": plan.traffic.output_tokens.p95_or_mean,
        },
        headroom=plan.headroom,
        confidence=plan.confidence,
        cluster=fleet.ClusterAccess.model_validate(plan.cluster.model_dump()),
        kubernetes_version=plan.kubernetes_version,
        regions=regions,
        monthly_cost_usd=_round(sum(r.monthly_cost_usd for r in regions)),
        monthly_cost_usd_at_trough=_round(sum(r.monthly_cost_usd_at_trough for r in regions)),
        gpus=gpus,
        rules_of_thumb=rules_of_thumb(model, plan),
    )


def _region_plan(
    plan: CapacityPlan,
    model: ResolvedModel,
    region: Region,
    best: Option,
    alternatives: list[fleet.Alternative],
    consts: Constants,
) -> fleet.RegionPlan:
    s, inst, mem = best.sizing, best.instance, best.sizing.memory
    peak = plan.traffic.peak_requests_per_s * region.traffic_share
    trough = plan.traffic.trough_requests_per_s * region.traffic_share
    per_replica_peak = peak / best.replicas.desired
    per_node = inst.gpu_count // best.tp
    weights_gib = model.arch.weight_bytes(plan.model.precision) / GIB
    volume = IMAGE_AND_OS_GIB + math.ceil(weights_gib * per_node * 1.2)
    volume = math.ceil(volume / VOLUME_STEP_GIB) * VOLUME_STEP_GIB
    o = plan.traffic.output_tokens.mean
    eng = Engine(
        model.arch,
        catalog.gpu(inst.gpu),
        best.tp,
        plan.model.precision,
        plan.model.kv_cache_dtype,
        consts,
    )
    at_peak, ttft_s = predict_at(eng, plan, s, per_replica_peak)
    tpot_ms = at_peak.tpot_percentile_s(o, plan.slo.percentile) * 1000
    limit_tpot_ms = s.steps.tpot_percentile_s(o, plan.slo.percentile) * 1000
    node_zones = catalog.zones(region.name, inst.instance_type)[:MAX_ZONES]
    engine = fleet.Engine(
        tensor_parallel_size=best.tp,
        max_num_seqs=s.batch,
        max_num_batched_tokens=s.max_num_batched_tokens,
        max_model_len=plan.max_model_len,
        gpu_memory_utilization=plan.gpu_memory_utilization,
        kv_cache_dtype=plan.model.kv_cache_dtype,
        block_size=mem.block_size,
    )
    reasons = [
        f"{inst.instance_type} at TP {best.tp}: weights {mem.weights_gib_per_gpu:.1f} GiB per GPU, "
        f"KV pool {mem.kv_cache_gib_per_gpu:.1f} GiB per GPU = {mem.kv_cache_tokens:,} tokens",
        f"at the SLO limit a replica runs {s.batch} sequences with {s.chunk_tokens}-token prefill "
        f"chunks in {s.steps.mixed_share:.0%} of steps: decode step "
        f"{s.steps.decode_only_s * 1000:.1f} ms, mixed step {s.steps.mixed_s * 1000:.1f} ms, "
        f"TPOT p{plan.slo.percentile:g} {limit_tpot_ms:.1f} ms <= {plan.slo.itl_ms:g} ms",
        f"one replica sustains {s.capacity_rps:.2f} req/s inside TTFT {plan.slo.ttft_ms:g} ms and "
        f"ITL {plan.slo.itl_ms:g} ms; with {plan.headroom:.0%} headroom {best.replicas.desired} "
        f"replicas carry the peak {peak:.2f} req/s ({per_replica_peak:.2f} each)",
        f"{per_node} replica(s) per {inst.gpu_count}-GPU node -> {best.nodes.desired} nodes at "
        f"${best.price:.3f}/h ({best.price_source})",
    ]
    trough_cost = best.nodes.min * best.price * HOURS_PER_MONTH
    return fleet.RegionPlan(
        region=region.name,
        traffic_share=region.traffic_share,
        peak_requests_per_s=_round(peak, 4),
        trough_requests_per_s=_round(trough, 4),
        instance_type=inst.instance_type,
        gpu=inst.gpu,
        gpus_per_node=inst.gpu_count,
        gpus_per_replica=best.tp,
        tensor_parallel_size=best.tp,
        replicas_per_node=per_node,
        replicas=best.replicas,
        nodes=best.nodes,
        price_usd_per_hour=best.price,
        price_source=best.price_source,
        monthly_cost_usd=_round(best.monthly_cost),
        monthly_cost_usd_at_trough=_round(trough_cost),
        predicted=fleet.Predicted(
            ttft_ms=_round(ttft_s * 1000, 1),
            itl_ms=_round(tpot_ms, 2),
            decode_only_itl_ms=_round(at_peak.decode_only_s * 1000, 2),
            mixed_step_ms=_round(at_peak.mixed_s * 1000, 2),
            output_tokens_per_s=_round(s.capacity_rps * o, 1),
            requests_per_s=_round(s.capacity_rps, 3),
            requests_per_s_at_peak=_round(per_replica_peak, 3),
            kv_cache_tokens=mem.kv_cache_tokens,
            max_concurrency=_round(mem.max_concurrency),
            batch_size=s.batch,
            ranges=_ranges(
                consts,
                {
                    "ttft_ms": ttft_s * 1000,
                    "itl_ms": tpot_ms,
                    "output_tokens_per_s": s.capacity_rps * o,
                    "kv_cache_tokens": float(mem.kv_cache_tokens),
                },
            ),
        ),
        memory=fleet.Memory(
            gpu_total_gib=_round(mem.total_gib),
            weights_gib_per_gpu=_round(mem.weights_gib_per_gpu),
            activation_gib=_round(mem.activation_gib),
            non_torch_gib=_round(mem.non_torch_gib),
            kv_cache_gib_per_gpu=_round(mem.kv_cache_gib_per_gpu),
            kv_bytes_per_token=mem.kv_bytes_per_token,
        ),
        engine=engine,
        serving=serving(
            plan,
            model.hf_repo,
            model.native_precision,
            weights_gib,
            inst,
            eng,
            s,
            engine,
            best.replicas,
        ),
        system_pool=fleet.SystemPool(
            instance_type=SYSTEM_INSTANCE_TYPE,
            nodes=SYSTEM_NODES,
            volume_gib=SYSTEM_VOLUME_GIB,
            priced=False,
            reason="untainted nodes for CoreDNS, KEDA and the Prometheus stack, one per zone "
            "for availability; general-purpose instances are outside the GPU price catalog, "
            "so their cost is not in monthly_cost_usd",
        ),
        node_zones=node_zones,
        availability_zones=cluster_zones(region.name, node_zones),
        node_volume_gib=volume,
        vpc_id=region.network.vpc_id if region.network else None,
        private_subnet_ids=region.network.private_subnet_ids if region.network else None,
        vpc_cidr=region.vpc_cidr,
        reasons=reasons,
        alternatives=alternatives,
        batch_curve=batch_curve(
            eng,
            plan,
            s.chunk_tokens,
            s.batch,
            mem.kv_cache_tokens // (plan.traffic.input_tokens.mean + o),
        ),
    )
