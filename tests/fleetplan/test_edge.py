"""The public edge as the core decides it: who may call, how fast, how requests spread and
drain, when a region leaves DNS; and what the rendered Ingresses, namespace and pods say."""

from __future__ import annotations

import json

import pulumi_aws as aws
from plans import EDGE, by_kind, make_plan, production_plan

from components.alarms import alarm_args
from components.edge import web_acl_args
from llmfleet.fleetplan.entry_point import load_balancer_name
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.outputs import render

ALB = "alb.ingress.kubernetes.io"


def _entry(**changes: object):  # type: ignore[no-untyped-def]
    fp = build_fleet_plan(production_plan(**{**EDGE, **changes}))
    return fp, fp.regions[0], fp.regions[0].entry_point


def test_jwt_validation_guards_the_api_and_health_stays_open_on_the_same_alb() -> None:
    fp, rp, entry = _entry()
    docs = render.region_manifests(fp, rp)
    api, health = [d for d in docs if d["kind"] == "Ingress"]
    validation = json.loads(api["metadata"]["annotations"][f"{ALB}/jwt-validation"])
    assert validation == {"jwksEndpoint": "https://auth.example.com/jwks.json",
                          "issuer": "https://auth.example.com/"}
    assert [p["path"] for p in api["spec"]["rules"][0]["http"]["paths"]] == ["/v1"]
    assert [p["path"] for p in health["spec"]["rules"][0]["http"]["paths"]] == ["/health"]
    assert f"{ALB}/jwt-validation" not in health["metadata"]["annotations"]
    group = {d["metadata"]["annotations"][f"{ALB}/group.name"] for d in (api, health)}
    assert group == {entry.group_name}, "one IngressGroup: one ALB"
    assert entry.health_check.resource_path == "/health", "Route53 sends no token"


def test_the_waf_limits_each_client_and_the_ingress_names_it() -> None:
    _, _, entry = _entry()
    rule = entry.rate_rule
    assert rule is not None and (rule.requests, rule.window_s, rule.per) == (600, 60, "ip")
    assert entry.ingress_annotations[f"{ALB}/wafv2-acl-name"] == rule.web_acl_name
    args = web_acl_args(rule, {})
    statement = args["rules"][0]["statement"]["rate_based_statement"]
    assert statement == {"limit": 600, "evaluation_window_sec": 60, "aggregate_key_type": "IP"}
    assert args["rules"][0]["action"]["block"]["custom_response"]["response_code"] == 429
    aws.wafv2.WebAclArgs(**args)  # every argument is the SDK's


def test_a_per_token_limit_counts_the_authorization_header() -> None:
    _, _, entry = _entry(**{"edge.rate_limit.per": "token"})
    assert entry.rate_rule is not None
    statement = web_acl_args(entry.rate_rule, {})["rules"][0]["statement"]["rate_based_statement"]
    assert statement["aggregate_key_type"] == "CUSTOM_KEYS"
    assert statement["custom_keys"][0]["header"]["name"] == "authorization"


def test_requests_go_to_the_least_busy_replica_and_drain_before_the_pod_stops() -> None:
    """deregistration delay = preStop 30 s (two failed 15 s ALB checks) + vLLM's drain."""
    _, rp, entry = _entry()
    groups = dict(kv.split("=") for kv in
                  entry.ingress_annotations[f"{ALB}/target-group-attributes"].split(","))
    assert groups["load_balancing.algorithm.type"] == "least_outstanding_requests"
    assert rp.serving.prestop_sleep_s == 30
    assert entry.deregistration_delay_s == 30 + rp.serving.vllm.shutdown_timeout
    assert int(groups["deregistration_delay.timeout_seconds"]) == entry.deregistration_delay_s
    assert rp.serving.termination_grace_s > entry.deregistration_delay_s


def test_the_capacity_alarm_finds_the_apis_target_group_not_the_health_ingresses() -> None:
    """Both Ingresses of the group make a target group for the same pods; the capacity
    alarm's lookup by the API Ingress's tags must match only the API's."""
    fp, rp, entry = _entry()
    api, health = [d for d in render.region_manifests(fp, rp) if d["kind"] == "Ingress"]
    api_tags = dict(kv.split("=") for kv in
                    api["metadata"]["annotations"][f"{ALB}/tags"].split(","))
    health_tags = dict(kv.split("=") for kv in
                       health["metadata"]["annotations"][f"{ALB}/tags"].split(","))
    assert not api_tags.items() <= health_tags.items()
    assert entry.capacity_check is not None


