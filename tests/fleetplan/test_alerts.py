"""Day-2 alerts and secure defaults in the rendered manifests, with worked numbers."""

from __future__ import annotations

import json
from pathlib import Path

from plans import gpu_pod_specs, make_plan

from llmfleet.fleetplan.alerts import good_share
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.outputs import render, vllm_checks

SEL = '{namespace="n",model_name="m"}'


def _rules(fp, region):
    return {r.name: r for r in fp.region(region).alerts.rules}


def test_p99_burn_rates_are_the_p99_budget_times_the_workbook_rates(own_plans) -> None:
    fp = own_plans["three-regions"]
    rules = _rules(fp, "us-east-1")
    assert fp.region("us-east-1").alerts.error_budget == 0.01
    # 14.4 x 1 % over 1 h and 5 m pages; 6 x 1 % over 6 h and 30 m opens a ticket
    assert rules["TtftBudgetBurnFast"].expr.endswith("> 0.144")
    assert "[1h]" in rules["TtftBudgetBurnFast"].expr and "[5m]" in rules["TtftBudgetBurnFast"].expr
    assert rules["ItlBudgetBurnSlow"].expr.endswith("> 0.06")
    assert rules["TtftBudgetBurnFast"].severity == "critical"
    assert rules["ItlBudgetBurnSlow"].severity == "warning"


def test_the_ceiling_alert_fires_at_the_plans_max_replicas_unless_min_is_max(
    stack_plans,
) -> None:
    for fp in stack_plans.values():
        for r in fp.regions:
            ceiling = [a for a in r.alerts.rules if a.name == "ReplicasAtCeiling"]
            if r.replicas.min == r.replicas.max:
                assert ceiling == [] and any("min = max" in n for n in r.alerts.notes)
            else:
                assert ceiling[0].expr.endswith(f">= {r.replicas.max}")


def test_a_target_on_a_bucket_bound_is_an_exact_ratio() -> None:
    # TTFT buckets include 0.5 s: the good share is the le="0.5" bucket over the count
    share = good_share("vllm:time_to_first_token_seconds", SEL, 0.5, "5m", None)
    assert share == (
        '(sum(rate(vllm:time_to_first_token_seconds_bucket{namespace="n",model_name="m",'
        'le="0.5"}[5m])) / sum(rate(vllm:time_to_first_token_seconds_count'
        '{namespace="n",model_name="m"}[5m])))'
    )


def test_a_target_between_bounds_is_interpolated_inside_its_bucket() -> None:
    # 40 ms lies 0.6 of the way from the 25 ms to the 50 ms ITL bound
    share = good_share("vllm:inter_token_latency_seconds", SEL, 0.040, "1h", None)
    assert " + 0.6 * (" in share and 'le="0.025"' in share and 'le="0.05"' in share


def test_a_custom_bound_at_the_target_makes_it_exact() -> None:
    custom = {"inter_token_latency": [0.025, 0.04, 0.05]}
    share = good_share("vllm:inter_token_latency_seconds", SEL, 0.040, "1h", custom)
    assert 'le="0.04"' in share and "*" not in share


def test_a_loose_percentile_drops_the_burn_rate_no_traffic_could_reach() -> None:
    # p90: a 10 % budget; 14.4 x 10 % > 100 % of requests, so only the 6x tier remains
    fp = build_fleet_plan(make_plan(**{"slo.percentile": 90}))
    names = set(_rules(fp, "us-east-1"))
    assert "TtftBudgetBurnFast" not in names and "TtftBudgetBurnSlow" in names


def test_the_prometheus_rule_carries_every_alert_of_the_plan(stack_plans) -> None:
    for fp in stack_plans.values():
        for r in fp.regions:
            docs = {d["kind"]: d for d in render.region_manifests(fp, r)}
            rules = docs["PrometheusRule"]["spec"]["groups"][0]["rules"]
            assert [x["alert"] for x in rules] == [a.name for a in r.alerts.rules]
            assert all(x["labels"]["region"] == r.region for x in rules)


def test_the_dashboard_shows_the_slo_and_gpu_telemetry(own_plans) -> None:
    fp = own_plans["three-regions"]
    r = fp.region("eu-north-1")
    [dash] = [d for d in render.region_manifests(fp, r)
              if "grafana_dashboard" in d["metadata"]["labels"]]
    model = json.loads(next(iter(dash["data"].values())))
    exprs = [t["expr"] for p in model["panels"] for t in p["targets"]]
    assert "vector(0.5)" in exprs and "vector(0.04)" in exprs  # the SLO lines, in seconds
    assert any(e.startswith("DCGM_FI_DEV_GPU_UTIL") for e in exprs)
    assert vllm_checks.metric_problems(exprs) == []


def test_vllm_usage_reporting_is_off(stack_plans) -> None:
    for fp in stack_plans.values():
        for r in fp.regions:
            specs = [s for d in render.region_manifests(fp, r) for s in gpu_pod_specs(d)]
            assert specs, r.region
            for spec in specs:
                [c] = spec["containers"]
                env = {e["name"]: e.get("value") for e in c["env"]}
                assert env["VLLM_NO_USAGE_STATS"] == "1" and env["DO_NOT_TRACK"] == "1"


def test_egress_is_dns_to_coredns_and_https_to_public_addresses(stack_plans) -> None:
    for fp in stack_plans.values():
        for r in fp.regions:
            docs = {d["kind"]: d for d in render.region_manifests(fp, r)}
            dns, pod_identity, https = docs["NetworkPolicy"]["spec"]["egress"]
            # EKS Pod Identity's agent: link-local, so the https rule's except would drop it;
            # the VPC CNI's policy agent enforces link-local destinations.
            assert pod_identity == {
                "to": [{"ipBlock": {"cidr": "169.254.170.23/32"}}],
                "ports": [{"port": 80, "protocol": "TCP"}],
            }
            assert dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
            assert {p["port"] for p in dns["ports"]} == {53}
            block = https["to"][0]["ipBlock"]
            assert block["cidr"] == "0.0.0.0/0"
            assert "169.254.0.0/16" in block["except"] and "10.0.0.0/8" in block["except"]
            assert https["ports"] == [{"port": 443, "protocol": "TCP"}]


def test_every_alert_links_to_its_section_of_the_runbook(stack_plans) -> None:
    """Default alerts.runbook_url: the repository's docs/runbook.md, one heading per alert."""
    headings = {
        line[3:].strip().lower()
        for line in (Path(__file__).resolve().parents[2] / "docs" / "runbook.md")
        .read_text().splitlines()
        if line.startswith("## ")
    }
    fp = build_fleet_plan(make_plan())
    links = [r.runbook_url for r in fp.regions[0].alerts.rules]
    for plan in stack_plans.values():
        for rp in plan.regions:
            links += [r.runbook_url for r in rp.alerts.rules]
            links += [a.runbook_url for a in (rp.entry_point.alarms if rp.entry_point else [])]
    for link in links:
        assert link.split("#")[1] in headings, link
