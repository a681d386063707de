"""Published pre-quantized checkpoints per catalog model (catalog/levers/checkpoints.json),
so a plan served at fp8 or int4 loads real quantized weights, not the 16-bit ones."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

DATA = Path(__file__).parent / "catalog" / "levers" / "checkpoints.json"


class Checkpoint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    precision: str
    hf_repo: str
    source: str


@cache
def checkpoints() -> tuple[Checkpoint, ...]:
    rows = json.loads(DATA.read_text())["checkpoints"]
    return tuple(Checkpoint.model_validate(r) for r in rows)


def published(model_id: str, precision: str) -> Checkpoint | None:
    return next(
        (c for c in checkpoints() if c.model == model_id and c.precision == precision), None
    )
