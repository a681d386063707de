"""`llmfleet predict --stack ENV --region R`: a plan's own replica, with its engine
arguments, at the region's peak per replica, and the flags that reproduce it."""

import json
import shlex
from pathlib import Path

import pytest
from plans import (
    FRONTIER,
    GPT_OSS_TP1,
    LONG_PROMPT,
    MOE_DP,
    ONE_REGION,
    plan_dict,
    three_regions,
    write_stacks,
)

from llmfleet.cli import main
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.fleetplan.replica_request import replica_request
from llmfleet.perf.replica import run_predict
from llmfleet.plan.stacks import read_plan


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_request_is_the_regions_engine_arguments_at_its_peak_per_replica(own_plans) -> None:
    rp = own_plans["three-regions"].region("us-east-1")
    req = replica_request(three_regions(), rp)
    vllm = rp.serving.vllm
    # B200 TP 2, FP8 weights and 16-bit KV, 124 slots, 7.105 req/s per replica (135 / 19:
    # 13 replicas of 13.27 req/s carry the peak with 20 % headroom, 19 the 240 req/s of
    # us-west-2's loss; B200 TP 4, FP8 KV and 135 / 10 before #28's SLO model)
    assert (req.gpu, req.tensor_parallel_size, req.precision, req.kv_cache_dtype) == (
        "B200", 2, "fp8", "auto"
    )
    assert (req.max_model_len, req.max_num_seqs, req.max_num_batched_tokens) == (
        vllm.max_model_len, vllm.max_num_seqs, vllm.max_num_batched_tokens
    )
    assert req.gpu_memory_utilization == vllm.gpu_memory_utilization
    assert (req.input_tokens, req.output_tokens, req.request_rate) == (1000, 300, 7.105)


def test_predict_stack_prints_the_replica_and_the_command_that_reproduces_it(
    capsys, own_stacks
) -> None:
    code, out, _ = _run(capsys, "predict", "--stack", "three-regions", "--region", "us-east-1")
    assert code == 0
    assert out.startswith("chat-three us-east-1: p6-b200.48xlarge (8 x B200), the replica of ")
    [command] = [line for line in out.splitlines() if "reproduce without the stack:" in line]
    argv = shlex.split(command.split("reproduce without the stack: ")[1])[1:]
    assert argv[:2] == ["predict", "--model"]
    _, by_flags, _ = _run(capsys, *argv, "--json")
    _, by_stack, _ = _run(
        capsys, "predict", "--stack", "three-regions", "--region", "us-east-1", "--json"
    )
    assert json.loads(by_flags) == json.loads(by_stack)
    plan = three_regions()
    rp = build_fleet_plan(plan).region("us-east-1")
    stack = json.loads(by_stack)
    # predict adds the shipped band around the prediction (#29): ITL and TTFT each p10-p90
    assert set(stack.pop("ranges")) == {"itl_ms", "output_tokens_per_s", "ttft_ms"}
    core = run_predict(replica_request(plan, rp)).model_dump(mode="json")
    assert core.pop("ranges") is None
    assert stack == core


def test_a_one_region_plan_needs_no_region_and_the_load_may_be_changed(
    capsys, own_stacks
) -> None:
    code, out, _ = _run(capsys, "predict", "--stack", "one-region", "--request-rate", "1",
                        "--json")
    # the rate comes back through the running batch's fixed point (batch / (output x
    # period)): equal to the asked rate up to float rounding
    assert code == 0 and json.loads(out)["requests_per_s"] == pytest.approx(1.0, rel=1e-12)


def test_engine_flags_with_a_stack_and_a_missing_region_are_refused(capsys, own_stacks) -> None:
    code, _, err = _run(capsys, "predict", "--stack", "three-regions", "--region", "us-east-1",
                        "--gpu", "H100")
    assert code == 2 and "--gpu: predict --stack takes it from the plan's replica" in err
    code, _, err = _run(capsys, "predict", "--stack", "three-regions")
    assert code == 2 and "--region = None: chat-three has 3 regions: name one of" in err
    code, _, err = _run(capsys, "predict", "--stack", "three-regions", "--region", "us-east-2")
    assert code == 2 and "--region = 'us-east-2'" in err


def test_predict_without_a_stack_still_needs_model_gpu_and_lengths(capsys) -> None:
    code, _, err = _run(capsys, "predict", "--model", "Qwen3-0.6B")
    assert code == 2 and "predict needs --gpu, --input-tokens, --output-tokens" in err


LAYOUT_STACKS = {
    "tp": ONE_REGION,
    "pp": plan_dict(**FRONTIER),
    "dp-ep": plan_dict(**MOE_DP),
    "disaggregated": plan_dict(**LONG_PROMPT),
    "calibrated": plan_dict(**GPT_OSS_TP1),
    "pessimistic": plan_dict(**GPT_OSS_TP1, confidence="pessimistic"),
    "prefix": {**ONE_REGION, "edge": {"balancing": "prefix_aware"},
               "traffic": {**ONE_REGION["traffic"], "peak_requests_per_s": 24,
                           "shared_prefix_tokens": 400, "turns": 4, "think_time_s": 30}},
}
"""One stack per layout (TP, PP, DP + EP, disaggregated), a calibrated server sized at
either confidence, and a replica sized with a prefix cache behind prefix-aware balancing."""


