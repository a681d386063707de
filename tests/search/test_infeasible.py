"""An infeasible plan is explained by the binding constraint of the lever setting that came
closest, and the nearest feasible change is a change the plan has not already made."""

import re

import pytest
from plans import make_plan, plan_dict

from llmfleet.errors import InfeasibleError
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.plan.stacks import parse_plan
from llmfleet.search.optimizer import allowed_instances


def _error(plan) -> InfeasibleError:
    with pytest.raises(InfeasibleError) as e:
        build_fleet_plan(plan)
    return e.value


def test_each_candidate_shows_the_lever_setting_that_came_closest_not_the_last_tried() -> None:
    # Llama-3.1-8B on A10G with the KV dtype left to the search: FP8 KV is not planned on
    # Ampere, but that is not why g5.12xlarge at TP 2 fails: a step carrying the smallest
    # (128-token) chunk beside one sequence already takes 28.1 ms of a 20 ms token gap
    # (33.1 ms of 25 before #29's refit, when 25 ms was out of reach too).
    plan = parse_plan(
        plan_dict(
            model={"id": "Llama-3.1-8B-Instruct"},
            **{"slo.itl_ms": 20, "slo.ttft_ms": 800, "allowed.gpus": ["A10G"]},
        )
    )
    err = _error(plan)
    [line] = [r for r in err.reasons if r.startswith("g5.12xlarge TP 2 ")]
    assert "(fp8, KV auto)" in line
    assert "a step carrying the smallest chunk (128 tokens) beside one sequence takes 28.1 ms" in (
        line
    )
    assert not any("FP8 KV cache is planned only" in r for r in err.reasons)
    # the closest of all, and by how much it misses, leads the message
    assert "The closest, g5.48xlarge TP 8 (fp8, KV auto), misses by 4%." in err.summary
    # (995 ms since a request waits for the step under way, #23, at the 25 ms gap)
    assert err.nearest.startswith("relax slo.ttft_ms to at least 916 ms or relax slo.itl_ms to")


def test_a_nearest_change_never_allows_an_instance_the_plan_already_allows() -> None:
    # Mixtral in FP8 in eu-west-1 on Ampere: every candidate needs FP8 tensor cores; it used
    # to say "allow g5.24xlarge", which the plan allowed.
    plan = make_plan(
        model={"id": "Mixtral-8x7B-Instruct-v0.1", "precision": "fp8"},
        max_model_len=8192,
        regions=[{"name": "eu-west-1", "traffic_share": 1.0}],
        allowed={"gpus": ["A10G", "A100-40GB", "A100-80GB", "L40S", "H100"]},
    )
    err = _error(plan)
    assert err.nearest == "set model.precision: bf16"
    assert "FP8 MoE weights need FP8 tensor cores" in err.reasons[0]


@pytest.mark.parametrize(
    "changes",
    [
        {"slo.ttft_ms": 20, "allowed.gpus": ["L4"]},
        {"slo.itl_ms": 0.5, "allowed.gpus": ["H100"]},
        {"model.id": "Llama-3.1-405B-Instruct", "allowed.instance_types": ["p5.48xlarge"]},
        {"slo.itl_ms": 20, "slo.ttft_ms": 600, "allowed.gpus": ["A10G", "L4"]},
    ],
)
def test_every_instance_a_nearest_change_allows_is_not_allowed_yet(changes) -> None:
    plan = make_plan(**changes)
    err = _error(plan)
    allowed = {i.instance_type for i in allowed_instances(plan)}
    named = set(re.findall(r"allow ([a-z0-9-]+\.[a-z0-9]+)", err.nearest))
    assert named and not named & allowed, err.nearest


def test_an_allowed_instance_without_a_price_is_named_as_a_price_to_add() -> None:
    # eu-north-1 offers p6-b200.48xlarge and p5.4xlarge with no known price: not sized, so
    # the largest sized instance is p5.48xlarge, whose replicas across two nodes miss the SLO
    # (before #29's refit they missed it by more than its 640 GiB missed the weights), and
    # one change is to price them
    plan = make_plan(
        **{"model.id": "Llama-3.1-405B-Instruct", "allowed.gpus": ["B200", "H100"]},
        regions=[{"name": "eu-north-1", "traffic_share": 1.0}],
    )
    err = _error(plan)
    assert "The closest, p5.48xlarge TP 8, misses by 31%." in err.summary
    assert err.nearest.endswith(
        "or add plan.prices for p5.4xlarge, p6-b200.48xlarge (allowed and offered in "
        "eu-north-1 without a known price, so not sized)"
    )


def test_an_slo_no_gpu_can_meet_says_no_faster_gpu_is_offered() -> None:
    # a 2 ms token gap on B200, the fastest GPU: the batch-1 floor is 2.3 ms, and no other
    # instance type in us-east-1 has a faster GPU; the nearest change never names a slower
    # one (it used to say "allow g5.12xlarge": four A10Gs, each slower)
    err = _error(make_plan(**{"slo.itl_ms": 2, "allowed.gpus": ["B200"]}))
    assert err.nearest.endswith(
        "; no instance type offered in us-east-1 beyond those allowed has a faster GPU than "
        "B200 (8 or more of it)"
    )
    assert "allow " not in err.nearest.split(";")[0]


def test_an_slo_a_faster_gpu_meets_names_it() -> None:
    # an 8 ms gap on A10G (floor 13.9 ms): the nearest change allows A100s, faster per GPU
    err = _error(make_plan(**{"slo.itl_ms": 8, "allowed.gpus": ["A10G"]}))
    assert "allow p4d.24xlarge (8 x A100-40GB)" in err.nearest
    assert "g5." not in err.nearest.split("allow")[-1]
