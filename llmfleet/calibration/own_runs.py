"""What calibrating on your own runs buys, per source of the published measurements: each
run predicted by the constants fitted without its source (a user's server is not in the
shipped fit either), and by those constants with the correction `llmfleet calibrate
--bench` would fit on the other runs of the same server in the same source (held out by
run: a run's TTFT, TPOT and throughput are left out together, never one metric of it).

A server is one (source, engine, model, GPU, TP, precision, KV dtype, release); a run
whose server has no other run in its source cannot be calibrated and is left out of both
columns."""

from __future__ import annotations

import os
import statistics
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from llmfleet.calibration.measurements import Measurement
from llmfleet.calibration.server_fit import (
    LENGTH_STEP,
    METRICS,
    Observed,
    fit_correction,
    held_out_ratios,
    prompt_lengths,
    run_ratios,
)
from llmfleet.catalog.constants import Constants
from llmfleet.errors import LlmfleetError
from llmfleet.perf.replica import run_predict_with
from llmfleet.perf.step import NO_CORRECTION

Ratios = list[tuple[str, dict[str, float], dict[str, float]]]  # (source, before, after)


def servers(rows: Sequence[Measurement]) -> list[list[Observed]]:
    """The runs of each server with two or more timing runs, in row order."""
    groups: dict[tuple[object, ...], list[Observed]] = {}
    for m in rows:
        measured = {k: v for k, v in m.measured.items() if k in METRICS and v > 0}
        if not measured:
            continue
        r = m.request
        key = (m.source_id, m.engine, r.model, r.gpu, r.tensor_parallel_size, r.precision,
               r.kv_cache_dtype, r.engine_version or "")
        groups.setdefault(key, []).append(Observed(f"{m.source_id}:{m.row_id}", r, measured))
    return [runs for runs in groups.values() if len(runs) > 1]


def _fits(run: Observed, consts: Constants) -> bool:
    try:
        return run_predict_with(run.request, consts).fits
    except LlmfleetError:
        return False


def _server_ratios(job: tuple[list[Observed], Constants]) -> Ratios:
    runs, consts = job
    runs = [r for r in runs if _fits(r, consts)]  # a run predicted not to fit has no TPOT
    if len(runs) < 2:
        return []
    source = runs[0].label.split(":")[0]
    after = held_out_ratios(runs, consts)  # each prompt length fitted on the others
    if not after:
        return []  # one prompt length: nothing the calibration can be tested on
    ordered = [r for group in prompt_lengths(runs) for r in group]
    before = run_ratios(ordered, consts, NO_CORRECTION)
    return [(source, b, a) for b, a in zip(before, after, strict=True)]


def own_runs_report(
    rows: Sequence[Measurement], held_out: Mapping[str, Constants]
) -> dict[str, Any]:
    """Per source and metric: how many runs, the median absolute error with the constants
    fitted without the source (`held_out`, per source), and with them and a calibration on
    the server's other runs. The servers are independent, so they are fitted in parallel
    processes and gathered in order."""
    jobs = [(runs, held_out[runs[0].label.split(":")[0]]) for runs in servers(rows)]
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        ratios = [r for server in pool.map(_server_ratios, jobs) for r in server]
    by: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
    for source, before, after in ratios:
        for metric in before.keys() & after.keys():
            b, a = by.setdefault(source, {}).setdefault(metric, ([], []))
            b.append(abs(1 / before[metric] - 1) * 100)
            a.append(abs(1 / after[metric] - 1) * 100)
    return {
        source: {
            metric: {
                "n": len(b),
                "median_ape_held_out": round(statistics.median(b), 2),
                "median_ape_own_runs": round(statistics.median(a), 2),
            }
            for metric, (b, a) in sorted(metrics.items())
        }
        for source, metrics in sorted(by.items())
    }


def sweeps(runs: Sequence[Observed]) -> list[list[Observed]]:
    """The runs grouped by shape, prompt and output length (means within LENGTH_STEP of the
    group's first on both): a concurrency sweep at one shape, what a user runs first."""
    groups: list[list[Observed]] = []
    for run in sorted(runs, key=lambda r: (r.request.input_tokens, r.request.output_tokens)):
        first = next(
            (
                g for g in groups
                if all(
                    max(a, b) < LENGTH_STEP * min(a, b)
                    for a, b in (
                        (run.request.input_tokens, g[0].request.input_tokens),
                        (run.request.output_tokens, g[0].request.output_tokens),
                    )
                )
            ),
            None,
        )
        if first is None:
            groups.append([run])
        else:
            first.append(run)
    return groups


