"""The pure parts of ClusterAddons and VllmService, without the Pulumi runtime."""

from __future__ import annotations

import re

import pulumi_kubernetes as k8s
from plans import gpu_pod_specs

from components.cluster_addons import (
    ALERTMANAGER_SERVICE_ACCOUNT,
    CHARTS,
    KEDA,
    KUBE_PROMETHEUS_STACK,
    NVIDIA_DEVICE_PLUGIN,
    alertmanager_config,
    crd_urls,
    prometheus_values,
    release_args,
)
from components.documents import CUSTOM, TYPED, resource_kwargs
from components.load_balancer_controller import chart_values as lbc_values
from components.node_pool import gpu_pool, node_taints, system_pool
from llmfleet.fleetplan import workload
from llmfleet.outputs import render
from llmfleet.plan.alerting import Alerting


def test_every_chart_is_pinned_to_an_exact_version_from_an_https_repository() -> None:
    for chart in CHARTS:
        args = release_args(chart)
        assert re.fullmatch(r"\d+\.\d+\.\d+", args["version"]), chart.release
        assert args["repository_opts"]["repo"].startswith("https://")
        assert args["name"] == chart.release and args["create_namespace"] is True
        assert chart.pinned.source


def test_a_chart_whose_crds_helm_never_upgrades_skips_them_and_applies_them_itself() -> None:
    """kube-prometheus-stack keeps its CRDs in crds/ (installed once by Helm, never
    upgraded): the release skips them and the program applies the chart tag's CRD files."""
    args = release_args(KUBE_PROMETHEUS_STACK)
    assert args["skip_crds"] is True
    urls = crd_urls("kube-prometheus-stack")
    assert len(urls) == 10 and all(f"kube-prometheus-stack-{args['version']}/" in u for u in urls)
    assert any(u.endswith("/crd-servicemonitors.yaml") for u in urls)
    assert "skip_crds" not in release_args(KEDA), "KEDA's CRDs are templates: helm upgrades them"


def test_the_load_balancer_controllers_service_webhook_is_off() -> None:
    """Its Service mutator fails closed for every Service CREATE while its pods start
    (aws-load-balancer-controller#4140); llmfleet makes no LoadBalancer Service."""
    assert lbc_values("c", "us-east-1", "vpc-1")["enableServiceMutatorWebhook"] is False


def _alerting(**receiver: object) -> Alerting:
    return Alerting.model_validate({"receivers": [{"name": "oncall", **receiver}]})


def test_alertmanager_reads_a_pagerduty_key_from_the_mounted_secret() -> None:
    alerting = _alerting(severities=["critical"],
                         pagerduty={"secret_name": "am-receivers", "secret_key": "pd"})
    config = alertmanager_config(alerting, "eu-north-1", "arn:aws:sns:eu-north-1:1:t")
    assert config["route"]["routes"] == [
        {"receiver": "oncall", "matchers": ['severity=~"critical"'], "continue": True}
    ]
    [_, oncall] = config["receivers"]
    assert oncall["pagerduty_configs"][0]["routing_key_file"] == (
        "/etc/alertmanager/secrets/am-receivers/pd"
    )
    values = prometheus_values(alerting, "eu-north-1", "arn:aws:sns:eu-north-1:1:t")
    assert values["alertmanager"]["alertmanagerSpec"]["secrets"] == ["am-receivers"]
    assert values["alertmanager"]["serviceAccount"]["name"] == ALERTMANAGER_SERVICE_ACCOUNT
    assert values["grafana"]["sidecar"]["dashboards"]["label"] == "grafana_dashboard"


def test_an_email_receiver_goes_through_the_regions_sns_topic() -> None:
    config = alertmanager_config(
        _alerting(email={"addresses": ["a@example.com"]}), "us-east-1", "arn:t"
    )
    assert config["receivers"][1]["sns_configs"] == [
        {"topic_arn": "arn:t", "sigv4": {"region": "us-east-1"}, "send_resolved": True}
    ]


