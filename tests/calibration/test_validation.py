"""Fidelity: every published measurement is predicted through `predict`'s code path.

The levels pinned below are the medians `llmfleet validate --json` printed when they were
pinned; README.md ("How far off is it?") states the same figures rounded. A change that
makes the model worse fails here. The held-out levels need the leave-one-source-out refits
(most of a minute on 2 cores), so they carry the `validation` marker: `make validate-check`
runs them and `make test` deselects them; the in-sample levels run in `make test`.
"""

import json

import pytest

from llmfleet.calibration.measurements import (
    REQUIRED_COLUMNS,
    load_measurements,
    normalize_gpu,
    normalize_precision,
    parse_row,
)
from llmfleet.calibration.report import validation_report
from llmfleet.catalog import vllm_release
from llmfleet.catalog.constants import fitted, priors
from llmfleet.cli import main

# Median absolute percentage error on vLLM rows, leave one source out, over the rows a plan
# is sized with (the report's "sizing_regimes": one TP group; a steady state, low load or an
# offline harness). Issue #29 took bursts of every prompt at once through an API server out
# of the step fit and the sizing band (they measure the server's front end), fitted request
# handling on short prompts at low load only, read TensorRT-LLM's FP8 KV default and put
# MXFP4 experts at the FP8 rate on Blackwell. Over these rows, before -> after: ITL 17.9 ->
# 17.7, throughput 14.1 -> 16.1, TTFT 18.1 -> 14.9, E2E 17.6 -> 17.9 %; KV unchanged.
PINNED_LOSO_MEDIAN = {
    "e2e_latency_ms": 18.0,
    "itl_ms": 17.8,
    "kv_cache_gib": 5.0,
    "kv_cache_tokens": 5.4,
    "output_tokens_per_s": 16.2,
    "ttft_ms": 15.0,
}
# The same, in sample (#29, before -> after over these rows: ITL 7.7 -> 8.6, throughput
# 7.1 -> 6.9, TTFT 15.6 -> 13.2, E2E 7.4 -> 8.6 %).
PINNED_IN_SAMPLE_MEDIAN = {
    "e2e_latency_ms": 8.7,
    "itl_ms": 8.7,
    "kv_cache_gib": 5.0,
    "kv_cache_tokens": 5.5,
    "output_tokens_per_s": 7.0,
    "ttft_ms": 13.3,
}
# Bursts through an API server, predicted and counted, not fitted on (#29): in sample ITL
# 25.4 %, throughput 36.3 %, TTFT 37.9 % (n 66 / 68 / 63).
PINNED_BURSTS = {"itl_ms": 25.5, "output_tokens_per_s": 36.4, "ttft_ms": 38.0}


@pytest.fixture(scope="module")
def loaded():
    return load_measurements()


@pytest.fixture(scope="module")
def in_sample(loaded):
    """The report of `llmfleet validate --no-loso`: the fitted constants on every row."""
    return validation_report(loaded, fitted(), priors(), loso=False)


@pytest.fixture(scope="module")
def held_out(loaded):
    """The report of `llmfleet validate`: each source also predicted by a refit without it."""
    return validation_report(loaded, fitted(), priors(), loso=True)


def test_validate_predicts_at_least_200_rows_and_gives_every_skip_a_reason(in_sample):
    assert in_sample["rows"] >= 200
    assert all(s["reason"] for s in in_sample["skipped"])


# The pins are over the sources of one TP group (the report's "one_group"), the ones the
# constants are fitted on: the sources of pipeline stages, DP and EP (S60-S62) are predicted
# and counted in "in_sample" but not fitted on (Measurement.fitted_on), and their rows are
# pinned apart below; with them counted, in sample reads ITL 14.4 %, throughput 13.2 %,
# TTFT 23.2 % (benchmarks/README.md).
@pytest.mark.parametrize("metric", sorted(PINNED_IN_SAMPLE_MEDIAN))
def test_in_sample_error_stays_at_or_under_the_level_reached(in_sample, metric):
    stats = in_sample["sizing_regimes"]["in_sample"]["vllm"][metric]
    assert stats["median_ape"] <= PINNED_IN_SAMPLE_MEDIAN[metric]


@pytest.mark.parametrize("metric", sorted(PINNED_BURSTS))
def test_bursts_through_an_api_server_are_predicted_and_counted_apart(in_sample, metric):
    stats = in_sample["bursts"]["in_sample"]["vllm"][metric]
    assert stats["n"] >= 60
    assert stats["median_ape"] <= PINNED_BURSTS[metric]


