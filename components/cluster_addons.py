"""ClusterAddons: what a region's cluster needs before vLLM can serve and scale there.

Three pinned Helm releases on the cluster's Kubernetes provider:

- NVIDIA device plugin: the EKS AL2023 NVIDIA AMI ships the driver and the container
  toolkit but does not run the device plugin, so without it no node advertises
  `nvidia.com/gpu` (EKS user guide, "Install Kubernetes device plugin for GPUs": "When using
  the EKS-optimized AL2023 AMIs with NVIDIA GPUs, you must install the NVIDIA Kubernetes
  device plugin"; only the Bottlerocket NVIDIA AMIs include it). It runs on the GPU nodes
  only: it tolerates the GPU taint and selects the `nvidia.com/gpu.present` label that
  GpuNodePool sets.
- KEDA: the ScaledObject CRD and the operator that turns the vLLM metrics into an HPA.
- kube-prometheus-stack: Prometheus, the operator and its CRDs (ServiceMonitor). Prometheus
  selects every ServiceMonitor in the cluster (not only the chart's own), so the
  VllmService's ServiceMonitor is scraped; Grafana is off (it would create a Secret with an
  admin password).

Versions are pinned to the releases whose CRD schemas the tests validate against
(cloudcoil-models-keda 2.16.1.0 = KEDA 2.16.1; cloudcoil-models-prometheus-operator
0.80.1.0 = prometheus-operator v0.80.1, which kube-prometheus-stack 69.5.1 ships).
The release name and namespace of Prometheus come from the core (`llmfleet.serving`), the
same constants the rendered ScaledObject's `serverAddress` and NetworkPolicy use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from llmfleet import serving


@dataclass(frozen=True)
class HelmChart:
    """A pinned chart: release name, chart, exact version, repository, namespace, values."""

    release: str
    chart: str
    version: str
    repository: str
    namespace: str
    values: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""


NVIDIA_DEVICE_PLUGIN = HelmChart(
    release="nvidia-device-plugin",
    chart="nvidia-device-plugin",
    version="0.17.4",
    repository="https://nvidia.github.io/k8s-device-plugin",
    namespace="kube-system",
    values={
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "tolerations": [
            {"key": serving.GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
        ],
    },
    source="EKS user guide ml-eks-k8s-device-plugin (helm repo nvdp, chart 0.17.4)",
)
KEDA = HelmChart(
    release="keda",
    chart="keda",
    version="2.16.1",
    repository="https://kedacore.github.io/charts",
    namespace="keda",
    source="kedacore/charts release v2.16.1 (app 2.16.1)",
)
KUBE_PROMETHEUS_STACK = HelmChart(
    release=serving.PROMETHEUS_RELEASE,
    chart="kube-prometheus-stack",
    version="69.5.1",
    repository="https://prometheus-community.github.io/helm-charts",
    namespace=serving.MONITORING_NAMESPACE,
    values={
        # Service names start with the release name: <release>-prometheus (serving.PROMETHEUS_URL)
        "fullnameOverride": serving.PROMETHEUS_RELEASE,
        "grafana": {"enabled": False},
        "prometheus": {
            "prometheusSpec": {
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
            }
        },
    },
    source="prometheus-community/helm-charts kube-prometheus-stack-69.5.1 (app v0.80.1)",
)
CHARTS: tuple[HelmChart, ...] = (NVIDIA_DEVICE_PLUGIN, KEDA, KUBE_PROMETHEUS_STACK)


def release_args(chart: HelmChart) -> dict[str, Any]:
    """Keyword arguments of the chart's `helm.v3.Release` (physical release name = chart's)."""
    return {
        "name": chart.release,
        "chart": chart.chart,
        "version": chart.version,
        "repository_opts": {"repo": chart.repository},
        "namespace": chart.namespace,
        "create_namespace": True,
        "values": dict(chart.values),
    }


@dataclass(frozen=True)
class ClusterAddonsArgs:
    """k8s_provider: the region's cluster provider (InferenceCluster.k8s_provider).
    depends_on: what the releases wait for, e.g. the GPU node group (the device plugin's
        DaemonSet has nowhere to run before it).
    charts: the releases to install (default CHARTS).
    """

    k8s_provider: k8s.Provider
    depends_on: Sequence[pulumi.Resource] = ()
    charts: Sequence[HelmChart] = CHARTS


class ClusterAddons(pulumi.ComponentResource):
    """Children: one `helm.v3.Release` per chart, named `{name}-{release}`; `releases` maps
    the release name to it."""

    releases: dict[str, k8s.helm.v3.Release]

    def __init__(
        self, name: str, args: ClusterAddonsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:ClusterAddons", name, None, opts)
        self.releases = {
            chart.release: k8s.helm.v3.Release(
                f"{name}-{chart.release}",
                **release_args(chart),
                opts=pulumi.ResourceOptions(
                    parent=self, provider=args.k8s_provider, depends_on=list(args.depends_on)
                ),
            )
            for chart in args.charts
        }
        self.register_outputs({"releases": {r: rel.status for r, rel in self.releases.items()}})
