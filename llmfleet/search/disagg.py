"""Disaggregated serving as a lever: per region, a prefill pool and a decode pool of one
instance type, each at its own TP, priced against aggregated serving (`perf.disagg`).

- Decode pool: the largest running batch whose decode step (no prompt chunk beside it) stays
  within the ITL target and whose KV fits; a replica sustains batch / (output x step).
- Prefill pool: prompts/s one replica takes while the p-th prompt's TTFT (queue wait, its
  prefill, its KV's transfer to the decode pool, the decode pool's first step) stays within
  the TTFT target.
- Replicas per pool cover the region's peak with headroom and its region losses, as for
  aggregated replicas; the KV moves between nodes over EFA (GPUDirect RDMA; NIXL's LIBFABRIC
  backend), so only instance types a replica may span (catalog.network) are tried.

The levers are those of aggregated serving without speculation (one drafter per decode
replica is possible but not sized here). The cheapest pair per instance type is listed as an
alternative; the region chooses it when it is cheaper than the best aggregated candidate."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from llmfleet.catalog import hardware, network
from llmfleet.catalog.constants import Constants
from llmfleet.catalog.hardware import Instance
from llmfleet.data import MinDesiredMax
from llmfleet.perf.architecture import kv_dtype_bytes
from llmfleet.perf.chunked import MixedSteps
from llmfleet.perf.disagg import (
    PrefillLoad,
    decode_step_s,
    kv_transfer_s,
    prefill_alone_s,
    prefill_token_s,
)
from llmfleet.perf.parallel import Link, efa_link
from llmfleet.perf.queueing import length_cv2, running_batch
from llmfleet.perf.step import StepModel
from llmfleet.plan.model import ResolvedModel
from llmfleet.plan.regions import Region
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.choice import Choice, PrefillPool
from llmfleet.search.levers import Levers, gpu_problem
from llmfleet.search.operating_point import (
    CHUNK_GRID,
    MAX_BATCH,
    Rejection,
    ReplicaSizing,
    kv_batch,
    memory_for,
    slot_loss_share,
)
from llmfleet.search.replica_slo import BATCH_RESOLUTION, ttft_prompt_tokens
from llmfleet.search.replicas import deployed_replicas, nodes_for
from llmfleet.search.shapes import TP_DEGREES, Shape
from llmfleet.units import HOURS_PER_MONTH

PREFILL_CHUNK = CHUNK_GRID[-1]
"""Prompt tokens a prefill step carries: nothing decodes beside it, so the largest budget."""
PREFILL_SEQS = 64
"""Prompts a prefill step may carry (its max_num_seqs)."""
DECODE_CHUNK = CHUNK_GRID[0]
"""A decode replica's token budget beyond its batch (the KV arrives computed)."""


@dataclass(frozen=True)
class DecodeSizing:
    tp: int
    sizing: ReplicaSizing


@dataclass(frozen=True)
class Disaggregated:
    """A priced prefill/decode pair on one instance type (the decode pool is `choice`)."""

    choice: Choice
    prefill_tp: int

    @property
    def monthly_cost_usd(self) -> float:
        return self.choice.monthly_cost_usd


def kv_link(instance: Instance) -> Link | None:
    """The link the KV crosses between the pools' nodes: EFA with GPUDirect RDMA, else None."""
    row = network.multi_node_row(instance)
    if row is None or row.collective_latency_us is None or row.collective_busbw_gb_s is None:
        return None
    return efa_link(row.collective_latency_us, row.collective_busbw_gb_s, row.gb_s_per_gpu)


