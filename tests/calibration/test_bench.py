"""Reading `vllm bench serve --save-result` files across releases (calibration.bench).

Each fixture has the shape and the figures of a published result file (keys as that release
wrote them); per-request arrays are the published file's own values."""

import json

import pytest

from llmfleet.calibration.bench import read_bench
from llmfleet.errors import BenchError

# vLLM 0.11-era `vllm bench serve` (endpoint_type and backend, failed, peak keys, rtfx):
# the figures of a published Qwen3-VL-8B-Instruct run at 1 request/s (vllm-ascend tutorial
# notes); the throughputs are its token totals over its duration (derived).
MODERN = {
    "endpoint_type": "openai",
    "backend": "openai",
    "label": None,
    "model_id": "Qwen/Qwen3-VL-8B-Instruct",
    "num_prompts": 200,
    "request_rate": 1.0,
    "burstiness": 1.0,
    "max_concurrency": None,
    "duration": 203.51,
    "completed": 200,
    "failed": 0,
    "total_input_tokens": 40000,
    "total_output_tokens": 25600,
    "request_throughput": 200 / 203.51,
    "request_goodput": None,
    "output_throughput": 25600 / 203.51,
    "total_token_throughput": 65600 / 203.51,
    "max_output_tokens_per_s": 313.0,
    "max_concurrent_requests": 12,
    "rtfx": 0.0,
    "mean_ttft_ms": 95.63,
    "mean_tpot_ms": 27.91,
}

# Legacy benchmark_serving.py appending runs (JSON Lines), with --metadata keys as strings
# and the "request_goodput:" key it misspelt: nerdalert/vllm-bench-automation's
# results.json (commit 13ee6ea5), runs at 10 req/s and at "inf".
LEGACY_LINES = [
    {
        "backend": "vllm",
        "model_id": "meta-llama/Llama-3.2-3B-Instruct",
        "tokenizer_id": "meta-llama/Llama-3.2-3B-Instruct",
        "num_prompts": 300,
        "gpu": "4xNVIDIA_L40S",
        "input_len": "1000",
        "request_rate": 10.0,
        "burstiness": 1.0,
        "max_concurrency": None,
        "duration": 35.84,
        "completed": 300,
        "total_input_tokens": 299700,
        "total_output_tokens": 80945,
        "request_throughput": 8.369,
        "request_goodput:": None,
        "output_throughput": 2258.2,
        "mean_ttft_ms": 54.60,
        "median_ttft_ms": 52.87,
        "p99_ttft_ms": 98.70,
        "mean_tpot_ms": 13.71,
        "mean_itl_ms": 13.73,
        "p99_itl_ms": 34.49,
    },
    {
        "backend": "vllm",
        "model_id": "meta-llama/Llama-3.2-3B-Instruct",
        "num_prompts": 300,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": None,
        # The published figures of this run (req/s 31.18, output 8,321.2 tok/s) give the
        # duration and the output total; the input is 300 prompts of 999 tokens as above.
        "duration": 300 / 31.18,
        "completed": 300,
        "total_input_tokens": 299700,
        "total_output_tokens": round(8321.2 * 300 / 31.18),
        "request_throughput": 31.18,
        "request_goodput:": None,
        "output_throughput": 8321.2,
        "mean_ttft_ms": 4386.7,
        "mean_tpot_ms": 61.81,
        "mean_itl_ms": 48.17,
    },
]

# A 2024 file written with per-request arrays: LambdaLabsML/vllm-benchmark
# results/prompt_10/1xH100-80GB-SXM/Mistral-7B-Instruct-v0.3_tp1_len2000.json
# (commit de55d46e; vLLM 0.5.4); its summary keys and its input_lens, output_lens and ttfts.
# One request produced no token (output 0, TTFT 0.0), and the file's mean TTFT averages
# that 0.0 in (51.81 ms over 10).
DETAILED = {
    "date": "20240819-062633",
    "backend": "vllm",
    "model_id": "mistralai/Mistral-7B-Instruct-v0.3",
    "tokenizer_id": "mistralai/Mistral-7B-Instruct-v0.3",
    "best_of": 1,
    "use_beam_search": False,
    "num_prompts": 10,
    "request_rate": "inf",
    "duration": 7.394543324015103,
    "completed": 10,
    "total_input_tokens": 1585,
    "total_output_tokens": 2490,
    "request_throughput": 1.3523485578241472,
    "input_throughput": 214.34724641512733,
    "output_throughput": 336.7347908982126,
    "mean_ttft_ms": 51.811695587821305,
    "mean_tpot_ms": 8.953799100091945,
    "mean_itl_ms": 8.044675804977672,
    "input_lens": [14, 30, 28, 12, 375, 29, 487, 369, 5, 236],
    "output_lens": [129, 890, 273, 169, 0, 928, 10, 26, 8, 57],
    "ttfts": [
        0.0657338589662686,
        0.06549760699272156,
        0.06539972103200853,
        0.06531604693736881,
        0.0,
        0.031083140056580305,
        0.030996285961009562,
        0.06469899392686784,
        0.06473432597704232,
        0.06465697602834553,
    ],
}


