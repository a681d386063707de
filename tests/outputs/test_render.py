"""The rendered vLLM config, Kubernetes manifests and fleet report, read as specifications.

Every rendered file is checked against the FleetPlan it came from (no number is invented on
the way) and against the pinned vLLM release's flags and metrics.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml
from plans import by_kind, make_plan

from components.node_pool import gpu_pool, node_taints
from llmfleet import paths
from llmfleet.catalog.vllm_release import (
    VLLM_VERSION,
    default_buckets,
    quantile_problem,
    vllm_release,
)
from llmfleet.errors import RenderError
from llmfleet.fleetplan.autoscaling import Trigger
from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.fleetplan.serving import VllmArgs
from llmfleet.fleetplan.workload import PORT
from llmfleet.outputs import charts, render, rendered_files, vllm_checks
from llmfleet.plan.stacks import list_stacks, read_plan
from llmfleet.simulate.run import report_simulation

Docs = dict[str, dict[str, Any]]
REPO = Path(__file__).resolve().parents[2]


def _regions(plans: dict[str, FleetPlan]) -> list[tuple[FleetPlan, RegionPlan, Docs]]:
    return [
        (
            fp,
            rp,
            {
                (
                    "Dashboard"
                    if name == "dashboard"
                    else d["kind"]
                    if name.replace("-", "") == str(d["kind"]).lower()
                    else name
                ): d
                for name, d in zip(
                    render.manifest_kinds(rp), render.region_manifests(fp, rp), strict=True
                )
            },
        )
        for fp in plans.values()
        for rp in fp.regions
    ]


@pytest.fixture(scope="module")
def regions(
    stack_plans: dict[str, FleetPlan], own_plans: dict[str, FleetPlan]
) -> list[tuple[FleetPlan, RegionPlan, Docs]]:
    """(fleet plan, region plan, rendered objects by kind) for every region of every stack,
    and of the tests' own plans (so each kind of region is there whatever stacks/ holds)."""
    return _regions({**stack_plans, **{f"own:{k}": v for k, v in own_plans.items()}})


@pytest.fixture(scope="module")
def deployed(regions: list[tuple[FleetPlan, RegionPlan, Docs]]
             ) -> list[tuple[FleetPlan, RegionPlan, Docs]]:
    """The regions whose replicas are a Deployment (one node a replica; a replica across
    nodes is a LeaderWorkerSet: tests/outputs/test_multi_node_render.py), never none."""
    found = [r for r in regions if "Deployment" in r[2]]
    assert found
    return found


def _container(docs: Docs) -> dict[str, Any]:
    [container] = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
    return dict(container)


# --- vLLM config ------------------------------------------------------------------------------


def test_the_vllm_config_is_exactly_the_plans_engine_args(regions) -> None:
    for _, rp, docs in regions:
        text = render.vllm_config(rp)
        assert yaml.safe_load(text) == rp.serving.vllm.config()
        assert docs["ConfigMap"]["data"]["config.yaml"] == text
        assert list(yaml.safe_load(text)) == sorted(rp.serving.vllm.config())


def test_every_config_key_is_a_flag_of_the_pinned_release(regions) -> None:
    for _, rp, _ in regions:
        assert vllm_checks.config_key_problems(yaml.safe_load(render.vllm_config(rp))) == []


def test_the_config_drains_with_the_plans_shutdown_timeout(regions) -> None:
    flags = vllm_release()["flags"]
    assert "--shutdown-timeout" in flags
    for _, rp, _ in regions:
        assert rp.serving.vllm.config()["shutdown-timeout"] == rp.serving.vllm.shutdown_timeout


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("speculative-model", "x", "last seen in vLLM"),
        ("swap-space", 4, "last seen in vLLM"),
        ("max_num_seqs_typo", 1, "not a flag of vLLM 0.33.0"),
        ("trust-remote-code", False, "silently dropped"),
    ],
)
def test_stale_unknown_or_dropped_config_keys_are_caught(key, value, message) -> None:
    [problem] = vllm_checks.config_key_problems({"model": "m", key: value})
    assert problem.startswith(f"{key}:") and message in problem


