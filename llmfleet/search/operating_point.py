"""Stage 1: size one replica on one (instance type, shape, levers) candidate against the SLOs.

The engine's two batch flags are the decision: `max_num_batched_tokens` (the budget a
scheduled batch carries: the running sequences' tokens and what is left for prompt chunks)
and `max_num_seqs` (the slots). For each budget on a grid (and bisected between the best
grid points) the SLO model (`perf.latency`) gives the highest request rate at which
- the token gap at the percentile meets the ITL target (or TPOT, with `slo.itl: tpot`),
- no period a chunk makes is longer than the stall bound,
- TTFT at the percentile (over every prompt length, the lane's and the slots' waits, the
  refused share) meets the TTFT target,
- an arrival finds every slot taken at most 1 - p of the time,
with as many slots as the KV pool holds; the best budget wins, and its slots are then cut to
the fewest that keep every SLO at that rate: a smaller `max_num_seqs` protects the running
streams from a burst, the requests beyond it wait for a slot (a wait TTFT already counts).
`binding` says which constraint stops the rate, for the reasons a reviewer reads."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from llmfleet.catalog import vllm_release
from llmfleet.catalog.constants import Constants
from llmfleet.catalog.hardware import Gpu, Instance
from llmfleet.perf.architecture import Arch
from llmfleet.perf.latency import OVER_SLO, Point, at_rate
from llmfleet.perf.memory import MemoryBudget, budget
from llmfleet.perf.parallel import SINGLE, Parallel
from llmfleet.perf.periods import Engine, Table, table_for
from llmfleet.perf.slots import slots_needed
from llmfleet.perf.step import NO_CORRECTION, Correction, StepModel, step_time
from llmfleet.perf.workload import ServedTraffic, SloTargets
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.levers import Levers, gpu_problem, pinned
from llmfleet.search.prefix_hold import CacheHold
from llmfleet.search.replica_slo import slo_of, ttft_prompt_tokens, workload_of
from llmfleet.search.shapes import Shape, inter_node
from llmfleet.search.slo_limit import COARSE_TOLERANCE, max_rate

BUDGET_GRID = (256, 512, 1024, 2048, 4096, 8192, 16384)
"""max_num_batched_tokens the search tries (vLLM's own defaults are 2048, 8192 and 16384 by
GPU memory), then bisects between the best one's neighbours."""
BUDGET_BISECTIONS = 2
"""Geometric midpoints tried on each side of the best budget (to 1/16 of a grid step)."""
START_BUDGET = 2048
"""The budget the search starts from (vLLM's default for most GPUs)."""
IDLE_RATE = 1e-6
"""Requests/s of a nearly idle replica."""
BUDGET_ROUND = 16
"""A bisected budget is a multiple of this (vLLM's block size)."""
SLOTS_STEP = 0.8
"""`_fewer_slots` tries a fifth fewer slots at a time."""
MAX_BATCH = 1024
"""Running sequences per engine at most (vLLM's max_num_seqs default on large GPUs)."""


