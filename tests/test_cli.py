"""The CLI contracts scripts depend on: keys of plan --json and predict --json, exit codes."""

import json
import subprocess
import sys

import pytest
import yaml
from plans import plan_dict

from llmfleet import cli
from llmfleet.catalog import model_facts
from llmfleet.cli import main
from llmfleet.plan import stacks
from llmfleet.plan.stacks import deploy_stacks, list_stacks, read_plan, stack_file_text

PREDICT = [
    "predict",
    "--model",
    "Llama-3.1-70B-Instruct",
    "--gpu",
    "H100",
    "--tensor-parallel-size",
    "4",
    "--precision",
    "bf16",
    "--input-tokens",
    "1000",
    "--output-tokens",
    "200",
    "--max-model-len",
    "131072",
    "--json",
]


def run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_plan_json_has_the_keys_scripts_rely_on(capsys, own_stacks):
    code, out, _ = run(["plan", "--stack", "three-regions", "--json"], capsys)
    assert code == 0
    fp = json.loads(out)
    assert isinstance(fp["regions"], list) and len(fp["regions"]) == 3
    assert fp["monthly_cost_usd"] == pytest.approx(
        sum(r["monthly_cost_usd"] for r in fp["regions"])
    )
    for r in fp["regions"]:
        for key in ("region", "instance_type", "gpu", "tensor_parallel_size", "monthly_cost_usd"):
            assert key in r
        assert set(r["replicas"]) >= {"min", "desired", "max"}
        assert set(r["nodes"]) >= {"min", "desired", "max"}
        assert set(r["predicted"]) >= {
            "ttft_ms",
            "itl_ms",
            "output_tokens_per_s",
            "kv_cache_tokens",
        }


def test_plan_prints_the_fleet_and_the_rules_of_thumb(capsys, own_stacks):
    code, out, _ = run(["plan", "--stack", "one-region"], capsys)
    assert code == 0
    assert "Sized fleet" in out and "us-east-1" in out and "1.5-2.5 MB" in out


def test_predict_json_has_the_keys_scripts_rely_on(capsys):
    code, out, _ = run(PREDICT, capsys)
    assert code == 0
    r = json.loads(out)
    for key in (
        "weights_gib_per_gpu",
        "kv_bytes_per_token",
        "kv_cache_gib_per_gpu",
        "kv_cache_tokens",
        "max_concurrency",
        "batch_size",
        "ttft_ms",
        "itl_ms",
        "output_tokens_per_s",
        "total_tokens_per_s",
        "requests_per_s",
    ):
        assert key in r
    assert r["kv_bytes_per_token"] == 327_680
    assert r["mode"] == "offline"


def test_predict_takes_a_rate_or_a_concurrency(capsys):
    _, out, _ = run(PREDICT + ["--request-rate", "2"], capsys)
    rate = json.loads(out)
    _, out, _ = run(PREDICT + ["--concurrency", "8"], capsys)
    conc = json.loads(out)
    assert (rate["mode"], conc["mode"]) == ("rate", "concurrency")
    assert conc["batch_size"] == 8


def test_predict_gives_a_requests_latency_as_ttft_plus_the_inter_token_steps(capsys):
    _, out, _ = run(PREDICT + ["--concurrency", "8"], capsys)
    r = json.loads(out)
    output_tokens = PREDICT[PREDICT.index("--output-tokens") + 1]
    expected = r["ttft_ms"] + (int(output_tokens) - 1) * r["itl_ms"]
    assert r["e2e_latency_ms"] == pytest.approx(expected)


