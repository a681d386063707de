"""The FleetPlan's levers section: what compression and speculation do for this model and
plan (memory per precision, speculative speed-up against batch, the cost each lever saves).
Plain data, built by `lever_report`."""

from __future__ import annotations

from pydantic import Field

from llmfleet.data import Data


class PrecisionMemory(Data):
    precision: str
    weights_gib: float
    saved_vs_bf16: float = Field(description="Share of the BF16 weights saved (0.5 = half).")
    checkpoint: str | None = Field(description="The checkpoint served at it (None: none known).")


class SpeedupRow(Data):
    batch: int
    ms_per_token: float = Field(description="Decode-only step without speculation.")
    spec_step_ms: float = Field(description="Verify step with k + 1 tokens per sequence + draft.")
    spec_ms_per_token: float = Field(description="That step over the expected tokens per step.")
    speedup: float


class LeverCost(Data):
    region: str
    lever: str
    precision: str
    kv_cache_dtype: str
    speculative: str | None
    monthly_cost_usd: float | None = Field(description="None: infeasible on this hardware.")
    saves_usd: float | None = Field(description="Against the plain levers on the same hardware.")


class LeverReport(Data):
    seed_claim: str
    memory: list[PrecisionMemory]
    speculative_method: str | None
    num_speculative_tokens: int | None
    acceptance_rate: float | None
    tokens_per_step: float | None
    speedup_hardware: str | None
    speedup: list[SpeedupRow]
    costs: list[LeverCost]
    notes: list[str]