def _shape(runs: Sequence[Observed]) -> str:
    i = statistics.median(r.request.input_tokens for r in runs)
    o = statistics.median(r.request.output_tokens for r in runs)
    return f"{i:,.0f}/{o:,.0f}"


def _one_sweep(job: tuple[list[Observed], Constants]) -> list[dict[str, Any]]:
    """Each sweep of a server as the one a user calibrates on, every other sweep predicted
    before and after: one entry per sweep calibrated on, with its other sweeps' median
    absolute error per metric (`cells`) and over every run and metric of them (`pooled`)."""
    runs, consts = job
    runs = [r for r in runs if _fits(r, consts)]
    groups = sweeps(runs)
    if len(groups) < 2:
        return []
    out = []
    for k, calibrated in enumerate(groups):
        correction = fit_correction(calibrated, consts)
        cells, before_all, after_all = [], [], []
        for j, other in enumerate(groups):
            if j == k:
                continue
            before = run_ratios(other, consts, NO_CORRECTION)
            after = run_ratios(other, consts, correction)
            before_all += before
            after_all += after
            cells.append({
                "held_out": _shape(other),
                "runs": len(other),
                "before": _median_ape(before),
                "after": _median_ape(after),
            })
        out.append({
            "source": runs[0].label.split(":")[0],
            "server": _server_label(runs[0]),
            "calibrated_on": _shape(calibrated),
            "runs": len(calibrated),
            "cells": cells,
            "pooled_before": _pooled(before_all),
            "pooled_after": _pooled(after_all),
        })
    return out


def _server_label(run: Observed) -> str:
    r = run.request
    return f"{r.model} on {r.gpu} TP {r.tensor_parallel_size}, {r.precision}, KV {r.kv_cache_dtype}"


def _median_ape(ratios: Sequence[dict[str, float]]) -> dict[str, float]:
    by: dict[str, list[float]] = {}
    for r in ratios:
        for m, ratio in r.items():
            by.setdefault(m, []).append(abs(1 / ratio - 1) * 100)
    return {m: round(statistics.median(v), 2) for m, v in sorted(by.items())}


def _pooled(ratios: Sequence[dict[str, float]]) -> float:
    return round(statistics.median(abs(1 / x - 1) * 100 for r in ratios for x in r.values()), 2)


ONE_SWEEP_TARGET_PCT = 10.0
"""Issue #29: calibrated on one sweep, the other shapes' median error at most this."""


def one_sweep_report(
    rows: Sequence[Measurement], held_out: Mapping[str, Constants]
) -> dict[str, Any]:
    """What `llmfleet calibrate --bench` on one sweep buys at the shapes it never ran, per
    vLLM server with runs at two or more shapes (at a concurrency: low load or a steady state):
    each sweep calibrated on in turn and each other sweep predicted by the constants fitted
    without the source (`held_out`), before and after the calibration. `cases` holds one
    entry per (server, sweep calibrated on) with its other sweeps per metric; `summary` per
    metric how many (case, sweep held out) cells, how many the calibration made worse, and
    the median error before and after; `pooled` how many cases reach the target over every
    run and metric of their other sweeps."""
    at_load = [m for m in rows if m.engine == "vllm" and m.regime in ("low_load", "steady")]
    jobs = [(runs, held_out[runs[0].label.split(":")[0]]) for runs in servers(at_load)]
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        cases = [c for server in pool.map(_one_sweep, jobs) for c in server]
    summary: dict[str, dict[str, float]] = {}
    for metric in METRICS:
        pairs = [
            (cell["before"][metric], cell["after"][metric])
            for case in cases for cell in case["cells"] if metric in cell["after"]
        ]
        if pairs:
            summary[metric] = {
                "cells": len(pairs),
                "worse": sum(a > b for b, a in pairs),
                "median_before": round(statistics.median(b for b, _ in pairs), 2),
                "median_after": round(statistics.median(a for _, a in pairs), 2),
            }
    return {
        "cases": cases,
        "summary": summary,
        "pooled": {
            "cases": len(cases),
            "within_target": sum(c["pooled_after"] <= ONE_SWEEP_TARGET_PCT for c in cases),
            "target_pct": ONE_SWEEP_TARGET_PCT,
        },
    }
