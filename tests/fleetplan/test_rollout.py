"""The rollout: regions in order, canary first, and the gate that stops it; the capacity a
region needs before it leaves DNS."""

from __future__ import annotations

from plans import make_plan

from llmfleet.fleetplan.entry_point import build_capacity_check
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.outputs.deploy_order import deploy_order

DNS = {"zone_name": "example.com", "record_name": "llm.example.com"}
THREE = [
    {"name": "us-east-1", "traffic_share": 0.5},
    {"name": "us-west-2", "traffic_share": 0.3, "vpc_cidr": "10.41.0.0/16"},
    {"name": "eu-north-1", "traffic_share": 0.2, "vpc_cidr": "10.42.0.0/16"},
]


def test_without_an_order_the_smallest_share_goes_first() -> None:
    fp = build_fleet_plan(make_plan(regions=THREE, dns=DNS))
    assert fp.rollout.order == ["eu-north-1", "us-west-2", "us-east-1"]
    assert fp.rollout.canary == "eu-north-1"


def test_the_plans_order_is_kept_and_its_first_region_is_the_canary() -> None:
    order = ["us-west-2", "us-east-1", "eu-north-1"]
    fp = build_fleet_plan(make_plan(regions=THREE, dns=DNS, rollout={"order": order}))
    assert (fp.rollout.order, fp.rollout.canary) == (order, "us-west-2")


def test_the_canary_bakes_until_a_change_slowing_every_request_fires_its_fast_alert() -> None:
    fp = build_fleet_plan(make_plan(regions=THREE, dns=DNS))
    # p99: 1 % budget x 14.4 = 14.4 % of the 1 h window = 518.4 s, then `for: 2m` = 638.4 s,
    # rounded up to whole minutes.
    assert fp.rollout.bake_s == 660
    assert fp.rollout.gate_alerts == ["TtftBudgetBurnFast", "ItlBudgetBurnFast"]


def test_a_single_region_has_no_canary_bake() -> None:
    fp = build_fleet_plan(make_plan(dns=DNS))
    assert (fp.rollout.order, fp.rollout.bake_s, fp.rollout.gate_alerts) == (["us-east-1"], 0, [])


def test_each_region_stack_waits_its_own_predicted_cold_start_and_global_goes_last() -> None:
    plan = make_plan(regions=THREE, dns=DNS)
    fp = build_fleet_plan(plan)
    order = deploy_order("qa", plan, fp)
    assert [s.stack for s in order.steps] == [
        "qa.eu-north-1",
        "qa.us-west-2",
        "qa.us-east-1",
        "qa.global",
    ]
    for step in order.steps[:-1]:
        assert step.region is not None
        assert step.ready_timeout_s is not None
        assert step.ready_timeout_s >= fp.region(step.region).cold_start.total_s
        assert step.ready_timeout_s < fp.region(step.region).cold_start.total_s + 1
    assert [s.bake_s for s in order.steps] == [660, 0, 0, 0]
    assert order.steps[-1].region is None


def test_a_region_leaves_dns_below_what_its_share_of_the_peak_needs() -> None:
    # 135 req/s at 24.312 req/s a replica at the SLO limit: 5.55 -> 6; the floor of 10
    # less one a rollout may take (9) does not cap it.
    check = build_capacity_check("us-east-1", 135, 24.312, 10, 1)
    assert (check.needed_at_peak, check.min_healthy_targets) == (6, 6)
    assert (check.metric_name, check.statistic, check.comparison_operator) == (
        "HealthyHostCount",
        "Minimum",
        "LessThanThreshold",
    )
    # ALB metrics every 60 s + 3 breaching minutes.
    assert check.detection_s == 240


def test_the_floor_stays_below_the_replicas_a_normal_night_runs() -> None:
    # 60 req/s at 12.553: 5 replicas at the peak, but KEDA runs 2 at the trough and a
    # rollout may take 1: above 1 the region would leave DNS every night.
    check = build_capacity_check("eu-north-1", 60, 12.553, 2, 1)
    assert (check.needed_at_peak, check.min_healthy_targets) == (5, 1)
    assert "capped at 1" in check.reason


def test_the_report_states_detection_for_no_replica_and_for_too_few() -> None:
    fp = build_fleet_plan(make_plan(regions=THREE, dns=DNS))
    rec = fp.resilience.recovery
    assert rec is not None
    # 3 failed checks 30 s apart; the capacity alarm's 240 s.
    assert (rec.detection_s, rec.below_capacity_detection_s) == (90, 240)
