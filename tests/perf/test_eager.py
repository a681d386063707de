"""--enforce-eager (vLLM without CUDA graphs): every kernel is launched from Python, so a
step takes at least a launch time per layer; the plan renders the flag only when set."""

import json

import pytest
from plans import make_plan

from llmfleet.catalog.vllm_release import vllm_release
from llmfleet.cli import main
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.perf.replica import PredictRequest, catalog_arch, run_predict
from llmfleet.perf.step import EAGER_LAYER_LAUNCH_US, eager_launch_s

EIGHT_B = dict(model="Llama-3.1-8B-Instruct", gpu="H100", input_tokens=1000, output_tokens=200)


def test_the_launch_floor_is_per_layer():
    # 32 layers x 330 us = 10.56 ms; none with CUDA graphs
    arch = catalog_arch("Llama-3.1-8B-Instruct")
    assert EAGER_LAYER_LAUNCH_US == 330.0
    assert eager_launch_s(arch, True) * 1000 == pytest.approx(10.56)
    assert eager_launch_s(arch, False) == 0.0


def test_eager_small_batch_decode_waits_on_python_launches():
    # at batch 4 the GPU step is ~7 ms: eager waits the 10.56 ms floor, plus the overhead
    graphs = run_predict(PredictRequest(**EIGHT_B, concurrency=4))
    eager = run_predict(PredictRequest(**EIGHT_B, concurrency=4, enforce_eager=True))
    assert graphs.itl_ms < 10.56 < eager.itl_ms
    assert eager.output_tokens_per_s < graphs.output_tokens_per_s


def test_eager_leaves_a_large_batch_as_it_was():
    # 256 sequences at ~1,100 tokens read ~80 ms of KV and weights: far above the floor
    big = dict(EIGHT_B, concurrency=256)
    assert run_predict(PredictRequest(**big, enforce_eager=True)).itl_ms == pytest.approx(
        run_predict(PredictRequest(**big)).itl_ms
    )


def test_eager_leaves_a_long_prefill_as_it_was():
    # an 8,000-token prompt's steps take hundreds of ms on the GPU
    long = dict(EIGHT_B, input_tokens=8000, concurrency=1)
    assert run_predict(PredictRequest(**long, enforce_eager=True)).ttft_ms == pytest.approx(
        run_predict(PredictRequest(**long)).ttft_ms
    )


def test_predict_takes_enforce_eager_and_says_so(capsys):
    args = ["predict", "--model", "Llama-3.1-8B-Instruct", "--gpu", "H100"]
    args += ["--input-tokens", "1000", "--output-tokens", "200", "--concurrency", "4"]
    assert main([*args, "--enforce-eager", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["enforce_eager"] is True


def test_the_vllm_config_says_enforce_eager_only_when_the_plan_asks():
    assert "--enforce-eager" in vllm_release()["flags"]
    # on H100, whose decode step is short enough for the eager launches to show (the plan's
    # default GPUs pick an L40S since #29's refit, whose step is longer than the launches)
    h100 = {"allowed.gpus": ["H100"]}
    eager = build_fleet_plan(make_plan(**{"model.enforce_eager": True, **h100})).regions[0]
    graphs = build_fleet_plan(make_plan(**h100)).regions[0]
    assert eager.serving.vllm.config()["enforce-eager"] is True
    assert "enforce-eager" not in graphs.serving.vllm.config()
    # the plan's steps are eager too: at the same batch (94 on a p5.4xlarge) the step
    # without a prefill chunk is ~10.5 ms with graphs, the floor plus overhead (~12.9) eager
    assert eager.predicted.decode_only_itl_ms > graphs.predicted.decode_only_itl_ms