# The rows of layouts beyond one TP group (pipeline stages across VMs and in an L4 node,
# EP), in sample: n and median absolute percentage error when pinned.
PINNED_BEYOND_ONE_GROUP = {
    # 20.3 / 48.2 / 48.0 before #29's refit without the API bursts (Hopper and Ampere MFU
    # rose to their priors, the roofline overlap to 1): these rows are not fitted on, so
    # they move with it; TTFT fell to 35.8 %
    "itl_ms": (8, 28.6),
    "output_tokens_per_s": (10, 61.4),
    "ttft_ms": (8, 48.0),
}


@pytest.mark.parametrize("metric", sorted(PINNED_BEYOND_ONE_GROUP))
def test_rows_beyond_one_tp_group_are_predicted_and_stay_at_the_level_reached(
    in_sample, metric
):
    stats = in_sample["beyond_one_group"]["in_sample"]["vllm"][metric]
    n, level = PINNED_BEYOND_ONE_GROUP[metric]
    assert stats["n"] == n
    assert stats["median_ape"] <= level


def test_the_sources_of_layouts_beyond_one_group_are_not_fitted_on(loaded):
    shapes = {m.source_id for m in loaded.rows if m.shape_source}
    assert shapes == {"S60", "S61", "S62"}
    assert not any(m.fitted_on for m in loaded.rows if m.shape_source)
    assert any(m.fitted_on for m in loaded.rows)


def test_llm_d_start_up_logs_kv_cache_is_predicted_within_2_8_percent(in_sample):
    # S8: vLLM's own "Available KV cache memory" lines on H100 (benchmarks/measurements.csv
    # rows 113-119, one a failure); README.md states 2.7 %
    assert in_sample["by_source"]["S8"]["kv_cache_gib"]["median_ape"] <= 2.8


@pytest.mark.validation
@pytest.mark.parametrize("metric", sorted(PINNED_LOSO_MEDIAN))
def test_held_out_error_stays_at_or_under_the_level_reached(held_out, metric):
    stats = held_out["sizing_regimes"]["leave_one_source_out"]["vllm"][metric]
    assert stats["median_ape"] <= PINNED_LOSO_MEDIAN[metric]


@pytest.mark.validation
def test_vllm_ci_latency_runs_are_predicted_within_7_percent_held_out(held_out):
    # S41: benchmark_latency, one batch of 8 prompts (32 in, 128 out) on A100, H100, H200,
    # predicted with constants fitted without S41; README.md states "within 7.3 %" (6.96 %:
    # 6.6 % before S20's outputs were read at their measured length moved the other folds;
    # 7.23 % since a request's inter-token time carries only the other requests' prefills;
    # 7.30 % since a request waits for the step under way)
    assert held_out["by_source_held_out"]["S41"]["e2e_latency_ms"]["median_ape"] <= 7.3


ROW = {
    "row_id": "9",
    "source_id": "SX",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "engine": "vLLM",
    "gpu": "H100 SXM",
    "gpu_count": "1",
    "tensor_parallel": "1",
    "precision": "BF16",
    "kv_cache_dtype": "",
    "input_len": "1000",
    "output_len": "100",
    "workload": "x",
    "concurrency": "8",
    "request_rate_qps": "",
    "output_tok_s": "900",
    "total_tok_s": "",
    "req_s": "",
    "ttft_mean_ms": "",
    "tpot_mean_ms": "",
    "itl_mean_ms": "",
    "e2e_latency_mean_ms": "",
    "kv_cache_gib_per_gpu": "",
    "kv_cache_tokens": "",
    "gpu_memory_utilization": "",
    "max_model_len": "",
}


def test_a_row_with_an_unknown_model_is_skipped_with_its_name():
    assert parse_row({**ROW, "model": "acme/unknown-7b"}) == (
        "model 'acme/unknown-7b' is not in the catalog"
    )


def test_a_row_with_a_unit_that_does_not_parse_is_skipped():
    reason = parse_row({**ROW, "input_len": "1k tokens", "output_len": "lots"})
    assert reason == "no input/output lengths for its throughput or latency"


def test_a_benchmark_latency_batch_is_predicted_as_prompts_queued_together():
    row = {**ROW, "workload": "benchmark_latency, fixed batch size 8", "output_tok_s": ""}
    m = parse_row({**row, "e2e_latency_mean_ms": "997.5"})
    assert m.request.num_requests == 8 and m.request.concurrency is None
    assert m.measured == {"e2e_latency_ms": 997.5}


def test_a_row_on_an_unstated_a100_variant_is_skipped():
    assert "not a catalog GPU" in str(parse_row({**ROW, "gpu": "A100 (memory size not stated)"}))


