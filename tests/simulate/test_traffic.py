"""The day's traffic: the diurnal curve from the plan's day profile, the spike, and where a
lost region's users go while DNS moves them."""

import numpy as np
import pytest

from llmfleet.plan.stacks import read_plan
from llmfleet.simulate.scenario import DAY_S, DayShape, Loss, Scenario, Spike, parse_day
from llmfleet.simulate.traffic import RouteState, demand, fleet_rate, level

T = np.arange(0, DAY_S, 1.0)


def test_the_day_carries_the_requests_the_plans_day_profile_costs(stack_plans) -> None:
    # prod: 8 h at 300 req/s, 8 h at 60, 8 h of ramps costed halfway (180): 180 req/s on average
    plan = read_plan("prod")
    rate = fleet_rate(plan, T, parse_day("plan", plan.day_profile))
    assert rate.mean() == pytest.approx((8 * 300 + 8 * 60 + 8 * 180) / 24, rel=1e-4)


def test_the_peak_is_centred_on_14_and_the_trough_on_02() -> None:
    day = DayShape(profile="plan", peak_hours=8, trough_hours=8)
    at = level(np.array([10, 14, 17.99, 22, 2, 5.99]) * 3600.0, day)
    assert list(at) == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert level(np.array([8 * 3600.0]), day)[0] == pytest.approx(0.5)  # mid-ramp


def test_the_curve_has_no_step_between_plateaus() -> None:
    day = DayShape(profile="plan", peak_hours=6, trough_hours=10)
    assert np.abs(np.diff(level(T, day))).max() < 1e-3  # per second: smooth ramps


def test_a_spike_multiplies_every_region_for_its_minutes() -> None:
    plan = read_plan("prod")
    from llmfleet.fleetplan.fleet import build_fleet_plan

    fp = build_fleet_plan(plan)
    day = parse_day("peak", plan.day_profile)
    spike = Spike(percent=50, start_s=14 * 3600, minutes=30)
    got = demand(plan, fp, Scenario(day=day, spike=spike), np.array([13.99, 14.0, 14.49]) * 3600)
    # us-east-1 holds 45 % of 300 req/s: 135, and 202.5 during the spike
    assert list(got.served["us-east-1"]) == pytest.approx([135.0, 202.5, 202.5])


def test_dns_moves_a_lost_regions_users_after_detection_over_the_ttl() -> None:
    # prod: 3 failed checks 10 s apart (30 s), then resolvers drop the answer over 60 s
    route = RouteState(detection_s=30, ttl_s=60)
    assert list(route.moved(np.array([0.0, 29.0, 60.0, 90.0, 200.0]))) == [0, 0, 0.5, 1, 1]
    assert route.recovery_s == 90


def test_a_lost_regions_users_fail_until_moved_then_reach_the_nearest_survivor(
    stack_plans,
) -> None:
    plan, fp = read_plan("prod"), stack_plans["prod"]
    day = parse_day("peak", plan.day_profile)
    loss = Loss(region="us-east-1", at_s=14 * 3600)
    at = 14 * 3600 + np.array([-1.0, 10.0, 60.0, 95.0])
    got = demand(plan, fp, Scenario(day=day, loss=loss), at)
    assert list(got.failed["us-east-1"]) == pytest.approx([0, 135, 67.5, 0])
    # us-west-2 (35 %: 105 req/s) absorbs us-east-1's 135 as DNS moves them (nearest survivor)
    assert list(got.served["us-west-2"]) == pytest.approx([105, 105, 172.5, 240])
    assert list(got.served["eu-north-1"]) == pytest.approx([60, 60, 60, 60])