def test_production_keeps_its_alb_and_logs_its_requests() -> None:
    _, rp, entry = _entry()
    attrs = entry.ingress_annotations[f"{ALB}/load-balancer-attributes"]
    assert "deletion_protection.enabled=true" in attrs
    assert f"access_logs.s3.bucket={rp.logs_bucket}" in attrs
    assert rp.logs_bucket == "t-logs-us-east-1-111122223333"


def test_a_long_fleet_name_still_gives_a_32_character_load_balancer_name() -> None:
    name = load_balancer_name("a-very-long-fleet-name-indeed", "ap-southeast-2")
    assert len(name) == 32 and name == load_balancer_name("a-very-long-fleet-name-indeed",
                                                          "ap-southeast-2")
    assert load_balancer_name("chat", "us-east-1") == "chat-us-east-1"


def test_the_albs_alarms_are_real_cloudwatch_arguments_with_runbooks() -> None:
    _, _, entry = _entry()
    share, latency = entry.alarms
    assert share.threshold == 14.4, "14.4x a p99 SLO's 1 % budget"
    for alarm in entry.alarms:
        args = alarm_args(alarm, entry.load_balancer_name, "app/x/1", "arn:t")
        aws.cloudwatch.MetricAlarmArgs(comparison_operator=args.pop("comparison_operator"),
                                       evaluation_periods=args.pop("evaluation_periods"),
                                       **args)
        assert "Runbook: " in args["alarm_description"]
    assert latency.threshold > 0


def test_the_namespace_enforces_pod_security_restricted_and_injects_readiness_gates() -> None:
    fp, rp, _ = _entry()
    labels = by_kind(render.region_manifests(fp, rp))["Namespace"]["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["pod-security.kubernetes.io/enforce-version"] == "v1.36"
    assert labels["elbv2.k8s.aws/pod-readiness-gate-inject"] == "enabled"
    plain = build_fleet_plan(make_plan())
    labels = by_kind(render.region_manifests(plain, plain.regions[0]))["Namespace"]
    assert "elbv2.k8s.aws/pod-readiness-gate-inject" not in labels["metadata"]["labels"]


def test_pods_check_their_weights_first_and_wait_out_a_cold_start_not_forever() -> None:
    fp, rp, _ = _entry()
    deploy = by_kind(render.region_manifests(fp, rp))["Deployment"]
    annotations = deploy["metadata"]["annotations"]
    assert "pulumi.com/skipAwait" not in annotations
    assert annotations["pulumi.com/timeoutSeconds"] == str(rp.cold_start.rollout_timeout_s)
    pod = deploy["spec"]["template"]["spec"]
    [verify] = pod["initContainers"]
    env = {e["name"]: e["value"] for e in verify["env"]}
    assert env["LLMFLEET_REVISION"] == rp.staging.revision == "0123456789abcdef" * 2 + "01234567"
    assert env["LLMFLEET_MANIFEST_KEY"] == f"{rp.staging.prefix}/llmfleet-manifest.json"
    assert verify["securityContext"]["readOnlyRootFilesystem"] is True
    [vllm] = pod["containers"]
    assert vllm["resources"]["limits"]["cpu"] == vllm["resources"]["requests"]["cpu"]


def test_the_staging_job_runs_on_system_nodes_read_only_with_an_optional_token() -> None:
    fp, rp, _ = _entry()
    docs = render.region_manifests(fp, rp)
    [job] = [d for d in docs if d["kind"] == "Job"]
    assert job["metadata"]["name"] == f"t-stage-{rp.staging.revision[:12]}"
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"llmfleet.io/pool": "system"}
    assert pod["serviceAccountName"] == rp.staging.service_account
    [container] = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    [token] = [v for v in pod["volumes"] if v["name"] == "hf-token"]
    assert token["secret"]["optional"] is True
    [policy] = [d for d in docs if d["kind"] == "NetworkPolicy"
                and d["metadata"]["name"] == rp.staging.service_account]
    assert policy["spec"]["podSelector"]["matchLabels"] == rp.staging.labels
    assert policy["spec"]["ingress"] == []
