"""An arrival rate above capacity has no steady state: predict says so instead of a TTFT
that cannot exist, and a finite run batches no more than its requests."""

import json

import pytest

from llmfleet.cli import main
from llmfleet.perf.overload import fluid_run
from llmfleet.perf.replica import PredictRequest, run_predict

# The example: Llama-3.1-70B fp8 on 4 x H100, 2000 in / 500 out, 20 requests/s,
# while the replica completes about 6.1 requests/s at its saturated batch of ~280 (5.2 before
# #29's refit).
OVERLOADED = dict(
    model="Llama-3.1-70B-Instruct",
    gpu="H100",
    tensor_parallel_size=4,
    precision="fp8",
    input_tokens=2000,
    output_tokens=500,
    request_rate=20,
)
CLI = ["predict", "--model", "Llama-3.1-70B-Instruct", "--gpu", "H100"]
CLI += ["--tensor-parallel-size", "4", "--precision", "fp8", "--input-tokens", "2000"]
CLI += ["--output-tokens", "500", "--request-rate", "20"]


def test_fluid_run_queues_each_request_behind_the_slot_it_waits_for():
    # one slot, arrivals 1 s apart, 0.5 s prefill, 3 tokens at 1 s each: first tokens at
    # 0.5, 3.0, 5.5, 8.0 s for arrivals at 0, 1, 2, 3 s (waits 0.5, 2, 3.5, 5); the last
    # request finishes at 8.0 + 2 tokens = 10 s
    mean_ttft, duration = fluid_run(4, 1.0, 1, 0.5, 0.5, 1.0, 3)
    assert mean_ttft == 2.75
    assert duration == 10.0


def test_fluid_run_queues_on_the_prefill_lane_when_slots_are_free():
    # ten slots, arrivals 0.1 s apart, prompts longer than a chunk (0.3 s of the lane each):
    # the k-th first token at 0.3 (k + 1), waits 0.3, 0.5, 0.7 s (mean 0.5); the last
    # decodes 1 more token to 0.9 + 1 = 1.9 s
    mean_ttft, duration = fluid_run(3, 10.0, 10, 0.3, 0.3, 1.0, 2)
    assert mean_ttft == pytest.approx(0.5)
    assert duration == pytest.approx(1.9)


def test_short_prompts_share_the_prefill_lane_by_tokens():
    # ten slots, arrivals 0.01 s apart, a 0.1 s prefill step of which each prompt holds the
    # lane 0.005 s (a chunk packs 20 of them): the lane keeps up, every first token is
    # 0.1 s after its arrival (one prompt per step would wait 0.1, 0.19, 0.28 s: mean 0.19)
    mean_ttft, _ = fluid_run(3, 100.0, 10, 0.1, 0.005, 1.0, 2)
    assert mean_ttft == pytest.approx(0.1)


def test_rate_above_capacity_without_a_run_length_has_no_ttft_and_says_why():
    r = run_predict(PredictRequest(**OVERLOADED))
    assert r.overloaded and r.saturated
    assert 5.5 < r.capacity_requests_per_s < 6.5  # ~6.1 req/s at the saturated batch
    assert r.ttft_ms is None and r.e2e_latency_ms is None
    assert "grow without bound" in r.ttft_reason
    # at capacity: the completions are the capacity, not the arrival rate
    assert r.requests_per_s == pytest.approx(r.capacity_requests_per_s)


def test_a_run_of_64_requests_batches_at_most_64_and_waits_seconds_not_200_ms():
    r = run_predict(PredictRequest(**OVERLOADED, num_requests=64))
    assert r.overloaded and r.batch_size == 64
    # the steady-state report was 200 ms at a batch of 280; 64 prompts of 2000 tokens
    # arriving 50 ms apart queue on a prefill lane that takes ~0.13 s each
    assert r.ttft_ms > 1000
    assert "run of 64 requests" in r.ttft_reason
    # throughput bounded by 64 sequences at the step of a batch of 64
    assert r.output_tokens_per_s < 64 / (r.itl_ms / 1000)


def test_a_longer_overloaded_run_waits_longer():
    short = run_predict(PredictRequest(**OVERLOADED, num_requests=64))
    long = run_predict(PredictRequest(**OVERLOADED, num_requests=640))
    assert long.ttft_ms > 2 * short.ttft_ms


def test_a_rate_the_replica_keeps_up_with_is_a_steady_state():
    r = run_predict(PredictRequest(**{**OVERLOADED, "request_rate": 1}))
    assert not r.overloaded and r.ttft_reason is None
    assert r.requests_per_s == pytest.approx(1.0) and r.capacity_requests_per_s > 1


def test_num_requests_caps_a_rate_driven_batch():
    # 4 requests at 3 req/s: below the replica's ~5.2 req/s, so no overload, but 4
    # sequences decoding together is all the run ever has (without the cap: ~30)
    capped = run_predict(PredictRequest(**{**OVERLOADED, "request_rate": 3}, num_requests=4))
    free = run_predict(PredictRequest(**{**OVERLOADED, "request_rate": 3}))
    assert not capped.overloaded
    assert capped.batch_size == 4 and free.batch_size > 4


def test_predict_json_stays_valid_when_ttft_is_unbounded(capsys):
    assert main([*CLI, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["overloaded"] is True and out["ttft_ms"] is None and out["ttft_reason"]
    # the contract's keys are all still there
    assert {"ttft_ms", "itl_ms", "batch_size", "saturated", "requests_per_s"} <= out.keys()


def test_predict_text_flags_the_overload(capsys):
    assert main(CLI) == 0
    text = capsys.readouterr().out
    assert "OVERLOADED: arrival rate 20 req/s exceeds the capacity of" in text
    assert "TTFT unbounded" in text
