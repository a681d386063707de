"""Disaggregated serving as a lever: per region, a prefill pool and a decode pool of one
instance type, each in its own shape (TP inside a node, or across nodes where a replica may
span them), priced against aggregated serving (`perf.disagg`).

- Decode pool: an engine that prefills nothing; its SLO-limit rate keeps the token gap (a
  decode period) and the stall within their targets and an arrival finding the slots full
  within 1 - p, its slots then cut to the fewest that hold them.
- Prefill pool: the highest rate of prompts one replica takes while TTFT at the percentile
  (request handling, its lane's wait, the prompt's own prefill, its KV's transfer, the decode
  pool's first period and slot wait, with the decode pool at its own limit) meets the target.
- The KV crosses between the pools' nodes as the pods get it: EFA with GPUDirect RDMA where
  the serving image carries the EFA plugin, else NIXL's UCX TCP transport on the ENA interface
  (catalog/tcp.csv: a fraction of a GB/s, one connection a transfer). Only instance types whose
  nodes a replica may span (catalog.network) are tried: their nodes share a placement.
- Replicas per pool cover the region's peak with headroom and its region losses, as for
  aggregated replicas.

The levers are those of aggregated serving without speculation. The cheapest pair per
instance type is listed as an alternative; the region chooses it when it is cheaper than the
best aggregated candidate."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from llmfleet.catalog import hardware, network
from llmfleet.catalog.constants import Constants
from llmfleet.catalog.hardware import Instance
from llmfleet.data import MinDesiredMax
from llmfleet.perf.architecture import kv_dtype_bytes
from llmfleet.perf.disagg import Pair, kv_transfer_s
from llmfleet.perf.latency import Point, at_rate
from llmfleet.perf.layout import node_link
from llmfleet.perf.memory import MemoryBudget
from llmfleet.perf.parallel import InterNode, Link
from llmfleet.perf.periods import Engine, Table, table_for
from llmfleet.perf.workload import SloTargets
from llmfleet.plan.model import ResolvedModel
from llmfleet.plan.regions import Region
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.capacity_bound import capacity_upper_bound
from llmfleet.search.choice import Choice, PrefillPool
from llmfleet.search.cost import nodes_for_monthly_usd
from llmfleet.search.levers import Levers, gpu_problem
from llmfleet.search.operating_point import (
    MAX_BATCH,
    Rejection,
    ReplicaSizing,
    engine_memory,
    engine_slots,
    shrink_slots,
)
from llmfleet.search.replica_slo import slo_of, workload_of
from llmfleet.search.replicas import deployed_replicas, nodes_for
from llmfleet.search.shapes import Shape, inter_node, shapes
from llmfleet.search.slo_limit import RATE_TOLERANCE, max_rate

PREFILL_BUDGET = 8192
"""Prompt tokens a prefill step carries: nothing decodes beside it (vLLM's default budget on
H100-class GPUs)."""
PREFILL_SEQS = 64
"""Prompts a prefill engine holds at once (its max_num_seqs)."""
DECODE_CHUNK = 128
"""A decode engine's token budget beyond its slots (the KV arrives computed)."""


@dataclass(frozen=True)
class DecodeSizing:
    shape: Shape
    sizing: ReplicaSizing

    @property
    def tp(self) -> int:
        return self.shape.tp


@dataclass(frozen=True)
class Disaggregated:
    """A priced prefill/decode pair on one instance type (the decode pool is `choice`)."""

    choice: Choice
    prefill_tp: int

    @property
    def on_demand_monthly_cost_usd(self) -> float:
        return self.choice.on_demand_monthly_cost_usd


def kv_link(instance: Instance, transport: InterNode) -> Link | None:
    """The link the KV crosses between the pools' nodes (None: nodes a replica may not span).
    Over TCP one UCX connection carries a transfer: its rate is the link's, not a GPU's."""
    if network.multi_node_row(instance) is None:
        return None
    if transport == "tcp":
        tcp = network.tcp(instance.instance_type)
        if tcp is None:
            return None
        return Link("tcp", tcp.latency_us * 1e-6, tcp.kv_transfer_gb_s * 1e9,
                    tcp.kv_transfer_gb_s * 1e9)
    return node_link(instance, "efa")


def transfer_s(model: ResolvedModel, levers: Levers, prompts: np.ndarray, link: Link,
               readers: int) -> np.ndarray:
    """Each prompt's KV from a prefill replica to a decode replica (`readers`: the decode
    replica's TP group; over TCP one connection)."""
    kv_b = kv_dtype_bytes(levers.kv_cache_dtype)
    per_reader = 1 if link.name == "tcp" else readers
    return np.array([
        kv_transfer_s(model.arch.kv_bytes_per_sequence(int(n), kv_b), link, per_reader)
        for n in prompts
    ])


