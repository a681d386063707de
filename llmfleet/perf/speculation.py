"""Speculative decoding: a drafter proposes k tokens per sequence; the target verifies them
in one step and keeps each with probability a until the first rejection, so a step yields
(1 - a^(k+1)) / (1 - a) tokens. The step model charges the verify step its k + 1 tokens
per sequence and the drafter its k passes (`step.step_time`); memory charges the drafter's
weights and KV (`memory.budget`). Defaults and their sources: catalog/levers/speculative.json.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmfleet.catalog import model_facts
from llmfleet.catalog.model_facts import default_k, model_default
from llmfleet.errors import PlanError
from llmfleet.perf.architecture import Arch, from_config

EAGLE3_DRAFT_VOCAB = 32000
"""EAGLE-3 heads predict over a reduced draft vocabulary."""
EAGLE3_FUSED_FEATURES = 3
"""Low, middle and top hidden states of the target, concatenated."""


def expected_tokens(acceptance_rate: float, k: int) -> float:
    """Tokens a sequence gains per target step when each of k drafted tokens is accepted with
    probability a until the first rejection, plus the target's own token:
    (1 - a^(k+1)) / (1 - a)."""
    a = acceptance_rate
    return float(k + 1) if a >= 1 else (1 - a ** (k + 1)) / (1 - a)


@dataclass(frozen=True)
class Speculation:
    """A resolved speculative setup: k drafted tokens per sequence, verified in one target
    step. GPU-independent and hashable (a memo key of the search); the step model runs the
    drafter (`draft_arch`: an EAGLE head, an MTP layer or a draft model; None when drafting
    costs no GPU time: ngram lookup in the prompt runs on the CPU) at the target's TP."""

    method: str
    k: int
    acceptance_rate: float
    draft_arch: Arch | None
    draft_model: str | None  # checkpoint of the drafter, None for ngram and mtp
    draft_precision: str
    source: str

    @property
    def tokens_per_step(self) -> float:
        return expected_tokens(self.acceptance_rate, self.k)

    def draft_weight_bytes(self) -> float:
        """Weights the drafter adds (EAGLE-1 heads and MTP layers share the target's head)."""
        if self.draft_arch is None:
            return 0.0
        shared = 2.0 * self.draft_arch.lm_head_params if self.method in ("eagle", "mtp") else 0
        return self.draft_arch.weight_bytes(self.draft_precision) - shared

    def draft_kv_bytes_per_token(self, kv_dtype_bytes: float) -> float:
        return self.draft_arch.kv_bytes_per_token(kv_dtype_bytes) if self.draft_arch else 0.0

    def vllm_config(self, tp: int) -> dict[str, object]:
        """`speculative-config` keys of vLLM's SpeculativeConfig (method, model,
        num_speculative_tokens, draft_tensor_parallel_size, prompt_lookup_max/min)."""
        out: dict[str, object] = {"method": self.method, "num_speculative_tokens": self.k}
        if self.draft_model:
            out["model"] = self.draft_model
        if self.method == "draft_model":
            out["draft_tensor_parallel_size"] = tp
        if self.method == "ngram":
            out["prompt_lookup_max"] = 4
            out["prompt_lookup_min"] = 2
        return out


def head_arch(target: Arch, method: str) -> Arch:
    """An EAGLE head or MTP layer: one decoder layer of the target's shapes. EAGLE-3 adds a
    projection of three fused features and its own LM head over a 32k draft vocabulary; an
    MTP layer (DeepSeek) is one full MoE layer plus a 2h -> h projection, sharing the
    target's embeddings and head."""
    h, layers = target.hidden, target.layers
    moe = 1 if target.moe_layers and method == "mtp" else 0
    dense_mlp = target.dense_mlp_params // max(1, layers - target.moe_layers) if not moe else 0
    if not dense_mlp and not moe:  # MoE target, dense EAGLE head: one expert-sized MLP x top-k
        dense_mlp = 3 * h * target.expert_intermediate * max(1, target.experts_per_token)
    if method == "eagle3":
        proj, vocab = EAGLE3_FUSED_FEATURES * h * h, EAGLE3_DRAFT_VOCAB
    else:
        proj, vocab = 2 * h * h, target.vocab
    return target.model_copy(
        update={
            "name": f"{target.name} {method} head",
            "layers": 1,
            "vocab": vocab,
            "sliding_layers": 0,
            "sliding_window": None,
            "embed_params": 0,  # shares the target's embeddings
            "lm_head_params": vocab * h if method == "eagle3" else target.lm_head_params,
            "attn_params": target.attn_params // layers + proj,
            "dense_mlp_params": dense_mlp,
            "expert_params": target.expert_params // max(1, target.moe_layers) * moe,
            "shared_expert_params": target.shared_expert_params // max(1, target.moe_layers) * moe,
            "other_params": 2 * h,
            "experts": target.experts if moe else 0,
            "experts_per_token": target.experts_per_token if moe else 0,
            "moe_layers": moe,
            "mxfp4_native": False,
            "mtp_layers": 0,
        }
    )