def test_predict_reads_a_config_json_path(tmp_path, capsys):

    path = tmp_path / "config.json"
    path.write_text(json.dumps(model_facts.model_entry("Qwen3-8B").config))
    code, out, _ = run(
        [
            "predict",
            "--model",
            str(path),
            "--gpu",
            "L4",
            "--input-tokens",
            "100",
            "--output-tokens",
            "100",
            "--max-model-len",
            "4096",
            "--json",
        ],
        capsys,
    )
    assert code == 0 and json.loads(out)["kv_bytes_per_token"] == 147_456


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "--stack", "nope"], "stack 'nope': no file"),
        (
            [
                "predict",
                "--model",
                "Llama-3.1-8B",
                "--gpu",
                "H10",
                "--input-tokens",
                "1",
                "--output-tokens",
                "1",
            ],
            "--gpu = 'H10': unknown GPU; did you mean H100",
        ),
        (
            [
                "predict",
                "--model",
                "Llama-3.1-8B",
                "--gpu",
                "H100",
                "--precision",
                "int3",
                "--input-tokens",
                "1",
                "--output-tokens",
                "1",
            ],
            "--precision = 'int3': use one of",
        ),
        (
            [
                "predict",
                "--model",
                "Llama-3.1-8B",
                "--gpu",
                "H100",
                "--input-tokens",
                "0",
                "--output-tokens",
                "1",
            ],
            "--input-tokens = 0: Input should be greater than 0",
        ),
    ],
)
def test_user_errors_exit_2_with_the_field_and_no_traceback(argv, message, capsys):
    code, _, err = run(argv, capsys)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_the_module_entry_point_exits_2_on_a_user_error():
    proc = subprocess.run(
        [sys.executable, "-m", "llmfleet", "plan", "--stack", "nope"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "no file" in proc.stderr


def test_predict_json_says_null_when_the_kv_pool_holds_no_request(capsys):
    # Llama-3.3-70B FP8 on one H100: vLLM fails with a negative KV budget (benchmarks row 116)
    argv = [
        "predict",
        "--model",
        "Llama-3.3-70B-Instruct",
        "--gpu",
        "H100",
        "--precision",
        "fp8",
        "--input-tokens",
        "1000",
        "--output-tokens",
        "100",
        "--max-model-len",
        "16000",
        "--json",
    ]
    code, out, _ = run(argv, capsys)
    r = json.loads(out)  # strict JSON: no Infinity
    assert code == 0 and r["fits"] is False
    assert r["ttft_ms"] is None and r["itl_ms"] is None and r["kv_cache_tokens"] == 0
    assert r["e2e_latency_ms"] is None


def test_a_closed_loop_benchmark_waits_longer_for_the_first_token_the_shorter_it_runs():
    # C clients start together: the first wave queues for each other's prefill; with 10 x C
    # requests that wave is a tenth of them, with C it is all of them.
    from llmfleet.perf.replica import PredictRequest, run_predict

    base = dict(
        model="Llama-3.1-8B-Instruct",
        gpu="H100",
        input_tokens=4000,
        output_tokens=200,
        concurrency=64,
    )
    steady = run_predict(PredictRequest(**base)).ttft_ms
    ten_waves = run_predict(PredictRequest(**base, num_requests=640)).ttft_ms
    one_wave = run_predict(PredictRequest(**base, num_requests=64)).ttft_ms
    assert steady < ten_waves < one_wave
    assert ten_waves == pytest.approx(steady + (one_wave - steady) / 10)


def test_a_short_burst_with_sharegpt_spread_lengths_drains_slower_than_fixed_lengths():
    # 10 requests at once: with lengths spread as ShareGPT's (up to ~4x the mean) the last
    # ones decode alone long after the rest finished; with equal lengths all finish together.
    from llmfleet.perf.replica import PredictRequest, run_predict

    base = dict(
        model="Mistral-7B-Instruct-v0.3",
        gpu="H100",
        input_tokens=160,
        output_tokens=250,
        num_requests=10,
    )
    fixed = run_predict(PredictRequest(**base)).output_tokens_per_s
    spread = run_predict(PredictRequest(**base, output_lengths="sharegpt")).output_tokens_per_s
    assert spread < 0.6 * fixed


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"edge": {"rate_limit": {"requests": 600}}}, "edge.auth = None: production's entry point"),
        ({"model": {"id": "Llama-3.1-8B-Instruct"}}, "model.revision = None: production serves"),
        ({"kubernetes_version": "1.33"}, "kubernetes_version = '1.33': EKS standard support"),
        ({"alerts": {"receivers": [{"name": "oncall"}]}},
         "plan.alerts.receivers.0: receiver 'oncall' has none"),
    ],
)
def test_the_shipped_prod_stack_broken_one_field_at_a_time_exits_2_naming_it(
    changes, message, tmp_path, capsys, monkeypatch
):
    """prod with auth removed, the revision unpinned, an old Kubernetes, or a receiver
    without a target: one line naming the plan field, exit 2, no traceback."""
    doc = yaml.safe_load(stacks.stack_path("prod").read_text())
    doc["config"]["llmfleet:plan"].update(changes)
    (tmp_path / "Pulumi.broken.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.setattr(cli, "read_plan", lambda env: stacks.read_plan(env, tmp_path))
    code, _, err = run(["plan", "--stack", "broken"], capsys)
    assert code == 2 and message in err and "Traceback" not in err


def test_rollout_json_has_the_keys_the_deploy_workflow_reads(capsys):
    for env in list_stacks():
        code, out, _ = run(["rollout", "--stack", env, "--json"], capsys)
        assert code == 0
        order = json.loads(out)
        assert {"environment", "canary", "steps", "prometheus_alerts_path"} <= set(order)
        plan = read_plan(env)
        regions = [s["region"] for s in order["steps"] if s["region"]]
        assert sorted(regions) == sorted(r.name for r in plan.regions)
        assert [s["stack"] for s in order["steps"]] == deploy_stacks(env, plan, regions)
        for step in order["steps"]:
            assert {"stack", "region", "ready_timeout_s", "bake_s", "gate_alerts"} <= set(step)


def test_a_region_stack_holds_no_plan_and_points_at_its_environment(
    tmp_path, capsys, monkeypatch
):
    regions = [
        {"name": "us-east-1", "traffic_share": 0.6},
        {"name": "us-west-2", "traffic_share": 0.4, "vpc_cidr": "10.41.0.0/16"},
    ]
    doc = {"config": {"aws:region": "us-east-1", "llmfleet:plan": plan_dict(regions=regions)}}
    (tmp_path / "Pulumi.qa.yaml").write_text(yaml.safe_dump(doc))
    (tmp_path / "Pulumi.qa.us-west-2.yaml").write_text(stack_file_text("qa", "us-west-2"))
    monkeypatch.setattr(cli, "read_plan", lambda env: read_plan(env, tmp_path))
    code, _, err = run(["plan", "--stack", "qa.us-west-2"], capsys)
    assert code == 2
    assert "its plan is in Pulumi.qa.yaml: use --stack qa" in err
