"""GlobalEndpoint's argument builders: what each health check and routed record says."""

from __future__ import annotations

import pytest
from plans import make_plan

from components.capacity_alarm import alarm_args, ingress_tags
from components.global_endpoint import (
    capacity_health_check_args,
    health_check_args,
    routed_record_args,
    serving_health_check_args,
    unhealthy_alarm_args,
)
from components.program import check_entries
from llmfleet.errors import ProgramError
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.fleetplan.network import subnet_layout
from llmfleet.outputs import render
from llmfleet.plan.stacks import StackTarget

DNS = {"zone_name": "example.com", "record_name": "llm.example.com"}
FAILOVER = [
    {"name": "us-east-1", "traffic_share": 1.0},
    {"name": "us-west-2", "traffic_share": 0.0, "vpc_cidr": "10.41.0.0/16"},
]


def test_the_health_check_asks_the_model_list_for_the_served_model_through_the_lb() -> None:
    rp = build_fleet_plan(make_plan(dns=DNS)).regions[0]
    assert rp.entry_point is not None
    args = health_check_args(rp.entry_point.health_check, "t-us-east-1")
    assert args == {
        "type": "HTTPS_STR_MATCH",
        "fqdn": "us-east-1.llm.example.com",
        "port": 443,
        "resource_path": "/v1/models",
        "search_string": "t",
        "request_interval": 30,
        "failure_threshold": 3,
        "enable_sni": True,
        "tags": {"Name": "t-us-east-1"},
    }


def test_with_api_keys_the_health_check_reads_health_which_needs_no_key() -> None:
    plan = make_plan(dns=DNS, api_key={"secret_name": "vllm-api-key"})
    check = build_fleet_plan(plan).regions[0].entry_point.health_check  # type: ignore[union-attr]
    assert (check.type, check.resource_path, check.search_string) == ("HTTPS", "/health", None)


def test_failover_records_are_a_primary_and_a_secondary() -> None:
    fp = build_fleet_plan(make_plan(dns=DNS, regions=FAILOVER, routing={"policy": "failover"}))
    roles = {
        rp.region: routed_record_args(fp, rp, "Z1", "lb", "Z2", "hc")["failover_routing_policies"]
        for rp in fp.regions
    }
    assert roles == {"us-east-1": [{"type": "PRIMARY"}], "us-west-2": [{"type": "SECONDARY"}]}


def test_a_cname_record_carries_the_plans_ttl_and_no_alias() -> None:
    fp = build_fleet_plan(make_plan(dns={**DNS, "record_type": "cname", "ttl_s": 20}))
    args = routed_record_args(fp, fp.regions[0], "Z1", "lb.example", "Z2", "hc")
    assert (args["type"], args["records"], args["ttl"]) == ("CNAME", ["lb.example"], 20)
    assert "aliases" not in args
    assert fp.resilience.recovery is None or fp.resilience.recovery.ttl_s == 20


def test_the_failover_standby_keeps_its_stated_warm_share_of_the_peak() -> None:
    plan = make_plan(dns=DNS, regions=FAILOVER, routing={"policy": "failover", "warm_share": 0.5})
    fp = build_fleet_plan(plan)
    [floor] = [f for f in fp.resilience.regions if f.region == "us-west-2"]
    # The secondary takes the whole 10 req/s peak. In a loss a replica carries its SLO-limit
    # rate, 6.564 req/s (since #28 the slots are sized so that an arrival finds them all taken
    # at most 1 % of the time there; 80 % of 6.321 req/s, 5.057, before): 10 / 6.564 = 1.52
    # -> 2 replicas at most; half the peak warm is 5 / 6.564 = 0.76 -> 1 replica.
    assert floor.loss_requests_per_s_per_replica == floor.capacity_requests_per_s_per_replica
    assert floor.loss_requests_per_s_per_replica == 6.564
    assert (floor.worst_load_requests_per_s, floor.replicas_needed, floor.warm_replicas) == (
        10.0,
        2,
        1,
    )
    assert fp.region("us-west-2").replicas.model_dump() == {"min": 1, "desired": 1, "max": 2}
    [lose_primary, _] = fp.resilience.scenarios
    rec = fp.resilience.recovery
    assert rec is not None and lose_primary.cold_start
    # 3 checks 30 s apart + 60 s TTL + the cold start the short floor pays.
    assert lose_primary.recovery_s == 90 + 60 + rec.cold_start_s


def test_api_keys_reach_vllm_from_the_secret_and_never_the_rendered_files() -> None:

    fp = build_fleet_plan(make_plan(dns=DNS, api_key={"secret_name": "vllm-api-key"}))
    docs = {d["kind"]: d for d in render.region_manifests(fp, fp.regions[0])}
    [container] = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
    [env] = [e for e in container["env"] if e["name"] == "VLLM_API_KEY"]
    assert env["valueFrom"] == {"secretKeyRef": {"name": "vllm-api-key", "key": "key"}}
    assert "api-key" not in render.vllm_config(fp.regions[0])


def test_an_existing_vpc_admits_its_load_balancer_cidrs_only() -> None:
    network = {
        "vpc_id": "vpc-1",
        "private_subnet_ids": ["subnet-1", "subnet-2"],
        "load_balancer_cidrs": ["10.9.0.0/24"],
    }
    plan = make_plan(
        dns=DNS, regions=[{"name": "us-east-1", "traffic_share": 1.0, "network": network}]
    )
    assert build_fleet_plan(plan).regions[0].entry_point.source_cidrs == ["10.9.0.0/24"]  # type: ignore[union-attr]


