"""The performance model's free constants, kept as data so calibration can refit them.

constants.json holds, per constant, the fitted `value`, the hand-derived `prior` and the
reason for it; `uncertainty` holds quantiles of measured/predicted from the last fit."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

PATH = Path(__file__).parent / "constants.json"


SECTIONS = ("memory", "compute")


class Constants(BaseModel):
    # A misspelt or retired key in constants.json is refused, not silently ignored.
    model_config = ConfigDict(frozen=True, extra="forbid")

    cuda_visible_fraction: float
    non_torch_gib: float
    non_torch_gib_multi_gpu: float
    sampler_logit_copies: float
    token_activation_factor: float
    mbu: dict[str, float]
    mfu: dict[str, float]
    step_overhead_ms: dict[str, float]
    allreduce_latency_us: dict[str, float]
    link_efficiency: float
    engine_step_factor: dict[str, float]
    request_handling_ms: dict[str, float]
    moe_efficiency: float
    roofline_overlap: float
    moe_layer_overhead_us: float
    tp_sync_overhead_us: float
    sequence_overhead_us: dict[str, float]
    # measured/predicted quantiles per metric: {"itl_ms": {"p10": .., "p90": ..}}: the band a
    # plan on a GPU architecture the fit measures is sized with; the same per regime of load
    # (low_load, steady, burst, ...); and the band of an architecture no measurement covers
    # (calibration.band: every measured architecture predicted without its rows)
    uncertainty: dict[str, dict[str, float]] = {}
    uncertainty_by_regime: dict[str, dict[str, dict[str, float]]] = {}
    uncertainty_unmeasured: dict[str, dict[str, float]] = {}
    measured_architectures: tuple[str, ...] = ()

    def measures(self, architecture: str | None) -> bool:
        """Whether the step constants were fitted on rows of this GPU architecture (None, or
        constants without the list: yes)."""
        return (
            architecture is None
            or not self.measured_architectures
            or architecture in self.measured_architectures
        )

    def band(self, architecture: str | None = None) -> dict[str, dict[str, float]]:
        """The band a prediction on this GPU architecture carries: the measured one, or for an
        architecture no measurement covers its own (the measured one for the metrics it
        lacks: KV capacity does not depend on the architecture's efficiencies)."""
        if self.measures(architecture):
            return self.uncertainty
        return {**self.uncertainty, **self.uncertainty_unmeasured}

    def ratio(self, metric: str, quantile: str, architecture: str | None = None) -> float:
        return self.band(architecture).get(metric, {}).get(quantile, 1.0)


def parse(doc: dict[str, Any], field: str = "value") -> Constants:
    flat = {k: v[field] for section in SECTIONS for k, v in doc[section].items()}
    flat["uncertainty"] = doc.get("uncertainty", {}).get("ratios", {})
    flat["uncertainty_by_regime"] = doc.get("uncertainty", {}).get("by_regime", {})
    flat["uncertainty_unmeasured"] = doc.get("uncertainty", {}).get("unmeasured_architecture", {})
    flat["measured_architectures"] = tuple(
        doc.get("uncertainty", {}).get("measured_architectures", ())
    )
    return Constants.model_validate(flat)


def document() -> dict[str, Any]:
    return dict(json.loads(PATH.read_text()))


@cache
def fitted() -> Constants:
    """The fitted constants every prediction uses."""
    return parse(document())


@cache
def priors() -> Constants:
    """The hand-derived constants calibration starts from (and leave-one-out refits use)."""
    return parse(document(), "prior")
