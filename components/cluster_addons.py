"""ClusterAddons: what a region's cluster needs before vLLM can serve and scale there.

Three pinned Helm releases on the cluster's Kubernetes provider:

- NVIDIA device plugin: the EKS AL2023 NVIDIA AMI ships the driver and the container
  toolkit but does not run the device plugin, so without it no node advertises
  `nvidia.com/gpu` (EKS user guide, "Install Kubernetes device plugin for GPUs": "When using
  the EKS-optimized AL2023 AMIs with NVIDIA GPUs, you must install the NVIDIA Kubernetes
  device plugin"; only the Bottlerocket NVIDIA AMIs include it). It runs on the GPU nodes
  only: it tolerates the GPU taint and selects the `nvidia.com/gpu.present` label that
  the GPU NodePool sets, and waits for the GPU node group.
- KEDA: the ScaledObject CRD and the operator that turns the vLLM metrics into an HPA.
- NVIDIA DCGM exporter: GPU telemetry (utilisation, memory, power, XID errors) from every
  GPU node, scraped through its own ServiceMonitor; it waits for the Prometheus stack
  (whose CRDs its ServiceMonitor needs) and for the GPU node group.
- kube-prometheus-stack: Prometheus, the operator and its CRDs (ServiceMonitor). Prometheus
  selects every ServiceMonitor in the cluster (not only the chart's own), so the
  VllmService's ServiceMonitor is scraped; Grafana is off (it would create a Secret with an
  admin password).

KEDA and the Prometheus stack run on the system pool: they wait for the system node group
(a release that waits for its pods would otherwise wait on pods with nowhere to run) and
select `llmfleet.io/pool: system` through the charts' own values: KEDA 2.16.1's top-level
`nodeSelector` (operator, metrics server, webhooks); in kube-prometheus-stack 69.5.1 the
operator, its admission-webhook patch jobs, Prometheus, Alertmanager and kube-state-metrics
each take a `nodeSelector` (values.yaml of those chart versions). The node exporter is a
DaemonSet meant for every node and keeps the chart's default.

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

from components.node_pool import PoolKind, pool_node_selector
from llmfleet.errors import ProgramError
from llmfleet.fleetplan import workload

SYSTEM = pool_node_selector("system")


@dataclass(frozen=True)
class HelmChart:
    """A pinned chart: release name, chart, exact version, repository, namespace, values,
    and the node pool its pods run on (`pool`: the release waits for that node group)."""

    release: str
    chart: str
    version: str
    repository: str
    namespace: str
    values: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    pool: PoolKind = "system"
    after: tuple[str, ...] = ()
    """Releases (by release name) this one waits for, e.g. the one installing its CRDs."""


NVIDIA_DEVICE_PLUGIN = HelmChart(
    release="nvidia-device-plugin",
    chart="nvidia-device-plugin",
    version="0.17.4",
    repository="https://nvidia.github.io/k8s-device-plugin",
    namespace="kube-system",
    values={
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "tolerations": [
            {"key": workload.GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
        ],
    },
    source="EKS user guide ml-eks-k8s-device-plugin (helm repo nvdp, chart 0.17.4)",
    pool="gpu",
)
KEDA = HelmChart(
    release="keda",
    chart="keda",
    version="2.16.1",
    repository="https://kedacore.github.io/charts",
    namespace="keda",
    values={"nodeSelector": SYSTEM},
    source="kedacore/charts release v2.16.1 (app 2.16.1)",
)
KUBE_PROMETHEUS_STACK = HelmChart(
    release=workload.PROMETHEUS_RELEASE,
    chart="kube-prometheus-stack",
    version="69.5.1",
    repository="https://prometheus-community.github.io/helm-charts",
    namespace=workload.MONITORING_NAMESPACE,
    values={
        # Service names start with the release name: <release>-prometheus (workload.PROMETHEUS_URL)
        "fullnameOverride": workload.PROMETHEUS_RELEASE,
        "grafana": {"enabled": False},
        "prometheus": {
            "prometheusSpec": {
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
                # every PrometheusRule (the fleet's alerts), not only the chart's own
                "ruleSelectorNilUsesHelmValues": False,
                "nodeSelector": SYSTEM,
            }
        },
        "prometheusOperator": {
            "nodeSelector": SYSTEM,
            "admissionWebhooks": {"patch": {"nodeSelector": SYSTEM}},
        },
        "alertmanager": {"alertmanagerSpec": {"nodeSelector": SYSTEM}},
        "kube-state-metrics": {"nodeSelector": SYSTEM},
    },
    source="prometheus-community/helm-charts kube-prometheus-stack-69.5.1 (app v0.80.1)",
)
DCGM_EXPORTER = HelmChart(
    release="dcgm-exporter",
    chart="dcgm-exporter",
    version="4.8.2",
    repository="https://nvidia.github.io/dcgm-exporter/helm-charts",
    namespace=workload.MONITORING_NAMESPACE,
    values={
        # GPU nodes only (the label the GPU NodePool sets), through their taint; its
        # ServiceMonitor (on by default) is selected by the Prometheus above.
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "tolerations": [
            {"key": workload.GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
        ],
        "serviceMonitor": {"enabled": True},
    },
    source="NVIDIA/dcgm-exporter deployment/Chart.yaml at tag 4.5.3-4.8.2 (chart 4.8.2, "
    "2026-05-06; image nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless)",
    pool="gpu",
    after=(KUBE_PROMETHEUS_STACK.release,),
)
CHARTS: tuple[HelmChart, ...] = (NVIDIA_DEVICE_PLUGIN, KEDA, KUBE_PROMETHEUS_STACK, DCGM_EXPORTER)


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
    pool_nodes: per pool kind, what a chart of that `pool` waits for: the pool's node group
        (its pods have nowhere to run before it). Every chart's pool must have an entry.
    charts: the releases to install (default CHARTS).
    """

    k8s_provider: k8s.Provider
    pool_nodes: Mapping[PoolKind, Sequence[pulumi.Resource]]
    charts: Sequence[HelmChart] = CHARTS


class ClusterAddons(pulumi.ComponentResource):
    """Children: one `helm.v3.Release` per chart, named `{name}-{release}`; `releases` maps
    the release name to it."""

    releases: dict[str, k8s.helm.v3.Release]

    def __init__(
        self, name: str, args: ClusterAddonsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:ClusterAddons", name, None, opts)
        missing = sorted({c.pool for c in args.charts} - set(args.pool_nodes))
        if missing:
            raise ProgramError(f"{name}: ClusterAddonsArgs.pool_nodes has no {', '.join(missing)}")
        self.releases = {}
        for chart in args.charts:  # in order: a chart's `after` releases come before it
            after = [self.releases[r] for r in chart.after if r in self.releases]
            self.releases[chart.release] = k8s.helm.v3.Release(
                f"{name}-{chart.release}",
                **release_args(chart),
                opts=pulumi.ResourceOptions(
                    parent=self,
                    provider=args.k8s_provider,
                    depends_on=[*args.pool_nodes[chart.pool], *after],
                ),
            )
        self.register_outputs({"releases": {r: rel.status for r, rel in self.releases.items()}})
