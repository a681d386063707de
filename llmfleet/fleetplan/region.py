"""One region's section of the FleetPlan, assembled from the search's `Choice`: the predicted
figures, memory, zones and volumes, and the reasons; each sub-section has its builder."""

from __future__ import annotations

import math

from pydantic import Field, computed_field

from llmfleet.catalog import hardware
from llmfleet.catalog.constants import Constants
from llmfleet.data import Data, MinDesiredMax
from llmfleet.errors import PlanError
from llmfleet.fleetplan.alerts import Alerts, build_alerts
from llmfleet.fleetplan.autoscaling import Autoscaling, build_autoscaling
from llmfleet.fleetplan.balancing_alternative import BalancingAlternative
from llmfleet.fleetplan.capacity import (
    NodeCapacity,
    SystemPool,
    build_always_on,
    build_node_capacity,
    build_system_pool,
    cluster_zone_ids,
    node_zone_ids,
    replicas_filling_slots,
)
from llmfleet.fleetplan.cold_start import ColdStart, build_cold_start
from llmfleet.fleetplan.costs import Costs, build_costs
from llmfleet.fleetplan.disaggregation import (
    Disaggregation,
    build_decode_autoscaling,
    build_disaggregation,
    with_kv_transfer,
)
from llmfleet.fleetplan.entry_point import EntryPoint, logs_bucket
from llmfleet.fleetplan.fabric import Fabric, build_fabric
from llmfleet.fleetplan.levers import ChosenLevers, build_chosen_levers, download_gib
from llmfleet.fleetplan.multi_node import MultiNode, build_multi_node
from llmfleet.fleetplan.network import SubnetPlan, subnet_layout
from llmfleet.fleetplan.node_update import NodeUpdate, build_node_update
from llmfleet.fleetplan.pinned_levers import PinnedAlternative
from llmfleet.fleetplan.predicted import (
    BatchPoint,
    Binding,
    Memory,
    Predicted,
    _round,
    build_batch_curve,
    build_binding,
    build_memory,
    build_predicted,
)
from llmfleet.fleetplan.prefix_router import PrefixRouterPlan
from llmfleet.fleetplan.replica_record import ReplicaRecord, build_replica_record
from llmfleet.fleetplan.risk import Risk, build_risk
from llmfleet.fleetplan.serving import Serving, build_serving
from llmfleet.fleetplan.weights import WeightStaging, account_of, build_weight_staging
from llmfleet.fleetplan.workload import Workload, build_workload, pods_per_node
from llmfleet.plan.schema import STALL_ITLS
from llmfleet.search.choice import Choice
from llmfleet.search.levers import served
from llmfleet.search.optimizer import Alternative, allowed_instances
from llmfleet.search.replica_slo import ttft_prompt_tokens
from llmfleet.search.replicas import LossSizing


