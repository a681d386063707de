"""`llmfleet drill` says what an operator runs while regions are lost: each survivor's own
stack (it touches that region only), the lost regions' stacks and the global stack left
alone."""

from __future__ import annotations

import pytest
from plans import make_plan

from llmfleet.drill import drill, drill_text
from llmfleet.fleetplan.fleet import build_fleet_plan

DNS = {"zone_name": "example.com", "record_name": "llm.example.com"}
THREE = [
    {"name": "us-east-1", "traffic_share": 0.5},
    {"name": "us-west-2", "traffic_share": 0.3, "vpc_cidr": "10.41.0.0/16"},
    {"name": "eu-north-1", "traffic_share": 0.2, "vpc_cidr": "10.42.0.0/16"},
]


def test_survivors_with_warm_floors_need_no_change_and_the_rest_is_left_alone() -> None:
    report = drill(make_plan(regions=THREE, dns=DNS), ["us-east-1"], environment="qa")
    assert report.passed
    steps = {s.stack: s for s in report.operator_commands}
    # Survivors in rollout order (smallest share first), then the lost region and global.
    assert list(steps) == ["qa.eu-north-1", "qa.us-west-2", "qa.us-east-1", "qa.global"]
    assert [s.action for s in steps.values()] == ["none", "none", "leave", "leave"]
    assert "pulumi up -s qa.us-west-2 touches us-west-2 only" in steps["qa.us-west-2"].change


def test_a_short_warm_floor_is_raised_in_the_plan_and_applied_to_the_survivor_only() -> None:
    # 60 req/s on H100: us-west-2 (35 %, 21 req/s) absorbs us-east-1's 27 req/s, 48 req/s in
    # all; an H100 replica carries 20.57 req/s in a loss (13.0 before #29's refit), so it must
    # reach 48 / 20.57 -> 3, and half the absorbed load warm is (21 + 13.5) / 20.57 -> 2:
    # short by one.
    plan = make_plan(
        regions=THREE, dns=DNS, routing={"warm_share": 0.5},
        **{"traffic.peak_requests_per_s": 60.0, "allowed.gpus": ["H100"]},
    )
    report = drill(plan, ["us-east-1"], environment="qa")
    short = [s for s in report.survivors if not s.warm_floor_holds]
    assert [(s.region, s.replicas_warm, s.replicas_must_reach) for s in short] == [
        ("us-west-2", 2, 3)
    ]
    for survivor in short:
        [step] = [s for s in report.operator_commands if s.stack == f"qa.{survivor.region}"]
        assert (step.action, step.command) == ("up", f"pulumi up -s qa.{survivor.region}")
        assert "routing.warm_share: 1.0 (now 0.5)" in step.change


def test_a_loss_beyond_the_plan_says_which_field_would_carry_it() -> None:
    report = drill(make_plan(regions=THREE, dns=DNS), ["us-east-1", "us-west-2"], environment="qa")
    [survivor] = report.operator_commands[:1]
    assert survivor.stack == "qa.eu-north-1" and survivor.action == "up"
    assert "routing.survive_region_losses: 2 (now 1)" in survivor.change


def test_the_drill_text_lists_the_operators_steps() -> None:
    text = drill_text(drill(make_plan(regions=THREE, dns=DNS), ["us-west-2"], environment="qa"))
    assert "operator, while us-west-2 is lost" in text
    assert "leave qa.us-west-2:" in text and "leave qa.global:" in text


def test_losing_route53s_home_region_says_how_a_survivor_avoids_its_control_plane() -> None:
    plan = make_plan(regions=THREE, dns=DNS)
    east = drill(plan, ["us-east-1"], environment="qa").operator_commands[0]
    assert "set dns.zone_id to skip that call" in east.change
    west = drill(plan, ["us-west-2"], environment="qa").operator_commands[0]
    assert "zone_id" not in west.change
    with_id = make_plan(regions=THREE, dns={**DNS, "zone_id": "Z0123456789ABC"})
    [first, *_] = drill(with_id, ["us-east-1"], environment="qa").operator_commands
    assert "zone_id" not in first.change


def test_a_calibrated_plans_survivors_are_drilled_on_the_fleets_own_sizing() -> None:
    # gpt-oss-120b on B200 with its calibration file: the drill reads the same (calibrated)
    # choice as the FleetPlan, so each survivor's capacity is its max replicas at the
    # FleetPlan's own rate in a loss.
    plan = make_plan(
        regions=[{**THREE[0], "traffic_share": 0.6}, {**THREE[1], "traffic_share": 0.4}],
        dns=DNS,
        model={"id": "gpt-oss-120b", "precision": "mxfp4", "kv_cache_dtype": "fp8"},
        allowed={"gpus": ["B200"]}, max_model_len=16384,
        calibration=["stacks/calibrations/gpt-oss-120b-b200-tp1.json"],
        **{"traffic.input_tokens": {"mean": 2000, "p95": 6000},
           "traffic.output_tokens": {"mean": 1000, "p95": 3000}},
    )
    fp = build_fleet_plan(plan)
    [survivor] = drill(plan, ["us-east-1"]).survivors
    rp = fp.region(survivor.region)
    assert rp.predicted.calibration is not None
    assert survivor.capacity_requests_per_s == pytest.approx(
        rp.replicas.max * rp.predicted.requests_per_s_in_loss, rel=1e-3
    )


def test_a_survivors_itl_key_says_it_is_at_the_percentile_and_keeps_its_old_name() -> None:
    """`itl_at_percentile_ms` (#31) with `itl_ms` kept as its alias in the JSON."""
    report = drill(make_plan(regions=THREE, dns=DNS), ["us-east-1"], environment="qa")
    for s in report.model_dump(mode="json")["survivors"]:
        assert s["itl_ms"] == s["itl_at_percentile_ms"] is not None
