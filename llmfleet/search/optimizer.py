"""The search: per region, try every allowed (instance type, TP, precision, KV dtype,
speculation) and keep the cheapest.

Candidates are the allowed instance types offered in the region with a price, each at
every TP and every point of the lever space (`levers.lever_space`); each is sized by
`operating_point.size_replica` (memoised per instance type, TP and levers: regions share
them); replicas cover the region's peak share with headroom, raised for the region losses
it must survive (`region_losses`); nodes pack replicas; the cheapest monthly cost wins
(ties: the plainer levers, then fewer GPUs, then more spare capacity, then name;
`Choice.rank`). The
search only chooses: `fleetplan` turns the choice into a FleetPlan."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from pydantic import Field, computed_field

from llmfleet.calibration.server_calibration import Coverage, Covered
from llmfleet.catalog import hardware, network
from llmfleet.catalog.constants import Constants
from llmfleet.catalog.hardware import Instance
from llmfleet.data import Data, MinDesiredMax
from llmfleet.perf.step import NO_CORRECTION, Correction
from llmfleet.plan.model import ResolvedModel
from llmfleet.plan.regions import Region
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search import cost
from llmfleet.search.capacity_bound import capacity_upper_bound
from llmfleet.search.choice import Choice
from llmfleet.search.disagg import PairSizer, Pricing, cheapest_pair
from llmfleet.search.infeasible import closest_per_candidate, infeasible
from llmfleet.search.levers import Levers, lever_space
from llmfleet.search.operating_point import (
    Rejection,
    ReplicaSizing,
    size_replica,
)
from llmfleet.search.prefix_hold import CacheHold, hold_at, reuses, shared_only
from llmfleet.search.region_losses import loss_demands
from llmfleet.search.replicas import deployed_replicas, nodes_for
from llmfleet.search.shapes import Shape, inter_node, shapes
from llmfleet.units import round_or_none


class Alternative(Data):
    instance_type: str
    tensor_parallel_size: int
    feasible: bool
    on_demand_monthly_cost_usd: float | None = Field(
        description="Its nodes at the node's price (on-demand or plan.prices) for a month: "
        "what the search compares; None: not sized."
    )
    reason: str
    precision: str | None = Field(default=None, description="Weight precision tried.")
    kv_cache_dtype: str | None = Field(default=None, description="KV cache dtype tried.")
    speculative: str | None = Field(
        default=None, description="Speculative method tried (None: no speculation)."
    )
    on_demand_gpu_at_peak_usd_per_million_output_tokens: float | None = Field(
        default=None,
        description="Its nodes at the peak at the node's price for an hour over the output "
        "tokens the region's peak serves in it (a floor on the cost per token).",
    )
    pruned: bool = Field(
        default=False,
        description="Not sized: even at its capacity upper bound it costs more than the "
        "chosen candidate (feasible is then unknown and reported false).",
    )

    no_price: bool = Field(
        default=False,
        description="Not sized only because no price is known in the region (add a "
        "plan.prices override): unpriced, not infeasible.",
    )
    chosen: bool = Field(default=False, description="The configuration the search chose.")
    differs: str = Field(
        default="",
        description="What differs from the chosen configuration: instance type, TP, "
        "precision, KV dtype, speculation or layout, each with the chosen value.",
    )
    pipeline_parallel_size: int = Field(default=1, description="Pipeline stages tried.")
    data_parallel_size: int = Field(default=1, description="Data-parallel ranks tried.")
    expert_parallel: bool = Field(default=False, description="Experts spread over TP x DP.")
    nodes_per_replica: int = Field(default=1, description="Nodes one replica spans.")
    shape: str | None = Field(
        default=None, description="The replica's layout, e.g. TP 8 x PP 2 (None: TP only)."
    )
    disaggregated: bool = Field(
        default=False,
        description="A prefill pool and a decode pool (tensor_parallel_size is the decode "
        "pool's); priced when allowed.disaggregated.",
    )
    prefill_tensor_parallel_size: int | None = Field(
        default=None, description="The prefill pool's TP (disaggregated only)."
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def monthly_cost_usd(self) -> float | None:
        """Alias of on_demand_monthly_cost_usd (the key before #31; docs/cli.md#aliases)."""
        return self.on_demand_monthly_cost_usd

    @computed_field  # type: ignore[prop-decorator]
    @property
    def usd_per_million_output_tokens(self) -> float | None:
        """Alias of on_demand_gpu_at_peak_usd_per_million_output_tokens (the key before
        #31; docs/cli.md#aliases)."""
        return self.on_demand_gpu_at_peak_usd_per_million_output_tokens


Candidate = tuple[Instance, Shape, Levers]


def allowed_instances(plan: CapacityPlan) -> list[Instance]:
    table = hardware.instances()
    names = list(table)
    if plan.allowed.instance_types is not None:
        names = [
            hardware.instance(n, f"allowed.instance_types[{k}]").instance_type
            for k, n in enumerate(plan.allowed.instance_types)
        ]
    if plan.allowed.gpus is not None:
        gpus = {hardware.gpu(g, f"allowed.gpus[{k}]").gpu for k, g in enumerate(plan.allowed.gpus)}
        names = [n for n in names if table[n].gpu in gpus]
    return [table[n] for n in sorted(names)]


def price_for(plan: CapacityPlan, instance_type: str, region: str) -> tuple[float, str] | None:
    for scope in (region, None):
        for o in plan.prices:
            if o.instance_type == instance_type and o.region == scope:
                return o.usd_per_hour, "plan.prices override"
    off = hardware.offering(instance_type, region)
    if off and off.on_demand_usd_per_hour is not None:
        return off.on_demand_usd_per_hour, f"on-demand list price {off.price_as_of} [catalog]"
    return None





class Sizer:
    """size_replica memoised per (instance type, shape, levers): the plan, model and
    constants are fixed for a FleetPlan, and regions offer mostly the same instance types. A
    server a calibration file covers is sized with its factors (`slowdown`: how much slower
    than them `confidence: pessimistic` sizes it)."""

    def __init__(
        self,
        plan: CapacityPlan,
        model: ResolvedModel,
        consts: Constants,
        coverage: Coverage | None = None,
        slowdown: Callable[[Covered], float] | None = None,
    ) -> None:
        self.plan, self.model, self.consts = plan, model, consts
        self.coverage = coverage or Coverage()
        self.slowdown = slowdown
        self.levers = lever_space(plan, model)
        self.loads = loss_demands(plan)
        self._memo: dict[tuple[str, Shape, Levers], ReplicaSizing | Rejection] = {}
        self._bound: dict[tuple[str, Shape, Levers, bool], float] = {}
        self._pairs: dict[str, PairSizer] = {}

    def share_sizing(self, other: Sizer) -> None:
        """Reuse `other`'s sizings: a candidate's sizing depends on its levers, not on which
        levers a plan pins (the same plan with its pins lifted sizes the pinned points
        again otherwise)."""
        self._memo, self._bound = other._memo, other._bound

    def covered(self, gpu: str, tp: int, levers: Levers) -> Covered | None:
        """The calibration file covering this server, if the plan names one."""
        return self.coverage.find(gpu, tp, levers.precision, levers.kv_cache_dtype)

    def correction(self, gpu: str, tp: int, levers: Levers) -> Correction:
        covered = self.covered(gpu, tp, levers)
        if covered is None:
            return NO_CORRECTION
        return covered.correction(self.slowdown(covered) if self.slowdown else 1.0)

    def pairs(self, inst: Instance) -> PairSizer:
        """Disaggregated prefill/decode pools of this instance type (`search.disagg`),
        memoised: they do not depend on the region."""
        if inst.instance_type not in self._pairs:
            self._pairs[inst.instance_type] = PairSizer(
                self.model, inst, self.plan, self.levers, self.consts
            )
        return self._pairs[inst.instance_type]

    def shapes(self, inst: Instance) -> list[Shape]:
        """The replica shapes tried on this instance type (`search.shapes`); within one node
        only unless the plan allows replicas across nodes (allowed.multi_node)."""
        found = shapes(self.model.arch, inst)
        if self.plan.allowed.multi_node:
            return found
        return [s for s in found if s.nodes_per_replica(inst.gpu_count) == 1]

    def bound(self, inst: Instance, shape: Shape, levers: Levers, slo: bool) -> float:
        """`capacity_bound.capacity_upper_bound` (KV only, or KV and SLOs), memoised like
        the sizing."""
        key = (inst.instance_type, shape, levers, slo)
        if key not in self._bound:
            gpu = hardware.gpu(inst.gpu)
            self._bound[key] = capacity_upper_bound(
                self.model.arch, gpu, inst, shape, self.plan, self.consts, levers, slo,
                self.correction(inst.gpu, shape.tp, levers),
            )
        return self._bound[key]

    def floor_usd(
        self, region: Region, inst: Instance, shape: Shape, levers: Levers, price: float, slo: bool
    ) -> float:
        """The least this candidate can cost a month in `region` (0: unknown; size it)."""
        cap = self.bound(inst, shape, levers, slo)
        if cap <= 0:
            return 0.0
        nodes = self.nodes(inst, shape, self.replicas(region, cap))
        return cost.on_demand_monthly_usd(nodes.desired, price)

    @staticmethod
    def nodes(inst: Instance, shape: Shape, replicas: MinDesiredMax) -> MinDesiredMax:
        gpn = inst.gpu_count
        return nodes_for(replicas, shape.replicas_per_node(gpn), shape.nodes_per_replica(gpn))

    def replicas(
        self,
        region: Region,
        capacity_requests_per_s: float,
        loss_requests_per_s: float | None = None,
    ) -> MinDesiredMax:
        return deployed_replicas(
            self.plan, region, capacity_requests_per_s, self.loads, loss_requests_per_s
        )

    def __call__(
        self, inst: Instance, shape: Shape | int, levers: Levers
    ) -> ReplicaSizing | Rejection:
        """The candidate's sizing; an int is a plain TP group of that size."""
        shape = Shape(shape) if isinstance(shape, int) else shape
        key = (inst.instance_type, shape, levers)
        if key not in self._memo:
            gpu = hardware.gpu(inst.gpu)
            correction = self.correction(inst.gpu, shape.tp, levers)

            def size(hold: CacheHold | None) -> ReplicaSizing | Rejection:
                return size_replica(self.model.arch, gpu, inst, shape, self.plan, self.consts,
                                    levers, correction, hold)

            if not reuses(self.plan):
                self._memo[key] = size(None)
            else:  # two passes: the shared prefix alone, then the cache at that sizing
                first = size(shared_only(self.plan))
                if isinstance(first, ReplicaSizing):
                    first = replace(first, hold=shared_only(self.plan))
                    hold = self._hold_at(first)
                    second = size(hold)
                    if isinstance(second, ReplicaSizing):
                        first = replace(second, hold=hold)
                self._memo[key] = first
        return self._memo[key]

    def _hold_at(self, sizing: ReplicaSizing) -> CacheHold:
        """The cache of `sizing`'s replica at its SLO-limit rate, on the replicas the largest
        region deploys at that rate (`search.prefix_hold`)."""
        rate = sizing.capacity_requests_per_s
        replicas = max(self.replicas(r, rate).desired for r in self.plan.regions)
        pt = sizing.point
        in_flight = rate * (pt.ttft_mean_s + self.plan.traffic.output_tokens.mean
                            * pt.token_s)
        return hold_at(
            self.plan,
            replicas=replicas,
            requests_per_s_per_replica=rate,
            running_sequences=sizing.running,
            context_tokens=pt.table.workload.context_tokens,
            kv_pool_tokens=sizing.memory.kv_cache_tokens,
            max_num_seqs=sizing.max_num_seqs,
            in_flight_per_replica=in_flight,
        )


def choose_region(
    plan: CapacityPlan,
    model: ResolvedModel,
    region: Region,
    consts: Constants,
    sizer: Sizer | None = None,
) -> tuple[Choice, list[Alternative]]:
    """The cheapest feasible candidate of `region`, and every candidate as an alternative."""
    hardware.check_region(region.name, f"regions[{plan.regions.index(region)}].name")
    size = sizer or Sizer(plan, model, consts)
    options: list[Choice] = []
    rejected: list[tuple[Candidate, Rejection]] = []
    offered = [
        i for i in allowed_instances(plan) if hardware.offering(i.instance_type, region.name)
    ]
    pruned: list[tuple[Candidate, float]] = []
    cheapest = math.inf  # the cheapest feasible cost so far
    for (inst, shape, levers), price, floor in _by_cost_bound(plan, region, size, offered):
        if price is None:
            why = f"no on-demand price in {region.name}; add a plan.prices override"
            rejected.append(((inst, shape, levers), Rejection(why, "price")))
            continue
        best = cheapest + 1e-6
        if floor <= best < math.inf:  # the KV-only floor does not prune it: the SLO one may
            floor = size.floor_usd(region, inst, shape, levers, price[0], slo=True)
        if floor > best:
            pruned.append(((inst, shape, levers), floor))
            continue
        result = size(inst, shape, levers)
        if isinstance(result, Rejection):
            rejected.append(((inst, shape, levers), result))
            continue
        replicas = size.replicas(
            region, result.capacity_requests_per_s, result.loss_requests_per_s
        )
        nodes = size.nodes(inst, shape, replicas)
        cheapest = min(cheapest, cost.on_demand_monthly_usd(nodes.desired, price[0]))
        gpu = hardware.gpu(inst.gpu)
        options.append(
            Choice(
                plan=plan,
                model=model,
                region=region,
                instance=inst,
                step_model=levers.step_model(
                    model.arch, gpu, shape.tp, consts,
                    size.correction(inst.gpu, shape.tp, levers),
                    shape.parallel(inst, inter_node(plan.startup.image)),
                ),
                calibration=size.covered(inst.gpu, shape.tp, levers),
                sizing=result,
                price_usd_per_hour=price[0],
                price_source=price[1],
                replicas=replicas,
                nodes=nodes,
                searched_levers=levers,
                shape=None if shape.plain else shape,
            )
        )
    if plan.allowed.disaggregated:
        best = min((o.on_demand_monthly_cost_usd for o in options), default=math.inf)
        options += _disaggregated(plan, model, region, size, offered, best)
    order = {lv: k for k, lv in enumerate(size.levers)}
    if not options:
        # Advice reads one rejection per (instance, TP): the lever setting that came closest.
        by_tp = [((i, shape.tp, lv), r) for (i, shape, lv), r in rejected]
        closest = closest_per_candidate(by_tp, order)
        raise infeasible(plan, model, region, offered, closest, size.levers)
    options.sort(key=lambda o: (o.rank, order[o.served_levers]))
    return options[0], _alternatives(options, rejected, pruned)


LISTED_WITHIN = 1.25
"""Disaggregated pairs are sized (and listed) up to this multiple of the best aggregated cost."""


def _disaggregated(
    plan: CapacityPlan,
    model: ResolvedModel,
    region: Region,
    size: Sizer,
    offered: list[Instance],
    best_usd: float,
) -> list[Choice]:
    """The cheapest prefill/decode pair of each priced instance type whose nodes share EFA
    with GPUDirect RDMA (the KV crosses it), as Choices of their decode pools; pairs whose
    decode pool alone costs more than twice the best aggregated candidate are not sized
    (nearer ones are listed as alternatives with their cost)."""
    out = []
    for inst in offered:
        price = price_for(plan, inst.instance_type, region.name)
        if price is None or network.multi_node_row(inst) is None:
            continue
        pricing = Pricing(plan, model, region, inst, price[0], price[1])
        best = cheapest_pair(pricing, size.pairs(inst), LISTED_WITHIN * best_usd)
        if best is not None:
            out.append(best.choice)
    return out


def _by_cost_bound(
    plan: CapacityPlan, region: Region, size: Sizer, offered: list[Instance]
) -> list[tuple[Candidate, tuple[float, str] | None, float]]:
    """Every candidate with its price and the least it can cost (from its capacity upper
    bound), cheapest floor first, so the search can stop sizing once floors pass the best."""
    out = []
    for inst in offered:
        price = price_for(plan, inst.instance_type, region.name)
        for shape in size.shapes(inst):
            for levers in size.levers:
                if levers.spec is not None and not shape.plain:
                    continue  # a drafter runs beside one TP group (search.shapes)
                floor = size.floor_usd(region, inst, shape, levers, price[0], False) if price else 0
                out.append(((inst, shape, levers), price, floor))
    return sorted(out, key=lambda c: c[2])


def differs(chosen: Candidate, other: Candidate) -> str:
    """What `other` changes against the chosen candidate, each with the chosen value:
    "TP 2 (chosen 4); KV auto (chosen fp8)"."""
    (ci, cs, clv), (i, s, lv) = chosen, other
    out = []
    if i.instance_type != ci.instance_type:
        out.append(f"{i.instance_type} (chosen {ci.instance_type})")
    if s.tp != cs.tp:
        out.append(f"TP {s.tp} (chosen {cs.tp})")
    if (s.pp, s.dp, s.ep) != (cs.pp, cs.dp, cs.ep):
        out.append(f"{s.label} (chosen {cs.label})")
    if lv.precision != clv.precision:
        out.append(f"{lv.precision} (chosen {clv.precision})")
    if lv.kv_cache_dtype != clv.kv_cache_dtype:
        out.append(f"KV {lv.kv_cache_dtype} (chosen {clv.kv_cache_dtype})")
    if lv.speculative != clv.speculative:
        out.append(f"{lv.speculative or 'no speculation'} (chosen {clv.speculative or 'none'})")
    return "; ".join(out)


def _candidate(o: Choice) -> Candidate:
    return (o.instance, o.layout, o.served_levers)


def _choice_fields(o: Choice) -> dict[str, object]:
    """A feasible Alternative's layout keys: its shape, or its two pools."""
    if o.prefill is not None:
        p = o.prefill
        return {
            "disaggregated": True,
            "prefill_tensor_parallel_size": p.tp,
            "shape": f"disaggregated: prefill TP {p.tp} x {p.replicas.desired}, decode TP "
            f"{o.tp} x {o.replicas.desired}",
        }
    return _shape_fields(o.layout, o.instance)


def _shape_fields(shape: Shape, inst: Instance) -> dict[str, object]:
    """An Alternative's layout keys (defaults for a plain TP group)."""
    if shape.plain:
        return {}
    return {
        "pipeline_parallel_size": shape.pp,
        "data_parallel_size": shape.dp,
        "expert_parallel": shape.ep,
        "nodes_per_replica": shape.nodes_per_replica(inst.gpu_count),
        "shape": shape.label,
    }


def _alternatives(
    options: list[Choice],
    rejected: list[tuple[Candidate, Rejection]],
    pruned: list[tuple[Candidate, float]],
) -> list[Alternative]:
    best = options[0].on_demand_monthly_cost_usd
    chosen = _candidate(options[0])
    return (
        [
            Alternative(
                instance_type=o.instance.instance_type,
                tensor_parallel_size=o.tp,
                feasible=True,
                on_demand_monthly_cost_usd=round(o.on_demand_monthly_cost_usd, 2),
                reason="chosen: cheapest feasible"
                if k == 0
                else f"{o.on_demand_monthly_cost_usd / best:.2f}x the cost "
                f"({o.nodes.desired} x {o.instance.instance_type})",
                precision=o.served_levers.precision,
                kv_cache_dtype=o.served_levers.kv_cache_dtype,
                speculative=o.served_levers.speculative,
                on_demand_gpu_at_peak_usd_per_million_output_tokens=round_or_none(
                    o.on_demand_gpu_at_peak_usd_per_million_output_tokens, 4
                ),
                chosen=k == 0,
                differs="; ".join(
                    part for part in ("disaggregated pools" if o.prefill is not None else "",
                                      differs(chosen, _candidate(o))) if part
                ),
                **_choice_fields(o),
            )
            for k, o in enumerate(options)
        ]
        + [
            Alternative(
                instance_type=i.instance_type,
                tensor_parallel_size=shape.tp,
                feasible=False,
                on_demand_monthly_cost_usd=None,
                reason=r.reason,
                no_price=r.kind == "price",
                precision=lv.precision,
                kv_cache_dtype=lv.kv_cache_dtype,
                speculative=lv.speculative,
                differs=differs(chosen, (i, shape, lv)),
                **_shape_fields(shape, i),
            )
            for (i, shape, lv), r in rejected
        ]
        + [
            Alternative(
                instance_type=i.instance_type,
                tensor_parallel_size=shape.tp,
                feasible=False,
                on_demand_monthly_cost_usd=None,
                reason=f"not sized: at its capacity upper bound it costs at least "
                f"${floor:,.0f}/month, more than the chosen ${best:,.0f}",
                precision=lv.precision,
                kv_cache_dtype=lv.kv_cache_dtype,
                speculative=lv.speculative,
                pruned=True,
                differs=differs(chosen, (i, shape, lv)),
                **_shape_fields(shape, i),
            )
            for (i, shape, lv), floor in pruned
        ]
    )