def resolve(
    method: str,
    k: int | None,
    acceptance_rate: float | None,
    draft_model: str | None,
    field: str,
    model_id: str,
    arch: Arch,
    precision: str,
) -> Speculation:
    """A speculative setup (a plan's `allowed.speculative` entry, or `predict`'s
    --speculative-* flags as `field` "--speculative") with its defaults filled from the
    catalog and checked against the model."""
    default = model_default(model_id, method)
    given_k, given_draft = k, draft_model
    k = given_k or default_k()
    rate = acceptance_rate
    source = "plan"
    if rate is None and default is not None and given_draft in (None, default["draft_model"]):
        rate, source = float(default["acceptance_rate"]), str(default["source"])
    draft_model = given_draft or (default["draft_model"] if default else None)
    if method == "mtp":
        if not arch.mtp_layers:
            raise PlanError(
                f"{field}.method" if field != "--speculative" else "--speculative-method",
                method,
                f"{model_id} ships no MTP layers (num_nextn_predict_layers); use eagle3, "
                "draft_model or ngram",
            )
        k = given_k or arch.mtp_layers
        draft_arch: Arch | None = head_arch(arch, "mtp")
        draft_model, draft_precision = None, precision
    elif method in ("eagle", "eagle3"):
        if draft_model is None:
            raise PlanError(
                f"{field}.draft_model",
                None,
                f"the catalog has no {method} head for {model_id}; name one (the head's "
                "Hugging Face repo) or use ngram",
            )
        draft_arch, draft_precision = head_arch(arch, method), "bf16"
    elif method == "draft_model":
        draft_arch, draft_model, draft_precision = _draft_model(given_draft, field, model_id, arch)
    else:
        draft_arch, draft_model, draft_precision = None, None, "bf16"
    if rate is None:
        raise PlanError(
            f"{field}.acceptance_rate",
            None,
            f"no published acceptance rate for {method} on {model_id} in the catalog: give "
            "one in (0, 1), e.g. measured as vllm:spec_decode_num_accepted_tokens / "
            "vllm:spec_decode_num_draft_tokens",
        )
    return Speculation(method, k, rate, draft_arch, draft_model, draft_precision, source)


def _draft_model(
    name: str | None, field: str, model_id: str, arch: Arch
) -> tuple[Arch, str, str]:
    if name is None:
        raise PlanError(
            f"{field}.draft_model",
            None,
            "draft_model needs a smaller catalog model with the target's tokenizer, e.g. "
            "Llama-3.1-8B-Instruct for a Llama 3 70B",
        )
    entry = model_facts.model_entry(name, f"{field}.draft_model")
    draft = from_config(entry.id, entry.config)
    if draft.vocab != arch.vocab:
        raise PlanError(
            f"{field}.draft_model",
            name,
            f"its vocabulary ({draft.vocab:,} tokens) is not {model_id}'s ({arch.vocab:,}): "
            "a draft model must share the target's tokenizer; pick one of the same family",
        )
    if entry.id == model_id:
        raise PlanError(f"{field}.draft_model", name, "is the target model itself")
    return draft, entry.hf_repo, entry.native_precision


def from_flags(
    method: str | None,
    k: int | None,
    acceptance_rate: float | None,
    draft_model: str | None,
    model_id: str,
    arch: Arch,
    precision: str,
) -> Speculation | None:
    """`predict --speculative-*` resolved like a plan's allowed.speculative entry (the
    request model has checked each flag's range)."""
    if method is None:
        if any(v is not None for v in (k, acceptance_rate, draft_model)):
            raise PlanError(
                "--speculative-method", None, "give it with the other --speculative flags"
            )
        return None
    return resolve(
        method, k, acceptance_rate, draft_model, "--speculative", model_id, arch, precision
    )
