"""What a replica is predicted to do at the region's peak, its memory, and its latency and
throughput against the running batch (the report's chart data).

The search picks one batch per region (max_num_seqs, the largest meeting both SLOs); a
reviewer asks how close that is to the edge. `batch_curve` evaluates the same performance
model with the region's engine and prefill chunk at batches from one sequence to twice the
operating point (or what the KV pool holds, if less), so the chart's curve passes exactly
through the FleetPlan's operating point."""

from __future__ import annotations

import math

from pydantic import Field

from llmfleet.catalog import hardware
from llmfleet.catalog.constants import Constants
from llmfleet.data import Data
from llmfleet.perf.chunked import MixedSteps, mixed_steps
from llmfleet.perf.step import StepModel
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.choice import Choice
from llmfleet.search.disagg import disaggregated_at
from llmfleet.search.operating_point import MAX_BATCH, batch_bound
from llmfleet.search.replica_slo import (
    itl_percentile_s,
    predict_at,
    ttft_percentile_s,
    ttft_prompt_tokens,
)


class Predicted(Data):
    """Per replica, at the region's peak load unless a name says otherwise."""

    ttft_ms: float = Field(
        description="TTFT at the SLO percentile at the peak load per replica: the prompt of "
        "ttft_prompt_tokens plus the queue wait at that percentile."
    )
    ttft_prompt_tokens: int = Field(
        description="The prompt TTFT is predicted for: that percentile of the input lengths."
    )
    itl_ms: float = Field(description="ITL as the SLO defines it (slo.itl) at the percentile.")
    token_gap_ms: float = Field(description="The longest gap between two tokens of a stream.")
    tpot_ms: float = Field(description="A request's mean time per output token at the percentile.")
    decode_only_itl_ms: float = Field(description="Gap between tokens in a step without prefill.")
    mixed_step_ms: float = Field(
        description="Gap in a step that carries a prefill chunk: the longest token gap."
    )
    mixed_step_share: float = Field(description="Share of steps that carry a prefill chunk.")
    output_tokens_per_s: float = Field(
        description="Output tokens/s one replica sustains inside the SLOs."
    )
    requests_per_s: float = Field(description="Requests/s one replica sustains inside the SLOs.")
    requests_per_s_at_peak: float = Field(description="Requests/s each replica serves at the peak.")
    requests_per_s_in_loss: float = Field(
        description="Requests/s one replica carries when a region loss has spent the headroom: "
        "requests_per_s, lowered until an arrival finds the batch full no more often than "
        "1 - p/100 (perf.slots); equal to requests_per_s when the plan survives no loss."
    )
    kv_cache_tokens: int = Field(description="KV capacity of a replica, as vLLM logs it.")
    max_concurrency: float = Field(description="Sequences of max_model_len the KV pool holds.")
    ranges: dict[str, tuple[float, float]] = Field(
        description="Per metric, where the measured value is expected (p10-p90 of the "
        "calibration's held-out measured/predicted ratios; of the plan's calibration file "
        "for this server where one covers it)."
    )
    calibration: str | None = Field(
        default=None,
        description="The plan's calibration file whose factors and band apply to this "
        "region's server (None: the shipped constants and their held-out band).",
    )


class Memory(Data):
    gpu_total_gib: float
    weights_gib_per_gpu: float
    activation_gib: float
    non_torch_gib: float
    kv_cache_gib_per_gpu: float
    kv_bytes_per_token: float


class BatchPoint(Data):
    """One replica at a running batch: what the performance model predicts (curves.py)."""

    batch: int = Field(description="Running sequences (max_num_seqs at the operating point).")
    itl_ms: float = Field(description="TPOT at the SLO percentile, with the chosen chunk.")
    ttft_ms: float | None = Field(description="TTFT at the percentile; None: prefill saturated.")
    output_tokens_per_s: float = Field(description="batch / mean step time.")


def _round(x: float, nd: int = 2) -> float:
    return round(x, nd)


