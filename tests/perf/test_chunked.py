"""A long prompt is prefilled chunk by chunk from where each chunk starts (causal attention
adds up to the whole prompt's), and a request's inter-token time carries only the other
requests' prefill chunks."""

import pytest

from llmfleet.catalog.constants import fitted
from llmfleet.perf.replica import PredictRequest, run_predict

QWEN_32K = dict(model="Qwen3-8B", gpu="H200", input_tokens=32_000, output_tokens=100)


def test_a_long_prompt_takes_its_flops_at_the_fitted_efficiency():
    # Qwen3-8B alone on one H200 (989 dense BF16 TFLOP/s): the weights without the LM head
    # (6.946e9 parameters) x 2 x 32,000 tokens = 4.45e14 FLOPs; causal attention over the
    # prompt, 4 x 36 layers x 4,096 x 32,000 tokens x 16,000 attended on average = 3.02e14.
    flops = 2 * 6.946e9 * 32_000 + 4 * 36 * 4096 * 32_000 * 16_000
    ideal_ms = flops / (989e12 * fitted().mfu["Hopper"]) * 1000  # 1,879 ms at MFU 0.40
    ttft_ms = run_predict(PredictRequest(**QWEN_32K, concurrency=1)).ttft_ms
    # plus a step overhead per chunk and the weights and KV each chunk reads
    assert ideal_ms < ttft_ms < 1.06 * ideal_ms


def test_how_a_prompt_is_chunked_does_not_change_its_attention():
    # 4 chunks of 8,192 or 16 of 2,048: the same causal attention; more steps add only
    # their overheads and weight reads
    coarse = run_predict(PredictRequest(**QWEN_32K, concurrency=1, max_num_batched_tokens=8192))
    fine = run_predict(PredictRequest(**QWEN_32K, concurrency=1, max_num_batched_tokens=2048))
    assert fine.ttft_ms == pytest.approx(coarse.ttft_ms, rel=0.05)


def test_a_lone_request_decodes_undisturbed_by_its_own_prefill():
    # its own four prefill chunks are in its TTFT, not between its tokens: the same ITL
    # however large the chunks (it was 27.1 ms, the mean step with its own chunks in it;
    # 6.91 ms before #29's refit moved Hopper's MBU 0.77 -> 0.74)
    coarse = run_predict(PredictRequest(**QWEN_32K, concurrency=1, max_num_batched_tokens=8192))
    fine = run_predict(PredictRequest(**QWEN_32K, concurrency=1, max_num_batched_tokens=2048))
    assert coarse.itl_ms == pytest.approx(fine.itl_ms) == pytest.approx(7.19, abs=0.01)
