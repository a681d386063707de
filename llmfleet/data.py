"""The base of every llmfleet model, inputs and outputs alike: unknown keys are errors (a
typo is never a default) and values are frozen (a decided number cannot drift); and the
one min/desired/max triple every count uses."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MinDesiredMax(Data):
    min: int
    desired: int
    max: int
