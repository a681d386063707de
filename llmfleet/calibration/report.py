"""The validation report: median and p90 absolute error per engine, metric and source, in
sample and held out (leave one source out); TTFT by prompt length; and per source what
calibrating a server on its own other runs buys (`own_runs`)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Any

from llmfleet.calibration.band import band_report, shipped_band, ttft_bias
from llmfleet.calibration.fit import held_out_by_architecture, held_out_fits
from llmfleet.calibration.measurements import SIZING_REGIMES, Loaded, Measurement
from llmfleet.calibration.own_runs import one_sweep_report, own_runs_report
from llmfleet.calibration.rows import RowPrediction, predict_rows
from llmfleet.catalog.constants import Constants
from llmfleet.perf.replica import ENGINES


def summarize(points: Iterable[RowPrediction]) -> dict[str, dict[str, float | None]]:
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
    points: Iterable[RowPrediction], key: str
) -> dict[str, dict[str, dict[str, float | None]]]:
    """summarize() per value of `key` (source_id or engine)."""
    groups: dict[str, list[RowPrediction]] = {}
    for pt in points:
        groups.setdefault(getattr(pt, key), []).append(pt)
    return {k: summarize(v) for k, v in sorted(groups.items())}


def validation_report(
    loaded: Loaded, consts: Constants, prior: Constants, loso: bool
) -> dict[str, Any]:
    """What `llmfleet validate` prints: errors per engine and per source, in sample and, with
    `loso`, held out (each source predicted by constants refitted from `prior` without it)."""
    # calibrate builds on this module's points, so it is imported only when refits are asked.

    points = predict_rows(loaded.rows, consts)
    held_out, fold_constants = held_out_fits(loaded.rows, prior) if loso else ([], {})
    shapes = {r.source_id for r in loaded.rows if r.shape_source}
    beyond = {r.row_id for r in loaded.rows if r.beyond_one_group}
    band: dict[str, Any] = {"sizing": {}, "by_regime": {}, "coverage": {}, "coverage_by_regime": {}}
    if loso:
        by_architecture = held_out_by_architecture(loaded.rows, prior)
        shipped = shipped_band(loaded.rows, held_out, by_architecture)
        band = band_report(loaded.rows, held_out, prior, shipped)
    return {
        "band": band,
        "ttft_by_source": {
            "in_sample": ttft_bias(points),
            "leave_one_source_out": ttft_bias(held_out),
        },
        "below_compute_floor": [
            {
                "row_id": r.row_id,
                "source_id": r.source_id,
                "ttft_ms": r.measured["ttft_ms"],
                "floor_ms": round(r.ttft_floor_ms, 1),
            }
            for r in loaded.rows
            if r.below_floor
        ],
        # over the rows a plan is sized with (bursts through an API server are apart)
        "ttft_by_prompt_tokens": {
            "in_sample": ttft_by_prompt(loaded.rows, _sizing(points, set())),
            "leave_one_source_out": ttft_by_prompt(loaded.rows, _sizing(held_out, set())),
        },
        "by_source_own_runs": own_runs_report(loaded.rows, fold_constants) if loso else {},
        # calibrated on one sweep (one prompt and output length), the server's other sweeps
        "calibrated_on_one_sweep": one_sweep_report(loaded.rows, fold_constants) if loso else {},
        "rows": len(loaded.rows),
        "skipped": [{"row_id": r, "reason": why} for r, why in loaded.skipped],
        "in_sample": {e: summarize([p for p in points if p.engine == e]) for e in ENGINES},
        "leave_one_source_out": {
            e: summarize([p for p in held_out if p.engine == e]) for e in ENGINES
        },
        # The same over the sources of one TP group only, the ones the constants are fitted
        # on (Measurement.fitted_on): comparable with the figures before layouts beyond one
        # group were measured; and those layouts' own rows (pipeline stages, DP, EP).
        "one_group": {
            "in_sample": _by_engine([p for p in points if p.source_id not in shapes]),
            "leave_one_source_out": _by_engine(
                [p for p in held_out if p.source_id not in shapes]
            ),
        },
        # The rows the constants are fitted on and a plan is sized with (one TP group, a
        # steady state, low load or offline), and the bursts through an API server apart.
        "sizing_regimes": {
            "in_sample": _by_engine(_sizing(points, shapes)),
            "leave_one_source_out": _by_engine(_sizing(held_out, shapes)),
        },
        "bursts": {
            "in_sample": _by_engine([p for p in points if p.regime == "burst"]),
            "leave_one_source_out": _by_engine([p for p in held_out if p.regime == "burst"]),
        },
        "beyond_one_group": {
            "in_sample": _by_engine([p for p in points if p.row_id in beyond]),
            "leave_one_source_out": _by_engine([p for p in held_out if p.row_id in beyond]),
        },
        "by_source": summarize_by(points, "source_id"),
        "by_source_held_out": summarize_by(held_out, "source_id"),
    }


PROMPT_BANDS = ((0, 512), (512, 2048), (2048, 8192), (8192, 10**9))


def band_name(lo: int, hi: int) -> str:
    return f"{lo:,}-{hi:,}" if hi < 10**9 else f">= {lo:,}"


def ttft_by_prompt(
    rows: Iterable[Measurement], points: Iterable[RowPrediction]
) -> dict[str, dict[str, float | None]]:
    """vLLM rows' TTFT per band of prompt tokens (and all): how many, the median absolute
    error and the median predicted / measured (above 1: predicted too slow)."""
    prompt = {m.row_id: m.request.input_tokens for m in rows}
    by: dict[str, list[RowPrediction]] = {}
    for pt in points:
        if pt.metric != "ttft_ms" or pt.engine != "vllm" or pt.infeasible or pt.predicted <= 0:
            continue
        tokens = prompt[pt.row_id]
        band = next(band_name(lo, hi) for lo, hi in PROMPT_BANDS if lo <= tokens < hi)
        by.setdefault(band, []).append(pt)
        by.setdefault("all", []).append(pt)
    order = [band_name(lo, hi) for lo, hi in PROMPT_BANDS] + ["all"]
    return {
        band: {
            "n": len(by[band]),
            "median_ape": statistics.median(p.ape for p in by[band]),
            "median_predicted_over_measured": statistics.median(
                p.predicted / p.measured for p in by[band]
            ),
        }
        for band in order
        if band in by
    }


def _sizing(points: list[RowPrediction], shapes: set[str]) -> list[RowPrediction]:
    return [p for p in points if p.source_id not in shapes and p.regime in SIZING_REGIMES]


def _by_engine(points: list[RowPrediction]) -> dict[str, dict[str, dict[str, float | None]]]:
    return {e: summarize([p for p in points if p.engine == e]) for e in ENGINES}
