"""A region's replicas as a fluid on the plan's step-time model, and the analytic waits."""

import math

import numpy as np
import pytest
from plans import (
    GPT_OSS_TP1,
    OWN_STACKS,
    frontier_plan,
    long_prompt_plan,
    make_plan,
    three_regions,
)

from llmfleet.errors import PlanError
from llmfleet.fleetplan.fleet import build_fleet_plan, search_setup
from llmfleet.outputs import render
from llmfleet.perf.step import NO_CORRECTION
from llmfleet.plan.stacks import parse_plan, read_plan
from llmfleet.simulate.engine import (
    Pool,
    inside_share,
    replica_models,
    step_models,
    wait_tail,
)


def test_a_calibrated_region_is_simulated_on_the_corrected_step_model() -> None:
    # gpt-oss-120b on B200 TP 1 with its calibration file: the simulator's step model is the
    # search's own, the file's factors included (not the shipped constants').
    plan = make_plan(**GPT_OSS_TP1)
    fp = build_fleet_plan(plan)
    [(choice, _)] = search_setup(plan).choose(plan)
    [model] = step_models(plan, fp).values()
    assert model == choice.step_model
    assert model.correction != NO_CORRECTION


def test_a_calibrated_region_is_simulated_with_its_calibrated_request_handling() -> None:
    # The file scales vLLM's 39.74 ms of request handling by 0.8113: 32.2 ms before the first
    # token, as the search counts it (the simulator added the shipped 39.74 ms before). The
    # factor is the stack calibration's as refitted after #29's band by architecture.
    plan = make_plan(**GPT_OSS_TP1)
    [model] = replica_models(plan, build_fleet_plan(plan)).values()
    assert model.ttft_overhead_s == model.step_model.ttft_overhead_s
    assert model.ttft_overhead_s == pytest.approx(0.03974 * 0.8113, abs=1e-6)


@pytest.mark.parametrize("env", ["three-regions", "one-region"])
def test_each_region_is_simulated_on_the_step_model_the_search_sized_it_with(
    env, own_plans
) -> None:
    plan = parse_plan(OWN_STACKS[env])
    chosen = [choice.step_model for choice, _ in search_setup(plan).choose(plan)]
    assert list(step_models(plan, own_plans[env]).values()) == chosen


def test_a_pipeline_parallel_region_is_simulated_across_its_stages() -> None:
    # Llama-3.1-405B at bf16 on p5.48xlarge: TP 8 x PP 2 over two nodes (issue #24).
    plan = frontier_plan()
    fp = build_fleet_plan(plan)
    [(choice, _)] = search_setup(plan).choose(plan)
    [model] = step_models(plan, fp).values()
    assert choice.layout.pp > 1 and model.parallel.pp == choice.layout.pp
    assert model == choice.step_model


def test_at_a_constant_rate_the_running_batch_is_rate_times_a_requests_life(stack_plans) -> None:
    # Little's law, at any step length: the implicit step settles exactly there.
    plan = read_plan("prod")
    model = replica_models(plan, stack_plans["prod"])["us-west-2"]
    for step_s in (1.0, 5.0):
        pool = Pool(model, step_s, 99)
        for _ in range(int(600 / step_s)):
            pool.advance(10 * 20.0, 10)  # 20 req/s per replica
        life = model.output_mean * pool.mean_step_s / model.tokens_per_step
        assert pool.running == pytest.approx(20.0 * life, rel=1e-6)
        assert pool.queued == 0


def test_above_what_the_batch_completes_a_backlog_grows_and_waits_grow_with_it(
    stack_plans,
) -> None:
    plan = read_plan("prod")
    model = replica_models(plan, stack_plans["prod"])["eu-north-1"]
    pool = Pool(model, 2.5, 99)
    rate = 1.2 * stack_plans["prod"].region("eu-north-1").predicted.requests_per_s
    for _ in range(240):  # 10 minutes at 120 % of what a full batch completes
        pool.advance(rate, 1)
    assert pool.running == pytest.approx(model.batch_cap, abs=0.5)
    assert pool.queued > 0.1 * rate * 600  # a sixth of the arrivals have nowhere to run
    assert pool.trace.backlog_wait_s[-1] > pool.trace.backlog_wait_s[-100] > 30


def test_two_waits_add_as_their_closed_form_says() -> None:
    x = np.array([0.0, 0.5, 2.0])
    zero, one = np.zeros(3), np.ones(3)
    # Only the second wait: its own tail.
    assert list(wait_tail(x, zero, one, 0.3 * one, 2 * one)) == pytest.approx(
        list(0.3 * np.exp(-2 * x)))
    # Both certain, equal rates: an Erlang-2 tail, (1 + r x) e^(-r x).
    assert list(wait_tail(x, one, 3 * one, one, 3 * one)) == pytest.approx(
        list((1 + 3 * x) * np.exp(-3 * x)))
    # Both certain, rates 1 and 2: (2 e^-x - e^-2x).
    assert list(wait_tail(x, one, one, one, 2 * one)) == pytest.approx(
        list(2 * np.exp(-x) - np.exp(-2 * x)))


def test_a_quiet_replica_serves_everyone_inside_and_a_backlog_past_the_target_no_one(
    stack_plans,
) -> None:
    plan = read_plan("prod")
    model = replica_models(plan, stack_plans["prod"])["us-east-1"]
    pool = Pool(model, 2.5, 99)
    for _ in range(100):
        pool.advance(5.0, 1)  # 5 req/s on a replica sized for 19.4
    for _ in range(100):
        pool.advance(40.0, 1)  # far above what it completes: the backlog wait passes 500 ms
    share, itl_ok = inside_share(model, pool.trace, 0.5, 0.04, "token_gap", 99)
    assert share[99] > 0.9999 and itl_ok.all()
    assert share[-1] == 0.0 and pool.trace.backlog_wait_s[-1] > 0.5
    assert math.isclose(float(share[:100].min()), 1.0, abs_tol=1e-4)


def test_at_the_rate_stage_4_sizes_a_loss_for_the_simulated_batch_is_rarely_full(
    own_plans,
) -> None:
    # The three-region plan's survivors: the simulator's own chain (every batch, where the
    # search tabulates 33) finds the batch full no more than 1 % of the time (p99) at the
    # rate a replica carries in a loss, and at the SLO-limit rate nearly always.
    plan, fp = three_regions(), own_plans["three-regions"]
    models = replica_models(plan, fp)
    for name in ("us-east-1", "us-west-2"):
        m, rp = models[name], fp.region(name)

        def chance(rate: float, m=m) -> float:
            return m.slot_wait_chance[min(len(m.slot_wait_chance) - 1,
                                          round(rate / m.rate_step))]

        assert chance(rp.predicted.requests_per_s_in_loss) <= 0.011
        assert chance(rp.predicted.requests_per_s) > 0.5


def test_a_disaggregated_region_is_refused_not_simulated_as_one_engine() -> None:
    plan = long_prompt_plan()
    fp = build_fleet_plan(plan)
    assert fp.regions[0].disaggregation is not None
    with pytest.raises(PlanError, match="allowed.disaggregated.*colocated replicas only"):
        replica_models(plan, fp)
    report = render.render_stack(fp, None, plan)[render.REPORT]
    assert "Not simulated: us-east-1 serves disaggregated" in report
