"""The base of every llmfleet model, inputs and outputs alike: unknown keys are errors (a
typo is never a default) and values are frozen (a decided number cannot drift)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
