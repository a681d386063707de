"""The band measured, not asserted: how often a held-out measurement lands inside the p10-p90
band of measured/predicted, and TTFT's bias per source and regime.

The band a plan is sized with (`fit.uncertainty`) is the spread of every source's held-out
ratios; checking it on those same ratios would count each measurement in the band it made.
So the coverage leaves one source out twice: each source's held-out ratios are checked
against the band made of the other sources' held-out ratios. 80 % is the band's nominal
coverage; below it the band is too narrow for what it has not seen."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from llmfleet.calibration.fit import uncertainty
from llmfleet.calibration.measurements import SIZING_REGIMES
from llmfleet.calibration.rows import Point


def _ratio(pt: Point) -> float | None:
    if pt.infeasible or pt.predicted <= 0 or pt.measured <= 0:
        return None
    return pt.measured / pt.predicted


def coverage(
    held_out: Sequence[Point], regimes: Sequence[str] = SIZING_REGIMES
) -> dict[str, dict[str, float]]:
    """Per metric (vLLM rows of `regimes`): n and the share of held-out measurements inside
    the p10-p90 band made without their source."""
    points = [p for p in held_out if p.engine == "vllm" and p.regime in regimes]
    inside: dict[str, list[bool]] = {}
    for source in sorted({p.source_id for p in points}):
        band = uncertainty([p for p in points if p.source_id != source], regimes)
        for pt in points:
            ratio = _ratio(pt)
            if pt.source_id != source or ratio is None or pt.metric not in band:
                continue
            lo, hi = band[pt.metric]["p10"], band[pt.metric]["p90"]
            inside.setdefault(pt.metric, []).append(lo <= ratio <= hi)
    return {
        m: {"n": len(v), "inside_p10_p90": sum(v) / len(v)} for m, v in sorted(inside.items())
    }


def coverage_by_regime(held_out: Sequence[Point]) -> dict[str, dict[str, dict[str, float]]]:
    """The coverage of each regime's own band (low load, steady, burst, offline)."""
    regimes = sorted({p.regime for p in held_out})
    return {r: cov for r in regimes if (cov := coverage(held_out, (r,)))}


def ttft_bias(points: Iterable[Point]) -> dict[str, dict[str, dict[str, Any]]]:
    """Median predicted/measured TTFT per source: over the rows a plan is sized on (the
    step regimes) and over bursts through an API server, apart (every engine)."""
    by: dict[str, dict[str, list[float]]] = {}
    for pt in points:
        ratio = _ratio(pt)
        if pt.metric != "ttft_ms" or ratio is None:
            continue
        part = "step" if pt.regime in SIZING_REGIMES else pt.regime
        by.setdefault(pt.source_id, {}).setdefault(part, []).append(1 / ratio)
    return {
        source: {
            part: {"n": len(v), "median_predicted_over_measured": statistics.median(v)}
            for part, v in sorted(parts.items())
        }
        for source, parts in sorted(by.items())
    }