def test_every_engine_argument_llmfleet_can_emit_is_a_flag_of_the_pinned_release() -> None:
    """VllmArgs is typed: each of its fields, under its flag name, must be a vLLM flag (a
    bool set true, since false needs a --no- form)."""
    names = [f.alias or n for n, f in VllmArgs.model_fields.items()]
    assert vllm_checks.config_key_problems({name: True for name in names}) == []


# --- metrics ------------------------------------------------------------------------------------


def test_every_metric_in_a_query_is_exported_by_the_pinned_release(regions) -> None:
    for _, _, docs in regions:
        queries = vllm_checks.prometheus_queries([docs["ScaledObject"]])
        assert len(queries) == 5
        assert vllm_checks.metric_problems(queries) == []
        names = {n for q in queries for n in vllm_checks.METRIC_NAME.findall(q)}
        assert names == {
            "vllm:request_success_total",
            "vllm:num_requests_waiting",
            "vllm:kv_cache_usage_perc",
            "vllm:request_queue_time_seconds_sum",
            "vllm:request_queue_time_seconds_count",
            "vllm:time_to_first_token_seconds_bucket",
        }


@pytest.mark.parametrize(
    "stale",
    ["vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds_bucket", "vllm:no_such"],
)
def test_stale_or_unknown_metric_names_are_caught(stale) -> None:
    [problem] = vllm_checks.metric_problems([f"sum(vllm:num_requests_waiting) + sum({stale})"])
    assert problem.startswith(stale)
    if stale != "vllm:no_such":
        assert "last seen in vLLM" in problem


# --- Deployment ---------------------------------------------------------------------------------


def test_pods_get_the_plans_gpus_cpu_and_memory(deployed) -> None:
    for _, rp, docs in deployed:
        s, res = rp.serving, _container(docs)["resources"]
        assert res["limits"]["nvidia.com/gpu"] == str(rp.tensor_parallel_size)
        assert res["requests"]["nvidia.com/gpu"] == res["limits"]["nvidia.com/gpu"]
        assert res["requests"]["cpu"] == str(s.cpu_per_pod)
        assert res["requests"]["memory"] == f"{s.memory_gib_per_pod}Gi"


def test_pods_land_only_on_the_node_pools_gpu_nodes(deployed) -> None:
    for _, rp, docs in deployed:
        spec = docs["Deployment"]["spec"]["template"]["spec"]
        assert spec["nodeSelector"].items() <= gpu_pool(rp).labels.items()
        [taint] = node_taints(rp)
        assert spec["tolerations"] == [
            {
                "key": taint["key"],
                "operator": "Equal",
                "value": taint["value"],
                "effect": "NoSchedule",
            }
        ]


def test_the_image_is_the_pinned_vllm_release(deployed) -> None:
    for _, rp, docs in deployed:
        image = _container(docs)["image"]
        assert image == rp.serving.image
        assert image.endswith("/" + str(vllm_release()["image"])) or image == vllm_release()[
            "image"
        ], "Docker Hub's, or the same through the account's ECR pull-through cache"
        assert image.endswith(":v" + VLLM_VERSION)


def test_vllm_serves_the_config_from_the_configmap(deployed) -> None:
    for _, rp, docs in deployed:
        c, spec = _container(docs), docs["Deployment"]["spec"]["template"]["spec"]
        w = rp.workload
        assert c["command"] == ["vllm", "serve", "--config", w.config_path]
        [config] = [v for v in spec["volumes"] if v["name"] == "config"]
        assert config["configMap"]["name"] == docs["ConfigMap"]["metadata"]["name"]
        [mount] = [m for m in c["volumeMounts"] if m["name"] == "config"]
        path = f"{mount['mountPath']}/{config['configMap']['items'][0]['path']}"
        assert path == w.config_path and mount["readOnly"] is True


def test_shm_and_the_model_cache_are_sized_by_the_plan(deployed) -> None:
    for _, rp, docs in deployed:
        s, c = rp.serving, _container(docs)
        vols = {v["name"]: v for v in docs["Deployment"]["spec"]["template"]["spec"]["volumes"]}
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        assert vols["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": f"{s.shm_gib}Gi"}
        assert mounts["dshm"] == "/dev/shm"
        assert vols["model-cache"]["emptyDir"] == {"sizeLimit": f"{s.model_cache_gib}Gi"}
        env = {e["name"]: e for e in c["env"]}
        assert env["HF_HOME"]["value"].startswith(mounts["model-cache"] + "/")