def test_release_args_are_arguments_of_the_helm_release() -> None:
    params = k8s.helm.v3.ReleaseArgs.__init__.__code__.co_varnames
    for chart in CHARTS:
        assert set(release_args(chart)) <= set(params)


def test_the_device_plugin_runs_only_on_the_node_pools_gpu_nodes(own_plans) -> None:
    values = NVIDIA_DEVICE_PLUGIN.values
    [taint] = node_taints(own_plans["one-region"].regions[0])
    assert values["tolerations"] == [
        {"key": taint["key"], "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert values["nodeSelector"].items() <= node_labels_of_any_pool().items()


def test_cluster_services_run_on_the_system_pool_not_on_gpu_nodes(own_plans) -> None:
    """KEDA's pods and every kube-prometheus-stack Deployment/StatefulSet/Job select the
    system pool's label (value keys of KEDA 2.16.1 and kube-prometheus-stack 69.5.1)."""
    rp = own_plans["one-region"].regions[0]
    system, gpu = system_pool(rp, "f").labels, gpu_pool(rp).labels
    kps = KUBE_PROMETHEUS_STACK.values
    selectors = {
        "keda": KEDA.values["nodeSelector"],
        "prometheus": kps["prometheus"]["prometheusSpec"]["nodeSelector"],
        "operator": kps["prometheusOperator"]["nodeSelector"],
        "operator webhook jobs": kps["prometheusOperator"]["admissionWebhooks"]["patch"][
            "nodeSelector"
        ],
        "alertmanager": kps["alertmanager"]["alertmanagerSpec"]["nodeSelector"],
        "kube-state-metrics": kps["kube-state-metrics"]["nodeSelector"],
    }
    for what, selector in selectors.items():
        assert selector and selector.items() <= system.items(), what
        assert not selector.items() <= gpu.items(), what
    assert "prometheus-node-exporter" not in kps, "the node exporter belongs on every node"


def test_each_release_waits_for_the_pool_its_pods_run_on() -> None:
    assert {c.release: c.pool for c in CHARTS} == {
        "nvidia-device-plugin": "gpu",
        "keda": "system",
        workload.PROMETHEUS_RELEASE: "system",
        "dcgm-exporter": "gpu",
    }


def test_the_dcgm_exporter_runs_on_gpu_nodes_after_the_prometheus_crds() -> None:
    [dcgm] = [c for c in CHARTS if c.release == "dcgm-exporter"]
    assert dcgm.version == "4.8.2"
    assert dcgm.values["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert dcgm.values["tolerations"][0]["key"] == workload.GPU_TAINT_KEY
    assert dcgm.after == (workload.PROMETHEUS_RELEASE,)
    names = [c.release for c in CHARTS]
    assert names.index(workload.PROMETHEUS_RELEASE) < names.index("dcgm-exporter")


def node_labels_of_any_pool() -> dict[str, str]:
    return workload.node_labels("f", "L4", "g6.xlarge", 1)


def test_gpu_node_labels_are_the_pods_node_selector(stack_plans) -> None:
    """Every pod that asks for GPUs (one node a replica: a Deployment; across nodes: a
    LeaderWorkerSet's leader and workers) selects its region's GPU pool."""
    for fp in stack_plans.values():
        for rp in fp.regions:
            specs = [s for d in render.region_manifests(fp, rp) for s in gpu_pod_specs(d)]
            assert specs, rp.region
            for spec in specs:
                assert spec["nodeSelector"].items() <= gpu_pool(rp).labels.items()


def test_every_rendered_kind_has_a_resource_class(own_plans) -> None:
    fp = own_plans["one-region"]
    for doc in render.region_manifests(fp, fp.regions[0]):
        assert (doc["apiVersion"], doc["kind"]) in {*TYPED, *CUSTOM}


def test_a_document_becomes_keyword_arguments_verbatim() -> None:
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}}
    assert resource_kwargs(doc) == {
        "api_version": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x"},
        "data": {"a": "b"},
    }
