"""One number, one home: where two files (or two fields) show one number, they agree.

Checked over every stack in stacks/ and over a plan whose nodes leave free replica slots
(TP leaves slots on a node paid for, so KEDA's ceiling is above the peak's replicas)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from plans import make_plan

from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.outputs import dashboard, karpenter_manifests, render


@pytest.fixture(scope="module")
def slots_plan() -> FleetPlan:
    # 50 req/s on 4-GPU L40S nodes: one replica per GPU, so the ceiling's nodes hold more
    # replica slots than the peak needs (10 replicas on 3 nodes; single-GPU g6e nodes,
    # cheaper since #29's refit, would leave none)
    fp = build_fleet_plan(
        make_plan(
            **{"traffic.peak_requests_per_s": 50, "allowed.instance_types": ["g6e.12xlarge"]}
        )
    )
    rp = fp.regions[0]
    assert rp.nodes.max * rp.replicas_per_node > rp.replicas.desired  # the case under test
    return fp


Where = tuple[str, FleetPlan, RegionPlan]


def _regions(stack_plans: dict[str, FleetPlan], slots_plan: FleetPlan) -> list[Where]:
    fleets = {**stack_plans, "slots": slots_plan}
    return [(f"{env}/{rp.region}", fp, rp) for env, fp in fleets.items() for rp in fp.regions]


def _doc(fp: FleetPlan, rp: RegionPlan, kind: str) -> dict[str, Any]:
    [doc] = [d for d in render.region_manifests(fp, rp) if d["kind"] == kind]
    return doc


def test_the_ceiling_alert_keda_and_the_dashboard_show_one_max(stack_plans, slots_plan) -> None:
    for where, fp, rp in _regions(stack_plans, slots_plan):
        keda_max = _doc(fp, rp, "ScaledObject")["spec"]["maxReplicaCount"]
        assert keda_max == rp.replicas.max, where
        [panel] = [p for p in dashboard.panel_queries(fp, rp) if p[0] == "Replicas"]
        assert dict(panel[2])["max"] == f"vector({keda_max})", where
        rules = [r for g in _doc(fp, rp, "PrometheusRule")["spec"]["groups"] for r in g["rules"]]
        ceiling = [r for r in rules if r.get("alert") == "ReplicasAtCeiling"]
        if rp.replicas.min == rp.replicas.max:
            assert ceiling == [], f"{where}: min = max, the alert would always fire"
        else:
            [rule] = ceiling
            assert re.search(r">= (\d+)$", rule["expr"]).group(1) == str(keda_max), where  # type: ignore[union-attr]


def test_the_autoscaling_reason_states_the_scaledobjects_bounds(stack_plans, slots_plan) -> None:
    # prod us-east-1: "min 19 replicas carry the trough, 19 the peak, max 20 fill the
    # ceiling's nodes ...; KEDA holds 19" beside minReplicaCount 19, maxReplicaCount 20 and
    # fallback.replicas 19 (the reason said "max 19" from the search's count before #31)
    for where, fp, rp in _regions(stack_plans, slots_plan):
        spec = _doc(fp, rp, "ScaledObject")["spec"]
        [said] = [r for r in rp.autoscaling.reasons if "carry the trough" in r]
        found = re.search(
            r"min (\d+) replicas carry the trough, (\d+) the peak, max (\d+) .* KEDA holds (\d+)",
            said,
        )
        assert found, where
        low, peak, high, held = (int(g) for g in found.groups())
        assert (low, high, held) == (
            spec["minReplicaCount"], spec["maxReplicaCount"], spec["fallback"]["replicas"]
        ), where
        assert peak == rp.replicas.desired, where


def test_the_ceiling_alerts_reason_states_kedas_max(stack_plans, slots_plan) -> None:
    for where, fp, rp in _regions(stack_plans, slots_plan):
        keda_max = _doc(fp, rp, "ScaledObject")["spec"]["maxReplicaCount"]
        rules = [r for g in _doc(fp, rp, "PrometheusRule")["spec"]["groups"] for r in g["rules"]]
        for rule in rules:
            if rule.get("alert") == "ReplicasAtCeiling":
                said = re.search(r"max replicas \((\d+), KEDA's maxReplicaCount\)",
                                 rule["annotations"]["description"])
                assert said and int(said.group(1)) == keda_max, where


def test_the_gpu_zones_lead_the_cluster_zones(stack_plans, slots_plan) -> None:
    for where, _, rp in _regions(stack_plans, slots_plan):
        assert rp.cluster_zone_ids[: len(rp.node_zone_ids)] == rp.node_zone_ids, where


def test_zone_names_derive_from_the_pinned_zone_ids() -> None:
    # node_zone_ids pinned out of ID order; names were once read from another table and
    # ignored the pin. us-east-1's GPU zone IDs in order: use1-az1 .. use1-az6 -> a .. f
    fp = build_fleet_plan(
        make_plan(**{"allowed.gpus": ["L40S"]},
                  regions=[{"name": "us-east-1", "traffic_share": 1.0,
                            "node_zone_ids": ["use1-az6", "use1-az4"]}])
    )
    [rp] = fp.regions
    assert rp.node_zone_ids == ["use1-az6", "use1-az4"]
    assert rp.node_zones == ["us-east-1f", "us-east-1d"]
    assert rp.availability_zones[:2] == ["us-east-1f", "us-east-1d"]


def test_the_nodepool_limit_plus_the_floor_is_the_ceiling(stack_plans, slots_plan) -> None:
    for where, fp, rp in _regions(stack_plans, slots_plan):
        pool = karpenter_manifests.nodepool(fp, rp)
        limit_nodes = int(pool["spec"]["limits"]["nvidia.com/gpu"]) // rp.gpus_per_node
        assert limit_nodes + rp.capacity.floor_nodes == rp.nodes.max, where
        assert rp.capacity.ceiling_nodes == rp.nodes.max, where


def test_a_new_vpcs_private_subnets_are_the_cluster_zones(stack_plans, slots_plan) -> None:
    for where, _, rp in _regions(stack_plans, slots_plan):
        if rp.vpc_id is None:
            assert [s.zone_id for s in rp.subnets if not s.public] == rp.cluster_zone_ids, where


def test_route53s_failure_threshold_is_the_plans_in_every_check_and_the_recovery(
    stack_plans, own_plans
) -> None:
    """One number: `dns.failure_threshold` as given is what each region's Route 53 health
    check carries (what `components.GlobalEndpoint` creates) and what the recovery's
    detection time multiplies."""
    for fp in [*stack_plans.values(), *own_plans.values()]:
        checks = [r.entry_point.health_check for r in fp.regions if r.entry_point is not None]
        if fp.dns is None or not checks:
            continue
        for c in checks:
            assert (c.failure_threshold, c.request_interval_s) == (
                fp.dns.failure_threshold, fp.dns.health_check_interval_s)
        recovery = fp.resilience.recovery
        assert recovery is not None
        assert recovery.detection_s == fp.dns.failure_threshold * fp.dns.health_check_interval_s
