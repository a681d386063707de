"""A region's replicas as a fluid on the plan's own SLO model: the steady replica tabulated
by rate (`perf.latency` on the replica record's engine), a backlog when the rate passes what
the replicas keep up with."""

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
from llmfleet.perf.latency import at_rate
from llmfleet.perf.step import NO_CORRECTION
from llmfleet.plan.stacks import parse_plan
from llmfleet.simulate.engine import Pool, inside_share, replica_models
from llmfleet.simulate.run import report_simulation


def test_a_calibrated_region_is_simulated_on_the_corrected_step_model() -> None:
    # gpt-oss-120b on B200 TP 1 with its calibration file: the simulator's engine is the
    # search's own, the file's factors included (not the shipped constants').
    plan = make_plan(**GPT_OSS_TP1)
    fp = build_fleet_plan(plan)
    [(choice, _)] = search_setup(plan).choose(plan)
    [model] = replica_models(plan, fp).values()
    assert model.table.engine == choice.sizing.engine
    assert model.table.engine.step_model.correction != NO_CORRECTION


def test_a_calibrated_region_is_simulated_with_its_calibrated_request_handling() -> None:
    # The file scales vLLM's 39.74 ms of request handling by 0.8113: 32.2 ms before the first
    # token, as the search counts it. The factor is the stack calibration's as refitted after
    # #29's band by architecture.
    plan = make_plan(**GPT_OSS_TP1)
    [model] = replica_models(plan, build_fleet_plan(plan)).values()
    assert model.table.engine.step_model.ttft_overhead_s == pytest.approx(
        0.03974 * 0.8113, abs=1e-6)


@pytest.mark.parametrize("env", ["three-regions", "one-region"])
def test_each_region_is_simulated_on_the_engine_the_search_sized(env, own_plans) -> None:
    plan = parse_plan(OWN_STACKS[env])
    chosen = [choice.sizing.engine for choice, _ in search_setup(plan).choose(plan)]
    assert [m.table.engine for m in replica_models(plan, own_plans[env]).values()] == chosen


def test_a_pipeline_parallel_region_is_simulated_across_its_stages() -> None:
    # Llama-3.1-405B at bf16 on p5.48xlarge: TP 8 x PP 2 over two nodes (issue #24).
    plan = frontier_plan()
    [(choice, _)] = search_setup(plan).choose(plan)
    [model] = replica_models(plan, build_fleet_plan(plan)).values()
    assert choice.layout.pp == model.table.engine.pipeline == 2


def test_at_a_constant_rate_the_running_batch_settles_where_the_slo_model_puts_it(
    own_plans,
) -> None:
    # 3 req/s a replica, held for ten minutes: the fluid's batch relaxes to the tabulated
    # steady batch at that rate, which is Little's law over the mean period.
    plan = three_regions()
    model = replica_models(plan, own_plans["three-regions"])["us-west-2"]
    for step_s in (1.0, 5.0):
        pool = Pool(model, step_s, 99)
        for _ in range(int(600 / step_s)):
            pool.advance(10 * 3.0, 10)
        j = model.index(3.0)
        assert pool.running == pytest.approx(float(model.running[j]), rel=1e-6)
        assert pool.queued == 0
    point = at_rate(model.table, float(model.rates[j]), 99)
    w = model.table.workload
    little = point.admitted_rate * (w.output_mean - 1) * point.lane.period_s
    assert point.running == pytest.approx(little, rel=1e-4)


def test_above_what_the_replicas_keep_up_with_a_backlog_grows_and_waits_grow_with_it(
    own_plans,
) -> None:
    plan = three_regions()
    model = replica_models(plan, own_plans["three-regions"])["eu-north-1"]
    pool = Pool(model, 2.5, 99)
    rate = 1.2 * model.saturation_rate
    for _ in range(240):  # 10 minutes at 120 % of what a replica keeps up with
        pool.advance(rate, 1)
    assert pool.running == pytest.approx(float(model.running[-1]), rel=1e-3)
    assert pool.queued == pytest.approx(0.2 * model.saturation_rate * 600, rel=1e-6)
    assert pool.trace.backlog_wait_s[-1] > pool.trace.backlog_wait_s[-100] > 30


def test_a_quiet_replica_serves_everyone_inside_and_a_backlog_past_the_target_no_one(
    own_plans,
) -> None:
    plan = three_regions()
    model = replica_models(plan, own_plans["three-regions"])["us-east-1"]
    pool = Pool(model, 2.5, 99)
    for _ in range(100):
        pool.advance(0.5, 1)  # a tenth of what the replica was sized for
    for _ in range(100):
        pool.advance(4 * model.saturation_rate, 1)  # the backlog's wait passes the target
    share, itl_ok = inside_share(model, pool.trace)
    assert share[99] > 0.9999 and itl_ok[:100].all()
    assert share[-1] == 0.0 and pool.trace.backlog_wait_s[-1] > plan.slo.ttft_ms / 1000
    assert float(share[:100].min()) == pytest.approx(1.0, abs=1e-4)


def test_at_the_rate_a_replica_carries_in_a_loss_the_slots_are_full_at_most_1_minus_p(
    own_plans,
) -> None:
    # The three-region plan's survivors carry their SLO-limit rate in a loss: an arrival
    # finds every slot taken at most 1 % of the time (p99), and at the saturation rate far
    # more often.
    plan, fp = three_regions(), own_plans["three-regions"]
    for name, m in replica_models(plan, fp).items():
        rp = fp.region(name)
        assert at_rate(m.table, rp.predicted.requests_per_s_in_loss, 99).slot_full_chance \
            <= 0.01 + 1e-6
        assert at_rate(m.table, m.saturation_rate * 0.999, 99).slot_full_chance > 0.05


def test_a_disaggregated_region_is_refused_not_simulated_as_one_engine() -> None:
    plan = long_prompt_plan()
    fp = build_fleet_plan(plan)
    assert fp.regions[0].disaggregation is not None
    with pytest.raises(PlanError, match="allowed.disaggregated.*colocated replicas only"):
        replica_models(plan, fp)
    report = render.render_stack(fp, None, report_simulation(plan, fp, fp.name))[render.REPORT]
    assert "Not simulated: us-east-1 serves disaggregated" in report


def test_the_tabulated_rates_reach_the_saturation_rate_evenly() -> None:
    plan = make_plan()
    [model] = replica_models(plan, build_fleet_plan(plan)).values()
    steps = np.diff(model.rates)
    assert model.rates[-1] == pytest.approx(model.saturation_rate)
    assert steps == pytest.approx(np.full(len(steps), model.saturation_rate / len(steps)))
