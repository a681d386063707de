"""What a plan allows the search to try: instance types, GPUs, precisions, KV dtypes and
speculative decoding (re-exported by `plan`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from llmfleet.architecture import KvCacheDtype, Precision
from llmfleet.data import Data

SpeculativeMethod = Literal["ngram", "eagle", "eagle3", "mtp", "draft_model"]


class SpeculativeSpec(Data):
    """One speculative-decoding setup the search may try (beside none)."""

    method: SpeculativeMethod = Field(description="vLLM speculative-config method.")
    num_speculative_tokens: int | None = Field(
        default=None, ge=1, le=10, description="Tokens drafted per step (k); default 3."
    )
    acceptance_rate: float | None = Field(
        default=None,
        gt=0,
        lt=1,
        description="Probability that each drafted token is accepted; defaults per method and "
        "model in catalog/levers/speculative.json (ngram and draft_model have none).",
    )
    draft_model: str | None = Field(
        default=None,
        description="eagle/eagle3: the head's Hugging Face repo (default per model); "
        "draft_model: a catalog model id with the target's tokenizer.",
    )


class Allowed(Data):
    instance_types: list[str] | None = Field(default=None, description="Only these instance types.")
    gpus: list[str] | None = Field(default=None, description="Only instances with these GPUs.")
    precisions: list[Precision] | None = Field(
        default=None,
        min_length=1,
        description="Weight precisions the search tries. Default: the model's native "
        "precision plus fp8 where the catalog lists a published FP8 checkpoint; int4 only "
        "when listed here (it needs a pre-quantized checkpoint).",
    )
    kv_cache_dtypes: list[KvCacheDtype] | None = Field(
        default=None,
        min_length=1,
        description="KV cache dtypes the search tries. Default: auto and fp8 (fp8 only on "
        "GPUs with FP8 support).",
    )
    speculative: list[SpeculativeSpec] = Field(
        default_factory=list,
        description="Speculative decoding setups the search tries besides none (default: "
        "none, as acceptance depends on the workload).",
    )
