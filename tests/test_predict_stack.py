"""`llmfleet predict --stack ENV --region R`: a plan's own replica, with its engine
arguments, at the region's peak per replica, and the flags that reproduce it."""

import json
import shlex

from plans import three_regions

from llmfleet.cli import main
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.fleetplan.replica_request import replica_request
from llmfleet.perf.replica import run_predict


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_request_is_the_regions_engine_arguments_at_its_peak_per_replica(own_plans) -> None:
    rp = own_plans["three-regions"].region("us-east-1")
    req = replica_request(three_regions(), rp)
    vllm = rp.serving.vllm
    # B200 TP 4, FP8 weights and KV, 198 sequences, 13.5 req/s per replica (135 / 10; 190 and
    # 135 / 11 before #29's refit)
    assert (req.gpu, req.tensor_parallel_size, req.precision, req.kv_cache_dtype) == (
        "B200", 4, "fp8", "fp8"
    )
    assert (req.max_model_len, req.max_num_seqs, req.max_num_batched_tokens) == (
        vllm.max_model_len, vllm.max_num_seqs, vllm.max_num_batched_tokens
    )
    assert req.gpu_memory_utilization == vllm.gpu_memory_utilization
    assert (req.input_tokens, req.output_tokens, req.request_rate) == (1000, 300, 13.5)


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
    assert code == 0 and json.loads(out)["requests_per_s"] == 1.0


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
