"""The band measured, not asserted: where a measurement lands against the prediction (p10-p90
of measured/predicted, each row predicted by constants fitted without its source), how often
a held-out measurement lands inside it, and TTFT's bias per source and regime.

The band is taken over the rows a plan is sized with: vLLM rows of one TP group's sources (a
source that measures layouts beyond one group runs on hardware the catalog stands in for, as
`Measurement.fitted_on` says) at low load, a steady state or offline. It knows when it
extrapolates: a row whose GPU architecture no other source measures was predicted, held out,
with its architecture's efficiencies carried from the others' (`fit._carry_to_unmeasured`),
which is a different error from a row on an architecture the fit has seen. So there are two:

- the band of a **measured** architecture (`uncertainty.ratios`, the one plans on H100, H200,
  A100 or B200 are sized with): the held-out rows whose architecture another source covers;
- the band of an **unmeasured** architecture (`uncertainty.unmeasured_architecture`, for L40S
  and L4 while no Ada row is fitted on): every row predicted without any row of its
  architecture (each measured architecture left out in turn, `fit.held_out_by_architecture`,
  and the held-out rows no other source covers). How far such a prediction lands from the
  measurement is measured; which way is not (a part may be faster or slower than its
  carried efficiencies), so the band is symmetric in log: e^-a to e^a with a the 80th
  percentile of |log(measured/predicted)|. ITL, output throughput and end-to-end latency
  each measure the same decode step, so they share one a; TTFT (prefill) has its own.

The coverage leaves one source out twice: each source's held-out ratios are checked against
the band made without it (the unmeasured band for its rows on an architecture no other source
covers, made from fits without the source). 80 % is the band's nominal coverage; below it the
band is too narrow for what it has not seen."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from llmfleet.calibration.fit import (
    held_out_by_architecture,
    timing_architectures,
    uncertainty,
)
from llmfleet.calibration.measurements import SIZING_REGIMES, Measurement
from llmfleet.calibration.rows import RowPrediction
from llmfleet.catalog.constants import Constants

STEP_METRICS = ("itl_ms", "output_tokens_per_s", "e2e_latency_ms")
"""Metrics of the decode step: one extrapolation spread between them."""
BAND_OF = {"e2e_latency_ms": "itl_ms"}
"""A request's end-to-end latency is its TTFT plus (output - 1) inter-token gaps, the gaps
over 90 % of it in every row that measures it (outputs of 128-8,000 tokens): its band is the
decode step's, which more sources measure (no plan reads an E2E band)."""
NOMINAL = 0.8
"""The band's nominal coverage: p10-p90."""

Band = dict[str, dict[str, float]]


def _ratio(pt: RowPrediction) -> float | None:
    if pt.infeasible or pt.predicted <= 0 or pt.measured <= 0:
        return None
    return pt.measured / pt.predicted


def one_group(points: Iterable[RowPrediction]) -> list[RowPrediction]:
    """vLLM rows of the sources of one TP group, with a ratio to take."""
    return [p for p in points if p.engine == "vllm" and not p.shape_source and _ratio(p)]


def measured_for(rows: Sequence[Measurement]) -> Callable[[RowPrediction], bool]:
    """Whether a held-out point's architecture is measured by another source than its own
    (the fit that predicted it saw rows of that architecture)."""
    covered = {s: timing_architectures(rows, without=s) for s in {r.source_id for r in rows}}
    return lambda p: p.architecture in covered.get(p.source_id, set())


def extrapolation_band(points: Iterable[RowPrediction]) -> Band:
    """The band of an architecture no measurement covers, from rows predicted without any row
    of their architecture: symmetric in log, e^-a to e^a, a the NOMINAL quantile of
    |log(measured/predicted)| over the decode-step metrics (one a) and over TTFT."""
    step: list[float] = []
    ttft: list[float] = []
    for p in points:
        ratio = _ratio(p)
        if ratio is None:
            continue
        if p.metric in STEP_METRICS:
            step.append(abs(math.log(ratio)))
        elif p.metric == "ttft_ms":
            ttft.append(abs(math.log(ratio)))
    out: Band = {}
    for metrics, logs in ((STEP_METRICS, step), (("ttft_ms",), ttft)):
        if not logs:
            continue
        logs.sort()
        a = logs[math.ceil(NOMINAL * (len(logs) - 1))]
        out.update({m: {"p10": math.exp(-a), "p90": math.exp(a)} for m in metrics})
    return out


