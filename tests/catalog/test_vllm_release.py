"""Engine versions: predictions are for the pinned vLLM release, which (from 0.21) takes the
CUDA-graph pool out of the KV budget; the measured rows' older releases did not."""

import pytest

from llmfleet.catalog import vllm_release
from llmfleet.catalog.vllm_release import VLLM_VERSION
from llmfleet.perf.replica import PredictRequest, run_predict

EIGHT_B = dict(model="Llama-3.1-8B-Instruct", gpu="H100", input_tokens=1000, output_tokens=200)


def test_the_pinned_release_reserves_the_graph_pool_and_older_or_eager_runs_do_not():
    assert vllm_release.release(None) == vllm_release.release(VLLM_VERSION) >= (0, 21)
    assert vllm_release.graph_pool_gib("vllm", None, enforce_eager=False) == 0.4
    assert vllm_release.graph_pool_gib("vllm", None, enforce_eager=True) == 0.0
    assert vllm_release.graph_pool_gib("vllm", "v0.11.0", enforce_eager=False) == 0.0
    assert vllm_release.graph_pool_gib("vllm", "main", enforce_eager=False) == 0.0  # unstated
    assert vllm_release.graph_pool_gib("sglang", None, enforce_eager=False) == 0.0


def test_a_measured_older_release_predicts_0_4_gib_more_kv_than_the_pinned_one():
    pinned = run_predict(PredictRequest(**EIGHT_B, concurrency=8))
    older = run_predict(PredictRequest(**EIGHT_B, concurrency=8, engine_version="0.10.2"))
    assert older.kv_cache_gib_per_gpu - pinned.kv_cache_gib_per_gpu == pytest.approx(0.4, abs=0.01)
