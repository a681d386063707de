"""The step-time roofline: memory-bound decode, compute-bound prefill, MoE, TP."""

import pytest

from llmfleet.catalog import hardware, model_facts
from llmfleet.catalog.constants import fitted
from llmfleet.perf.architecture import from_config
from llmfleet.perf.chunked import mixed_steps
from llmfleet.perf.step import StepModel, experts_touched_fraction, step_time


def engine(model="Llama-3.1-8B-Instruct", gpu="H100", tp=1, precision="bf16"):
    e = model_facts.model_entry(model)
    return StepModel(
        from_config(e.id, e.config), hardware.gpu(gpu), tp, precision, "auto", fitted()
    )


def test_decode_at_batch_1_is_memory_bound_and_reads_every_streamed_weight():
    step_model = engine()
    c = fitted()
    s = step_time(step_model, decode=1, decode_context=1)
    assert s.bound == "memory"
    a = step_model.arch
    streamed = a.weight_bytes("bf16") - 2 * a.embed_params  # input embeddings are a lookup
    assert s.memory_s == pytest.approx(streamed / (3350e9 * c.mbu["Hopper"]), rel=0.01)


def test_a_big_prefill_chunk_is_compute_bound():
    assert step_time(engine(), decode=8, decode_context=1000, prefill=4096).bound == "compute"


def test_itl_grows_with_batch_and_context():
    step_model = engine()
    assert step_time(step_model, 64, 2000).total_s > step_time(step_model, 8, 2000).total_s
    assert step_time(step_model, 64, 8000).total_s > step_time(step_model, 64, 2000).total_s


def test_higher_bandwidth_gpu_decodes_faster():
    h100 = step_time(engine(gpu="H100"), 16, 2000).total_s
    h200 = step_time(engine(gpu="H200"), 16, 2000).total_s
    l4 = step_time(engine(gpu="L4"), 16, 2000).total_s
    assert h200 < h100 < l4


def test_tensor_parallel_splits_the_weight_reads_but_adds_all_reduces():
    tp1 = step_time(engine("Llama-3.1-70B-Instruct", tp=2), 1, 100)
    tp8 = step_time(engine("Llama-3.1-70B-Instruct", tp=8), 1, 100)
    assert tp8.memory_s == pytest.approx(tp1.memory_s / 4, rel=0.01)
    assert tp8.comm_s > 0 and tp8.total_s < tp1.total_s


def test_pcie_all_reduce_costs_more_than_nvlink():
    pcie = step_time(engine("Llama-3.1-8B-Instruct", gpu="L40S", tp=4), 64, 1000).comm_s
    nvlink = step_time(engine("Llama-3.1-8B-Instruct", gpu="H100", tp=4), 64, 1000).comm_s
    assert pcie > 2 * nvlink


def test_moe_decode_reads_only_the_experts_its_tokens_touch():
    # 8 experts, top-2: one token touches 2/8; many tokens touch (nearly) all
    assert experts_touched_fraction(8, 2, 1) == pytest.approx(0.25)
    assert experts_touched_fraction(8, 2, 64) == pytest.approx(1.0, abs=1e-6)
    step_model = engine("Mixtral-8x7B-Instruct-v0.1", tp=2)
    assert step_time(step_model, 1, 100).memory_s < 0.5 * step_time(step_model, 64, 100).memory_s


def test_fp8_uses_fp8_tensor_cores_only_where_the_gpu_has_them():
    assert engine(gpu="H100", precision="fp8").compute_flops == 1979e12
    assert engine(gpu="A100-80GB", precision="fp8").compute_flops == 312e12  # W8A16 on Ampere


def test_mixed_step_share_follows_flow_balance():
    # 32 decodes, 1000-token prompts per 250 outputs, 2048-token chunks: 32*1000/(250*2048)
    steps = mixed_steps(engine(), 32, 1000, 250, 2048)
    assert steps.mixed_share == pytest.approx(32 * 1000 / (250 * 2048))
    assert steps.decode_only_s < steps.mean_s < steps.mixed_s
    assert steps.tpot_percentile_s(250, 99) > steps.mean_s


def test_mxfp4_experts_run_at_the_fp8_rate_on_blackwell_and_the_rest_at_16_bit():
    # an MXFP4 checkpoint quantizes only the experts, whose activations are 8-bit on B200
    # (FlashInfer's MXFP4 x MXFP8 MoE): 4,500 TFLOP/s, not FP4's 9,000; attention, router
    # and LM head stay BF16 (2,250); H100 has no FP4: its experts widen to BF16 (989)
    b200 = engine("gpt-oss-20b", gpu="B200", precision="mxfp4")
    assert b200.compute_flops == 2250e12
    assert b200.terms.expert_flops / b200.terms.flops == 2.0
    h100 = engine("gpt-oss-20b", gpu="H100", precision="mxfp4")
    assert h100.compute_flops == 989e12 and h100.terms.expert_flops == h100.terms.flops
