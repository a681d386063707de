"""Model shapes from config.json: parameter counts, KV bytes per token, weight bytes."""

import pytest

from llmfleet.catalog import model_facts
from llmfleet.errors import PlanError
from llmfleet.perf.architecture import check_config, from_config, with_defaults
from llmfleet.units import GIB


def arch(name: str):
    entry = model_facts.model_entry(name)
    return from_config(entry.id, entry.config)


@pytest.mark.parametrize("name", sorted(model_facts.model_entries()))
def test_parameter_count_matches_the_published_one_within_one_percent(name):
    entry = model_facts.model_entries()[name]
    assert entry.published_params_b is not None
    assert arch(name).total_params / 1e9 == pytest.approx(entry.published_params_b, rel=0.01)


def test_llama_3_1_70b_bf16_kv_is_327680_bytes_per_token():
    # 2 (K and V) x 80 layers x 8 KV heads x 128 head dim x 2 bytes
    assert arch("Llama-3.1-70B-Instruct").kv_bytes_per_token(2) == 2 * 80 * 8 * 128 * 2 == 327_680


def test_deepseek_v3_mla_kv_is_the_latent_70272_bytes_per_token():
    # 61 layers x (kv_lora_rank 512 + rope 64) x 2 bytes: no separate K and V
    assert arch("DeepSeek-V3").kv_bytes_per_token(2) == 61 * 576 * 2 == 70_272


def test_fp8_kv_halves_the_kv_bytes():
    a = arch("Llama-3.1-8B-Instruct")
    assert a.kv_bytes_per_token(1) == a.kv_bytes_per_token(2) / 2 == 65_536


def test_kv_heads_split_across_tp_and_replicate_past_the_kv_head_count():
    llama = arch("Llama-3.1-70B-Instruct")  # 8 KV heads
    assert llama.kv_shards(4) == 4
    assert llama.kv_shards(8) == 8
    qwen_moe = arch("Qwen3-235B-A22B")  # 4 KV heads: TP 8 holds each head twice
    assert qwen_moe.kv_shards(8) == 4
    assert arch("DeepSeek-V3").kv_shards(8) == 1  # MLA latent is replicated on every rank


def test_explicit_head_dim_wins_over_hidden_over_heads():
    # Qwen3-0.6B: hidden 1024 / 16 heads = 64, but config.json says head_dim 128
    assert arch("Qwen3-0.6B").head_dim == 128


def test_sliding_window_layers_hold_at_most_the_window():
    a = arch("gpt-oss-20b")  # 24 layers, 12 sliding (window 128), 8 KV heads x 64
    assert (a.sliding_layers, a.sliding_window) == (12, 128)
    per_layer_token = 2 * 8 * 64 * 2
    assert a.kv_bytes_per_sequence(16_000, 2) == per_layer_token * (12 * 16_000 + 12 * 128)


def test_llama_3_1_70b_bf16_weights_are_131_gib():
    # 70.55e9 parameters x 2 bytes = 141 GB = 131.4 GiB: more than one 80 GiB GPU
    assert arch("Llama-3.1-70B-Instruct").weight_bytes("bf16") / GIB == pytest.approx(
        131.4, abs=0.1
    )


def test_fp8_keeps_embeddings_and_lm_head_at_16_bit():
    # vLLM log (benchmarks row 116): Llama-3.3-70B FP8 loads 67.72 GiB on one GPU
    assert arch("Llama-3.3-70B-Instruct").weight_bytes("fp8") / GIB == pytest.approx(
        67.72, rel=0.005
    )


def test_mxfp4_experts_match_vllm_loaded_weights_for_gpt_oss():
    # vLLM logs (benchmarks rows 113, 114): 13.47 GiB and 64.38 GiB on one H100
    assert arch("gpt-oss-20b").weight_bytes("mxfp4") / GIB == pytest.approx(13.47, rel=0.01)
    assert arch("gpt-oss-120b").weight_bytes("mxfp4") / GIB == pytest.approx(64.38, rel=0.01)


def test_moe_active_parameters_follow_top_k():
    mixtral = arch("Mixtral-8x7B-Instruct-v0.1")  # 8 experts, top 2: published 12.9B active
    assert mixtral.active_params / 1e9 == pytest.approx(12.9, rel=0.02)
    qwen = arch("Qwen3-235B-A22B")
    assert qwen.active_params / 1e9 == pytest.approx(22, rel=0.03)


def test_a_config_json_without_a_required_key_names_it():
    from llmfleet.errors import PlanError

    with pytest.raises(PlanError, match="config.json:num_hidden_layers"):
        from_config("x", {"hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10})


# --- config.json defaults, named or refused (#29) ---------------------------------------------


def _qwen3_moe() -> dict:
    return dict(catalog_config("Qwen3-235B-A22B"))


def test_a_qwen3_moe_config_without_num_experts_takes_transformers_default_and_says_so():
    # transformers' Qwen3MoeConfig defaults num_experts to 128: the same 235B model, never a
    # dense 22B one, and the default is named
    cfg = _qwen3_moe()
    full = from_config("q", cfg)
    del cfg["num_experts"]
    arch = from_config("q", cfg)
    assert arch.experts == 128 and arch.total_params == full.total_params
    assert with_defaults(cfg)[1] == ["no num_experts: 128, transformers' Qwen3MoeConfig default"]


def test_a_top_k_of_zero_is_refused():
    cfg = {**_qwen3_moe(), "num_experts_per_tok": 0}
    with pytest.raises(PlanError, match="num_experts_per_tok: 0; every token is routed"):
        check_config(cfg, "c.json", "--model")


def test_an_moe_class_without_experts_or_a_known_default_is_refused():
    cfg = {**_qwen3_moe(), "model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"]}
    del cfg["num_experts"]
    with pytest.raises(PlanError, match="describes an MoE model .qwen2_moe. without its expert"):
        check_config(cfg, "c.json", "--model")


def test_no_num_key_value_heads_is_multi_head_attention_and_says_so():
    cfg = dict(catalog_config("Llama-3.1-8B-Instruct"))
    del cfg["num_key_value_heads"]
    assert from_config("l", cfg).kv_heads == 32
    assert with_defaults(cfg)[1] == [
        "no num_key_value_heads: multi-head attention, one KV head per query head (32), as "
        "transformers reads it"
    ]


def catalog_config(model_id: str) -> dict:
    return dict(model_facts.model_entry(model_id).config)
