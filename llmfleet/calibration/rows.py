"""Every measured row predicted through `perf.replica`'s code path: the point the fit
minimises over and the report summarises."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from llmfleet.calibration.measurements import Measurement
from llmfleet.catalog import hardware
from llmfleet.catalog.constants import Constants
from llmfleet.errors import LlmfleetError
from llmfleet.perf.replica import PredictResult, run_predict_with


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
class RowPrediction:
    row_id: str
    source_id: str
    engine: str
    metric: str
    measured: float
    predicted: float
    regime: str = "steady"  # measurements.Regime: what the row's load measures
    architecture: str = ""  # the GPU's architecture (Hopper, Blackwell, ...)
    shape_source: bool = False  # its source measures layouts beyond one TP group

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


def predict_rows(rows: Iterable[Measurement], consts: Constants) -> list[RowPrediction]:
    points = []
    for m in rows:
        try:
            p = run_predict_with(m.request, consts)
        except LlmfleetError:
            continue
        arch = hardware.gpu(m.request.gpu).architecture
        for metric, value in sorted(m.fitted_metrics().items()):
            if value == 0:
                continue
            pred = predicted_value(metric, p)
            infeasible = not p.fits and metric not in ("kv_cache_gib", "kv_cache_tokens")
            points.append(
                RowPrediction(
                    m.row_id, m.source_id, m.engine, metric, value,
                    math.nan if infeasible else pred, m.regime, arch, m.shape_source,
                )
            )
    return points
