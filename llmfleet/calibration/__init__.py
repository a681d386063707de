"""The performance model's free constants, kept as data so calibration can refit them."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

PATH = Path(__file__).parent / "constants.json"


class Constants(BaseModel):
    model_config = ConfigDict(frozen=True)

    cuda_visible_fraction: float
    non_torch_gib: float
    non_torch_gib_multi_gpu: float
    sampler_logit_copies: float
    token_activation_factor: float
    mbu: dict[str, float]
    mfu: dict[str, float]
    step_overhead_ms: float
    allreduce_latency_us: dict[str, float]
    link_efficiency: float
    engine_step_factor: dict[str, float]
    engine_non_torch_gib: dict[str, float] = {}


def parse(doc: dict[str, dict[str, dict[str, object]]]) -> Constants:
    flat = {k: v["value"] for section in ("memory", "compute") for k, v in doc[section].items()}
    return Constants.model_validate(flat)


@cache
def load() -> Constants:
    return parse(json.loads(PATH.read_text()))
