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
    METRICS,
    Observed,
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
