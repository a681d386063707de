"""A server calibrated on its own `vllm bench serve` runs (`llmfleet calibrate --bench`),
applied by `llmfleet predict --calibration`.

The runs are InferenceMAX's gpt-oss-120b sweeps (vLLM 0.13, benchmarks/bench-results/,
README there): per server, concurrency 4-128 at nominal 1024/1024, 1024/8192 and
8192/1024 tokens. A user would run one of them; the others say how well the calibration
carries to prompt and output lengths it never saw."""

import hashlib
import json
import statistics
from pathlib import Path

import pytest

from llmfleet.calibration.bench import read_bench
from llmfleet.calibration.server_calibration import read_calibration
from llmfleet.calibration.server_fit import Server, observe, run_ratios
from llmfleet.catalog.constants import fitted
from llmfleet.cli import main
from llmfleet.perf.step import NO_CORRECTION

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench-results"
SERVERS = {  # (GPU, TP): the KV dtype InferenceMAX served it with
    ("B200", 1): "fp8",
    ("B200", 2): "fp8",
    ("H200", 1): "auto",
    ("H200", 2): "auto",
}
FLAGS = ["--max-num-seqs", "512", "--max-num-batched-tokens", "8192"]


def bench_file(gpu, tp, lengths):
    return BENCH / f"gpt-oss-120b-{gpu.lower()}-tp{tp}-{lengths}.jsonl"


def server_flags(gpu, tp):
    return [
        "--model", "gpt-oss-120b", "--gpu", gpu, "--tensor-parallel-size", str(tp),
        "--precision", "mxfp4", "--kv-cache-dtype", SERVERS[(gpu, tp)],
        "--engine-version", "0.13.0", *FLAGS,
    ]


def calibrate(tmp_path, gpu, tp, lengths="1024-1024", capsys=None):
    out = tmp_path / f"{gpu}-{tp}.json"
    code = main(["calibrate", "--bench", str(bench_file(gpu, tp, lengths)), "--out", str(out),
                 *server_flags(gpu, tp)])
    assert code == 0
    return read_calibration(out)


def pooled_median_ape(ratios):
    return statistics.median(abs(1 / r - 1) * 100 for run in ratios for r in run.values())


@pytest.mark.parametrize(("gpu", "tp"), sorted(SERVERS))
def test_calibrated_on_one_sweep_the_other_lengths_are_predicted_within_10_percent(
    tmp_path, gpu, tp
):
    cal = calibrate(tmp_path, gpu, tp)
    others = [r for n in ("1024-8192", "8192-1024") for r in read_bench(bench_file(gpu, tp, n))]
    server = cal.server
    after = run_ratios(observe(server, others), fitted(), cal.factors.correction)
    before = run_ratios(observe(server, others), fitted(), NO_CORRECTION)
    # Median over every run's TTFT, TPOT and output throughput.
    assert pooled_median_ape(after) <= 10.0
    assert pooled_median_ape(after) <= pooled_median_ape(before) + 1.0


def test_the_calibration_file_records_its_files_runs_factors_and_errors(tmp_path):
    cal = calibrate(tmp_path, "B200", 2)
    path = bench_file("B200", 2, "1024-1024")
    assert cal.files[0].sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert cal.files[0].runs == len(cal.runs) == 6
    assert cal.server.gpu == "B200" and cal.server.tensor_parallel_size == 2
    # B200's prefill is slower than the shipped constants say (the runs' TTFT grows faster
    # with the load than predicted): the tensor-time factor is above 1.
    assert cal.factors.compute > 1.2
    assert cal.errors.after["ttft_ms"] < cal.errors.before["ttft_ms"]
    assert set(cal.ranges) == {"itl_ms", "output_tokens_per_s", "ttft_ms"}
    assert all(r["p10"] <= 0.95 and r["p90"] >= 1.05 for r in cal.ranges.values())


def test_one_run_fits_but_gives_no_band(tmp_path):
    cal = calibrate(tmp_path, "H200", 1)  # its 1024/1024 file holds one run
    assert len(cal.runs) == 1
    assert cal.ranges == {} and cal.errors.held_out == {}


def test_a_bench_file_of_another_model_is_refused_naming_file_and_model(tmp_path, capsys):
    path = bench_file("B200", 1, "1024-1024")
    flags = server_flags("B200", 1)
    flags[1] = "Qwen3-8B"
    code = main(["calibrate", "--bench", str(path), "--out", str(tmp_path / "c.json"), *flags])
    err = capsys.readouterr().err
    assert code == 2
    assert path.name in err and "'openai/gpt-oss-120b' is not the server's model Qwen3-8B" in err
    assert not (tmp_path / "c.json").exists()