def test_probes_give_startup_the_plans_budget_and_watch_health(deployed) -> None:
    for _, rp, docs in deployed:
        s, c = rp.serving, _container(docs)
        start = c["startupProbe"]
        assert start["httpGet"] == {"path": "/health", "port": "http"}
        assert start["periodSeconds"] == s.startup_period_s
        budget_s = rp.cold_start.startup_budget_s
        assert start["failureThreshold"] * start["periodSeconds"] == budget_s
        for probe in ("readinessProbe", "livenessProbe"):
            assert c[probe]["httpGet"] == {"path": "/health", "port": "http"}
        assert c["livenessProbe"]["failureThreshold"] > c["readinessProbe"]["failureThreshold"]


def test_drain_prestop_then_shutdown_timeout_inside_the_grace_period(deployed) -> None:
    for _, rp, docs in deployed:
        s, c = rp.serving, _container(docs)
        spec = docs["Deployment"]["spec"]["template"]["spec"]
        assert c["lifecycle"]["preStop"] == {"sleep": {"seconds": s.prestop_sleep_s}}
        assert spec["terminationGracePeriodSeconds"] == s.termination_grace_s
        assert s.prestop_sleep_s + s.vllm.shutdown_timeout < s.termination_grace_s


def test_replicas_spread_across_zones_and_nodes(deployed) -> None:
    for _, rp, docs in deployed:
        spread = docs["Deployment"]["spec"]["template"]["spec"]["topologySpreadConstraints"]
        assert {t["topologyKey"] for t in spread} == {
            "topology.kubernetes.io/zone",
            "kubernetes.io/hostname",
        }
        for t in spread:
            assert t["labelSelector"]["matchLabels"] == rp.workload.labels


def test_pods_stream_weights_from_s3_with_their_service_account_not_a_hugging_face_token(
    deployed,
) -> None:
    for _, rp, docs in deployed:
        pod = docs["Deployment"]["spec"]["template"]["spec"]
        env = {e["name"]: e for e in _container(docs)["env"]}
        assert "HF_TOKEN" not in env and "HF_TOKEN_PATH" not in env and "Secret" not in docs
        assert env["AWS_REGION"]["value"] == rp.region
        assert pod["serviceAccountName"] == docs["ServiceAccount"]["metadata"]["name"]
        assert docs["ServiceAccount"]["automountServiceAccountToken"] is False
        config = yaml.safe_load(docs["ConfigMap"]["data"]["config.yaml"])
        assert config["model"] == rp.cold_start.weights_uri
        assert config["model"] == f"s3://{rp.staging.bucket}/{rp.staging.prefix}"
        # S3 names are global: the bucket carries the account where the plan names one
        assert rp.staging.bucket.startswith(f"{rp.workload.namespace}-weights-{rp.region}")
        assert config["load-format"] == "runai_streamer"