@pytest.mark.parametrize(
    ("text", "gpu"),
    [
        ("H100 SXM 80GB (DGX H100)", "H100"),
        ("H200 SXM", "H200"),
        ("A100 SXM 80GB", "A100-80GB"),
        ("A100 (4 GPUs; CUDA total 39.38 GiB each, i.e. 40GB variant)", "A100-40GB"),
        ("NVIDIA L40S (IBM Code Engine)", "L40S"),
        ("NVIDIA A10G x 1", "A10G"),
        ("NVIDIA GeForce RTX 3090", None),
    ],
)
def test_gpu_names_as_sources_print_them_map_to_the_catalog(text, gpu):
    assert normalize_gpu(text) == gpu


def test_precision_comes_from_the_row_or_the_checkpoint_name():
    assert normalize_precision("FP8 (ModelOpt pre-quantized checkpoint)", "") == "fp8"
    assert normalize_precision("model default", "nvidia/Llama-3.1-8B-Instruct-FP8") == "fp8"
    assert normalize_precision("MXFP4 (checkpoint)", "openai/gpt-oss-20b") == "mxfp4"
    assert normalize_precision("BF16", "Qwen/Qwen3-8B") == "bf16"


def test_a_measurements_file_without_the_columns_names_them(tmp_path, capsys):
    bad = tmp_path / "m.csv"
    bad.write_text("row_id,model\n1,x\n")
    assert main(["validate", "--measurements", str(bad), "--no-loso"]) == 2
    err = capsys.readouterr().err
    assert "m.csv: missing columns source_id, engine, gpu" in err and "Traceback" not in err


def test_a_missing_measurements_file_is_a_user_error(tmp_path, capsys):
    assert main(["validate", "--measurements", str(tmp_path / "nope.csv")]) == 2
    assert "cannot read the measurements" in capsys.readouterr().err


def test_mean_lengths_follow_from_e2e_ttft_and_tpot_when_lengths_vary_around_the_nominal():
    # InferenceMAX row 2000: nominal 1024/1024, E2E 13,246 ms, TTFT 137.7 ms, TPOT 14.257 ms
    # -> 1 + (13246.1 - 137.7) / 14.257 = 920.4 output tokens (0.9 x 1024: range ratio 0.8);
    # total / output tok/s 17,364 / 8,672.5 -> input = 920.4 x 1.0022 = 922
    row = {
        **ROW,
        "input_len": "1024",
        "output_len": "1024",
        "output_tok_s": "8672.5",
        "total_tok_s": "17364.1",
        "ttft_mean_ms": "137.749",
        "tpot_mean_ms": "14.257",
        "e2e_latency_mean_ms": "13246.07",
    }
    m = parse_row(row)
    assert (m.request.input_tokens, m.request.output_tokens) == (922, 920)


def test_server_flags_and_the_prompt_count_a_row_states_reach_the_prediction():
    row = {**ROW, "max_num_seqs": "512", "max_num_batched_tokens": "8192", "num_prompts": "80"}
    req = parse_row(row).request
    assert (req.max_num_seqs, req.max_num_batched_tokens, req.num_requests) == (512, 8192, 80)


@pytest.mark.parametrize(
    ("text", "release"),
    [("v0.11.0", (0, 11)), ("0.5.4 (stated in benchmark_v0.md)", (0, 5)), ("not stated", None)],
)
def test_engine_releases_are_read_from_the_version_a_row_states(text, release):
    assert vllm_release.release(text) == release


def test_rows_of_v0_era_vllm_are_predicted_but_not_fitted_on():
    old = parse_row({**ROW, "engine_version": "0.5.4"})
    new = parse_row({**ROW, "engine_version": "v0.11.0"})
    sglang = parse_row({**ROW, "engine": "SGLang", "engine_version": "v0.5.3"})
    assert (old.legacy, new.legacy, sglang.legacy) == (True, False, False)


def test_a_sharegpt_workload_spreads_its_output_lengths():
    row = {**ROW, "workload": "benchmark_serving.py ShareGPT, 320 prompts, all at once"}
    assert parse_row(row).request.output_lengths == "sharegpt"
    assert parse_row(ROW).request.output_lengths == "fixed"


def _one_row_file(tmp_path):
    path = tmp_path / "m.csv"
    row = {k: ROW.get(k, "") for k in REQUIRED_COLUMNS}
    path.write_text(",".join(REQUIRED_COLUMNS) + "\n" + ",".join(row.values()) + "\n")
    return path