def test_a_published_checkpoint_at_another_precision_is_refused(tmp_path, capsys):
    first = json.loads(bench_file("H200", 2, "1024-1024").read_text().splitlines()[0])
    path = tmp_path / "fp8.jsonl"
    fp8 = "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic"  # a published checkpoint's repository
    path.write_text(json.dumps({**first, "model_id": fp8}))
    code = main(["calibrate", "--bench", str(path), "--out", str(tmp_path / "c.json"),
                 "--model", "Llama-3.3-70B-Instruct", "--gpu", "H200", "--tensor-parallel-size",
                 "2", "--precision", "bf16"])
    err = capsys.readouterr().err
    assert code == 2 and "is the fp8 checkpoint of Llama-3.3-70B-Instruct" in err
    assert "give --precision fp8" in err


def test_a_config_json_model_needs_the_repository_its_runs_served(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({}))
    code = main(["calibrate", "--bench", str(bench_file("H200", 2, "1024-1024")), "--out",
                 str(tmp_path / "c.json"), "--model", str(config), "--gpu", "H200"])
    assert code == 2 and "give --hf-repo" in capsys.readouterr().err


def test_predict_applies_the_calibration_and_shows_its_band(tmp_path, capsys):
    cal_path = tmp_path / "B200-1.json"
    calibrate(tmp_path, "B200", 1)
    capsys.readouterr()
    args = ["predict", *server_flags("B200", 1), "--input-tokens", "7300", "--output-tokens",
            "920", "--concurrency", "16", "--num-requests", "160", "--json"]
    assert main(args) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main([*args, "--calibration", str(cal_path)]) == 0
    calibrated = json.loads(capsys.readouterr().out)
    assert plain["calibration"] is None and calibrated["calibration"] == str(cal_path)
    # Slower prefill: a 7,300-token prompt's TTFT rises (the runs measured 168 ms at this load).
    assert calibrated["ttft_ms"] > plain["ttft_ms"]
    lo, hi = calibrated["ranges"]["ttft_ms"]
    assert lo < calibrated["ttft_ms"] < hi


@pytest.mark.parametrize(
    ("flag", "value", "why"),
    [
        ("--gpu", "H200", "it calibrates gpu B200, not H200"),
        ("--tensor-parallel-size", "2", "it calibrates tensor_parallel_size 1, not 2"),
        ("--precision", "bf16", "it calibrates precision mxfp4, not bf16"),
    ],
)
def test_predict_refuses_a_calibration_of_another_server(tmp_path, capsys, flag, value, why):
    cal_path = tmp_path / "B200-1.json"
    calibrate(tmp_path, "B200", 1)
    flags = server_flags("B200", 1)
    flags[flags.index(flag) + 1] = value
    code = main(["predict", *flags, "--input-tokens", "1000", "--output-tokens", "100",
                 "--calibration", str(cal_path)])
    err = capsys.readouterr().err
    assert code == 2 and f"--calibration {cal_path}: {why}" in err


def test_a_calibration_fitted_on_other_constants_is_refitted_from_its_runs(tmp_path, capsys):
    cal = calibrate(tmp_path, "B200", 2)
    stale = tmp_path / "stale.json"
    doc = json.loads((tmp_path / "B200-2.json").read_text())
    doc["constants_sha256"] = "0" * 64
    doc["factors"] = {"memory": 3.0, "compute": 3.0, "overhead": 3.0, "ttft_overhead": 3.0}
    stale.write_text(json.dumps(doc))
    args = ["predict", *server_flags("B200", 2), "--input-tokens", "1000", "--output-tokens",
            "1000", "--concurrency", "32", "--json", "--calibration"]
    capsys.readouterr()
    assert main([*args, str(tmp_path / "B200-2.json")]) == 0
    fresh = json.loads(capsys.readouterr().out)
    assert main([*args, str(stale)]) == 0
    refit = json.loads(capsys.readouterr().out)
    assert refit["ttft_ms"] == fresh["ttft_ms"] and refit["itl_ms"] == fresh["itl_ms"]
    assert cal.factors.compute != 3.0


def test_a_file_that_is_not_a_calibration_is_refused(tmp_path, capsys):
    path = tmp_path / "x.json"
    path.write_text("{}")
    code = main(["predict", *server_flags("B200", 1), "--input-tokens", "10",
                 "--output-tokens", "10", "--calibration", str(path)])
    assert code == 2 and "not a calibration file" in capsys.readouterr().err


def test_out_without_bench_is_refused(tmp_path, capsys):
    assert main(["calibrate", "--out", str(tmp_path / "c.json")]) == 2
    assert "give its runs with --bench" in capsys.readouterr().err


def test_a_server_description_is_what_predict_takes():
    server = Server(model="gpt-oss-120b", gpu="B200", precision="mxfp4")
    assert server.label == "gpt-oss-120b on B200 TP 1, mxfp4, KV auto"