class RegionPlan(Data):
    region: str
    traffic_share: float
    peak_requests_per_s: float
    trough_requests_per_s: float
    instance_type: str
    gpu: str
    gpus_per_node: int
    replicas_per_node: int
    replicas: MinDesiredMax = Field(
        description="min carries the trough, desired and max the peak; KEDA scales between."
    )
    nodes: MinDesiredMax
    price_usd_per_hour: float
    price_source: str
    billed_monthly_cost_usd: float = Field(
        description="GPU nodes at desired (provisioned for the peak) for a month as the "
        "purchase bills them (regions[].capacity: spot above the floor, a reservation paid "
        "used or not, a Capacity Block whole; costs.gpu_peak)."
    )
    billed_monthly_cost_usd_at_trough: float = Field(
        description="The floor's GPU nodes for a month as the purchase bills them "
        "(costs.gpu_trough)."
    )
    on_demand_monthly_cost_usd: float = Field(
        description="GPU nodes at desired for a month at price_usd_per_hour: what the search "
        "compared candidates by (alternatives[].on_demand_monthly_cost_usd)."
    )
    predicted: Predicted
    binding: Binding = Field(
        description="What stops the batch at max_num_seqs: the constraint one more sequence "
        "breaks, and what a lone request already takes of each SLO."
    )
    risk: Risk
    memory: Memory
    serving: Serving
    autoscaling: Autoscaling
    workload: Workload
    system_pool: SystemPool
    node_volume_gib: int = Field(description="Root volume per node: images and weights.")
    vpc_id: str | None
    private_subnet_ids: list[str] | None
    vpc_cidr: str
    subnets: list[SubnetPlan] = Field(
        description="A new VPC's subnets (private and public per cluster zone); empty with an "
        "existing VPC, whose subnets the plan names."
    )
    reasons: list[str]
    alternatives: list[Alternative]
    batch_curve: list[BatchPoint] = Field(
        description="ITL, TTFT and throughput against the running batch, from one sequence to "
        "what the KV pool holds; includes the operating point (the report's chart)."
    )
    faster_gpus: list[str] = Field(
        default_factory=list,
        description="GPUs with more memory bandwidth than the chosen one that the catalog "
        "offers (with a price) in the region; empty: none faster is sold there.",
    )
    levers: ChosenLevers | None = Field(
        default=None, description="Precision, KV dtype, checkpoint and speculation chosen."
    )
    alerts: Alerts
    entry_point: EntryPoint | None = Field(
        default=None, description="The region's TLS entry point (None without plan.dns)."
    )
    cluster_zone_ids: list[str] = Field(
        description="Zone IDs of the cluster's private subnets: the GPU zones topped up to 2-3."
    )
    capacity: NodeCapacity
    cold_start: ColdStart
    staging: WeightStaging = Field(description="The Job that stages the weights, its manifest.")
    logs_bucket: str | None = Field(
        default=None,
        description="The region's log bucket (ALB access logs, a new VPC's flow logs); None "
        "without an account id, whose name it must carry.",
    )
    costs: Costs
    nodes_per_replica: int = Field(
        default=1, description="Nodes one replica spans (1: a node hosts replicas_per_node)."
    )
    multi_node: MultiNode | None = Field(
        default=None,
        description="A replica spanning nodes: its LeaderWorkerSet, launch, placement group.",
    )
    retiring: bool = Field(
        default=False,
        description="regions[].retire: the region is leaving the fleet (docs/day2.md): no "
        "global routing, its ALB unprotected, its weight bucket emptied on destroy.",
    )
    node_update: NodeUpdate = Field(
        description="How the GPU floor's node group replaces its nodes and how long `pulumi "
        "up` waits for it."
    )
    fabric: Fabric | None = Field(
        default=None,
        description="Traffic between the region's GPU nodes (a replica across nodes, a "
        "disaggregated KV transfer): its transport (EFA or TCP, the image's), the one zone, "
        "the NCCL environment.",
    )
    disaggregation: Disaggregation | None = Field(
        default=None,
        description="Disaggregated serving: the prefill pool, the router, the KV transfer; "
        "the region's replicas, serving and autoscaling are then the decode pool's, its "
        "nodes both pools'.",
    )
    prefix_router: PrefixRouterPlan | None = Field(
        default=None,
        description="edge.balancing prefix_aware: the cache-aware router between the entry "
        "point and the replicas, and what the replicas are expected to cache with and "
        "without it.",
    )
    pinned_alternative: PinnedAlternative | None = Field(
        default=None,
        description="The cheapest configuration with the plan's lever pins (model.precision, "
        "model.kv_cache_dtype) lifted, where it costs less than the pinned one; the reasons "
        "say it with its price.",
    )
    balancing_alternative: BalancingAlternative | None = Field(
        default=None,
        description="With traffic that shares prefixes balanced by least outstanding "
        "requests: the region searched with edge.balancing prefix_aware, where it costs less.",
    )
    replica: ReplicaRecord = Field(
        description="The replica the search sized: layout, the step model's inputs after "
        "levers and calibration, the engine's batch, chunk and memory (a disaggregated "
        "region's decode pool, with its prefill pool); what predict --stack, simulate and "
        "drill read."
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def monthly_cost_usd(self) -> float:
        """Alias of billed_monthly_cost_usd (the key before #31; docs/cli.md#aliases)."""
        return self.billed_monthly_cost_usd

    @computed_field  # type: ignore[prop-decorator]
    @property
    def monthly_cost_usd_at_trough(self) -> float:
        """Alias of billed_monthly_cost_usd_at_trough (the key before #31;
        docs/cli.md#aliases)."""
        return self.billed_monthly_cost_usd_at_trough

    @computed_field  # type: ignore[prop-decorator]
    @property
    def node_zone_ids(self) -> list[str]:
        """Zone IDs of the GPU nodes (2+ where offered); their home: capacity.node_zone_ids."""
        return self.capacity.node_zone_ids

    @computed_field  # type: ignore[prop-decorator]
    @property
    def node_zones(self) -> list[str]:
        """node_zone_ids as the catalog account's zone names; another account's names
        differ, so deploys place by ID."""
        return hardware.zone_names(self.region, self.node_zone_ids)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def availability_zones(self) -> list[str]:
        """cluster_zone_ids as the catalog account's zone names (informational)."""
        return hardware.zone_names(self.region, self.cluster_zone_ids)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tensor_parallel_size(self) -> int:
        """vLLM's --tensor-parallel-size (its home: serving.vllm); a replica's GPUs when it
        has no pipeline stages or data-parallel ranks."""
        return self.serving.vllm.tensor_parallel_size

    @computed_field  # type: ignore[prop-decorator]
    @property
    def layout(self) -> str:
        """The replica's layout, e.g. `TP 8`, `TP 8 x PP 2`, `TP 1 x DP 8 (EP 8)` (from
        serving.vllm)."""
        v = self.serving.vllm
        pp, dp = v.pipeline_parallel_size or 1, v.data_parallel_size or 1
        parts = [f"TP {v.tensor_parallel_size}"]
        parts += [f"PP {pp}"] if pp > 1 else []
        parts += [f"DP {dp}"] if dp > 1 else []
        ep = f" (EP {v.tensor_parallel_size * dp})" if v.enable_expert_parallel else ""
        return " x ".join(parts) + ep


IMAGE_AND_OS_GIB = 100


VOLUME_STEP_GIB = 50


def node_volume_gib(weights_gib: float, replicas_per_node: int) -> int:
    """Root volume: image and OS plus each replica's weight cache (+20 %), in 50 GiB steps."""
    volume = IMAGE_AND_OS_GIB + math.ceil(weights_gib * replicas_per_node * 1.2)
    return math.ceil(volume / VOLUME_STEP_GIB) * VOLUME_STEP_GIB


def reasons(choice: Choice, stage4: LossSizing | None = None) -> list[str]:
    plan, s, inst, mem = choice.plan, choice.sizing, choice.instance, choice.sizing.memory
    p = plan.slo.percentile
    itl_name = f"token gap p{p:g}" if plan.slo.itl == "token_gap" else f"TPOT p{p:g}"
    pt = s.point
    limit_itl_ms = pt.itl_s(plan.slo.itl) * 1000
    given = {95: plan.traffic.input_tokens.p95, 99: plan.traffic.input_tokens.p99}.get(int(p))
    prompt_from = ", as given" if given else ""
    own = stage4.replicas_without_resilience["desired"] if stage4 else choice.replicas.desired
    stall = (f"the longest stall {pt.stall_s * 1000:.0f} ms <= {plan.slo.stall_ms:g} ms"
             + ("" if plan.slo.max_stall_ms is not None
                else f" (slo.max_stall_ms default: {STALL_ITLS} x itl_ms)"))
    steps_line = (
        f"at the SLO limit a replica runs {pt.running:.0f} sequences of its "
        f"{s.slots} slots (max_num_seqs {s.max_num_seqs}) with {s.chunk_tokens}-token prompt "
        f"chunks in {pt.mixed_time_share:.0%} of the time ({pt.mixed_gap_share:.0%} of the "
        f"token gaps): decode step {pt.decode_s * 1000:.1f} ms, mixed step "
        f"{pt.mixed_s * 1000:.1f} ms, {itl_name} {limit_itl_ms:.1f} ms <= "
        f"{plan.slo.itl_ms:g} ms, {stall}; an arrival finds every slot taken "
        f"{pt.slot_full_chance:.2%} of the time"
        if choice.prefill is None
        else f"at the SLO limit a decode replica runs {pt.running:.0f} sequences of its "
        f"{s.slots} slots and no prompt chunk: its step, {pt.decode_s * 1000:.1f} ms, is the "
        f"{itl_name} (<= {plan.slo.itl_ms:g} ms)"
    )
    return [
        f"{inst.instance_type} at {choice.layout.label}: weights {mem.weights_gib_per_gpu:.1f} "
        f"GiB per GPU, KV pool {mem.kv_cache_gib_per_gpu:.1f} GiB per GPU = "
        f"{mem.kv_cache_tokens:,} tokens",
        steps_line,
        f"TTFT p{p:g} is of every prompt length (lognormal through the plan's mean and "
        f"percentiles; the p{p:g} prompt is {ttft_prompt_tokens(plan):,} tokens"
        f"{prompt_from}) with the prefill lane's and the slots' waits as distributions"
        + (f"; {pt.table.workload.prompts.refused:.2%} of prompts exceed max_model_len and "
           "count against it" if pt.table.workload.prompts.refused > 0 else ""),
        f"one replica sustains {s.capacity_requests_per_s:.2f} req/s inside TTFT "
        f"{plan.slo.ttft_ms:g} ms and ITL {plan.slo.itl_ms:g} ms; with {plan.headroom:.0%} "
        f"headroom {own} replicas carry "
        f"the peak {choice.peak_requests_per_s:.2f} req/s"
        + (
            f"; {choice.replicas.desired} run for the region losses it survives (below), "
            f"{choice.peak_requests_per_s_per_replica:.2f} req/s each at its own peak"
            if choice.replicas.desired > own
            else f" ({choice.peak_requests_per_s_per_replica:.2f} each)"
        ),
        (
            f"{choice.replicas_per_node} replica(s) per {inst.gpu_count}-GPU node -> "
            if choice.nodes_per_replica == 1
            else f"each replica spans {choice.nodes_per_replica} {inst.gpu_count}-GPU nodes -> "
        )
        + (
            f"{choice.serving_nodes.desired} decode and {choice.prefill.nodes.desired} prefill "
            "nodes: "
            if choice.prefill is not None
            else ""
        )
        + f"{choice.nodes.desired} nodes at ${choice.price_usd_per_hour:.3f}/h "
        f"({choice.price_source})",
        *_shape_reasons(choice),
        *_cache_reasons(choice),
    ]


def _cache_reasons(choice: Choice) -> list[str]:
    """What the sizing expects the prefix cache to hold of each prompt, and why."""
    hold = choice.sizing.hold
    if hold is None or hold.cache is None:
        return []
    t, c = choice.plan.traffic, hold.cache
    spread = ("keeps a conversation on the replica that holds it"
              if hold.balancing == "prefix_aware" else "spreads a conversation's turns")
    history = (
        f"; a turn finds its conversation's earlier turns on its replica with chance "
        f"{c.same_replica_probability:.0%} (edge.balancing {hold.balancing} {spread} over "
        f"{hold.replicas} replica(s)) and still cached {c.survival_probability:.0%} of the "
        f"time after a {t.think_time_s:g} s think (an untouched block stays "
        f"{min(c.turnover_s, 1e9):.0f} s in the free pool): {c.history_hit_rate:.0%} of "
        f"the history a prompt resends is cached"
        if t.turns > 1 else ""
    )
    shared = (f"the {t.shared_prefix_tokens:,}-token shared prefix stays cached on every "
              "replica" if hold.shared_tokens > 0 and t.shared_prefix_tokens > 0
              else "the pool cannot keep the shared prefix" if t.shared_prefix_tokens > 0
              else "no shared prefix")
    return [
        f"prefix cache: {c.cached_tokens_per_prompt:,.0f} of a mean prompt's "
        f"{t.input_tokens.mean:,} tokens expected cached ({c.hit_rate:.0%}), so prefill "
        f"computes {c.uncached_tokens_per_prompt:,.0f}: {shared}{history}"
    ]


def faster_gpus(choice: Choice) -> tuple[list[str], str | None]:
    """GPUs the region sells (a catalog offering with a price) with more memory bandwidth
    than the chosen one (decode reads the weights and KV from it every step), and a line
    for the reasons: the region has none, or has them but the plan does not allow them."""
    region, gpu = choice.region.name, hardware.gpu(choice.instance.gpu)
    sold = {
        o.instance_type: hardware.instance(o.instance_type)
        for o in hardware.offerings()
        if o.region == region and o.on_demand_usd_per_hour is not None
    }
    gpus = {i.gpu: hardware.gpu(i.gpu) for i in sold.values()}
    faster = sorted(
        (g for g in gpus.values() if g.hbm_bandwidth_gb_s > gpu.hbm_bandwidth_gb_s),
        key=lambda g: (-g.hbm_bandwidth_gb_s, g.gpu),
    )
    names = [g.gpu for g in faster]
    if not faster:
        return [], (
            f"the catalog sells no GPU faster than {gpu.gpu} in {region} "
            f"({gpu.hbm_bandwidth_gb_s:,.0f} GB/s of memory bandwidth; {region} offers "
            f"{', '.join(sorted(gpus))})"
        )
    allowed = {i.instance_type for i in allowed_instances(choice.plan)}
    if not any(n in allowed for n, i in sold.items() if i.gpu in names):
        example = {g: min(n for n, i in sold.items() if i.gpu == g) for g in names}
        listed = ", ".join(f"{g} ({example[g]})" for g in names)
        return names, f"faster GPUs sold in {region} that the plan does not allow: {listed}"
    return names, None


def _shape_reasons(choice: Choice) -> list[str]:
    """Why a replica is laid out beyond one TP group (nothing for a plain one)."""
    shape, mem = choice.layout, choice.sizing.memory
    out = []
    if shape.ep:
        out.append(
            f"{shape.dp} data-parallel ranks of TP {shape.tp}, the experts spread over EP "
            f"{shape.ep_size}: each rank keeps its own sequences' KV "
            f"({mem.kv_cache_tokens // shape.dp:,} tokens a rank, {mem.kv_cache_tokens:,} in all), "
            "and every MoE layer gathers the ranks' tokens to the experts and back"
        )
    if shape.pp > 1:
        out.append(
            f"{shape.pp} pipeline stages of TP {shape.tp}: the running batch splits into "
            f"{shape.pp} microbatches in flight; a token waits for all stages and "
            f"{shape.pp} hops, so the KV pool grows with the stages but a step does not shrink"
        )
    return out


def build_region_plan(
    choice: Choice,
    alternatives: list[Alternative],
    consts: Constants,
    pessimistic: Constants,
    stage4: LossSizing | None = None,
) -> RegionPlan:
    """The region's section of the FleetPlan, from the search's choice (and, when stage 4
    raised its floor, why)."""
    plan, region, inst = choice.plan, choice.region, choice.instance
    field = f"regions[{plan.regions.index(region)}]"
    weights_gib = download_gib(choice)
    account = account_of(plan)
    gpu_zone_ids = node_zone_ids(region, field, inst.instance_type)
    fabric = build_fabric(choice, gpu_zone_ids[0])
    if fabric is not None:  # traffic between GPU nodes: one zone (fleetplan.fabric)
        gpu_zone_ids = [fabric.zone_id]
    zone_ids = cluster_zone_ids(region.name, gpu_zone_ids)
    floor = build_always_on(choice, stage4)
    cold = build_cold_start(choice, weights_gib)
    multi = build_multi_node(choice, field)
    work = build_workload(
        plan, inst, "LeaderWorkerSet" if multi else "Deployment",
        pods_per_node(choice.replicas_per_node, choice.nodes_per_replica),
    )
    capacity = build_node_capacity(
        choice, floor, gpu_zone_ids, field, cold,
        work.pdb_max_unavailable // choice.nodes_per_replica,
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
    serve = build_serving(choice, weights_gib, cold)
    if choice.prefill is not None and fabric is not None:
        serve = with_kv_transfer(serve, fabric.kv_backend)
    disagg = build_disaggregation(
        choice, weights_gib, cold, work.labels, work.namespace, serve.vllm.served_model_name,
        fabric.kv_backend if fabric else "",
    )
    update = build_node_update(
        capacity.floor_nodes, choice.nodes_per_replica, cold.total_s, serve.termination_grace_s
    )
    expected = build_predicted(choice, consts)
    bound = build_binding(choice)
    faster, faster_note = faster_gpus(choice)
    volume = node_volume_gib(weights_gib / choice.nodes_per_replica, choice.replicas_per_node)
    cost = build_costs(
        choice, capacity, floor, build_system_pool(), volume, weights_gib, len(zone_ids)
    )
    return RegionPlan(
        region=region.name,
        traffic_share=region.traffic_share,
        peak_requests_per_s=_round(choice.peak_requests_per_s, 4),
        trough_requests_per_s=_round(choice.trough_requests_per_s, 4),
        instance_type=inst.instance_type,
        gpu=inst.gpu,
        gpus_per_node=inst.gpu_count,
        replicas_per_node=choice.replicas_per_node,
        replicas=replicas,
        nodes=MinDesiredMax(min=floor.nodes, desired=choice.nodes.desired, max=choice.nodes.max),
        price_usd_per_hour=choice.price_usd_per_hour,
        price_source=choice.price_source,
        billed_monthly_cost_usd=cost.gpu_peak,
        billed_monthly_cost_usd_at_trough=cost.gpu_trough,
        on_demand_monthly_cost_usd=round(choice.on_demand_monthly_cost_usd, 2),
        predicted=expected,
        binding=bound,
        risk=build_risk(choice, expected, pessimistic),
        batch_curve=build_batch_curve(choice),
        memory=build_memory(choice),
        serving=serve,
        autoscaling=build_decode_autoscaling(
            choice, work.namespace, serve.vllm.served_model_name, cold.container_s
        )
        if disagg
        else build_autoscaling(
            choice, replicas, work.namespace, serve.vllm.served_model_name, cold.container_s
        ),
        workload=work,
        system_pool=build_system_pool(),
        node_volume_gib=volume,
        vpc_id=region.network.vpc_id if region.network else None,
        private_subnet_ids=region.network.private_subnet_ids if region.network else None,
        vpc_cidr=region.vpc_cidr,
        subnets=[]
        if region.network
        else subnet_layout(region.vpc_cidr, region.name, zone_ids, f"{field}.cluster_zone_ids"),
        reasons=[
            *reasons(choice, stage4),
            bound.text,
            *([faster_note] if faster_note else []),
            *(disagg.reasons if disagg else []),
            *(fabric.reasons if fabric else []),
            update.reason,
        ],
        faster_gpus=faster,
        alternatives=alternatives,
        levers=build_chosen_levers(choice),
        alerts=build_alerts(plan, replicas, serve, work),
        cluster_zone_ids=zone_ids,
        capacity=capacity,
        cold_start=cold,
        staging=build_weight_staging(
            plan, region.name, served(plan, choice.model, choice.served_levers).hf_repo,
            weights_gib, work, serve.scanner_skips,
        ),
        logs_bucket=logs_bucket(plan.name, region.name, account),
        costs=cost,
        nodes_per_replica=choice.nodes_per_replica,
        multi_node=multi,
        disaggregation=disagg,
        replica=build_replica_record(choice),
        fabric=fabric,
        node_update=update,
        retiring=region.retire,
    )