def test_a_new_vpc_admits_the_quarter_its_public_subnets_are_cut_from() -> None:
    ep = build_fleet_plan(make_plan(dns=DNS)).regions[0].entry_point
    assert ep is not None and ep.source_cidrs == ["10.40.192.0/18"]
    import ipaddress

    block = ipaddress.IPv4Network(ep.source_cidrs[0])
    public = [
        s
        for s in subnet_layout("10.40.0.0/16", "us-east-1", ["use1-az1", "use1-az2"])
        if s.public
    ]
    assert all(ipaddress.IPv4Network(s.cidr_block).subnet_of(block) for s in public)


THREE = [
    {"name": "us-east-1", "traffic_share": 0.5},
    {"name": "us-west-2", "traffic_share": 0.3, "vpc_cidr": "10.41.0.0/16"},
    {"name": "eu-north-1", "traffic_share": 0.2, "vpc_cidr": "10.42.0.0/16"},
]


def test_the_capacity_check_reads_the_regions_alarm_in_its_region() -> None:
    rp = build_fleet_plan(make_plan(dns=DNS)).regions[0]
    assert rp.entry_point is not None and rp.entry_point.capacity_check is not None
    check = rp.entry_point.capacity_check
    args = capacity_health_check_args(check, "t-us-east-1-serving-capacity", "us-east-1", "n")
    assert args == {
        "type": "CLOUDWATCH_METRIC",
        "cloudwatch_alarm_name": "t-us-east-1-serving-capacity",
        "cloudwatch_alarm_region": "us-east-1",
        "insufficient_data_health_status": "LastKnownStatus",
        "triggers": {"min_healthy_targets": str(check.min_healthy_targets)},
        "tags": {"Name": "n"},
    }


def test_the_routed_check_is_healthy_only_while_every_child_is() -> None:
    args = serving_health_check_args(["hc-endpoint", "hc-capacity"], "n")
    assert (args["type"], args["child_healthchecks"], args["child_health_threshold"]) == (
        "CALCULATED",
        ["hc-endpoint", "hc-capacity"],
        2,
    )


def test_the_route53_alarm_fires_while_route53_sees_the_region_unhealthy() -> None:
    args = unhealthy_alarm_args("hc-1", "arn:topic", "t-us-east-1-dns-unhealthy", "t-us-east-1")
    assert (args["namespace"], args["metric_name"], args["dimensions"]) == (
        "AWS/Route53",
        "HealthCheckStatus",
        {"HealthCheckId": "hc-1"},
    )
    assert (args["threshold"], args["comparison_operator"]) == (1.0, "LessThanThreshold")
    assert args["alarm_actions"] == args["ok_actions"] == ["arn:topic"]


def test_the_capacity_alarm_counts_healthy_targets_of_the_ingress_alb() -> None:
    rp = build_fleet_plan(make_plan(dns=DNS)).regions[0]
    assert rp.entry_point is not None and rp.entry_point.capacity_check is not None
    # The lookups use the tags the API Ingress asks the controller to put on its ALB and its
    # target group (`llmfleet.io/serves`: not the health Ingress's target group).
    assert ingress_tags(rp) == {
        "llmfleet.io/fleet": "t", "llmfleet.io/region": "us-east-1", "llmfleet.io/serves": "api"
    }
    lb, tg = "app/k8s-x/1", "targetgroup/k8s-y/2"
    args = alarm_args(rp.entry_point.capacity_check, "a", lb, tg)
    assert args["dimensions"] == {"LoadBalancer": lb, "TargetGroup": tg}
    assert args["threshold"] == rp.entry_point.capacity_check.min_healthy_targets
    assert (args["period"], args["evaluation_periods"], args["datapoints_to_alarm"]) == (60, 3, 3)
    assert args["treat_missing_data"] == "breaching"  # no target registered: no capacity


def _global_target() -> StackTarget:
    return StackTarget("qa.global", "qa", make_plan(regions=THREE, dns=DNS), "global")


ENTRY = {"lb_hostname": "k8s-a.elb.amazonaws.com", "capacity_alarm_name": "qa-alarm"}


def test_the_global_stack_routes_every_region_once_all_region_stacks_are_deployed() -> None:
    found = {r["name"]: ENTRY for r in THREE}
    entries = check_entries(_global_target(), found)
    assert sorted(entries) == ["eu-north-1", "us-east-1", "us-west-2"]
    assert entries["us-east-1"].capacity_alarm_name == "qa-alarm"


def test_before_any_region_stack_the_global_stack_routes_nothing() -> None:
    assert check_entries(_global_target(), {r["name"]: None for r in THREE}) == {}


def test_a_region_stack_not_deployed_yet_stops_the_global_stack_naming_it() -> None:
    found = {"us-east-1": ENTRY, "us-west-2": None, "eu-north-1": ENTRY}
    with pytest.raises(ProgramError, match=r"qa.us-west-2 have no `entry_point` output"):
        check_entries(_global_target(), found)


def test_a_region_stack_deployed_by_an_older_llmfleet_says_to_update_it() -> None:
    found = {r["name"]: ENTRY for r in THREE} | {"eu-north-1": {"lb_hostname": "x"}}
    with pytest.raises(ProgramError, match=r"qa.eu-north-1: .* no capacity_alarm_name; run "):
        check_entries(_global_target(), found)
