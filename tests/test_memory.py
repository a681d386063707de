"""vLLM's start-up memory accounting: what it logs as KV cache GiB, tokens and concurrency."""

import pytest

from llmfleet import catalog
from llmfleet.architecture import from_config
from llmfleet.calibration import load
from llmfleet.memory import budget


def mem(
    model,
    gpu="H100",
    tp=1,
    precision="bf16",
    kv="auto",
    util=0.9,
    max_len=16000,
    seqs=1024,
    tokens=8192,
):
    e = catalog.model_entry(model)
    return budget(
        from_config(e.id, e.config),
        catalog.gpu(gpu),
        tp,
        precision,
        kv,
        util,
        max_len,
        seqs,
        tokens,
        load(),
    )


def test_the_budget_adds_up_to_the_requested_memory():
    m = mem("Llama-3.1-8B-Instruct")
    parts = m.weights_gib_per_gpu + m.activation_gib + m.non_torch_gib + m.kv_cache_gib_per_gpu
    assert parts == pytest.approx(m.requested_gib)
    assert m.requested_gib == pytest.approx(0.9 * m.total_gib)


def test_llama_3_1_8b_on_h100_matches_the_vllm_log_within_3_percent():
    # llm-d-benchmark S8 (benchmarks row 117): "Available KV cache memory: 51.38 GiB"
    assert mem("Llama-3.1-8B-Instruct").kv_cache_gib_per_gpu == pytest.approx(51.38, rel=0.03)


def test_kv_tokens_are_the_pool_over_per_gpu_bytes_per_token_in_whole_blocks():
    m = mem("Llama-3.1-70B-Instruct", tp=4, max_len=131072)
    # 327,680 bytes/token split over 4 GPUs = 81,920 bytes per GPU per token
    assert m.kv_bytes_per_token_per_gpu == 81_920
    expected_blocks = int(m.kv_cache_gib_per_gpu * 2**30 // (16 * 81_920))
    assert m.kv_cache_tokens == expected_blocks * 16


def test_llama_3_1_70b_tp4_kv_tokens_match_the_published_log_within_5_percent():
    # LMCache docs (benchmarks row 127): 420,208 tokens, 3.21x at 131,072
    m = mem("Llama-3.1-70B-Instruct", tp=4, max_len=131072)
    assert m.kv_cache_tokens == pytest.approx(420_208, rel=0.05)
    assert m.max_concurrency == pytest.approx(3.21, rel=0.05)


def test_llama_3_3_70b_fp8_does_not_fit_one_h100():
    # S8 (row 116): the engine failed with a negative KV budget (-1.44 GiB)
    m = mem("Llama-3.3-70B-Instruct", precision="fp8")
    assert m.kv_cache_gib_per_gpu < 0
    assert m.kv_cache_tokens == 0


def test_fp8_kv_doubles_the_tokens_in_the_same_pool():
    auto = mem("Llama-3.1-8B-Instruct")
    fp8 = mem("Llama-3.1-8B-Instruct", kv="fp8")
    assert fp8.kv_cache_tokens == pytest.approx(2 * auto.kv_cache_tokens, rel=0.001)


def test_a_smaller_max_num_seqs_shrinks_the_sampler_peak_and_grows_the_pool():
    assert (
        mem("Llama-3.1-8B-Instruct", seqs=64).kv_cache_gib_per_gpu
        > mem("Llama-3.1-8B-Instruct", seqs=1024).kv_cache_gib_per_gpu
    )


def test_sliding_window_models_hold_more_sequences_than_their_token_count_suggests():
    m = mem("gpt-oss-20b", precision="mxfp4")
    # tokens are counted as if every layer were full attention; half the layers keep 128
    assert m.max_concurrency > m.kv_cache_tokens / 16000 * 1.9


def test_l4_memory_is_the_decimal_24_gb_not_24_gib():
    assert catalog.gpu("L4").memory_gib == pytest.approx(22.35, abs=0.01)
    assert catalog.gpu("B200").memory_gib == pytest.approx(179.06, abs=0.01)


def test_the_profiling_peak_is_the_larger_of_the_forward_pass_and_the_sampler_not_their_sum():
    # vLLM frees the forward pass's intermediates before its dummy sampler run
    from llmfleet.memory import activation_gib

    e = catalog.model_entry("Llama-3.1-8B-Instruct")
    arch, c = from_config(e.id, e.config), load()
    forward_only = activation_gib(arch, 1, 1, 8192, c)  # one sampled row: the forward pass
    both = activation_gib(arch, 1, 1024, 8192, c)
    logits = c.sampler_logit_copies * 1024 * 128_256 * 4 / 2**30
    kept = 8192 * 4096 * 2 / 2**30  # the last hidden states the sampler reads
    assert both == pytest.approx(max(forward_only, kept + logits))
    assert both < forward_only + logits