def test_vllm_runs_as_the_images_non_root_user_without_privileges(deployed) -> None:
    for _, rp, docs in deployed:
        pod = docs["Deployment"]["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == rp.workload.run_as_user != 0
        assert pod["securityContext"]["fsGroup"] == rp.workload.run_as_user
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        sc = _container(docs)["securityContext"]
        assert sc == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_the_hpa_owns_the_replica_count(deployed) -> None:
    for _, _, docs in deployed:
        assert "replicas" not in docs["Deployment"]["spec"]


# --- Service, PDB, monitoring, network policy -------------------------------------------------


def test_every_selector_matches_the_pods(deployed) -> None:
    for _, rp, docs in deployed:
        labels = rp.workload.labels
        assert docs["Deployment"]["spec"]["template"]["metadata"]["labels"] == labels
        assert docs["Deployment"]["spec"]["selector"]["matchLabels"] == labels
        assert docs["Service"]["spec"]["selector"] == labels
        assert docs["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"] == labels
        assert docs["NetworkPolicy"]["spec"]["podSelector"]["matchLabels"] == labels
        assert docs["ServiceMonitor"]["spec"]["selector"]["matchLabels"] == labels
        assert docs["Service"]["metadata"]["labels"] == labels  # what the ServiceMonitor selects


def test_everything_lives_in_the_fleets_namespace(regions) -> None:
    for _, rp, docs in regions:
        ns = rp.workload.namespace
        assert docs["Namespace"]["metadata"]["name"] == ns
        for kind, doc in docs.items():
            if kind != "Namespace":
                assert doc["metadata"]["namespace"] == ns, kind


def test_the_service_exposes_vllms_port_inside_the_cluster(regions) -> None:
    for _, rp, docs in regions:
        svc = docs["Service"]["spec"]
        assert svc["type"] == "ClusterIP"
        assert svc["ports"] == [
            {"name": "http", "port": PORT, "targetPort": "http", "protocol": "TCP"}
        ]
        assert rp.serving.vllm.port == PORT


def test_prometheus_scrapes_metrics_as_often_as_keda_polls(regions) -> None:
    for _, rp, docs in regions:
        [ep] = docs["ServiceMonitor"]["spec"]["endpoints"]
        assert ep == {
            "port": "http",
            "path": "/metrics",
            "interval": f"{rp.autoscaling.polling_interval_s}s",
        }


def test_a_disruption_takes_at_most_the_plans_share(deployed) -> None:
    for _, rp, docs in deployed:
        share = rp.workload.pdb_max_unavailable
        assert docs["PodDisruptionBudget"]["spec"]["maxUnavailable"] == share
        strategy = docs["Deployment"]["spec"]["strategy"]["rollingUpdate"]
        # A surge pod only where the nodes paid for have a spare slot (capacity.max_surge).
        assert strategy == {"maxSurge": rp.capacity.max_surge, "maxUnavailable": share}
        assert rp.capacity.max_surge == (1 if rp.capacity.free_slots_at_ceiling else 0)


def test_only_the_load_balancer_subnets_and_prometheus_reach_the_model_port(regions) -> None:
    """With an entry point the ALB's nodes connect to pod IPs from the public subnets."""
    with_dns = [(rp, docs) for _, rp, docs in regions if rp.entry_point is not None]
    assert with_dns  # the tests' own plans have a global name
    for rp, docs in with_dns:
        w, spec = rp.workload, docs["NetworkPolicy"]["spec"]
        assert spec["policyTypes"] == ["Ingress", "Egress"]
        lb, prometheus = spec["ingress"]
        assert lb["from"] == [{"ipBlock": {"cidr": c}} for c in rp.entry_point.source_cidrs]
        # Prometheus's pods, not the whole monitoring namespace (Grafana, exporters)
        assert prometheus["from"] == [
            {
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": w.monitoring_namespace}
                },
                "podSelector": {"matchLabels": {
                    "app.kubernetes.io/instance": "kube-prometheus-stack-prometheus",
                    "app.kubernetes.io/name": "prometheus",
                }},
            }
        ]
        for rule in (lb, prometheus):
            assert rule["ports"] == [{"port": PORT, "protocol": "TCP"}]
        egress_ports = {p["port"] for r in spec["egress"] for p in r["ports"]}
        assert egress_ports == {53, 80, 443}, "DNS, the Pod Identity agent, HTTPS"


