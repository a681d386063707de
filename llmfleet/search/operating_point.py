"""Stage 1: size one replica on one (instance type, TP, levers) candidate against the SLOs.

With chunked prefill a share of steps carries a prefill chunk (`perf.chunked.MixedSteps`);
once more than 1 - p of steps carry one, the gap at percentile p is a mixed step, and a
mixed step stalls every stream, so the token-gap target bounds the longest gap: the chunk
size and the batch together set it.

For each chunk size C the largest running batch D is found such that
  - ITL at the percentile <= the ITL target,
  - TTFT at the percentile <= the TTFT target (`replica_slo`),
  - D sequences of input + output tokens fit the KV pool.
The replica then sustains D / (output * mean step) requests/s. The best C wins.
`batch_bound` says which of them stops D, for the reasons a reviewer reads."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from llmfleet.catalog import vllm_release
from llmfleet.catalog.constants import Constants
from llmfleet.catalog.hardware import Gpu, Instance
from llmfleet.perf.architecture import Arch
from llmfleet.perf.chunked import MixedSteps, mixed_steps, prefill_s
from llmfleet.perf.memory import MemoryBudget, budget
from llmfleet.perf.parallel import SINGLE, Parallel
from llmfleet.perf.slots import SEARCH_BATCH_POINTS, batch_table, loss_share
from llmfleet.perf.step import NO_CORRECTION, Correction, StepModel, step_time
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.levers import Levers, gpu_problem, pinned
from llmfleet.search.replica_slo import (
    BATCH_RESOLUTION,
    itl_percentile_s,
    ttft_percentile_s,
    ttft_prompt_tokens,
)
from llmfleet.search.shapes import Shape

CHUNK_GRID = (128, 256, 512, 1024, 2048, 4096, 8192)


MAX_BATCH = 1024


@dataclass(frozen=True)
class ReplicaSizing:
    """A feasible operating point of one replica."""

    batch: int  # running sequences at the SLO limit: max_num_seqs (of the whole replica)
    chunk_tokens: int  # prefill tokens a mixed step carries
    steps: MixedSteps
    capacity_requests_per_s: float  # requests/s one replica sustains inside both SLOs
    memory: MemoryBudget
    data_parallel_size: int = 1  # vLLM's batch flags are per data-parallel rank
    loss_share: float = 1.0  # of the capacity a replica carries in a region loss (perf.slots;
    # 1 when the plan survives no loss)

    @property
    def loss_requests_per_s(self) -> float:
        """What a replica carries when a region loss has spent the headroom: the SLO-limit
        rate, lowered until an arrival rarely finds the batch full (`perf.slots`)."""
        return self.capacity_requests_per_s * self.loss_share

    @property
    def batch_per_rank(self) -> int:
        """max_num_seqs of one engine: a data-parallel rank's share of the batch."""
        return -(-self.batch // self.data_parallel_size)

    @property
    def max_num_batched_tokens(self) -> int:
        return self.batch_per_rank + self.chunk_tokens


@dataclass(frozen=True)
class Rejection:
    reason: str
    kind: str  # shape | lever (the GPU lacks what a lever needs) | memory | itl | ttft | price
    best_ms: float | None = None  # the physical floor, for the nearest feasible change
    over: float = math.inf  # how far past its limit the binding constraint is (1.2: 20 %)
    gap_ms: float | None = None  # the closest chunk's ITL and TTFT with one sequence
    ttft_ms: float | None = None
    one_sequence: tuple[tuple[float, float], ...] = ()  # (ITL, TTFT) ms per chunk, batch 1


def memory_for(
    arch: Arch,
    gpu: Gpu,
    tp: int,
    plan: CapacityPlan,
    max_num_seqs: int,
    budget_tokens: int,
    consts: Constants,
    levers: Levers | None = None,
    parallel: Parallel = SINGLE,
) -> MemoryBudget:
    """vLLM's memory budget for this candidate; `max_num_seqs` and the token budget are the
    whole replica's (a data-parallel rank's engine takes its share)."""
    lv = levers or pinned(plan)
    per_rank = -(-max_num_seqs // parallel.dp)
    return budget(
        arch,
        gpu,
        tp,
        lv.precision,
        lv.kv_cache_dtype,
        plan.gpu_memory_utilization,
        plan.max_model_len,
        per_rank,
        budget_tokens - max_num_seqs + per_rank,
        consts,
        speculation=lv.spec,
        graph_pool_gib=vllm_release.graph_pool_gib("vllm", None, lv.enforce_eager),  # pinned
        parallel=parallel,
    )


def _meets(
    step_model: StepModel, plan: CapacityPlan, batch: float, chunk: int
) -> MixedSteps | None:
    i, o = plan.traffic.input_tokens.mean, plan.traffic.output_tokens.mean
    steps = mixed_steps(step_model, batch, i, o, chunk)
    if steps.mixed_share >= 1:
        return None
    if itl_percentile_s(plan, steps) * 1000 > plan.slo.itl_ms:
        return None
    if ttft_percentile_s(step_model, plan, steps, batch, chunk) * 1000 > plan.slo.ttft_ms:
        return None
    return steps


def size_replica(
    arch: Arch,
    gpu: Gpu,
    instance: Instance,
    shape: Shape,
    plan: CapacityPlan,
    consts: Constants,
    levers: Levers | None = None,
    correction: Correction = NO_CORRECTION,
) -> ReplicaSizing | Rejection:
    """The best operating point of one replica of this shape with these levers (default:
    the plan's own precision and KV dtype, no speculation), or why there is none;
    `correction`: a calibrated server's own factors."""
    lv = levers or pinned(plan)
    tp = shape.tp
    problem = _shape_problem(arch, instance, shape)
    if problem:
        return Rejection(problem, "shape")
    unsupported = gpu_problem(arch, gpu, lv)
    if unsupported:
        return Rejection(unsupported, "lever")
    par = shape.parallel(instance)
    # Feasibility at the smallest engine (one sequence, the smallest chunk): the activation
    # peak grows with max_num_seqs and the token budget, which the search then picks.
    mem = memory_for(arch, gpu, tp, plan, 1, CHUNK_GRID[0] + 1, consts, lv, par)
    if mem.kv_cache_gib_per_gpu <= 0:
        need = mem.weights_gib_per_gpu + mem.activation_gib + mem.non_torch_gib
        return Rejection(
            f"weights {mem.weights_gib_per_gpu:.1f} GiB + runtime "
            f"{mem.activation_gib + mem.non_torch_gib:.1f} GiB per GPU exceed "
            f"{mem.requested_gib:.1f} GiB usable at {shape.label}",
            "memory",
            over=need / mem.requested_gib,
        )
    if not mem.holds_one_sequence:
        return Rejection(
            f"KV pool {mem.kv_cache_gib_per_gpu:.1f} GiB per GPU holds {mem.kv_cache_tokens:,} "
            f"tokens, less than one max_model_len sequence ({plan.max_model_len:,})",
            "memory",
            over=1 / max(mem.max_concurrency, 1e-9),
        )

    step_model = lv.step_model(arch, gpu, tp, consts, correction, par)
    i, o = plan.traffic.input_tokens.mean, plan.traffic.output_tokens.mean
    floor = step_time(step_model, 1, i + o / 2).total_s * 1000
    if plan.slo.itl == "tpot" and lv.spec:
        floor /= lv.spec.tokens_per_step
    prompt = ttft_prompt_tokens(plan)
    one = _one_sequence(step_model, plan)
    over_one = min(max(g / plan.slo.itl_ms, t / plan.slo.ttft_ms) for g, t in one)
    closest = min((max(g / plan.slo.itl_ms, t / plan.slo.ttft_ms), g, t) for g, t in one)
    if floor > plan.slo.itl_ms:
        return Rejection(
            f"ITL {floor:.1f} ms > {plan.slo.itl_ms:g} ms at batch 1",
            "itl",
            floor,
            over=max(floor / plan.slo.itl_ms, over_one),
            gap_ms=floor,
            ttft_ms=closest[2],
            one_sequence=one,
        )
    best: ReplicaSizing | None = None
    ttft_best_ms = gap_best_ms = math.inf
    for chunk in CHUNK_GRID:
        ttft_best_ms = min(ttft_best_ms, 1000 * prefill_s(step_model, 1, i + o / 2, prompt, chunk))
        gap_best_ms = min(
            gap_best_ms, 1000 * itl_percentile_s(plan, mixed_steps(step_model, 1, i, o, chunk))
        )
        kv_most = kv_batch(arch, gpu, tp, plan, chunk, consts, lv, par)
        if kv_most < 1 or _meets(step_model, plan, 1, chunk) is None:
            continue
        lo, hi = 1.0, float(kv_most)
        if _meets(step_model, plan, hi, chunk) is not None:
            lo = hi
        else:
            while hi - lo > BATCH_RESOLUTION:
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if _meets(step_model, plan, mid, chunk) else (lo, mid)
        steps = _meets(step_model, plan, lo, chunk)
        assert steps is not None
        rate = lo / (o * steps.mean_token_s)
        if best is None or rate > best.capacity_requests_per_s * (1 + 1e-9):
            best = ReplicaSizing(max(1, math.floor(lo)), chunk, steps, rate, mem, par.dp)
    if best is None and gap_best_ms > plan.slo.itl_ms:
        return Rejection(
            f"no prefill chunk keeps the longest token gap within "
            f"{plan.slo.itl_ms:g} ms: a step carrying the smallest chunk ({CHUNK_GRID[0]} "
            f"tokens) beside one sequence takes {gap_best_ms:.1f} ms",
            "itl",
            gap_best_ms,
            over=closest[0],
            gap_ms=closest[1],
            ttft_ms=closest[2],
            one_sequence=one,
        )
    if best is None:
        why = (
            f"a lone p{plan.slo.percentile:g} prompt ({prompt:,} tokens) takes "
            f"{ttft_best_ms:.0f} ms to prefill"
            if ttft_best_ms > plan.slo.ttft_ms
            else f"the prefill chunks that keep the longest token gap within "
            f"{plan.slo.itl_ms:g} ms are too small to prefill a p{plan.slo.percentile:g} "
            f"prompt ({prompt:,} tokens) in time (the largest chunk needs {ttft_best_ms:.0f} ms)"
        )
        return Rejection(
            f"no batch meets TTFT {plan.slo.ttft_ms:g} ms and ITL {plan.slo.itl_ms:g} ms "
            f"p{plan.slo.percentile:g}: {why}",
            "ttft",
            ttft_best_ms,
            over=max(1.0, closest[0]),
            gap_ms=closest[1],
            ttft_ms=closest[2],
            one_sequence=one,
        )
    final_mem = memory_for(
        arch, gpu, tp, plan, best.batch, best.batch + best.chunk_tokens, consts, lv, par
    )
    sized = ReplicaSizing(
        best.batch, best.chunk_tokens, best.steps, best.capacity_requests_per_s, final_mem, par.dp
    )
    return replace(sized, loss_share=slot_loss_share(step_model, plan, sized))


def slot_loss_share(
    step_model: StepModel, plan: CapacityPlan, sizing: ReplicaSizing, prefills: bool = True
) -> float:
    """The share of its SLO-limit rate a replica carries in a region loss (`perf.slots`):
    the highest at which an arrival finds every slot taken no more often than 1 - p/100,
    between the everyday sized share (1 - headroom) and 1; `prefills` False for a
    disaggregated decode replica (no prompt is chunked beside its batch)."""
    if plan.survive_region_losses == 0 or len(plan.regions) == 1:
        return 1.0  # no loss to carry: the share is never read
    t = plan.traffic
    table = batch_table(
        step_model, t.input_tokens.mean, t.output_tokens.mean, t.output_tokens.sigma,
        sizing.batch, sizing.max_num_batched_tokens, sizing.memory.kv_cache_tokens,
        SEARCH_BATCH_POINTS,
    )
    return loss_share(
        step_model, table, t.input_tokens.mean if prefills else 0.0, t.output_tokens.mean,
        sizing.capacity_requests_per_s, plan.slo.percentile, 1 - plan.headroom,
    )


def _one_sequence(step_model: StepModel, plan: CapacityPlan) -> tuple[tuple[float, float], ...]:
    """ITL (as slo.itl reads it) and TTFT at the percentile, in ms, of a replica running one
    sequence, for each prefill chunk: how close a candidate comes to the SLOs."""
    i, o = plan.traffic.input_tokens.mean, plan.traffic.output_tokens.mean
    out = []
    for chunk in CHUNK_GRID:
        steps = mixed_steps(step_model, 1, i, o, chunk)
        ttft = math.inf
        if steps.mixed_share < 1:
            ttft = ttft_percentile_s(step_model, plan, steps, 1, chunk)
        out.append((1000 * itl_percentile_s(plan, steps), 1000 * ttft))
    return tuple(out)


def capacity_upper_bound(
    arch: Arch,
    gpu: Gpu,
    instance: Instance,
    shape: Shape,
    plan: CapacityPlan,
    consts: Constants,
    levers: Levers,
    slo: bool = True,
    correction: Correction = NO_CORRECTION,
) -> float:
    """Requests/s no operating point of this candidate can exceed (0: it cannot run), for
    pruning the search. The batch D is capped by the largest KV pool (one sequence, the
    smallest chunk) and, with `slo`, by the SLOs, found to within 10 % by a coarse search
    for the batch where some chunk still meets them; D / decode step(D) only grows with D
    (each term of a step is affine or concave in the batch), so D * tokens per step /
    (output * decode step(D)) bounds the capacity."""
    if _shape_problem(arch, instance, shape) or gpu_problem(arch, gpu, levers):
        return 0.0
    tp, par = shape.tp, shape.parallel(instance)
    mem = memory_for(arch, gpu, tp, plan, 1, CHUNK_GRID[0] + 1, consts, levers, par)
    i, o = plan.traffic.input_tokens.mean, plan.traffic.output_tokens.mean
    most = MAX_BATCH * par.dp
    batch = min(most, mem.kv_cache_tokens // (i + o)) if mem.kv_cache_gib_per_gpu > 0 else 0
    if batch < 1:
        return 0.0
    step_model = levers.step_model(arch, gpu, tp, consts, correction, par)
    per_step = levers.spec.tokens_per_step if levers.spec else 1.0
    ctx = i + o / 2

    last = [CHUNK_GRID[0]]  # the chunk that met the SLOs last is the likeliest again

    def possible(d: float) -> bool:
        """Some chunk meets both SLOs at batch d (`_meets` only gets harder as d grows)."""
        for c in sorted(CHUNK_GRID, key=lambda c: c != last[0]):
            if _meets(step_model, plan, d, c) is not None:
                last[0] = c
                return True
        return False

    if slo and not possible(1):
        return 0.0
    lo, hi = 1.0, float(batch)
    if not slo:
        return hi * per_step / (o * step_time(step_model, hi, ctx).total_s)
    if not possible(hi):
        while hi > 1.1 * lo:  # geometric bisection: a bound within 10 % is enough to prune
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if possible(mid) else (lo, mid)
    return hi * per_step / (o * step_time(step_model, hi, ctx).total_s)


def kv_batch(
    arch: Arch,
    gpu: Gpu,
    tp: int,
    plan: CapacityPlan,
    chunk: int,
    consts: Constants,
    levers: Levers,
    parallel: Parallel = SINGLE,
) -> int:
    """Most sequences of input + output tokens the KV pool holds with this chunk (MAX_BATCH
    per data-parallel rank at most).

    The pool shrinks as max_num_seqs grows (the sampler's profiling peak), so iterate from
    the largest batch down to a fixed point.
    """
    need = plan.traffic.input_tokens.mean + plan.traffic.output_tokens.mean
    most = MAX_BATCH * parallel.dp
    seqs = most
    for _ in range(8):
        m = memory_for(arch, gpu, tp, plan, seqs, chunk + seqs, consts, levers, parallel)
        fits = min(most, m.kv_cache_tokens // need)
        if fits >= seqs:
            return seqs
        seqs = fits
        if seqs < 1:
            return 0
    return seqs


def _shape_problem(arch: Arch, instance: Instance, shape: Shape) -> str | None:
    if shape.plain and shape.tp <= instance.gpu_count and instance.gpu_count % shape.tp:
        return f"TP {shape.tp} does not divide the {instance.gpu_count} GPUs of a node"
    return shape.problem(arch, instance)


@dataclass(frozen=True)
class BatchBound:
    """What stops a replica's batch at its operating point, and the floors beside it: the
    constraint one more running sequence would break, and what a lone request costs."""

    constraint: str  # ttft | itl | prefill | kv_cache | max_batch
    batch: int  # the operating point (max_num_seqs)
    chunk_tokens: int
    ttft_next_ms: float | None  # TTFT at the percentile with one more sequence (None: prefill)
    itl_next_ms: float  # ITL (as slo.itl reads it) with one more sequence
    lone_prompt_ttft_ms: float  # the percentile prompt alone: its chunked prefill
    lone_itl_ms: float  # ITL with one sequence running
    kv_sequences: int  # mean requests (input + output) the KV pool holds


def batch_bound(
    arch: Arch,
    gpu: Gpu,
    tp: int,
    plan: CapacityPlan,
    consts: Constants,
    levers: Levers,
    sizing: ReplicaSizing,
    step_model: StepModel,
) -> BatchBound:
    """Which constraint binds `sizing`'s batch: the one a batch one larger breaks (the KV
    pool when that batch no longer fits, llmfleet's MAX_BATCH when it is reached), on the
    step model the sizing used (a calibrated server's correction and the replica's layout
    included)."""
    i, o = plan.traffic.input_tokens.mean, plan.traffic.output_tokens.mean
    chunk, b = sizing.chunk_tokens, sizing.batch
    kv = kv_batch(arch, gpu, tp, plan, chunk, consts, levers, step_model.parallel)
    nxt = mixed_steps(step_model, b + 1, i, o, chunk)
    itl_next = itl_percentile_s(plan, nxt) * 1000
    ttft_next = (
        ttft_percentile_s(step_model, plan, nxt, b + 1, chunk) * 1000
        if nxt.mixed_share < 1
        else None
    )
    if b >= MAX_BATCH:
        constraint = "max_batch"
    elif b + 1 > kv:
        constraint = "kv_cache"
    elif ttft_next is None:
        constraint = "prefill"
    else:  # the SLO one more sequence overruns most (both within: the bisection's edge)
        over_itl, over_ttft = itl_next / plan.slo.itl_ms, ttft_next / plan.slo.ttft_ms
        constraint = "itl" if over_itl >= over_ttft else "ttft"
    ctx = i + o / 2
    lone = prefill_s(step_model, 1, ctx, ttft_prompt_tokens(plan), chunk)
    return BatchBound(
        constraint=constraint,
        batch=b,
        chunk_tokens=chunk,
        ttft_next_ms=ttft_next,
        itl_next_ms=itl_next,
        lone_prompt_ttft_ms=(lone + step_model.ttft_overhead_s) * 1000,
        lone_itl_ms=itl_percentile_s(plan, mixed_steps(step_model, 1, i, o, chunk)) * 1000,
        kv_sequences=kv,
    )