def size_decode(
    model: ResolvedModel,
    instance: Instance,
    tp: int,
    plan: CapacityPlan,
    consts: Constants,
    levers: Levers,
) -> ReplicaSizing | Rejection:
    """A decode replica: the largest batch whose decode step meets the ITL target and whose
    KV (a whole request each) fits."""
    arch, gpu = model.arch, hardware.gpu(instance.gpu)
    problem = Shape(tp).problem(arch, instance) or gpu_problem(arch, gpu, levers)
    if instance.gpu_count % tp:
        problem = f"TP {tp} does not divide the {instance.gpu_count} GPUs of a node"
    if problem:
        return Rejection(problem, "shape")
    i, o = plan.traffic.input_tokens.mean, plan.traffic.output_tokens.mean
    most = kv_batch(arch, gpu, tp, plan, DECODE_CHUNK, consts, levers)
    if most < 1:
        return Rejection(f"TP {tp}: the KV pool holds no whole request", "memory")
    step_model = levers.step_model(arch, gpu, tp, consts)
    ctx, target = i + o / 2, plan.slo.itl_ms / 1000

    def step(b: float) -> float:
        return decode_step_s(step_model, b, ctx)

    if step(1) > target:
        floor = step(1) * 1000
        return Rejection(f"a decode step at batch 1 takes {floor:.1f} ms", "itl", floor)
    lo, hi = 1.0, float(min(most, MAX_BATCH))
    if step(hi) <= target:
        lo = hi
    while hi - lo > BATCH_RESOLUTION:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if step(mid) <= target else (lo, mid)
    t = step(lo)
    batch = max(1, math.floor(lo))
    mem = memory_for(arch, gpu, tp, plan, batch, batch + DECODE_CHUNK, consts, levers)
    sized = ReplicaSizing(batch, DECODE_CHUNK, MixedSteps(t, t, 0.0), lo / (o * t), mem)
    return replace(sized, loss_share=slot_loss_share(step_model, plan, sized, prefills=False))