def test_without_dns_only_the_gateway_and_prometheus_reach_the_model_port() -> None:
    fp = build_fleet_plan(make_plan())
    rp = fp.regions[0]
    docs = by_kind(render.region_manifests(fp, rp))
    assert "Ingress" not in docs
    gateway, prometheus = docs["NetworkPolicy"]["spec"]["ingress"]
    assert gateway["from"] == [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": rp.workload.gateway_namespace}}}]
    assert prometheus["from"][0]["podSelector"] == {
        "matchLabels": rp.workload.prometheus_pod_labels
    }


# --- KEDA ---------------------------------------------------------------------------------------


def test_the_scaled_object_carries_the_plans_autoscaling(deployed) -> None:
    for _, rp, docs in deployed:
        a, so = rp.autoscaling, docs["ScaledObject"]["spec"]
        assert so["scaleTargetRef"] == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": docs["Deployment"]["metadata"]["name"],
        }
        assert (so["minReplicaCount"], so["maxReplicaCount"]) == (rp.replicas.min, rp.replicas.max)
        assert so["pollingInterval"] == a.polling_interval_s
        assert so["cooldownPeriod"] == a.cooldown_period_s
        assert so["fallback"] == {
            "failureThreshold": a.fallback_failure_threshold,
            "replicas": rp.replicas.desired,
        }
        behavior = so["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
        assert behavior == {
            "scaleDown": {"stabilizationWindowSeconds": a.scale_down_stabilization_s}
        }


def test_triggers_fire_at_the_plans_thresholds(regions) -> None:
    for _, rp, docs in regions:
        triggers = {t["name"]: t for t in docs["ScaledObject"]["spec"]["triggers"]}
        expected = {t.name: t.threshold for t in rp.autoscaling.triggers}
        names = ["request-rate", "queue-depth", "kv-cache-usage", "queue-wait-mean",
                 "ttft-slo-guard"]
        assert list(expected) == names
        assert {n: float(t["metadata"]["threshold"]) for n, t in triggers.items()} == expected
        for t in triggers.values():
            assert t["type"] == "prometheus"
            assert t["metadata"]["serverAddress"] == rp.workload.prometheus_url


def test_fallback_is_valid_because_every_trigger_is_average_value(regions) -> None:
    """KEDA 2.16 (CheckFallbackValid) rejects a ScaledObject with `fallback` unless every
    trigger's metricType is AverageValue, so fleet-wide signals are scaled by the replicas."""
    for _, _, docs in regions:
        triggers = docs["ScaledObject"]["spec"]["triggers"]
        assert {t["metricType"] for t in triggers} == {"AverageValue"}
        q = {t["name"]: t["metadata"]["query"] for t in triggers}
        assert q["request-rate"].startswith("sum(rate(vllm:request_success_total{")
        assert q["queue-depth"].startswith("sum(vllm:num_requests_waiting{")
        assert q["kv-cache-usage"].startswith("sum(avg_over_time(vllm:kv_cache_usage_perc{")
        for fleet_wide in ("queue-wait-mean", "ttft-slo-guard"):
            assert "* count(vllm:kv_cache_usage_perc{" in q[fleet_wide]
            assert q[fleet_wide].endswith("> 0 or vector(0)")  # an idle fleet's NaN is 0


def test_the_queue_wait_trigger_is_a_mean_from_sum_and_count(regions) -> None:
    """vLLM 0.33's queue-time histogram starts at 0.3 s (buckets.py, request_latency), far
    above a sized replica's wait; a mean from _sum/_count resolves any threshold."""
    for _, rp, _ in regions:
        [t] = [t for t in rp.autoscaling.triggers if t.name == "queue-wait-mean"]
        assert t.quantile is None and t.threshold > 0
        assert "request_queue_time_seconds_sum" in t.query
        assert "request_queue_time_seconds_count" in t.query
        assert "histogram_quantile" not in t.query


def test_render_refuses_a_quantile_threshold_below_the_lowest_bucket(own_plans) -> None:
    """The 0.3 s case: a p99 queue-time trigger at 0.154 s reads ~0.3 s under any traffic."""
    fp = own_plans["three-regions"]
    rp = fp.regions[0]
    bad = Trigger(
        name="queue-wait-p99",
        metric="vllm:request_queue_time_seconds",
        query="histogram_quantile(0.99, sum by (le) (rate("
        'vllm:request_queue_time_seconds_bucket{namespace="x"}[2m])))',
        threshold=0.154,
        quantile=0.99,
        reason="the old trigger",
    )
    region = rp.model_copy(
        update={"autoscaling": rp.autoscaling.model_copy(update={"triggers": [bad]})}
    )
    with pytest.raises(RenderError, match=r"0.154 is below its lowest bucket bound 0.3"):
        render.region_manifests(fp, region)


def test_a_quantile_threshold_inside_a_bucket_wider_than_itself_is_refused() -> None:
    # time_to_first_token buckets ... 0.1, 0.25, ...: 0.12 falls in (0.1, 0.25], 0.15 wide
    problem = quantile_problem("vllm:time_to_first_token_seconds", 0.12)
    assert problem and "(0.1, 0.25]" in problem
    assert quantile_problem("vllm:time_to_first_token_seconds", 0.5) is None  # (0.25, 0.5]


def test_the_ttft_guard_adds_a_bucket_bound_when_the_defaults_cannot_resolve_it() -> None:
    """A 1,200 ms TTFT SLO falls in the default bucket (1.0, 2.5], 1.5 s wide: the vLLM config
    then carries --custom-histogram-buckets with 1.2 added, and render accepts it."""
    fp = build_fleet_plan(make_plan(**{"slo.ttft_ms": 1200}))
    rp = fp.regions[0]
    custom = rp.serving.vllm.custom_histogram_buckets
    assert custom is not None and 1.2 in custom["time_to_first_token"]
    assert set(custom["time_to_first_token"]) - set(default_buckets("time_to_first_token")) == {1.2}
    files = render.region_files(fp, rp)
    config = yaml.safe_load(files[f"{rp.region}/vllm-config.yaml"])
    assert config["custom-histogram-buckets"] == custom


def test_queries_select_this_namespace_and_served_model(regions) -> None:
    for _, rp, docs in regions:
        selector = (
            f'{{namespace="{rp.workload.namespace}",'
            f'model_name="{rp.serving.vllm.served_model_name}"}}'
        )
        queries = vllm_checks.prometheus_queries(docs.values())
        assert sum("vllm:" in q for q in queries) >= 4 + 4 + 6  # triggers, alerts, panels
        for q in (q for q in queries if "vllm:" in q):
            # a bucket matcher (le) narrows the selector to one bound
            uses = [re.sub(r',le=~?"[^"]*"', "", u) for u in re.findall(r"vllm:\w+(\{[^}]*\})", q)]
            assert uses and set(uses) == {selector}, q


# --- the report and the files -------------------------------------------------------------------


def test_the_report_explains_each_regions_decisions(stack_plans) -> None:
    for fp in stack_plans.values():
        report = render.render_stack(fp)[render.REPORT]
        assert f"# Fleet report: {fp.name}" in report
        for rp in fp.regions:
            s = rp.serving
            assert f"## {rp.region}: {rp.instance_type}, TP {rp.tensor_parallel_size}" in report
            shown = [a for a in rp.alternatives if not a.chosen][:5]
            for text in [
                s.paging.explanation,
                *rp.autoscaling.reasons,
                *s.reasons,
                *rp.reasons,
                *(a.reason for a in shown),
                *(a.differs for a in shown),
            ]:
                assert text in report, text
        for rule in fp.rules_of_thumb:
            assert rule.verdict in report


@pytest.mark.slow  # a fresh interpreter: imports and renders every stack
def test_a_render_in_a_fresh_process_is_byte_identical_to_the_committed_files() -> None:
    # Another interpreter with string hashing unsalted (PYTHONHASHSEED=0) where the committed
    # files' run was salted at random: set or dict order leaking into a file shows here.
    # Searched and simulated afresh there, not read back from the run's disk_memo.
    proc = subprocess.run(
        [sys.executable, "-m", "llmfleet", "render", "--check"],
        cwd=REPO,
        env={**os.environ, "PYTHONHASHSEED": "0", "LLMFLEET_CACHE": "off"},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"up to date for {', '.join(list_stacks())}" in proc.stdout


def test_a_stack_renders_a_config_a_file_per_object_per_region_and_a_report(stack_plans) -> None:
    karpenter = ["karpenter-ec2nodeclass.yaml", "karpenter-nodepool.yaml"]
    for fp in stack_plans.values():
        files = render.render_stack(fp)
        expected = {render.REPORT} | {c.path for c in charts.chart_index(fp)} | {
            f"{rp.region}/{name}"
            for rp in fp.regions
            for name in [
                render.VLLM_CONFIG,
                *(f"{k}.yaml" for k in render.manifest_kinds(rp)),
                *karpenter,
            ]
        }
        # the charts, and per region the config, the manifests and Karpenter's two objects
        assert len(expected) == 1 + len(charts.chart_index(fp)) + sum(
            1 + len(render.manifest_kinds(rp)) + 2 for rp in fp.regions
        )
        assert set(files) == expected
        assert all(text.endswith("\n") for text in files.values())


@pytest.mark.slow  # whole plans, drills or renders: program-check
def test_rendered_is_current_for_every_stack(stack_plans) -> None:
    for env, fp in stack_plans.items():
        # with the simulated days
        files = render.render_stack(fp, None, report_simulation(read_plan(env), fp, fp.name))
        drift = rendered_files.drift(files, paths.RENDERED_DIR / env)
        assert not drift, "run `llmfleet render`:\n" + "\n".join(drift.lines())


def test_no_secret_value_is_rendered() -> None:
    for path in paths.RENDERED_DIR.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert not re.search(r"\bhf_[A-Za-z0-9]{8,}", text), path
            if path.suffix == ".yaml":
                for doc in yaml.safe_load_all(text):
                    assert doc.get("kind") != "Secret", path


def test_templates_fail_on_an_undefined_value() -> None:
    env = render.environment()
    assert env.undefined is jinja2.StrictUndefined
    with pytest.raises(jinja2.UndefinedError):
        env.get_template("kubernetes/service.yaml.j2").render()


def test_the_node_pool_can_hold_the_scaled_objects_max_replicas(regions) -> None:
    for _, rp, docs in regions:
        so = docs["ScaledObject"]["spec"]
        assert rp.nodes.max * rp.replicas_per_node >= so["maxReplicaCount"]
        assert rp.replicas_per_node * rp.tensor_parallel_size <= rp.gpus_per_node


# Startup budgets, worked with llmfleet/serving.py's figures: the download gets half the
# instance's sustained network, at most 10 Gbps; weights are read at 1 GB/s; compilation and
# CUDA-graph capture take 180 s; the budget is whole 10 s /health probes.


def test_a_g6e_xlarge_startup_budget_is_540_s_streaming_at_its_baseline(
    own_plans,
) -> None:
    # Llama-3.1-8B bf16: 14.96 GiB. g6e.xlarge sustains 2.5 Gbps (catalog/instances.csv) =
    # 0.291 GiB/s, of which S3 streaming takes 75 % (3.51 GiB/s on a 40 Gbps g5.12xlarge):
    # 0.219 GiB/s -> 68.2 s. Container start: 95 s bootstrap + 68.2 s + 195 s engine =
    # 358.2 s; x 1.5 = 537.3 s -> 54 probes of 10 s.
    [rp] = own_plans["one-region"].regions
    assert rp.instance_type == "g6e.xlarge"
    assert rp.cold_start.container_s == pytest.approx(358.2, abs=0.1)
    assert (rp.cold_start.startup_budget_s, rp.serving.startup_failure_threshold) == (540, 54)


def test_the_startup_budget_outlasts_streaming_the_fp8_checkpoint_from_s3(own_plans) -> None:
    # Llama-3.3-70B served from its FP8 checkpoint: 67.7 GiB streamed from S3 at the measured
    # 3.51 GiB/s per node. p6-b200.48xlarge at TP 2 starts four replicas per node: 0.88 GiB/s
    # each, 77.1 s; 95 + 77.1 + 195 = 367.1 s; x 1.5 = 550.7 s -> 560 s, 56 probes of 10 s.
    # p5.48xlarge at TP 4 (eu-north-1) starts two: 1.75 GiB/s each, 38.6 s; 95 + 38.6 + 195
    # = 328.6 s; x 1.5 = 492.9 s -> 50 probes. (Every region at TP 4, two a node, before #28's
    # SLO model.)
    fp = own_plans["three-regions"]
    expected = {
        ("p6-b200.48xlarge", 2): (367.1, 560, 56),
        ("p5.48xlarge", 4): (328.6, 500, 50),
    }
    assert {(rp.instance_type, rp.tensor_parallel_size) for rp in fp.regions} == set(expected)
    for rp in fp.regions:
        container_s, budget_s, probes = expected[(rp.instance_type, rp.tensor_parallel_size)]
        assert rp.cold_start.container_s == pytest.approx(container_s, abs=0.1)
        assert (rp.cold_start.startup_budget_s, rp.serving.startup_failure_threshold) == (
            budget_s,
            probes,
        )
        assert rp.cold_start.startup_budget_s > rp.cold_start.container_s




def test_every_scanner_skip_says_why_and_checkov_can_read_it(regions) -> None:
    """checkov splits `checkov.io/skipN: CHECK=comment` on "=": a reason must hold none."""
    for _, _, docs in regions:
        for doc in docs.values():
            annotations = doc["metadata"].get("annotations") or {}
            for key, value in annotations.items():
                if key.startswith("checkov.io/skip"):
                    check, reason = value.split("=")
                    assert re.fullmatch(r"CKV2?_K8S_\d+", check) and len(reason) > 20, value