@pytest.fixture
def layout_stacks(tmp_path, monkeypatch) -> Path:
    from llmfleet import cli

    folder = write_stacks(tmp_path / "stacks", LAYOUT_STACKS)
    monkeypatch.setattr(cli, "read_plan", lambda env: read_plan(env, folder))
    return folder


def _reproduced(capsys, env: str) -> tuple[str, dict, dict]:
    """predict --stack's text, its JSON, and the JSON of the command it prints."""
    code, text, _ = _run(capsys, "predict", "--stack", env)
    assert code == 0
    [line] = [x for x in text.splitlines() if "reproduce without the stack:" in x]
    argv = shlex.split(line.split("reproduce without the stack: ")[1])[1:]
    _, by_stack, _ = _run(capsys, "predict", "--stack", env, "--json")
    code, by_flags, err = _run(capsys, *argv, "--json")
    assert code == 0, err
    return text, json.loads(by_stack), json.loads(by_flags)


@pytest.mark.parametrize("env", list(LAYOUT_STACKS))
def test_the_printed_command_reproduces_predict_stack_for_every_layout(
    env, capsys, layout_stacks
) -> None:
    _, by_stack, by_flags = _reproduced(capsys, env)
    assert by_flags == by_stack


@pytest.mark.parametrize("env", list(LAYOUT_STACKS))
def test_predict_stack_reads_the_plans_replica_record(env, capsys, layout_stacks) -> None:
    # The memory and layout predict --stack shows are the record's, and its header line is
    # the plan's own prediction at the peak, computed from the record.
    text, by_stack, _ = _reproduced(capsys, env)
    plan = read_plan(env, layout_stacks)
    rp = build_fleet_plan(plan).regions[0]
    rec, p = rp.replica, rp.predicted
    assert by_stack["kv_cache_tokens"] == rec.memory.kv_cache_tokens == p.kv_cache_tokens
    assert (by_stack["tensor_parallel_size"], by_stack["pipeline_parallel_size"]) == (
        rec.layout.tensor_parallel_size, rec.layout.pipeline_parallel_size
    )
    assert (by_stack["data_parallel_size"], by_stack["expert_parallel"]) == (
        rec.layout.data_parallel_size, rec.layout.expert_parallel
    )
    assert by_stack["gpus"] == rec.layout.gpus and by_stack["nodes"] == rec.layout.nodes_per_replica
    assert f"TTFT p{plan.slo.percentile:g} {p.ttft_ms:g} ms" in text
    assert f"ITL ({plan.slo.itl}) {p.itl_ms:g} ms" in text


def test_a_pipeline_replica_across_two_nodes_is_predicted_as_it_runs(capsys, layout_stacks):
    # Llama-3.1-405B bf16 at TP 8 x PP 2 on two p5.48xlarge: before the record, predict
    # --stack dropped PP and answered "does not fit" (94.5 GiB of weights per GPU at TP 8).
    text, by_stack, _ = _reproduced(capsys, "pp")
    assert "--pipeline-parallel-size 2" in text and "does not fit" not in text
    assert by_stack["fits"] and by_stack["weights_gib_per_gpu"] == pytest.approx(47.25, abs=0.01)
    # 21.94 GiB of KV a GPU after a 1.12 GiB activation peak: the sampler's logits of 204
    # slots (max_num_seqs) beside a 512-token budget (749,216 tokens after 0.56 GiB for
    # 611-token steps before #28's SLO model)
    assert by_stack["kv_cache_tokens"] == 730_304


def test_a_calibrated_replica_is_reproduced_with_its_file_and_confidence(
    capsys, layout_stacks
) -> None:
    text, by_stack, _ = _reproduced(capsys, "pessimistic")
    assert "--calibration stacks/calibrations/gpt-oss-120b-b200-tp1.json" in text
    assert "--confidence pessimistic" in text
    assert by_stack["calibration"] == "stacks/calibrations/gpt-oss-120b-b200-tp1.json"
    _, expected, _ = _reproduced(capsys, "calibrated")
    assert by_stack["itl_ms"] > expected["itl_ms"]  # the slower, pessimistic step


def test_a_replica_sized_with_a_prefix_cache_is_predicted_among_its_regions_replicas(
    capsys, layout_stacks
) -> None:
    """The region's 4 replicas behind its 2 prefix-aware routers at its peak (24 req/s), the
    plan's 4-turn conversations sharing 400 tokens: the printed command carries the fleet
    flags and the JSON the cache's hit rate."""
    text, by_stack, _ = _reproduced(capsys, "prefix")
    assert ("--request-rate 24 --replicas 4 --balancing prefix-aware --turns 4 "
            "--shared-prefix-tokens 400 --think-time-s 30 --router-replicas 2") in text
    assert by_stack["replicas"] == 4 and by_stack["requests_per_s"] == pytest.approx(24)
    assert 0.4 < by_stack["prefix_cache_hit_rate"] < 1