class Binding(Data):
    """What stops a replica's batch at the operating point (`max_num_seqs`), and by how much:
    the constraint one more running sequence breaks, and what a lone request already costs
    of each SLO. `text` is the one line the report and `llmfleet diff` show."""

    constraint: str = Field(
        description="ttft, itl (either SLO), prefill (every step would carry a chunk), "
        "kv_cache (the pool holds no more) or max_batch (llmfleet's cap)."
    )
    batch: int = Field(description="The operating point: running sequences, max_num_seqs.")
    chunk_tokens: int = Field(description="Prefill tokens a mixed step carries.")
    slo_ms: float | None = Field(description="The binding SLO's target (None: not an SLO).")
    next_ms: float | None = Field(
        description="The binding SLO's figure with one more sequence (over slo_ms)."
    )
    lone_prompt_ttft_ms: float = Field(
        description="TTFT of the SLO percentile's prompt alone on an idle replica."
    )
    lone_itl_ms: float = Field(description="ITL (as slo.itl reads it) of one sequence alone.")
    kv_sequences: int = Field(description="Mean requests the KV pool holds (capped at 1024).")
    text: str


def _over(value_ms: float, slo_ms: float) -> str:
    """A value just over the SLO, with a decimal where whole milliseconds would hide it."""
    return f"{value_ms:.0f}" if round(value_ms) > slo_ms else f"{value_ms:.1f}"


def build_binding(choice: Choice, consts: Constants) -> Binding:
    plan, inst = choice.plan, choice.instance
    b = batch_bound(
        choice.model.arch, hardware.gpu(inst.gpu), choice.tp, plan, consts, choice.lever,
        choice.sizing, choice.step_model,
    )
    p, slo = f"p{plan.slo.percentile:g}", plan.slo
    on = f"on {inst.gpu} TP {choice.tp}"
    itl_name = "longest token gap" if slo.itl == "token_gap" else f"TPOT {p}"
    mean = plan.traffic.input_tokens.mean + plan.traffic.output_tokens.mean
    slo_ms = next_ms = None
    if b.constraint == "ttft":
        slo_ms, next_ms = slo.ttft_ms, b.ttft_next_ms
        text = (
            f"TTFT binds: {b.batch + 1} running sequences would take TTFT {p} to "
            f"{_over(next_ms or 0.0, slo_ms)} ms, over the {slo_ms:g} ms SLO; a lone {p} prompt "
            f"({ttft_prompt_tokens(plan):,} tokens) already takes {b.lone_prompt_ttft_ms:.0f} "
            f"ms of it {on} ({b.lone_prompt_ttft_ms / slo_ms:.0%})"
        )
    elif b.constraint == "itl":
        slo_ms, next_ms = slo.itl_ms, b.itl_next_ms
        text = (
            f"ITL binds: {b.batch + 1} running sequences would take the {itl_name} to "
            f"{next_ms:.1f} ms, over the {slo_ms:g} ms SLO; one sequence alone already takes "
            f"{b.lone_itl_ms:.1f} ms of it {on} ({b.lone_itl_ms / slo_ms:.0%}, with "
            f"{b.chunk_tokens}-token prefill chunks)"
        )
    elif b.constraint == "prefill":
        text = (
            f"prefill binds: with {b.batch + 1} running sequences every step would carry a "
            f"{b.chunk_tokens}-token prefill chunk {on}, and prompts would queue without bound"
        )
    elif b.constraint == "kv_cache":
        held = f"at least {MAX_BATCH}" if b.kv_sequences >= MAX_BATCH else f"{b.kv_sequences}"
        text = (
            f"the KV pool binds: {choice.sizing.memory.kv_cache_tokens:,} tokens {on} hold "
            f"{held} mean requests ({mean:,} tokens each), inside both SLOs"
        )
    else:
        text = f"the batch is at llmfleet's cap of {MAX_BATCH} sequences, inside both SLOs"
    return Binding(
        constraint=b.constraint,
        batch=b.batch,
        chunk_tokens=b.chunk_tokens,
        slo_ms=slo_ms,
        next_ms=None if next_ms is None else _round(next_ms, 1),
        lone_prompt_ttft_ms=_round(b.lone_prompt_ttft_ms, 1),
        lone_itl_ms=_round(b.lone_itl_ms, 2),
        kv_sequences=b.kv_sequences,
        text=text,
    )