def size_prefill(
    model: ResolvedModel,
    instance: Instance,
    tp: int,
    plan: CapacityPlan,
    consts: Constants,
    levers: Levers,
    decode: DecodeSizing,
    link: Link,
) -> PrefillPool | Rejection:
    """A prefill replica's capacity inside the TTFT target, feeding `decode`'s replicas
    (replicas and nodes are filled in by `price_pair`)."""
    arch, gpu = model.arch, hardware.gpu(instance.gpu)
    problem = Shape(tp).problem(arch, instance) or gpu_problem(arch, gpu, levers)
    if instance.gpu_count % tp:
        problem = f"TP {tp} does not divide the {instance.gpu_count} GPUs of a node"
    if problem:
        return Rejection(problem, "shape")
    budget = PREFILL_CHUNK + PREFILL_SEQS
    mem = memory_for(arch, gpu, tp, plan, PREFILL_SEQS, budget, consts, levers)
    prompt = ttft_prompt_tokens(plan)
    if mem.kv_cache_tokens < prompt:
        return Rejection(f"TP {tp}: the KV pool cannot hold a {prompt:,}-token prompt", "memory")
    step_model = levers.step_model(arch, gpu, tp, consts)
    t = plan.traffic.input_tokens
    kv_b = arch.kv_bytes_per_sequence(prompt, kv_dtype_bytes(levers.kv_cache_dtype))
    load = PrefillLoad(
        service_mean_s=t.mean * prefill_token_s(step_model, PREFILL_CHUNK, t.mean / 2),
        cv2=length_cv2(t.mean, t.p95_or_mean),
        prompt_s=prefill_alone_s(step_model, prompt, PREFILL_CHUNK),
        transfer_s=kv_transfer_s(kv_b, link, decode.tp),
        first_step_s=decode.sizing.steps.decode_only_s,
        overhead_s=step_model.ttft_overhead_s,
    )
    target = plan.slo.ttft_ms / 1000
    capacity = load.capacity_requests_per_s(target, plan.slo.percentile)
    if capacity <= 0:
        best = load.ttft_s(0.0, plan.slo.percentile) * 1000
        return Rejection(
            f"a lone p{plan.slo.percentile:g} prompt ({prompt:,} tokens) takes {best:.0f} ms "
            f"to its first token (prefill {load.prompt_s * 1000:.0f} ms, KV transfer "
            f"{load.transfer_s * 1000:.1f} ms)",
            "ttft",
            best,
        )
    empty = MinDesiredMax(min=0, desired=0, max=0)
    return PrefillPool(
        tp=tp,
        step_model=step_model,
        memory=mem,
        chunk_tokens=PREFILL_CHUNK,
        max_num_seqs=PREFILL_SEQS,
        capacity_requests_per_s=capacity,
        replicas=empty,
        nodes=empty,
        kv_transfer_s=load.transfer_s,
        prompt_s=load.prompt_s,
        ttft_s=load.ttft_s(capacity * load.service_mean_s, plan.slo.percentile),
        load=load,
    )


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

    def pool(capacity: float, tp: int, in_loss: float) -> tuple[MinDesiredMax, MinDesiredMax]:
        if (capacity, in_loss) not in replicas:
            replicas[capacity, in_loss] = deployed_replicas(
                p.plan, p.region, capacity, loss_requests_per_s=in_loss
            )
        rep = replicas[capacity, in_loss]
        return rep, nodes_for(rep, gpn // tp)

    d = decode.sizing
    d_rep, d_nodes = pool(d.capacity_requests_per_s, decode.tp, d.loss_requests_per_s)
    p_rep, p_nodes = pool(
        prefill.capacity_requests_per_s, prefill.tp, prefill.capacity_requests_per_s
    )
    total = MinDesiredMax(
        min=d_nodes.min + p_nodes.min,
        desired=d_nodes.desired + p_nodes.desired,
        max=d_nodes.max + p_nodes.max,
    )
    gpu = hardware.gpu(p.instance.gpu)
    consts = prefill.step_model.consts
    choice = Choice(
        plan=p.plan,
        model=p.model,
        region=p.region,
        instance=p.instance,
        step_model=levers.step_model(p.model.arch, gpu, decode.tp, consts),
        sizing=decode.sizing,
        price_usd_per_hour=p.price_usd_per_hour,
        price_source=p.price_source,
        replicas=d_rep,
        nodes=total,
        levers=levers,
        prefill=replace(prefill, replicas=p_rep, nodes=p_nodes),
    )
    return Disaggregated(choice, prefill.tp)


Pair = tuple[Levers, DecodeSizing, PrefillPool]


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
        self.link = kv_link(instance)
        self.tps = [tp for tp in TP_DEGREES if tp <= instance.gpu_count]
        self.why: list[str] = []
        self._decodes: list[tuple[Levers, DecodeSizing]] | None = None
        self._prefill: dict[tuple[Levers, int, int], PrefillPool | None] = {}

    def decodes(self) -> list[tuple[Levers, DecodeSizing]]:
        if self._decodes is None:
            self._decodes = []
            if self.link is None:
                why = network.why_single_node(self.instance)
                self.why.append(f"{why}: the KV would not cross on EFA")
                return self._decodes
            for lv in self.levers:
                for tp in self.tps:
                    sized = size_decode(self.model, self.instance, tp, self.plan, self.consts, lv)
                    if isinstance(sized, Rejection):
                        self.why.append(f"decode TP {tp} ({lv.label}): {sized.reason}")
                    else:
                        self._decodes.append((lv, DecodeSizing(tp, sized)))
        return self._decodes

    def prefill(self, lv: Levers, decode: DecodeSizing, tp: int) -> PrefillPool | None:
        key = (lv, decode.tp, tp)
        if key not in self._prefill:
            assert self.link is not None
            pre = size_prefill(
                self.model, self.instance, tp, self.plan, self.consts, lv, decode, self.link
            )
            if isinstance(pre, Rejection):
                self.why.append(f"prefill TP {tp} ({lv.label}): {pre.reason}")
                self._prefill[key] = None
            else:
                self._prefill[key] = pre
        return self._prefill[key]

    def pairs(self, decode_nodes: Callable[[DecodeSizing], int], most_nodes: float) -> list[Pair]:
        """Feasible pairs whose decode pool alone needs fewer than `most_nodes` nodes (a pair
        needs at least one prefill node more)."""
        out = []
        for lv, decode in self.decodes():
            if decode_nodes(decode) + 1 > most_nodes:
                continue
            for tp in self.tps:
                pre = self.prefill(lv, decode, tp)
                if pre is not None:
                    out.append((lv, decode, pre))
        return out


def cheapest_pair(p: Pricing, sizer: PairSizer, best_usd: float) -> Disaggregated | None:
    """The region's cheapest pair on this instance type that could beat `best_usd` (ties:
    fewer nodes, plainer levers): nodes first for every pair, the Choice for the cheapest."""
    replicas: dict[tuple[float, float], MinDesiredMax] = {}
    gpn = p.instance.gpu_count

    def nodes(capacity: float, tp: int, in_loss: float) -> int:
        if (capacity, in_loss) not in replicas:
            replicas[capacity, in_loss] = deployed_replicas(
                p.plan, p.region, capacity, loss_requests_per_s=in_loss
            )
        return nodes_for(replicas[capacity, in_loss], gpn // tp).desired

    def total(pair: Pair) -> int:
        _, d, pre = pair
        return nodes(
            d.sizing.capacity_requests_per_s, d.tp, d.sizing.loss_requests_per_s
        ) + nodes(pre.capacity_requests_per_s, pre.tp, pre.capacity_requests_per_s)

    most = best_usd / (p.price_usd_per_hour * HOURS_PER_MONTH) + 1e-9
    pairs = sizer.pairs(
        lambda d: nodes(d.sizing.capacity_requests_per_s, d.tp, d.sizing.loss_requests_per_s),
        most,
    )
    if not pairs:
        return None
    lv, decode, pre = min(pairs, key=total)
    return price_pair(p, lv, decode, pre, replicas)


def disaggregated_at(
    choice: Choice, decode_rate: float, prefill_rate: float
) -> tuple[float, float]:
    """(ITL, TTFT at the percentile), seconds, of a disaggregated region whose decode
    replicas each take `decode_rate` requests/s and prefill replicas `prefill_rate`."""
    pre = choice.prefill
    assert pre is not None
    return pools_at(
        choice.plan, choice.step_model, choice.sizing.batch, pre.load, decode_rate, prefill_rate
    )


def pools_at(
    plan: CapacityPlan,
    decode: StepModel,
    decode_batch: int,
    load: PrefillLoad,
    decode_rate: float,
    prefill_rate: float,
) -> tuple[float, float]:
    """`disaggregated_at` from the pools' own terms (a FleetPlan's replica record): the
    decode batch settles by Little's law, a token gap is its step; TTFT is the prefill
    queue's wait at that load plus the prompt's own terms."""
    o = plan.traffic.output_tokens.mean
    ctx = plan.traffic.input_tokens.mean + o / 2

    def token_s(d: float) -> float:
        return decode_step_s(decode, d, ctx)

    cap = float(decode_batch)
    running = running_batch(decode_rate, o, cap, token_s, 1e-6, resolution=BATCH_RESOLUTION)
    rho = min(prefill_rate * load.service_mean_s, 0.999)
    return token_s(max(running, 1e-6)), load.ttft_s(rho, plan.slo.percentile)


def resize_pair(choice: Choice, consts: Constants) -> Choice | Rejection:
    """The same pools (instance type, TPs, levers) re-sized with other constants (the risk
    section's pessimistic ones) and re-priced, or why they no longer meet the SLOs."""
    pre = choice.prefill
    assert pre is not None
    lv, inst = choice.lever, choice.instance
    link = kv_link(inst)
    assert link is not None
    decode = size_decode(choice.model, inst, choice.tp, choice.plan, consts, lv)
    if isinstance(decode, Rejection):
        return decode
    sized = DecodeSizing(choice.tp, decode)
    prefill = size_prefill(choice.model, inst, pre.tp, choice.plan, consts, lv, sized, link)
    if isinstance(prefill, Rejection):
        return prefill
    p = Pricing(
        choice.plan,
        choice.model,
        choice.region,
        inst,
        choice.price_usd_per_hour,
        choice.price_source,
    )
    return price_pair(p, lv, sized, prefill, {}).choice