def shipped_band(
    rows: Sequence[Measurement],
    held_out: Sequence[RowPrediction],
    by_architecture: Sequence[RowPrediction],
) -> dict[str, Any]:
    """What constants.json carries under `uncertainty`: the band of a measured architecture
    (`ratios`), per regime (`by_regime`, bursts among them), the band of an unmeasured one,
    and which architectures are measured."""
    measured = measured_for(rows)
    points = one_group(held_out)
    known = [p for p in points if measured(p)]
    unknown = [p for p in points if not measured(p) and p.regime in SIZING_REGIMES]
    regimes = sorted({p.regime for p in known})
    return {
        "ratios": _decode_band(uncertainty(known)),
        "by_regime": {r: b for r in regimes if (b := _decode_band(uncertainty(known, (r,))))},
        "unmeasured_architecture": extrapolation_band(
            unknown + [p for p in one_group(by_architecture) if p.regime in SIZING_REGIMES]
        ),
        "measured_architectures": sorted(timing_architectures(rows)),
    }


def _decode_band(band: Band) -> Band:
    """The band with end-to-end latency given its decode step's (`BAND_OF`)."""
    out = dict(band)
    for metric, of in BAND_OF.items():
        if of in band:
            out[metric] = band[of]
        else:
            out.pop(metric, None)
    return out


def coverage(
    held_out: Sequence[RowPrediction],
    regimes: Sequence[str] = SIZING_REGIMES,
    measured: Callable[[RowPrediction], bool] | None = None,
    unmeasured_band: Mapping[str, Band] | None = None,
) -> dict[str, dict[str, float]]:
    """Per metric (vLLM rows of one TP group, of `regimes`): n and the share of held-out
    measurements inside the p10-p90 band made without their source. With `measured`, a row
    on an architecture no other source covers is checked against `unmeasured_band[source]`
    (the unmeasured band made without that source) and left out of every other source's
    band; without it every row is of a measured architecture."""
    points = [p for p in one_group(held_out) if p.regime in regimes]
    known = [p for p in points if measured is None or measured(p)]
    inside: dict[str, list[bool]] = {}
    for source in sorted({p.source_id for p in points}):
        band = _decode_band(uncertainty([p for p in known if p.source_id != source], regimes))
        for pt in points:
            if pt.source_id != source:
                continue
            own = band if measured is None or measured(pt) else (unmeasured_band or {}).get(
                source, {}
            )
            ratio = _ratio(pt)
            if ratio is None or pt.metric not in own:
                continue
            lo, hi = own[pt.metric]["p10"], own[pt.metric]["p90"]
            inside.setdefault(pt.metric, []).append(lo <= ratio <= hi)
    return {
        m: {"n": len(v), "inside_p10_p90": sum(v) / len(v)} for m, v in sorted(inside.items())
    }


def band_report(
    rows: Sequence[Measurement],
    held_out: Sequence[RowPrediction],
    prior: Constants,
    shipped: dict[str, Any],
) -> dict[str, Any]:
    """`validate`'s band: the shipped one, per regime and for an unmeasured architecture, and
    the coverage of each (every source's rows checked against the band made without it; for
    a source whose rows include an architecture no other source covers, the unmeasured band
    is made again from fits without that source)."""
    measured = measured_for(rows)
    points = one_group(held_out)
    unmeasured: dict[str, Band] = {}
    for source in sorted({p.source_id for p in points if not measured(p)}):
        others = [p for p in points if p.source_id != source and not measured(p)]
        refits = held_out_by_architecture(rows, prior, without=source)
        unmeasured[source] = extrapolation_band(
            [p for p in others + one_group(refits) if p.regime in SIZING_REGIMES]
        )
    regimes = sorted({p.regime for p in points})
    return {
        "sizing": shipped["ratios"],
        "by_regime": shipped["by_regime"],
        "unmeasured_architecture": shipped["unmeasured_architecture"],
        "measured_architectures": shipped["measured_architectures"],
        "coverage": coverage(held_out, SIZING_REGIMES, measured, unmeasured),
        "coverage_by_regime": {
            r: cov for r in regimes if (cov := coverage(held_out, (r,), measured, unmeasured))
        },
        "coverage_measured": coverage(
            [p for p in held_out if measured(p)], SIZING_REGIMES, measured, unmeasured
        ),
        "coverage_unmeasured": coverage(
            [p for p in held_out if not measured(p)], SIZING_REGIMES, measured, unmeasured
        ),
    }


def ttft_bias(points: Iterable[RowPrediction]) -> dict[str, dict[str, dict[str, Any]]]:
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