def build_predicted(choice: Choice, consts: Constants) -> Predicted:
    """Per replica at the region's peak; ranges from the calibration's held-out errors."""
    plan, s = choice.plan, choice.sizing
    o = plan.traffic.output_tokens.mean
    per_replica = choice.peak_requests_per_s_per_replica
    if choice.prefill is not None:  # disaggregated: decode steps only; TTFT from the prefill pool
        per_prefill = choice.peak_requests_per_s / choice.prefill.replicas.desired
        itl_s, ttft_s = disaggregated_at(choice, per_replica, per_prefill)
        at_peak = MixedSteps(itl_s, itl_s, 0.0)
    else:
        at_peak, ttft_s = predict_at(choice.step_model, plan, s.batch, s.chunk_tokens, per_replica)
    itl_ms = itl_percentile_s(plan, at_peak) * 1000
    values = {
        "ttft_ms": ttft_s * 1000,
        "itl_ms": itl_ms,
        "output_tokens_per_s": s.capacity_requests_per_s * o,
        "kv_cache_tokens": float(s.memory.kv_cache_tokens),
    }
    covered = choice.calibration

    arch = hardware.gpu(choice.instance.gpu).architecture

    def ratio(metric: str, quantile: str) -> float:
        own = covered.ratio(metric, quantile) if covered else None
        return own if own is not None else consts.ratio(metric, quantile, arch)

    ranges = {
        k: (_round(v * ratio(k, "p10"), 1), _round(v * ratio(k, "p90"), 1))
        for k, v in sorted(values.items())
    }
    return Predicted(
        ttft_ms=_round(ttft_s * 1000, 1),
        ttft_prompt_tokens=ttft_prompt_tokens(plan),
        itl_ms=_round(itl_ms, 2),
        token_gap_ms=_round(at_peak.longest_gap_s * 1000, 2),
        tpot_ms=_round(at_peak.tpot_percentile_s(o, plan.slo.percentile) * 1000, 2),
        decode_only_itl_ms=_round(at_peak.decode_only_s * 1000, 2),
        mixed_step_ms=_round(at_peak.mixed_s * 1000, 2),
        mixed_step_share=_round(min(1.0, at_peak.mixed_share), 4),
        output_tokens_per_s=_round(s.capacity_requests_per_s * o, 1),
        requests_per_s=_round(s.capacity_requests_per_s, 3),
        requests_per_s_at_peak=_round(choice.peak_requests_per_s_per_replica, 3),
        requests_per_s_in_loss=_round(s.loss_requests_per_s, 3),
        kv_cache_tokens=s.memory.kv_cache_tokens,
        max_concurrency=_round(s.memory.max_concurrency),
        ranges=ranges,
        calibration=covered.path if covered else None,
    )


def build_memory(choice: Choice) -> Memory:
    mem = choice.sizing.memory
    return Memory(
        gpu_total_gib=_round(mem.total_gib),
        weights_gib_per_gpu=_round(mem.weights_gib_per_gpu),
        activation_gib=_round(mem.activation_gib),
        non_torch_gib=_round(mem.non_torch_gib),
        kv_cache_gib_per_gpu=_round(mem.kv_cache_gib_per_gpu),
        kv_bytes_per_token=mem.kv_bytes_per_token,
    )


CURVE_POINTS = 32
"""Batches evaluated per region (plus the operating point)."""


def curve_batches(operating_batch: int, kv_batch: int, points: int = CURVE_POINTS) -> list[int]:
    """1 .. min(2 x operating, KV limit), evenly spaced, always holding the operating batch."""
    top = max(operating_batch, min(kv_batch, 2 * operating_batch))
    step = (top - 1) / max(1, points - 1)
    grid = {1 + round(k * step) for k in range(points)} | {operating_batch}
    return sorted(b for b in grid if 1 <= b <= top)


def batch_point(
    step_model: StepModel, plan: CapacityPlan, batch: int, chunk_tokens: int
) -> BatchPoint:
    """One replica running `batch` sequences with `chunk_tokens`-token prefill chunks."""
    i, o = plan.traffic.input_tokens.mean, plan.traffic.output_tokens.mean
    steps = mixed_steps(step_model, batch, i, o, chunk_tokens)
    ttft_s = (
        ttft_percentile_s(step_model, plan, steps, batch, chunk_tokens)
        if steps.mixed_share < 1
        else math.inf
    )
    return BatchPoint(
        batch=batch,
        itl_ms=round(itl_percentile_s(plan, steps) * 1000, 2),
        ttft_ms=round(ttft_s * 1000, 1) if math.isfinite(ttft_s) else None,
        output_tokens_per_s=round(batch / steps.mean_s, 1),
    )


def build_batch_curve(
    step_model: StepModel,
    plan: CapacityPlan,
    chunk_tokens: int,
    operating_batch: int,
    kv_batch: int,
) -> list[BatchPoint]:
    """The curve the report draws for one region (see the module docstring)."""
    return [
        batch_point(step_model, plan, b, chunk_tokens)
        for b in curve_batches(operating_batch, kv_batch)
    ]
