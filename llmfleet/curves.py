"""A replica's latency and throughput against its running batch: the report's chart data.

The optimizer picks one batch per region (max_num_seqs, the largest meeting both SLOs); a
reviewer asks how close that is to the edge. This evaluates the same performance model
(`perf.mixed_steps`, `sizing.ttft_percentile_s`) with the region's engine and prefill chunk
at batches from one sequence to twice the operating point (or what the KV pool holds, if
less), so the chart's curve passes exactly through the FleetPlan's operating point.
Pure: numbers only; `charts.py` draws them.
"""

from __future__ import annotations

import math

from llmfleet import fleet
from llmfleet.perf import StepModel, mixed_steps
from llmfleet.plan import CapacityPlan
from llmfleet.sizing import itl_percentile_s, ttft_percentile_s

CURVE_POINTS = 32
"""Batches evaluated per region (plus the operating point)."""


def curve_batches(operating_batch: int, kv_batch: int, points: int = CURVE_POINTS) -> list[int]:
    """1 .. min(2 x operating, KV limit), evenly spaced, always holding the operating batch."""
    top = max(operating_batch, min(kv_batch, 2 * operating_batch))
    step = (top - 1) / max(1, points - 1)
    grid = {1 + round(k * step) for k in range(points)} | {operating_batch}
    return sorted(b for b in grid if 1 <= b <= top)


def batch_point(
    eng: StepModel, plan: CapacityPlan, batch: int, chunk_tokens: int
) -> fleet.BatchPoint:
    """One replica running `batch` sequences with `chunk_tokens`-token prefill chunks."""
    i, o = plan.traffic.input_tokens.mean, plan.traffic.output_tokens.mean
    steps = mixed_steps(eng, batch, i, o, chunk_tokens)
    ttft_s = (
        ttft_percentile_s(eng, plan, steps, batch, chunk_tokens)
        if steps.mixed_share < 1
        else math.inf
    )
    return fleet.BatchPoint(
        batch=batch,
        itl_ms=round(itl_percentile_s(plan, steps) * 1000, 2),
        ttft_ms=round(ttft_s * 1000, 1) if math.isfinite(ttft_s) else None,
        output_tokens_per_s=round(batch / steps.mean_s, 1),
    )


def batch_curve(
    eng: StepModel, plan: CapacityPlan, chunk_tokens: int, operating_batch: int, kv_batch: int
) -> list[fleet.BatchPoint]:
    """The curve the report draws for one region (see the module docstring)."""
    return [
        batch_point(eng, plan, b, chunk_tokens) for b in curve_batches(operating_batch, kv_batch)
    ]