def _engine_table(
    model: ResolvedModel, instance: Instance, shape: Shape, plan: CapacityPlan,
    consts: Constants, levers: Levers, role: str,
) -> tuple[Table, ReplicaSizing] | Rejection:
    """A pool's engine and its table: a decode engine holds every slot the KV pool takes,
    a prefill engine PREFILL_SEQS prompts and a PREFILL_BUDGET budget."""
    arch, gpu = model.arch, hardware.gpu(instance.gpu)
    problem = shape.problem(arch, instance) or gpu_problem(arch, gpu, levers)
    if shape.plain and instance.gpu_count % shape.tp:
        problem = f"TP {shape.tp} does not divide the {instance.gpu_count} GPUs of a node"
    if problem:
        return Rejection(problem, "shape")
    transport = inter_node(plan.startup.image)
    par = shape.parallel(instance, transport)
    wl = workload_of(plan)
    sm = levers.step_model(arch, gpu, shape.tp, consts, parallel=par)
    if role == "decode":
        slots, mem = engine_slots(arch, gpu, shape.tp, plan, MAX_BATCH + DECODE_CHUNK, consts,
                                  levers, par, wl.context_tokens)
        if slots < 1:
            return Rejection(f"{shape.label}: the KV pool holds no running sequence", "memory")
        budget = -(-slots // (par.pp * par.dp)) + DECODE_CHUNK
        engine = Engine(sm, slots, budget, mem.kv_cache_tokens, prefills=False)
    else:
        mem = engine_memory(arch, gpu, shape.tp, plan, PREFILL_SEQS, PREFILL_BUDGET, consts,
                            levers, par)
        if mem.kv_cache_tokens < plan.max_model_len:
            return Rejection(f"{shape.label}: the KV pool cannot hold a "
                             f"{plan.max_model_len:,}-token request", "memory")
        engine = Engine(sm, PREFILL_SEQS, PREFILL_BUDGET, mem.kv_cache_tokens, decodes=False)
    table = table_for(engine, wl)
    empty = Point(table, 0.0, 0.0, plan.slo.percentile)
    return table, ReplicaSizing(engine.slots, engine.budget_tokens, empty, mem, par.dp)


def size_decode(
    model: ResolvedModel, instance: Instance, shape: Shape, plan: CapacityPlan,
    consts: Constants, levers: Levers,
) -> ReplicaSizing | Rejection:
    """A decode replica at its SLO-limit rate: the token gap (a decode period), the stall and
    the slots within their targets (TTFT is the pair's), slots cut to the fewest."""
    built = _engine_table(model, instance, shape, plan, consts, levers, "decode")
    if isinstance(built, Rejection):
        return built
    table, empty = built
    slo = replace(slo_of(plan), ttft_s=math.inf)
    rate = max_rate(table, slo)
    if rate <= 0:
        floor = table.decode_s[1] * 1000
        return Rejection(f"a decode step at batch 1 takes {floor:.1f} ms", "itl", floor)
    gpu = hardware.gpu(instance.gpu)

    def memory(slots: int) -> MemoryBudget:
        return engine_memory(model.arch, gpu, shape.tp, plan, slots, table.engine.budget_tokens,
                             consts, levers, table.engine.step_model.parallel)

    final, rate = shrink_slots(table, slo, rate, lambda n: memory(n).kv_cache_tokens)
    e = final.engine
    mem = memory(e.slots)
    point = at_rate(final, rate, plan.slo.percentile)
    return ReplicaSizing(e.slots, e.budget_tokens, point, mem, e.step_model.parallel.dp)


def size_prefill(
    model: ResolvedModel, instance: Instance, shape: Shape, plan: CapacityPlan,
    consts: Constants, levers: Levers, decode: DecodeSizing, link: Link,
) -> PrefillPool | Rejection:
    """A prefill replica's capacity inside the TTFT target, feeding `decode`'s replicas at
    their own SLO-limit rate (replicas and nodes are filled in by `price_pair`)."""
    built = _engine_table(model, instance, shape, plan, consts, levers, "prefill")
    if isinstance(built, Rejection):
        return built
    table, empty = built
    slo = slo_of(plan)
    moved = transfer_s(model, levers, table.workload.prompts.tokens, link, decode.tp)
    dec = decode.sizing.point

    def pair(rate: float) -> Pair:
        return Pair(Point(table, rate, 0.0, slo.percentile), dec, moved)

    rate = _max_pair_rate(pair, table, slo)
    if rate <= 0:
        idle = pair(0.0)
        best = idle.ttft_at() * 1000
        return Rejection(
            f"a nearly idle pair takes {best:.0f} ms to the first token at "
            f"p{plan.slo.percentile:g} (the KV crosses {link.name.upper()}: "
            f"{float(moved.max()) * 1000:.0f} ms for the longest prompt)", "ttft", best,
        )
    at = pair(rate)
    return PrefillPool(
        shape=shape,
        step_model=table.engine.step_model,
        sizing=replace(empty, point=at.prefill),
        replicas=MinDesiredMax(min=0, desired=0, max=0),
        nodes=MinDesiredMax(min=0, desired=0, max=0),
        link=link,
        transfer_s=moved,
        pair=at,
    )


def _max_pair_rate(pair: Callable[[float], Pair], table: Table, slo: SloTargets) -> float:
    """The highest prefill rate at which the pair meets every SLO, by bisection on the log
    of the rate below the lane's saturation."""
    work = float(table.work_mean_s[0]) * table.engine.lanes
    top = 1.0 / max(work, 1e-12) / table.workload.prompts.admitted
    if pair(top * 1e-6).margin(slo) > 1e-9:
        return 0.0
    lo, hi = math.log(top * 1e-6), math.log(top)
    while hi - lo > math.log1p(RATE_TOLERANCE):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if pair(math.exp(mid)).margin(slo) <= 1e-9 else (lo, mid)
    return math.exp(lo)


@dataclass(frozen=True)
class Pricing:
    """Everything a pair needs besides its pools: the region, its price, the replica rule."""

    plan: CapacityPlan
    model: ResolvedModel
    region: Region
    instance: Instance
    price_usd_per_hour: float
    price_source: str


def price_pair(
    p: Pricing,
    levers: Levers,
    decode: DecodeSizing,
    prefill: PrefillPool,
    replicas: dict[tuple[float, float], MinDesiredMax],
) -> Disaggregated:
    """The pair's replicas, nodes and Choice (the decode pool, with its prefill pool)."""
    gpn = p.instance.gpu_count

    def pool(capacity: float, shape: Shape, in_loss: float
             ) -> tuple[MinDesiredMax, MinDesiredMax]:
        if (capacity, in_loss) not in replicas:
            replicas[capacity, in_loss] = deployed_replicas(
                p.plan, p.region, capacity, loss_requests_per_s=in_loss
            )
        rep = replicas[capacity, in_loss]
        return rep, nodes_for(rep, shape.replicas_per_node(gpn), shape.nodes_per_replica(gpn))

    d = decode.sizing
    d_rep, d_nodes = pool(d.capacity_requests_per_s, decode.shape, d.loss_requests_per_s)
    cap = prefill.sizing.capacity_requests_per_s
    p_rep, p_nodes = pool(cap, prefill.shape, cap)
    total = MinDesiredMax(
        min=d_nodes.min + p_nodes.min,
        desired=d_nodes.desired + p_nodes.desired,
        max=d_nodes.max + p_nodes.max,
    )
    choice = Choice(
        plan=p.plan,
        model=p.model,
        region=p.region,
        instance=p.instance,
        step_model=d.engine.step_model,
        sizing=d,
        price_usd_per_hour=p.price_usd_per_hour,
        price_source=p.price_source,
        replicas=d_rep,
        nodes=total,
        searched_levers=levers,
        shape=None if decode.shape.plain else decode.shape,
        prefill=replace(prefill, replicas=p_rep, nodes=p_nodes),
    )
    return Disaggregated(choice, prefill.tp)


Pair3 = tuple[Levers, DecodeSizing, PrefillPool]


class PairSizer:
    """Decode and prefill pools of one instance type, sized on demand and memoised (they do
    not depend on the region); `pairs` skips decode pools that alone cost more than a bound."""

    def __init__(
        self,
        model: ResolvedModel,
        instance: Instance,
        plan: CapacityPlan,
        levers: list[Levers],
        consts: Constants,
    ) -> None:
        self.model, self.instance, self.plan, self.consts = model, instance, plan, consts
        self.levers = [lv for lv in levers if lv.spec is None]
        self.link = kv_link(instance, inter_node(plan.startup.image))
        found = shapes(model.arch, instance)
        if not plan.allowed.multi_node:
            found = [s for s in found if s.nodes_per_replica(instance.gpu_count) == 1]
        self.shapes = found
        self.why: list[str] = []
        self._decode: dict[tuple[Levers, Shape], DecodeSizing | None] = {}
        self._prefill: dict[tuple[Levers, Shape, Shape], PrefillPool | None] = {}
        if self.link is None:
            why = network.why_single_node(self.instance)
            self.why.append(f"{why}: the KV would not cross to the decode pool")

    def decode_bound(self, lv: Levers, shape: Shape) -> float:
        """Requests/s a decode replica of this shape cannot exceed (its KV pool's slots at
        the ITL target, `capacity_upper_bound` without a prefill lane)."""
        return capacity_upper_bound(
            self.model.arch, hardware.gpu(self.instance.gpu), self.instance, shape, self.plan,
            self.consts, lv, prefills=False,
        )

    def decode(self, lv: Levers, shape: Shape) -> DecodeSizing | None:
        key = (lv, shape)
        if key not in self._decode:
            sized = size_decode(self.model, self.instance, shape, self.plan, self.consts, lv)
            if isinstance(sized, Rejection):
                self.why.append(f"decode {shape.label} ({lv.label}): {sized.reason}")
                self._decode[key] = None
            else:
                self._decode[key] = DecodeSizing(shape, sized)
        return self._decode[key]

    def prefill(self, lv: Levers, decode: DecodeSizing, shape: Shape) -> PrefillPool | None:
        key = (lv, decode.shape, shape)
        if key not in self._prefill:
            assert self.link is not None
            pre = size_prefill(self.model, self.instance, shape, self.plan, self.consts, lv,
                               decode, self.link)
            if isinstance(pre, Rejection):
                self.why.append(f"prefill {shape.label} ({lv.label}): {pre.reason}")
                self._prefill[key] = None
            else:
                self._prefill[key] = pre
        return self._prefill[key]

    def pairs(self, nodes: Callable[[float, float, Shape], int], most_nodes: float
              ) -> list[Pair3]:
        """Feasible pairs whose decode pool alone needs fewer than `most_nodes` nodes (a pair
        needs at least one prefill node more); `nodes(capacity, in a loss, shape)`. A decode
        pool whose capacity bound already needs as many is not sized."""
        out: list[Pair3] = []
        if self.link is None:
            return out
        for lv in self.levers:
            for shape in self.shapes:
                bound = self.decode_bound(lv, shape)
                if bound <= 0 or nodes(bound, bound, shape) + 1 > most_nodes:
                    continue
                decode = self.decode(lv, shape)
                if decode is None:
                    continue
                d = decode.sizing
                if nodes(d.capacity_requests_per_s, d.loss_requests_per_s, shape) + 1 \
                        > most_nodes:
                    continue
                for pre_shape in self.shapes:
                    pre = self.prefill(lv, decode, pre_shape)
                    if pre is not None:
                        out.append((lv, decode, pre))
        return out


def cheapest_pair(p: Pricing, sizer: PairSizer, best_usd: float) -> Disaggregated | None:
    """The region's cheapest pair on this instance type that could beat `best_usd` (ties:
    fewer nodes, plainer levers): nodes first for every pair, the Choice for the cheapest."""
    replicas: dict[tuple[float, float], MinDesiredMax] = {}
    gpn = p.instance.gpu_count

    def nodes(capacity: float, in_loss: float, shape: Shape) -> int:
        if (capacity, in_loss) not in replicas:
            replicas[capacity, in_loss] = deployed_replicas(
                p.plan, p.region, capacity, loss_requests_per_s=in_loss
            )
        rep = replicas[capacity, in_loss]
        return nodes_for(rep, shape.replicas_per_node(gpn), shape.nodes_per_replica(gpn)).desired

    def total(pair: Pair3) -> int:
        _, d, pre = pair
        cap = pre.sizing.capacity_requests_per_s
        return nodes(d.sizing.capacity_requests_per_s, d.sizing.loss_requests_per_s, d.shape) \
            + nodes(cap, cap, pre.shape)

    most = nodes_for_monthly_usd(best_usd, p.price_usd_per_hour) + 1e-9
    pairs = sizer.pairs(nodes, most)
    if not pairs:
        return None
    lv, decode, pre = min(pairs, key=total)
    return price_pair(p, lv, decode, pre, replicas)


def pair_at(choice: Choice, decode_rate: float, prefill_rate: float) -> Pair:
    """A disaggregated region's pair when its decode replicas each take `decode_rate`
    requests/s and its prefill replicas `prefill_rate`."""
    pre = choice.prefill
    assert pre is not None
    p = choice.plan.slo.percentile
    dec = at_rate(choice.sizing.point.table, decode_rate, p)
    return Pair(Point(pre.sizing.point.table, prefill_rate, 0.0, p), dec, pre.transfer_s)


def resize_pair(choice: Choice, consts: Constants) -> Choice | Rejection:
    """The same pools (instance type, shapes, levers) re-sized with other constants (the risk
    section's pessimistic ones) and re-priced, or why they no longer meet the SLOs."""
    pre = choice.prefill
    assert pre is not None
    lv, inst, plan = choice.served_levers, choice.instance, choice.plan
    decode = size_decode(choice.model, inst, choice.layout, plan, consts, lv)
    if isinstance(decode, Rejection):
        return decode
    sized = DecodeSizing(choice.layout, decode)
    prefill = size_prefill(choice.model, inst, pre.shape, plan, consts, lv, sized, pre.link)
    if isinstance(prefill, Rejection):
        return prefill
    p = Pricing(plan, choice.model, choice.region, inst, choice.price_usd_per_hour,
                choice.price_source)
    return price_pair(p, lv, sized, prefill, {}).choice
