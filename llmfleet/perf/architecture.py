"""A model's architecture, read from Hugging Face config.json keys, and the memory it implies.

Parameter counts come from the shapes, so a config.json the catalog has never seen
sizes the same way as a catalog model. Tests compare the counts to the published ones.
A config.json with shapes no model has is refused before it is sized (`check_config`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from llmfleet.errors import PlanError

Precision = Literal["bf16", "fp16", "fp8", "int4-awq", "int4-gptq", "mxfp4"]
KvCacheDtype = Literal["auto", "fp8"]
PRECISIONS: tuple[str, ...] = ("bf16", "fp16", "fp8", "int4-awq", "int4-gptq", "mxfp4")

# Bytes per weight of a quantized linear layer. INT4 with group size 128 carries an fp16
# scale and a 4-bit zero point per group: 0.5 + (2 + 0.5) / 128. MXFP4 is 4-bit values
# with one 8-bit shared exponent per 32: 4.25 bits. Embeddings, norms and routers stay 16-bit.
LINEAR_BYTES: dict[str, float] = {
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int4-awq": 0.5 + 2.5 / 128,
    "int4-gptq": 0.5 + 2.5 / 128,
}
MXFP4_BYTES = 4.25 / 8
# vLLM's MXFP4 MoE kernels pad each expert's intermediate size per TP rank to 256.
MXFP4_INTERMEDIATE_ALIGN = 256


class Arch(BaseModel):
    """The shapes that decide memory and FLOPs. Parameter counts are totals, unsharded."""

    model_config = ConfigDict(frozen=True)

    name: str
    model_type: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    max_context: int
    tied_embeddings: bool
    # attention
    mla_kv_dim: int | None  # kv_lora_rank + qk_rope_head_dim for MLA models
    sliding_window: int | None
    sliding_layers: int
    # parameter groups (counts of weights)
    embed_params: int
    lm_head_params: int
    attn_params: int  # all layers
    dense_mlp_params: int  # all dense-MLP layers
    expert_params: int  # all routed experts, all layers
    shared_expert_params: int
    other_params: int  # norms, routers, biases, sinks
    # MoE routing
    experts: int
    experts_per_token: int
    moe_layers: int
    expert_intermediate: int
    mxfp4_native: bool
    mtp_layers: int = 0  # multi-token-prediction layers shipped beside the model (not counted)

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def total_params(self) -> int:
        return (
            self.embed_params
            + self.lm_head_params
            + self.attn_params
            + self.dense_mlp_params
            + self.expert_params
            + self.shared_expert_params
            + self.other_params
        )

    @property
    def active_params(self) -> int:
        """Parameters one token multiplies through (embeddings are a lookup, not a matmul)."""
        routed = 0
        if self.experts:
            routed = self.expert_params * self.experts_per_token // self.experts
        return (
            (self.lm_head_params or self.embed_params)
            + self.attn_params
            + self.dense_mlp_params
            + routed
            + self.shared_expert_params
        )

    # ---- memory ----
    def kv_bytes_per_token(self, kv_dtype_bytes: float) -> float:
        """K and V for one token across every layer (MLA: the latent, no K/V pair)."""
        if self.mla_kv_dim is not None:
            return self.layers * self.mla_kv_dim * kv_dtype_bytes
        return 2 * self.layers * self.kv_heads * self.head_dim * kv_dtype_bytes

    def kv_shards(self, tp: int) -> int:
        """How many ways one token's KV splits across a TP group (replicated past the KV heads)."""
        if self.mla_kv_dim is not None:
            return 1
        return min(tp, self.kv_heads)

    def kv_bytes_per_sequence(self, tokens: int, kv_dtype_bytes: float) -> float:
        """KV for one sequence of `tokens`; sliding-window layers hold at most the window."""
        per_layer_token = self.kv_bytes_per_token(kv_dtype_bytes) / self.layers
        full_layers = self.layers - self.sliding_layers
        window = min(tokens, self.sliding_window or tokens)
        return per_layer_token * (full_layers * tokens + self.sliding_layers * window)

    def weight_bytes(self, precision: str, tp: int = 1) -> float:
        """Weights of the whole model in bytes at a serving precision (all experts held)."""
        shared, experts = self.weight_bytes_split(precision, tp)
        return shared + experts

    def weight_bytes_split(self, precision: str, tp: int = 1) -> tuple[float, float]:
        """(bytes every token reads, bytes of the routed experts) at a serving precision."""
        sixteen = 2.0 * (self.embed_params + self.lm_head_params + self.other_params)
        linear = self.attn_params + self.dense_mlp_params + self.shared_expert_params
        if precision == "mxfp4":
            if not self.mxfp4_native:
                raise PlanError(
                    "model.precision",
                    precision,
                    f"{self.name} has no MXFP4 checkpoint; use bf16, fp8, int4-awq or int4-gptq",
                )
            per_rank = -(-self.expert_intermediate // tp)
            padded = -(-per_rank // MXFP4_INTERMEDIATE_ALIGN) * MXFP4_INTERMEDIATE_ALIGN * tp
            experts = self.expert_params * padded / self.expert_intermediate
            return sixteen + 2.0 * linear, MXFP4_BYTES * experts
        per = LINEAR_BYTES[precision]
        return sixteen + per * linear, per * self.expert_params


def tp_problem(arch: Arch, tp: int) -> str | None:
    """Why tensor parallelism of `tp` cannot split this model, or None: the attention heads
    split evenly, and the KV heads either split evenly or are replicated evenly (MLA's
    latent is replicated whole)."""
    if arch.heads % tp:
        return f"TP {tp} does not divide the {arch.heads} attention heads"
    if arch.mla_kv_dim is None and arch.kv_heads % tp and tp % arch.kv_heads:
        return f"TP {tp} and the {arch.kv_heads} KV heads do not divide each other"
    return None


def _int(cfg: dict[str, object], key: str, default: int | None = None) -> int:
    value = cfg.get(key, default)
    if value is None:
        raise PlanError(f"config.json:{key}", None, "required to size the model")
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise PlanError(f"config.json:{key}", value, "must be a non-negative number")
    return int(value)


# transformers' config classes' own defaults for the keys an MoE architecture needs, where a
# config.json leaves them out: transformers fills them so when it loads the file, and vLLM
# builds the model from what transformers loaded. (huggingface/transformers
# src/transformers/models/qwen3_moe/configuration_qwen3_moe.py: num_experts 128,
# num_experts_per_tok 8, moe_intermediate_size 768, decoder_sparse_step 1;
# models/mixtral/configuration_mixtral.py: num_local_experts 8, num_experts_per_tok 2.)
MOE_CONFIG_DEFAULTS: dict[str, tuple[str, dict[str, int]]] = {
    "qwen3_moe": (
        "Qwen3MoeConfig",
        {"num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768},
    ),
    "mixtral": ("MixtralConfig", {"num_local_experts": 8, "num_experts_per_tok": 2}),
}
EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
TOP_K_KEYS = ("num_experts_per_tok", "experts_per_token")
MOE_MODEL_TYPES = {
    "qwen3_moe", "qwen2_moe", "mixtral", "deepseek_v2", "deepseek_v3", "gpt_oss", "glm4_moe",
    "olmoe", "phimoe", "granitemoe", "dbrx", "llama4_text", "minimax", "ernie4_5_moe",
}


def is_moe_config(cfg: dict[str, object]) -> bool:
    """An architecture with routed experts, by its model_type or its class name."""
    names = cfg.get("architectures") or []
    named = isinstance(names, list) and any(
        "moe" in str(n).lower() or "mixtral" in str(n).lower() for n in names
    )
    return named or str(cfg.get("model_type", "")) in MOE_MODEL_TYPES


def with_defaults(cfg: dict[str, object]) -> tuple[dict[str, object], list[str]]:
    """The config as it is sized, and each default applied to it, named: the ones
    transformers' config class applies for a missing key (no num_key_value_heads is
    multi-head attention; an MoE class's expert counts)."""
    if isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg, **cfg["text_config"]}  # type: ignore[dict-item]
    cfg, notes = dict(cfg), []
    heads = cfg.get("num_attention_heads")
    if "num_key_value_heads" not in cfg and isinstance(heads, int) and heads > 0:
        cfg["num_key_value_heads"] = heads
        notes.append(
            f"no num_key_value_heads: multi-head attention, one KV head per query head "
            f"({heads}), as transformers reads it"
        )
    moe = MOE_CONFIG_DEFAULTS.get(str(cfg.get("model_type", "")))
    if moe is not None:
        cls, defaults = moe
        for key, value in defaults.items():
            aliases = EXPERT_KEYS if key in EXPERT_KEYS else (key,)
            if not any(cfg.get(k) is not None for k in aliases):
                cfg[key] = value
                notes.append(f"no {key}: {value}, transformers' {cls} default")
    return cfg, notes


def from_config(name: str, cfg: dict[str, object]) -> Arch:
    """Build an Arch from a Hugging Face config.json dict (dense, MoE, MLA, sliding window),
    with the defaults transformers applies for missing keys (`with_defaults`)."""
    cfg = with_defaults(cfg)[0]
    model_type = str(cfg.get("model_type", "unknown"))
    hidden = _int(cfg, "hidden_size")
    layers = _int(cfg, "num_hidden_layers")
    heads = _int(cfg, "num_attention_heads")
    kv_heads = _int(cfg, "num_key_value_heads", heads)
    head_dim = _int(cfg, "head_dim", hidden // heads if heads else None)
    vocab = _int(cfg, "vocab_size")
    inter = _int(cfg, "intermediate_size", 0)
    tied = bool(cfg.get("tie_word_embeddings", False))
    max_ctx = _int(cfg, "max_position_embeddings", 0)
    attn_bias = bool(cfg.get("attention_bias", False))

    # Attention
    mla_kv_dim: int | None = None
    if cfg.get("kv_lora_rank"):
        kv_rank = _int(cfg, "kv_lora_rank")
        rope = _int(cfg, "qk_rope_head_dim")
        nope = _int(cfg, "qk_nope_head_dim")
        v_dim = _int(cfg, "v_head_dim")
        q_rank = cfg.get("q_lora_rank")
        q_head = nope + rope
        if q_rank:
            qr = int(q_rank)  # type: ignore[call-overload]
            q = hidden * qr + qr + qr * heads * q_head
        else:
            q = hidden * heads * q_head
        kv = hidden * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v_dim)
        attn_layer = q + kv + heads * v_dim * hidden
        mla_kv_dim = kv_rank + rope
        head_dim = q_head
    else:
        attn_layer = hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
        attn_layer += heads * head_dim * hidden
        if attn_bias:
            attn_layer += heads * head_dim + 2 * kv_heads * head_dim + hidden

    # Sliding window
    window = cfg.get("sliding_window")
    layer_types = cfg.get("layer_types")
    sliding_layers = 0
    if isinstance(layer_types, list):
        sliding_layers = sum(1 for t in layer_types if t == "sliding_attention")
    elif window and cfg.get("use_sliding_window", True) and model_type in ("mistral", "mixtral"):
        sliding_layers = layers
    if not sliding_layers:
        window = None

    # MoE
    experts = int(
        cfg.get("num_local_experts")
        or cfg.get("num_experts")  # type: ignore[call-overload]
        or cfg.get("n_routed_experts")
        or 0
    )
    top_k = int(cfg.get("num_experts_per_tok") or cfg.get("experts_per_token") or 0)  # type: ignore[call-overload]
    expert_inter = int(cfg.get("moe_intermediate_size") or inter)  # type: ignore[call-overload]
    shared = int(cfg.get("n_shared_experts") or 0)  # type: ignore[call-overload]
    first_dense = int(cfg.get("first_k_dense_replace") or 0)  # type: ignore[call-overload]
    mlp_only = cfg.get("mlp_only_layers") or []
    step = int(cfg.get("decoder_sparse_step") or 1)  # type: ignore[call-overload]
    gpt_oss = model_type == "gpt_oss"
    if experts:
        moe_layer_ids = [
            i
            for i in range(layers)
            if i >= first_dense
            and i not in mlp_only  # type: ignore[operator]
            and (i + 1) % step == 0
        ]
        moe_layers = len(moe_layer_ids)
    else:
        moe_layers = 0
    dense_layers = layers - moe_layers
    expert_size = 3 * hidden * expert_inter
    if gpt_oss:  # fused gate_up with biases, down with bias
        expert_size += 2 * expert_inter + hidden
    expert_params = experts * moe_layers * expert_size
    shared_params = shared * moe_layers * 3 * hidden * expert_inter
    dense_mlp = dense_layers * 3 * hidden * inter
    router = moe_layers * (hidden * experts + (experts if gpt_oss else 0))
    norms = layers * 2 * hidden + hidden
    if model_type.startswith("qwen3"):
        norms += layers * 2 * head_dim  # q_norm, k_norm
    sinks = layers * heads if gpt_oss else 0
    quant = cfg.get("quantization_config")
    mxfp4 = isinstance(quant, dict) and quant.get("quant_method") == "mxfp4"

    return Arch(
        name=name,
        model_type=model_type,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        vocab=vocab,
        max_context=max_ctx,
        tied_embeddings=tied,
        mla_kv_dim=mla_kv_dim,
        sliding_window=int(window) if window else None,  # type: ignore[call-overload]
        sliding_layers=sliding_layers,
        embed_params=vocab * hidden,
        lm_head_params=0 if tied else vocab * hidden,
        attn_params=layers * attn_layer,
        dense_mlp_params=dense_mlp,
        expert_params=expert_params,
        shared_expert_params=shared_params,
        other_params=router + norms + sinks,
        experts=experts,
        experts_per_token=top_k,
        moe_layers=moe_layers,
        expert_intermediate=expert_inter,
        mxfp4_native=mxfp4,
        mtp_layers=int(cfg.get("num_nextn_predict_layers") or 0),  # type: ignore[call-overload]
    )


def _positive_int(cfg: dict[str, object], key: str) -> int | None:
    value = cfg.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


SHAPE_KEYS = {
    "hidden_size": "the width of every layer",
    "num_hidden_layers": "the transformer layers",
    "num_attention_heads": "the query heads of every attention layer",
    "num_key_value_heads": "the KV heads every attention layer reads (without grouped-query "
    "attention, num_attention_heads; leave the key out to mean that)",
    "head_dim": "the width of one attention head (leave it out to mean hidden_size / "
    "num_attention_heads)",
    "vocab_size": "the tokenizer's vocabulary",
}
"""config.json keys a model cannot have as 0: each sizes weights, KV or FLOPs."""


def check_config(cfg: dict[str, object], path: str, field: str) -> None:
    """A config.json with shapes no model has, refused before it is sized: a zero head,
    layer or width count (a 0 KV-head model would divide by zero; 0 attention heads would
    size a model without attention), and KV heads that do not divide the query heads."""
    if isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg, **cfg["text_config"]}  # type: ignore[dict-item]
    for key, meaning in SHAPE_KEYS.items():
        value = cfg.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value <= 0:
            raise PlanError(
                field,
                path,
                f"config.json has {key}: {value:g}, but it counts {meaning}: give the "
                f"model's own value (at least 1), as its published config.json has it",
            )
    check_config_heads(cfg, path, field)
    check_config_experts(with_defaults(cfg)[0], path, field)


def check_config_experts(cfg: dict[str, object], path: str, field: str) -> None:
    """An MoE architecture is sized with its experts or refused, never as a dense model: a
    class without an expert count and without a transformers default for it is refused, and
    so is a top-k of 0 or above the experts."""
    experts = next((cfg[k] for k in EXPERT_KEYS if cfg.get(k) is not None), None)
    top_k = next((cfg[k] for k in TOP_K_KEYS if cfg.get(k) is not None), None)
    if experts is None and is_moe_config(cfg):
        raise PlanError(
            field,
            path,
            f"config.json describes an MoE model ({cfg.get('model_type')}) without its expert "
            f"count ({' or '.join(EXPERT_KEYS)}), and llmfleet knows no transformers default "
            "for it: give the model's own num_experts and num_experts_per_tok, as its "
            "published config.json has them",
        )
    if experts is None:
        return
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k <= 0:
        raise PlanError(
            field,
            path,
            f"config.json has {experts} experts and num_experts_per_tok: {top_k}; every token "
            "is routed to at least one expert: give the model's own top-k (at least 1)",
        )
    if isinstance(experts, int) and top_k > experts:
        raise PlanError(
            field,
            path,
            f"config.json routes each token to {top_k} of {experts} experts: "
            f"num_experts_per_tok must be at most {experts}",
        )


def check_config_heads(cfg: dict[str, object], path: str, field: str) -> None:
    """Grouped-query attention shares each KV head among num_attention_heads /
    num_key_value_heads query heads, so the division must be exact."""
    if isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg, **cfg["text_config"]}  # type: ignore[dict-item]
    heads = _positive_int(cfg, "num_attention_heads")
    kv_heads = _positive_int(cfg, "num_key_value_heads")
    if heads is None or kv_heads is None:
        return
    if heads % kv_heads:
        divisors = [d for d in range(1, heads + 1) if heads % d == 0]
        raise PlanError(
            field,
            path,
            f"num_attention_heads ({heads}) is not a multiple of num_key_value_heads "
            f"({kv_heads}); no model shares KV heads unevenly. KV heads must divide "
            f"{heads}: one of {', '.join(map(str, divisors))}",
        )


def kv_dtype_bytes(kv_cache_dtype: str) -> float:
    """`auto` keeps the activation dtype (16-bit) even for FP8/INT4 weights."""
    return 1.0 if kv_cache_dtype == "fp8" else 2.0
