"""Predict every published measurement through `llmfleet predict`'s code path; show the error.

The rows come from `measurements.py`; this module turns them into (measured, predicted)
points, per-metric error statistics and the report `llmfleet validate` prints.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from llmfleet.calibration import Constants
from llmfleet.errors import LlmfleetError
from llmfleet.measurements import Loaded, Measurement
from llmfleet.predict import ENGINES, PredictResult, run_predict_with


def predicted_value(metric: str, p: PredictResult) -> float:
    """The prediction for a metric; NaN where llmfleet predicts the row cannot run."""
    return {
        "kv_cache_gib": p.kv_cache_gib_per_gpu,
        "kv_cache_tokens": float(p.kv_cache_tokens),
        "output_tokens_per_s": p.output_tokens_per_s,
        "itl_ms": math.nan if p.itl_ms is None else p.itl_ms,
        "ttft_ms": math.nan if p.ttft_ms is None else p.ttft_ms,
        "e2e_latency_ms": math.nan if p.e2e_latency_ms is None else p.e2e_latency_ms,
    }[metric]


@dataclass(frozen=True)
class Point:
    row_id: str
    source_id: str
    engine: str
    metric: str
    measured: float
    predicted: float

    @property
    def infeasible(self) -> bool:
        """llmfleet predicts this configuration cannot hold one request; the source ran it."""
        return math.isnan(self.predicted)

    @property
    def ape(self) -> float:
        """Absolute percentage error."""
        return abs(self.predicted - self.measured) / abs(self.measured) * 100

    @property
    def log_ratio(self) -> float:
        if self.predicted <= 0 or self.measured <= 0:
            return math.copysign(3.0, self.predicted - self.measured)
        return math.log(self.predicted / self.measured)


def predict_rows(rows: Iterable[Measurement], consts: Constants) -> list[Point]:
    points = []
    for m in rows:
        try:
            p = run_predict_with(m.request, consts)
        except LlmfleetError:
            continue
        for metric, value in sorted(m.measured.items()):
            if value == 0:
                continue
            pred = predicted_value(metric, p)
            infeasible = not p.fits and metric not in ("kv_cache_gib", "kv_cache_tokens")
            points.append(
                Point(
                    m.row_id, m.source_id, m.engine, metric, value, math.nan if infeasible else pred
                )
            )
    return points


def summarize(points: Iterable[Point]) -> dict[str, dict[str, float | None]]:
    """Per metric: count, median and p90 absolute percentage error, and how many rows
    llmfleet wrongly predicts cannot run (kept out of the percentages, never dropped)."""
    by: dict[str, list[float]] = {}
    infeasible: dict[str, int] = {}
    for pt in points:
        if pt.infeasible:
            infeasible[pt.metric] = infeasible.get(pt.metric, 0) + 1
            by.setdefault(pt.metric, [])
        else:
            by.setdefault(pt.metric, []).append(pt.ape)
    return {k: _stats(v, infeasible.get(k, 0)) for k, v in sorted(by.items())}


def _stats(errors: list[float], infeasible: int) -> dict[str, float | None]:
    errors = sorted(errors)
    if not errors:
        return {"n": 0, "median_ape": None, "p90_ape": None, "infeasible": infeasible}
    p90 = errors[min(len(errors) - 1, math.ceil(0.9 * len(errors)) - 1)]
    return {
        "n": len(errors),
        "median_ape": statistics.median(errors),
        "p90_ape": p90,
        "infeasible": infeasible,
    }


def summarize_by(
    points: Iterable[Point], key: str
) -> dict[str, dict[str, dict[str, float | None]]]:
    """summarize() per value of `key` (source_id or engine)."""
    groups: dict[str, list[Point]] = {}
    for pt in points:
        groups.setdefault(getattr(pt, key), []).append(pt)
    return {k: summarize(v) for k, v in sorted(groups.items())}


def validation_report(
    loaded: Loaded, consts: Constants, prior: Constants, loso: bool
) -> dict[str, Any]:
    """What `llmfleet validate` prints: errors per engine and per source, in sample and, with
    `loso`, held out (each source predicted by constants refitted from `prior` without it)."""
    # calibrate builds on this module's points, so it is imported only when refits are asked.
    from llmfleet.calibrate import leave_one_source_out

    points = predict_rows(loaded.rows, consts)
    held_out = leave_one_source_out(loaded.rows, prior) if loso else []
    return {
        "rows": len(loaded.rows),
        "skipped": [{"row_id": r, "reason": why} for r, why in loaded.skipped],
        "in_sample": {e: summarize([p for p in points if p.engine == e]) for e in ENGINES},
        "leave_one_source_out": {
            e: summarize([p for p in held_out if p.engine == e]) for e in ENGINES
        },
        "by_source": summarize_by(points, "source_id"),
        "by_source_held_out": summarize_by(held_out, "source_id"),
    }
