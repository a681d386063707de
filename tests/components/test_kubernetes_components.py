"""The pure parts of ClusterAddons and VllmService, without the Pulumi runtime."""

from __future__ import annotations

import re

import pulumi_kubernetes as k8s

from components.cluster_addons import (
    CHARTS,
    KEDA,
    KUBE_PROMETHEUS_STACK,
    NVIDIA_DEVICE_PLUGIN,
    release_args,
)
from components.node_pool import gpu_pool, node_taints, system_pool
from components.vllm_service import CUSTOM, TYPED, resource_kwargs
from llmfleet.fleetplan import workload
from llmfleet.outputs import render


def test_every_chart_is_pinned_to_an_exact_version_from_an_https_repository() -> None:
    for chart in CHARTS:
        args = release_args(chart)
        assert re.fullmatch(r"\d+\.\d+\.\d+", args["version"]), chart.release
        assert args["repository_opts"]["repo"].startswith("https://")
        assert args["name"] == chart.release and args["create_namespace"] is True
        assert chart.source


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
    for fp in stack_plans.values():
        for rp in fp.regions:
            [deployment] = [
                d for d in render.region_manifests(fp, rp) if d["kind"] == "Deployment"
            ]
            selector = deployment["spec"]["template"]["spec"]["nodeSelector"]
            assert selector.items() <= gpu_pool(rp).labels.items()


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