def test_a_measurements_file_with_only_the_required_columns_still_validates(tmp_path, capsys):
    args = ["validate", "--measurements", str(_one_row_file(tmp_path)), "--no-loso", "--json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 1


def test_validate_json_keeps_its_keys(tmp_path, capsys):
    args = ["validate", "--measurements", str(_one_row_file(tmp_path)), "--no-loso", "--json"]
    assert main(args) == 0
    # keys are added, never renamed: "one_group" and "beyond_one_group" came with #24
    assert sorted(json.loads(capsys.readouterr().out)) == [
        "band",  # added (#29): the sizing band, per regime, and its held-out coverage
        "below_compute_floor",  # added (#29): TTFTs no prefill could reach (cache hits)
        "beyond_one_group",
        "bursts",  # added (#29): bursts through an API server, apart
        "by_source",
        "by_source_held_out",
        "by_source_own_runs",  # added: per source, calibrated on the server's other runs
        "calibrated_on_one_sweep",  # added (#29): calibrated on one sweep, the other sweeps
        "in_sample",
        "leave_one_source_out",
        "one_group",
        "prefix_caching",  # added (#32): the prefix-cache model against published runs
        "rows",
        "sizing_regimes",  # added (#29): the rows a plan is sized with
        "skipped",
        "ttft_by_prompt_tokens",  # added: TTFT error and bias by prompt length
        "ttft_by_source",  # added (#29): median predicted/measured per source and regime
    ]


def test_outputs_that_stopped_early_are_read_from_the_runs_own_token_rates():
    # S20 row 1036: random 4000 in / 200 out without ignore_eos; 463.35 output and 14,247.47
    # total tok/s give 4000 x 463.35 / 13,784.12 = 134.5 output tokens a request.
    m = parse_row(
        {
            **ROW,
            "input_len": "4000",
            "output_len": "200",
            "output_tok_s": "463.35",
            "total_tok_s": "14247.47",
        }
    )
    assert (m.request.input_tokens, m.request.output_tokens) == (4000, 134)


def test_outputs_as_asked_keep_the_nominal_length():
    # 1000 in, 100 out at 900 output tok/s: the total 9,900 tok/s gives exactly 100
    m = parse_row({**ROW, "total_tok_s": "9900"})
    assert m.request.output_tokens == 100


def test_ttft_is_reported_by_prompt_length_with_its_bias(in_sample):
    bands = in_sample["ttft_by_prompt_tokens"]["in_sample"]
    # over the rows a plan is sized with: the 32,000-token rows are all bursts (#29)
    assert list(bands) == ["0-512", "512-2,048", "2,048-8,192", "all"]
    assert sum(b["n"] for name, b in bands.items() if name != "all") == bands["all"]["n"]


def test_the_median_predicted_over_measured_ttft_is_within_10_percent_of_one(in_sample):
    # Over the project's vLLM rows a plan is sized with (README.md, "How far off is it?"):
    # 0.95 since #29 (0.94 over every row before it, bursts through an API server in).
    ratio = in_sample["ttft_by_prompt_tokens"]["in_sample"]["all"]["median_predicted_over_measured"]
    assert 0.9 <= ratio <= 1.1


@pytest.mark.validation
def test_calibrating_on_a_servers_other_runs_brings_inferencemax_within_10_percent(held_out):
    # S40: each run predicted by the constants fitted without S40, then by those with the
    # correction `calibrate --bench` fits on the same server's runs at its other prompt
    # lengths (held out by length since #29: runs at one length share its errors). TPOT and
    # throughput within 10 % (21.2 -> 2.6 %, 20.5 -> 2.9 %); TTFT only 12.8 -> 12.6 %: its
    # factors are fitted on low-load TTFT alone, and TTFT under load is queueing (5.5 % when
    # held out by run and fitted on every run's TTFT, before #29).
    own = held_out["by_source_own_runs"]["S40"]
    for metric, s in own.items():
        assert s["median_ape_own_runs"] <= (12.6 if metric == "ttft_ms" else 10.0), metric
        assert s["median_ape_own_runs"] < s["median_ape_held_out"], metric


@pytest.mark.validation
def test_the_band_covers_each_sources_held_out_rows_near_its_nominal_80_percent(held_out):
    # #29: each source's held-out rows against the band made without it (the unmeasured
    # band for rows on an architecture no other source measures). Before the band by
    # architecture: ITL 39, throughput 45, E2E 39 %; now 71, 76, 78 %; KV 71 / 70 %.
    # TTFT is over-covered (94 %: the unmeasured TTFT band made without S40 holds all of its
    # B200 TTFTs; benchmarks/README.md).
    cov = held_out["band"]["coverage"]
    for metric in ("itl_ms", "output_tokens_per_s", "e2e_latency_ms", "kv_cache_gib",
                   "kv_cache_tokens"):
        assert 0.70 <= cov[metric]["inside_p10_p90"] <= 0.90, metric
    assert 0.70 <= cov["ttft_ms"]["inside_p10_p90"] <= 0.95