@dataclass(frozen=True)
class ReplicaSizing:
    """A feasible operating point of one replica: its engine and the replica at its
    SLO-limit rate."""

    slots: int  # running sequences the replica admits: max_num_seqs x data-parallel ranks
    budget_tokens: int  # max_num_batched_tokens: tokens one scheduled batch carries
    point: Point  # the replica at its SLO-limit rate
    memory: MemoryBudget
    data_parallel_size: int = 1
    hold: CacheHold | None = None  # what its prefix cache holds (None: nothing assumed)

    @property
    def capacity_requests_per_s(self) -> float:
        """Requests/s one replica sustains inside every SLO (slots, lane and KV included)."""
        return self.point.rate

    @property
    def loss_requests_per_s(self) -> float:
        """What a replica carries when a region loss has spent the headroom: its SLO-limit
        rate, at which an arrival already finds the slots full at most 1 - p of the time."""
        return self.point.rate

    @property
    def running(self) -> float:
        """Mean sequences decoding at the SLO-limit rate."""
        return self.point.running

    @property
    def chunk_tokens(self) -> int:
        """Prompt tokens a scheduled batch carries beside its decodes at the SLO limit."""
        return int(self.point.chunk_tokens)

    @property
    def max_num_seqs(self) -> int:
        """max_num_seqs of one engine: a data-parallel rank's share of the slots."""
        return -(-self.slots // self.data_parallel_size)

    @property
    def max_num_batched_tokens(self) -> int:
        return self.budget_tokens

    @property
    def engine(self) -> Engine:
        return self.point.table.engine


@dataclass(frozen=True)
class Rejection:
    reason: str
    kind: str  # shape | lever | memory | itl | ttft | stall | price | input
    best_ms: float | None = None  # the physical floor, for the nearest feasible change
    over: float = math.inf  # how far past its limit the binding constraint is (1.2: 20 %)
    gap_ms: float | None = None  # the closest budget's ITL and TTFT with one sequence
    ttft_ms: float | None = None
    one_sequence: tuple[tuple[float, float], ...] = ()  # (ITL, TTFT) ms per budget, idle


def engine_memory(
    arch: Arch,
    gpu: Gpu,
    tp: int,
    plan: CapacityPlan,
    slots: int,
    budget_tokens: int,
    consts: Constants,
    levers: Levers,
    parallel: Parallel = SINGLE,
) -> MemoryBudget:
    """vLLM's memory budget for an engine of `slots` (the whole replica's: a data-parallel
    rank's engine takes its share) and a `budget_tokens` token budget."""
    return budget(
        arch,
        gpu,
        tp,
        levers.precision,
        levers.kv_cache_dtype,
        plan.gpu_memory_utilization,
        plan.max_model_len,
        -(-slots // parallel.dp),
        budget_tokens,
        consts,
        speculation=levers.spec,
        graph_pool_gib=vllm_release.graph_pool_gib("vllm", None, levers.enforce_eager),
        parallel=parallel,
    )


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
    """`engine_memory` with the plan's own levers by default."""
    return engine_memory(
        arch, gpu, tp, plan, max_num_seqs, budget_tokens, consts, levers or pinned(plan),
        parallel,
    )


def engine_slots(
    arch: Arch,
    gpu: Gpu,
    tp: int,
    plan: CapacityPlan,
    budget_tokens: int,
    consts: Constants,
    levers: Levers,
    parallel: Parallel,
    context_tokens: float,
    shared_kv_tokens: float = 0.0,
) -> tuple[int, MemoryBudget]:
    """The most slots the KV pool holds at this budget (running sequences of `context_tokens`
    each), at most MAX_BATCH per engine and what the budget leaves a chunk beside them, and
    the memory at that engine. The pool shrinks as max_num_seqs grows (the sampler's
    profiling peak), so the slots that fit only fall as more are asked for: the largest
    count that fits at its own memory, by bisection."""
    batches = parallel.pp * parallel.dp
    most = min(MAX_BATCH * parallel.dp, batches * max(1, budget_tokens - 1))

    def memory(slots: int) -> MemoryBudget:
        return engine_memory(arch, gpu, tp, plan, slots, budget_tokens, consts, levers, parallel)

    def fits(slots: int) -> tuple[bool, MemoryBudget]:
        mem = memory(slots)
        held = (mem.kv_cache_tokens - shared_kv_tokens) // max(
            context_tokens - shared_kv_tokens, 1.0)
        return held >= slots, mem

    ok, mem = fits(most)
    if ok:
        return most, mem
    ok, least = fits(1)
    if not ok:
        return 0, least
    lo, hi, mem = 1, most, least
    while hi - lo > 1:
        mid = (lo + hi) // 2
        ok, at = fits(mid)
        if ok:
            lo, mem = mid, at
        else:
            hi = mid
    return lo, mem


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
    """Most whole requests (input + output tokens) the KV pool holds beside a `chunk`-token
    prompt chunk (MAX_BATCH per data-parallel rank at most)."""
    need = plan.traffic.input_tokens.mean + plan.traffic.output_tokens.mean
    return engine_slots(
        arch, gpu, tp, plan, chunk + MAX_BATCH, consts, levers, parallel, float(need)
    )[0]


@dataclass(frozen=True)
class Candidate:
    """What size_replica holds about one candidate while it tries budgets."""

    arch: Arch
    gpu: Gpu
    tp: int
    plan: CapacityPlan
    consts: Constants
    levers: Levers
    parallel: Parallel
    step_model: StepModel
    workload: ServedTraffic
    slo: SloTargets

    def table(self, budget_tokens: int) -> tuple[Table, MemoryBudget] | None:
        slots, mem = engine_slots(
            self.arch, self.gpu, self.tp, self.plan, budget_tokens, self.consts, self.levers,
            self.parallel, self.workload.context_tokens, self.workload.shared_kv_tokens,
        )
        if slots < 1:
            return None
        engine = Engine(self.step_model, slots, budget_tokens, mem.kv_cache_tokens)
        return table_for(engine, self.workload), mem


def size_replica(
    arch: Arch,
    gpu: Gpu,
    instance: Instance,
    shape: Shape,
    plan: CapacityPlan,
    consts: Constants,
    levers: Levers | None = None,
    correction: Correction = NO_CORRECTION,
    hold: CacheHold | None = None,
) -> ReplicaSizing | Rejection:
    """The best operating point of one replica of this shape with these levers (default:
    the plan's own precision and KV dtype, no speculation), or why there is none;
    `correction`: a calibrated server's own factors; `hold`: what its prefix cache holds
    of each prompt (`search.prefix_hold`)."""
    lv = levers or pinned(plan)
    tp = shape.tp
    problem = shape_problem(arch, instance, shape)
    if problem:
        return Rejection(problem, "shape")
    unsupported = gpu_problem(arch, gpu, lv)
    if unsupported:
        return Rejection(unsupported, "lever")
    par = shape.parallel(instance, inter_node(plan.startup.image))
    # Feasibility at the smallest engine (one sequence, the smallest budget): the activation
    # peak grows with max_num_seqs and the budget, which the search then picks.
    mem = engine_memory(arch, gpu, tp, plan, 1, BUDGET_GRID[0], consts, lv, par)
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
    cand = Candidate(arch, gpu, tp, plan, consts, lv, par, step_model,
                     workload_of(plan, hold), slo_of(plan))
    floor = float(step_time(step_model, 1.0, cand.workload.context_tokens).total_s) * 1000
    if plan.slo.itl == "tpot" and lv.spec:
        floor /= lv.spec.tokens_per_step
    tables: dict[int, tuple[Table, MemoryBudget] | None] = {}

    def table(budget_tokens: int) -> Table | None:
        """The engine's table at this budget (None: no slot, or a chunk stalls too long)."""
        if budget_tokens not in tables:
            built = None
            if _stall_floor_s(cand, budget_tokens) <= cand.slo.max_stall_s:
                built = cand.table(budget_tokens)
            if built is not None and built[0].stall_s > cand.slo.max_stall_s * (1 + 1e-9):
                built = None
            tables[budget_tokens] = built
        got = tables[budget_tokens]
        return got[0] if got else None

    found = _best_budget(table, cand.slo)
    if floor > plan.slo.itl_ms or found is None:
        return _rejection(cand, tables, floor)
    best, coarse = found
    got = tables[best]
    assert got is not None
    return _sized(cand, got[0], max_rate(got[0], cand.slo, guess=coarse))


def _best_budget(table: Callable[[int], Table | None], slo: SloTargets) -> tuple[int, float] | None:
    """The budget with the highest SLO-limit rate and that rate (to COARSE_TOLERANCE; None:
    no budget meets the SLOs).

    Budgets are compared at one rate: the best one's SLO-limit rate r. A budget whose worst
    share outside a target at r is under its allowance (`Point.load_ratio` < 1) holds the
    SLOs beyond r, so it is better: the search moves to it and finds its own limit, which
    raises r; one at or over its allowance cannot beat r, so it is not looked at again. The
    grid is tried whole (a larger budget prefills in larger chunks: the rate rises with it
    until a chunk's period crosses the token-gap target and only a share 1 - p of the gaps
    may carry one, a cliff past which it may rise again up to the stall bound), then
    geometric midpoints on each side of the best."""
    p = slo.percentile
    usable = [b for b in BUDGET_GRID if table(b) is not None]
    if not usable:
        return None

    def ratio(budget_tokens: int, rate: float) -> float:
        t = table(budget_tokens)
        return OVER_SLO if t is None else at_rate(t, rate, p).load_ratio(slo, exact=False)

    best = min(usable, key=lambda b: abs(math.log(b / START_BUDGET)))
    rate = max_rate(_table(table, best), slo, COARSE_TOLERANCE)
    if rate <= 0:  # the start does not serve even an idle replica: the least-loaded one may
        idle = {b: ratio(b, IDLE_RATE) for b in usable}
        best = min(usable, key=lambda b: (idle[b], b))
        if idle[best] > 1:
            return None
        rate = max_rate(_table(table, best), slo, COARSE_TOLERANCE)
        if rate <= 0:
            return None
    beyond = [b for b in usable if b != best]  # budgets that may hold the SLOs beyond rate
    tried = set(usable)

    def improve(pool: list[int]) -> list[int]:
        """Move to the best of `pool` that holds the SLOs beyond the rate, until none does;
        what is left of the pool may still beat a higher rate."""
        nonlocal best, rate
        while pool:
            ratios = {b: ratio(b, rate * (1 + COARSE_TOLERANCE)) for b in pool}
            pool = [b for b in pool if ratios[b] < 1]
            if not pool:
                break
            nxt = min(pool, key=lambda b: (ratios[b], b))
            pool.remove(nxt)
            higher = max_rate(_table(table, nxt), slo, COARSE_TOLERANCE, guess=rate)
            if higher > rate:
                pool.append(best)
                best, rate = nxt, higher
        return pool

    improve(beyond)
    for _ in range(BUDGET_BISECTIONS):  # geometric midpoints on each side of the best
        ordered = sorted(tried)
        k = ordered.index(best)
        sides = [ordered[j] for j in (k - 1, k + 1) if 0 <= j < len(ordered)]
        mids = [_round_budget(math.sqrt(side * best)) for side in sides]
        mids = [m for m in mids if m not in tried and table(m) is not None]
        tried.update(mids)
        improve(mids)
    return best, rate


def _table(table: Callable[[int], Table | None], budget_tokens: int) -> Table:
    t = table(budget_tokens)
    assert t is not None
    return t


def _stall_floor_s(cand: Candidate, budget_tokens: int) -> float:
    """A period carrying a whole budget of prompt tokens beside one sequence: the stall a
    budget makes at least (cheap: one step, no table)."""
    return float(step_time(cand.step_model, 1.0, cand.workload.context_tokens,
                           float(budget_tokens - 1), 0.0).total_s)


def _round_budget(tokens: float) -> int:
    return max(BUDGET_ROUND, int(round(tokens / BUDGET_ROUND)) * BUDGET_ROUND)


def shrink_slots(table: Table, slo: SloTargets, rate: float,
                 kv_tokens: Callable[[int], int] | None = None) -> tuple[Table, float]:
    """The engine of `table` with the fewest slots that keep every SLO at `rate` (an arrival
    then finds them all taken at most 1 - p of the time and waits for one, inside TTFT), its
    own table, and its SLO-limit rate found again on that table (whose periods are read at
    other batches); `kv_tokens(slots)`: the KV pool at that max_num_seqs (a smaller sampler
    peak leaves it more), else the table's."""
    p = slo.percentile
    point = at_rate(table, rate, p)
    least = slots_needed(table, rate * table.workload.prompts.admitted,
                         point.mixed_time_share, point.own_mean_s, slo.tail)

    def holds(slots: int) -> bool:
        return at_rate(table, rate, p, slots=slots).meets(slo)

    lo, hi = max(1, least), table.cap  # every slot the table holds meets the SLOs at rate
    if lo >= hi or holds(lo):
        hi = min(lo, hi)
    else:  # gallop up from the chain's estimate (the fewest is usually near it), then bisect
        step = max(1, lo // 4)
        while lo + step < hi:
            if holds(lo + step):
                hi = lo + step
                break
            lo, step = lo + step, step * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if holds(mid) else (mid, hi)
    kv = kv_tokens(hi) if kv_tokens else table.engine.kv_cache_tokens
    final = table_for(replace(table.engine, slots=hi, kv_cache_tokens=kv), table.workload)
    return final, max_rate(final, slo, guess=rate)


def _sized(cand: Candidate, table: Table, rate: float) -> ReplicaSizing:
    """The sizing at this budget: the fewest slots that keep every SLO, on the engine whose
    memory is re-read at that max_num_seqs."""
    budget_tokens = table.engine.budget_tokens

    def memory(slots: int) -> MemoryBudget:
        return engine_memory(cand.arch, cand.gpu, cand.tp, cand.plan, slots, budget_tokens,
                             cand.consts, cand.levers, cand.parallel)

    table, rate = _fewer_slots(table, cand.slo, rate)
    final, rate = shrink_slots(table, cand.slo, rate, lambda n: memory(n).kv_cache_tokens)
    e = final.engine
    point = at_rate(final, rate, cand.slo.percentile)
    return ReplicaSizing(e.slots, e.budget_tokens, point, memory(e.slots), cand.parallel.dp)


def _fewer_slots(table: Table, slo: SloTargets, rate: float) -> tuple[Table, float]:
    """The engine of `table` with the slot count under which it holds the SLOs at the highest
    rate, and that rate: every slot the KV pool holds lets a burst lengthen every period
    (an ITL or TTFT that binds at the full count may hold at a higher rate with fewer), but
    too few make arrivals wait for a slot. Cut by SLOTS_STEP while the rate grows."""
    best, best_rate = table, rate
    while True:
        slots = int(best.cap * SLOTS_STEP)
        if slots < 1:
            break
        fewer = table_for(replace(best.engine, slots=slots), best.workload)
        got = max_rate(fewer, slo, COARSE_TOLERANCE, guess=best_rate)
        if got <= best_rate * (1 + COARSE_TOLERANCE):
            break
        best, best_rate = fewer, max_rate(fewer, slo, guess=got)
    return best, best_rate


def _one_sequence(cand: Candidate, tried: dict[int, tuple[Table, MemoryBudget] | None]
                  ) -> tuple[tuple[float, float], ...]:
    """ITL (as slo.itl reads it) and TTFT at the percentile, in ms, of a nearly idle replica
    at each budget tried: how close a candidate comes to the SLOs."""
    out = []
    p = cand.slo.percentile
    for b in sorted(tried):
        got = tried[b] or cand.table(b)
        table = got[0] if got else None
        if table is None:
            continue
        pt = at_rate(table, 1e-6, p)
        out.append((1000 * pt.itl_s(cand.slo.itl), 1000 * pt.ttft_at(p)))
    return tuple(out)


def _rejection(
    cand: Candidate, tried: dict[int, tuple[Table, MemoryBudget] | None], floor: float
) -> Rejection:
    """Why no budget meets the SLOs, with how close the candidate came."""
    plan, slo = cand.plan, cand.plan.slo
    one = _one_sequence(cand, tried)
    if not one:
        return Rejection("the KV pool holds no running sequence at any budget", "memory")
    closest = min((max(g / slo.itl_ms, t / slo.ttft_ms), g, t) for g, t in one)
    p = f"p{slo.percentile:g}"
    if floor > slo.itl_ms:
        return Rejection(
            f"ITL {floor:.1f} ms > {slo.itl_ms:g} ms at batch 1", "itl", floor,
            over=max(floor / slo.itl_ms, closest[0]), gap_ms=floor, ttft_ms=closest[2],
            one_sequence=one,
        )
    stalls = [v for v in tried.values() if v is None]
    if len(stalls) == len(tried):
        smallest = cand.table(BUDGET_GRID[0])
        stall = smallest[0].stall_s * 1000 if smallest else math.inf
        return Rejection(
            f"every prompt chunk stalls the streams longer than the {slo.stall_ms:g} ms the "
            f"plan allows (slo.max_stall_ms): a {BUDGET_GRID[0]}-token step takes "
            f"{stall:.0f} ms", "stall", stall, over=stall / slo.stall_ms,
            gap_ms=closest[1], ttft_ms=closest[2], one_sequence=one,
        )
    ttft_best = min(t for _, t in one)
    gap_best = min(g for g, _ in one)
    if gap_best > slo.itl_ms:
        return Rejection(
            f"no budget keeps the token gap {p} within {slo.itl_ms:g} ms: the shortest takes "
            f"{gap_best:.1f} ms beside one sequence", "itl", gap_best, over=closest[0],
            gap_ms=closest[1], ttft_ms=closest[2], one_sequence=one,
        )
    prompt = ttft_prompt_tokens(plan)
    why = (
        f"a nearly idle replica takes {ttft_best:.0f} ms to the first token at {p} (the "
        f"{p} prompt is {prompt:,} tokens)"
        if ttft_best > slo.ttft_ms
        else f"the budgets that keep the token gap within {slo.itl_ms:g} ms prefill too "
        f"slowly for TTFT {slo.ttft_ms:g} ms {p} (the closest: {closest[2]:.0f} ms)"
    )
    return Rejection(
        f"no load meets TTFT {slo.ttft_ms:g} ms and ITL {slo.itl_ms:g} ms {p}: {why}", "ttft",
        ttft_best, over=max(1.0, closest[0]), gap_ms=closest[1], ttft_ms=closest[2],
        one_sequence=one,
    )


def shape_problem(arch: Arch, instance: Instance, shape: Shape) -> str | None:
    if shape.plain and shape.tp <= instance.gpu_count and instance.gpu_count % shape.tp:
        return f"TP {shape.tp} does not divide the {instance.gpu_count} GPUs of a node"
    return shape.problem(arch, instance)
