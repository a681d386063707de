"""vLLM's start-up memory accounting: what it logs as KV cache GiB, tokens and concurrency."""

import pytest

from llmfleet.catalog import hardware, model_facts
from llmfleet.catalog.constants import fitted, priors
from llmfleet.perf.architecture import from_config
from llmfleet.perf.memory import activation_gib, budget


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
    e = model_facts.model_entry(model)
    return budget(
        from_config(e.id, e.config),
        hardware.gpu(gpu),
        tp,
        precision,
        kv,
        util,
        max_len,
        seqs,
        tokens,
        fitted(),
    )


def test_the_budget_adds_up_to_the_requested_memory():
    m = mem("Llama-3.1-8B-Instruct")
    parts = m.weights_gib_per_gpu + m.activation_gib + m.non_torch_gib + m.kv_cache_gib_per_gpu
    assert parts == pytest.approx(m.requested_gib)
    assert m.requested_gib == pytest.approx(0.9 * m.total_gib)


def test_llama_3_1_8b_on_h100_matches_the_vllm_log_within_3_percent():
    # llm-d-benchmark S8 (benchmarks row 117): "Available KV cache memory: 51.38 GiB"
    assert mem("Llama-3.1-8B-Instruct").kv_cache_gib_per_gpu == pytest.approx(51.38, rel=0.03)


def test_kv_tokens_are_the_whole_16_token_blocks_the_pool_holds():
    m = mem("Llama-3.1-70B-Instruct", tp=4, max_len=131072)
    # 327,680 bytes/token split over 4 GPUs = 81,920 bytes per GPU per token
    assert m.kv_bytes_per_token_per_gpu == 81_920
    pool_bytes = m.kv_cache_gib_per_gpu * 2**30
    assert m.kv_cache_tokens % 16 == 0
    assert m.kv_cache_tokens * 81_920 <= pool_bytes < (m.kv_cache_tokens + 16) * 81_920


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
    assert hardware.gpu("L4").memory_gib == pytest.approx(22.35, abs=0.01)
    assert hardware.gpu("B200").memory_gib == pytest.approx(179.06, abs=0.01)


def act(model, max_num_seqs, max_num_batched_tokens=8192):
    """vLLM's profiling peak on one GPU with the hand-derived (prior) constants of
    llmfleet/calibration/constants.json: token_activation_factor 1.5, sampler_logit_copies
    9.7 (read off S8's logs), so the worked numbers below do not move with a refit."""
    e = model_facts.model_entry(model)
    return activation_gib(
        from_config(e.id, e.config), 1, max_num_seqs, max_num_batched_tokens, priors()
    )


def test_llama_3_1_8b_profiling_peaks_at_the_samplers_4_81_gib_not_the_sum_5_56():
    # vLLM frees the forward pass's intermediates before its dummy sampler run.
    # Forward pass alone (one sampled row): 1.5 x (4,096 + 2 x 14,336) x 2 B x 8,192 tokens
    # = 0.75 GiB. Sampler at max_num_seqs 1,024: 9.7 x 1,024 x 128,256 x 4 B = 4.75 GiB of
    # fp32 logits + 8,192 x 4,096 x 2 B = 0.06 GiB of kept hidden states = 4.81 GiB.
    # Their sum, 5.56 GiB, is 17 % over the 4.76 GiB that benchmarks/measurements.csv row 117
    # (S8, H100) logs as peak activation.
    assert act("Llama-3.1-8B-Instruct", 1) == pytest.approx(0.75, abs=0.005)
    assert act("Llama-3.1-8B-Instruct", 1024) == pytest.approx(4.81, abs=0.005)


@pytest.mark.parametrize(
    ("model", "logged_gib"),
    [
        ("gpt-oss-20b", 7.38),  # benchmarks/measurements.csv row 113
        ("Llama-3.1-8B-Instruct", 4.76),  # row 117
        ("Qwen3-0.6B", 5.56),  # row 118
    ],
)
def test_the_profiling_peak_matches_s8s_logged_peak_activation_within_2_percent(model, logged_gib):
    # S8's H100 start-up logs at vLLM's defaults (max_num_seqs 1,024, 8,192 batched tokens)
    assert act(model, 1024) == pytest.approx(logged_gib, rel=0.02)
