"""Requests/s no operating point of a candidate can exceed, for pruning the search before
it sizes the candidate (`operating_point.size_replica`): the KV pool's slots decoding at
Little's law, and the prefill lane's tokens per period the token-gap target allows."""

from __future__ import annotations

import math

import numpy as np

from llmfleet.catalog.constants import Constants
from llmfleet.catalog.hardware import Gpu, Instance
from llmfleet.perf.architecture import Arch
from llmfleet.perf.step import NO_CORRECTION, Correction, StepModel, step_time, step_times
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.levers import Levers, gpu_problem
from llmfleet.search.operating_point import BUDGET_GRID, MAX_BATCH, engine_memory, shape_problem
from llmfleet.search.prefix_hold import ideal, reuses
from llmfleet.search.replica_slo import workload_of
from llmfleet.search.shapes import Shape, inter_node


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
    prefills: bool = True,
) -> float:
    """Requests/s no operating point of this candidate can exceed (0: it cannot run), for
    pruning the search: every slot the KV pool holds at its largest (one sequence, the
    smallest budget; MAX_BATCH per engine) (with `slo`, no more than keep a
    decode step within the ITL target, since the token gap at any percentile is at least a
    decode step) decoding in periods without chunks, by Little's law (a step grows at most
    linearly with the batch, so the rate only grows with it); without `prefills` (a decode
    pool) no prefill lane bounds it."""
    if shape_problem(arch, instance, shape) or gpu_problem(arch, gpu, levers):
        return 0.0
    tp, par = shape.tp, shape.parallel(instance, inter_node(plan.startup.image))
    wl = workload_of(plan, ideal(plan) if reuses(plan) else None)  # the most a cache saves
    least = engine_memory(arch, gpu, tp, plan, 1, BUDGET_GRID[0], consts, levers, par)
    most = min(MAX_BATCH * par.dp, wl.sequences_in(least.kv_cache_tokens))
    if most < 1:
        return 0.0
    step_model = levers.step_model(arch, gpu, tp, consts, correction, par)
    tps = step_model.speculation.tokens_per_step if step_model.speculation else 1.0
    o = max(wl.output_mean - 1, 1.0)
    ctx = wl.context_tokens
    d = float(most)
    if slo:
        target = plan.slo.itl_ms / 1000 * (tps if plan.slo.itl == "tpot" else 1.0)
        if float(step_time(step_model, 1.0, ctx).total_s) > target:
            return 0.0
        if float(step_time(step_model, d, ctx).total_s) > target:
            lo, hi = 1.0, d
            while hi > 1.05 * lo:
                mid = math.sqrt(lo * hi)
                lo, hi = (mid, hi) if step_time(step_model, mid, ctx).total_s <= target else (
                    lo, mid)
            d = hi
    little = d * tps / (o * float(step_time(step_model, d, ctx).total_s))
    if not slo or not prefills:
        return little
    return min(little, _lane_bound(step_model, plan, wl.prompts.computed_mean, ctx, d, tps, o)
               / wl.prompts.admitted)


def _lane_bound(step_model: StepModel, plan: CapacityPlan, prompt_mean: float, ctx: float,
                most: float, tps: float, o: float) -> float:
    """Requests/s the prefill lane carries at most, whatever the budget: its prompts' tokens
    need periods that carry chunks, and with the token gap at p as the target at most a
    share 1 - p of all gaps may exceed it, so at any running batch D the periods at or below
    the target carry at most k_itl(D) tokens each (the largest chunk whose period at a
    prompt's start is the target: a period only lengthens with its chunk and its start, and
    carries tokens at the best rate at its longest) and the longer ones, at most as long as
    the stall bound allows, come at most at that share of all periods. With `slo.itl: tpot`
    a period may be longer: every period may carry the stall bound's chunk. The rate also
    cannot exceed D decodes in periods without chunks (Little's law): the bound is the best
    of min(lane, Little) over D."""
    par = step_model.parallel
    per_batch = par.pp * par.dp
    itl, stall = plan.slo.itl_ms / 1000, plan.slo.stall_ms / 1000
    tail = 1 - plan.slo.percentile / 100
    batches = np.geomspace(1.0, max(most, 1.0), 12)
    decode = step_times(step_model, batches, ctx)

    def largest_chunk(limit_s: float) -> np.ndarray:
        """Per batch, the largest chunk (tokens) whose period at start 0 is within limit_s."""
        lo = np.zeros_like(batches)
        hi = np.full_like(batches, float(BUDGET_GRID[-1]) * 4)
        for _ in range(40):
            mid = (lo + hi) / 2
            inside = step_times(step_model, batches, ctx, np.maximum(mid, 1.0), 0.0) <= limit_s
            lo, hi = np.where(inside, mid, lo), np.where(inside, hi, mid)
        return lo

    widest = largest_chunk(stall)
    periods = 1.0 / np.maximum(decode, 1e-15)  # periods a second at most
    if plan.slo.itl == "tpot":
        tokens = per_batch * widest * periods
    else:
        within = largest_chunk(itl)
        tokens = per_batch * (within / itl + tail * widest * periods)
    lane = tokens / prompt_mean
    little = batches * tps / (o * decode)
    return float(np.max(np.minimum(lane, little)))