def write(tmp_path, name, objects, lines=False):
    path = tmp_path / name
    if lines:
        path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    else:
        path.write_text(json.dumps(objects))
    return path


def test_a_modern_single_run_reads_its_rate_lengths_and_means(tmp_path):
    (run,) = read_bench(write(tmp_path, "r.json", MODERN))
    assert run.request_rate == 1.0 and run.max_concurrency is None
    assert (run.input_tokens, run.output_tokens) == (200, 128)  # 40,000 and 25,600 over 200
    assert run.measured == {
        "ttft_ms": 95.63,
        "itl_ms": 27.91,  # TPOT: a request's mean time per output token
        "output_tokens_per_s": pytest.approx(125.79, abs=0.01),
    }


def test_json_lines_give_one_run_per_line_and_inf_is_a_burst(tmp_path):
    runs = read_bench(write(tmp_path, "r.jsonl", LEGACY_LINES, lines=True))
    assert [r.request_rate for r in runs] == [10.0, None]
    assert runs[1].label.endswith("r.jsonl run 2")
    assert runs[1].num_prompts == 300 and runs[1].max_concurrency is None


def test_per_request_arrays_leave_the_request_without_a_token_out_of_every_mean(tmp_path):
    (run,) = read_bench(write(tmp_path, "d.json", DETAILED))
    # Nine requests produced tokens: prompts 1,585 - 375 = 1,210 and outputs 2,490 tokens.
    assert run.input_tokens == pytest.approx(1210 / 9)
    assert run.output_tokens == pytest.approx(2490 / 9)
    # Their mean TTFT is 57.6 ms, not the file's 51.8 ms that averaged in the 0.0.
    assert run.ttft_ms == pytest.approx(57.57, abs=0.01)
    assert run.spread_outputs  # 8 to 928 tokens: a dataset's spread, not a fixed length


def test_a_file_that_is_not_json_is_refused_naming_the_file_and_the_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"model_id": "x"}\nnot json at all\n')
    with pytest.raises(BenchError, match=r"bad.json: not JSON \(line 2"):
        read_bench(path)


def test_a_run_without_the_keys_a_result_has_is_refused_naming_them(tmp_path):
    partial = {k: v for k, v in MODERN.items() if k not in ("duration", "mean_ttft_ms")}
    with pytest.raises(BenchError, match="r.json: lacks duration, mean_ttft_ms"):
        read_bench(write(tmp_path, "r.json", partial))


def test_a_run_that_completed_no_request_is_refused(tmp_path):
    with pytest.raises(BenchError, match="completed 0 requests"):
        read_bench(write(tmp_path, "r.json", {**MODERN, "completed": 0}))


def test_a_json_list_is_not_a_result(tmp_path):
    with pytest.raises(BenchError, match="a JSON list, not a result object"):
        read_bench(write(tmp_path, "r.json", [MODERN]))


@pytest.mark.parametrize(
    ("export", "tool"),
    [
        ({"benchmarks": [], "metadata": {"version": 2}}, "GuideLLM report"),
        (
            {"time_to_first_token": {"avg": 45.5, "p99": 120.0, "unit": "ms"}, "request_count": 1},
            "GenAI-Perf or AIPerf export",
        ),
    ],
)
def test_another_tools_export_is_named_not_misread(tmp_path, export, tool):
    with pytest.raises(BenchError, match=f"r.json: a {tool}, not a `vllm bench serve"):
        read_bench(write(tmp_path, "r.json", export))
