"""ClusterAddons: what a region's cluster needs before vLLM can serve, scale and page someone.

Pinned Helm releases on the cluster's Kubernetes provider, each at the version
`llmfleet/catalog/charts.csv` gives with the Kubernetes versions it supports (the plan is
refused for a version outside any of them, `plan.checks.check_kubernetes_version`):

- NVIDIA device plugin: the EKS AL2023 NVIDIA AMI ships the driver and the container
  toolkit but does not run the device plugin, so without it no node advertises
  `nvidia.com/gpu` (EKS user guide, "Install Kubernetes device plugin for GPUs": "When using
  the EKS-optimized AL2023 AMIs with NVIDIA GPUs, you must install the NVIDIA Kubernetes
  device plugin"; only the Bottlerocket NVIDIA AMIs include it). It runs on the GPU nodes
  only: it tolerates the GPU taint and selects the `nvidia.com/gpu.present` label that
  the GPU NodePool sets, and waits for the GPU node group.
- KEDA: the ScaledObject CRD and the operator that turns the vLLM metrics into an HPA. Its
  CRDs are chart templates, so `helm upgrade` upgrades them.
- kube-prometheus-stack: Prometheus, the operator, Alertmanager and Grafana. Prometheus
  selects every ServiceMonitor and PrometheusRule in the cluster (not only the chart's own).
  Alertmanager routes by severity to the plan's receivers (`alertmanager_config`): Slack,
  PagerDuty and webhooks through `*_file` settings that read a Secret you create in
  `monitoring` (mounted by `alertmanagerSpec.secrets`), e-mail through the region's SNS
  topic (its own Pod Identity, `components.alarms`). Grafana (the chart's random admin
  password, kept in a Secret of the chart) loads every ConfigMap labelled
  `grafana_dashboard: "1"` in any namespace, the fleet's dashboard included. The chart's
  CRDs sit in a `crds/` directory Helm installs once and never upgrades, so they are applied
  here instead (`crd_files`, server-side apply, from the chart's own tag) and the release
  skips them: a chart upgrade upgrades its CRDs first.
- NVIDIA DCGM exporter: GPU telemetry (utilisation, memory, power, XID errors) from every
  GPU node, scraped through its own ServiceMonitor; it waits for the Prometheus stack
  (whose CRDs its ServiceMonitor needs) and for the GPU node group.

KEDA and the Prometheus stack run on the system pool: they wait for the system node group
(a release that waits for its pods would otherwise wait on pods with nowhere to run) and
select `llmfleet.io/pool: system` through the charts' own values: KEDA's top-level
`nodeSelector` (operator, metrics server, webhooks); in kube-prometheus-stack the operator,
its admission-webhook patch jobs, Prometheus, Alertmanager, Grafana and kube-state-metrics
each take a `nodeSelector` (values.yaml of those chart versions). The node exporter is a
DaemonSet meant for every node and keeps the chart's default.

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
from llmfleet.catalog.kubernetes import ChartPin, chart
from llmfleet.errors import ProgramError
from llmfleet.fleetplan import workload
from llmfleet.plan.alerting import Alerting, Receiver

SYSTEM = pool_node_selector("system")
ALERTMANAGER_SERVICE_ACCOUNT = f"{workload.PROMETHEUS_RELEASE}-alertmanager"
"""Named in the values (not left to the chart's default) so its Pod Identity association
(sns:Publish on the region's topic, components.alarms) names the right account."""
ALERTMANAGER_SECRETS_DIR = "/etc/alertmanager/secrets"
"""Where Alertmanager mounts `alertmanagerSpec.secrets` (prometheus-operator AlertmanagerSpec:
`/etc/alertmanager/secrets/<secret-name>`)."""
KPS_CRDS = (
    "alertmanagerconfigs",
    "alertmanagers",
    "podmonitors",
    "probes",
    "prometheusagents",
    "prometheuses",
    "prometheusrules",
    "scrapeconfigs",
    "servicemonitors",
    "thanosrulers",
)
"""charts/kube-prometheus-stack/charts/crds/crds/crd-<name>.yaml at the chart's tag."""
LWS_CRDS = (
    "leaderworkerset.x-k8s.io_leaderworkersets",
    "disaggregatedset.x-k8s.io_disaggregatedsets",
    "disaggregatedset.x-k8s.io_disaggregatedsetrolescalers",
)
"""kubernetes-sigs/lws charts/lws/crds/<name>.yaml at the tag: the chart's controller watches
all three (its values.yaml: 'The CRD (under crds/) ... always installed')."""


def crd_urls(component: str) -> list[str]:
    """The CRD manifests of a chart whose CRDs Helm never upgrades, at the pinned version."""
    c = chart(component)
    if component == "kube-prometheus-stack":
        base = (
            "https://raw.githubusercontent.com/prometheus-community/helm-charts/"
            f"kube-prometheus-stack-{c.version}/charts/kube-prometheus-stack/charts/crds/crds"
        )
        return [f"{base}/crd-{name}.yaml" for name in KPS_CRDS]
    if component == "lws":
        base = f"https://raw.githubusercontent.com/kubernetes-sigs/lws/v{c.version}/charts/lws/crds"
        return [f"{base}/{name}.yaml" for name in LWS_CRDS]
    if component == "aws-load-balancer-controller":
        return [
            "https://raw.githubusercontent.com/kubernetes-sigs/aws-load-balancer-controller/"
            f"v{c.version}/helm/aws-load-balancer-controller/crds/crds.yaml"
        ]
    raise ProgramError(f"{component}: no CRD manifests known (catalog/charts.csv crds={c.crds})")


def crd_files(
    name: str, component: str, opts: pulumi.ResourceOptions
) -> list[k8s.yaml.v2.ConfigFile]:
    """The chart's CRDs as managed resources (server-side apply), one per manifest."""
    return [
        k8s.yaml.v2.ConfigFile(
            f"{name}-crds-{url.rsplit('/', 1)[-1].removesuffix('.yaml')}", file=url, opts=opts
        )
        for url in crd_urls(component)
    ]


@dataclass(frozen=True)
class HelmChart:
    """A pinned chart (`component` in catalog/charts.csv), its release name, namespace,
    values, and the node pool its pods run on (`pool`: the release waits for that node
    group)."""

    release: str
    component: str
    namespace: str
    values: Mapping[str, Any] = field(default_factory=dict)
    pool: PoolKind = "system"
    after: tuple[str, ...] = ()
    """Releases (by release name) this one waits for, e.g. the one installing its CRDs."""

    @property
    def pinned(self) -> ChartPin:
        return chart(self.component)

    @property
    def version(self) -> str:
        return self.pinned.version


NVIDIA_DEVICE_PLUGIN = HelmChart(
    release="nvidia-device-plugin",
    component="nvidia-device-plugin",
    namespace="kube-system",
    values={
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "tolerations": [
            {"key": workload.GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
        ],
    },
    pool="gpu",
)
KEDA = HelmChart(
    release="keda",
    component="keda",
    namespace="keda",
    values={"nodeSelector": SYSTEM},
)
KUBE_PROMETHEUS_STACK = HelmChart(
    release=workload.PROMETHEUS_RELEASE,
    component="kube-prometheus-stack",
    namespace=workload.MONITORING_NAMESPACE,
    values={
        # Service names start with the release name: <release>-prometheus (workload.PROMETHEUS_URL)
        "fullnameOverride": workload.PROMETHEUS_RELEASE,
        "grafana": {
            "enabled": True,
            "nodeSelector": SYSTEM,
            "sidecar": {
                "dashboards": {
                    "enabled": True,
                    "label": "grafana_dashboard",
                    "labelValue": "1",
                    "searchNamespace": "ALL",
                }
            },
        },
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
        "alertmanager": {
            "serviceAccount": {"create": True, "name": ALERTMANAGER_SERVICE_ACCOUNT},
            "alertmanagerSpec": {"nodeSelector": SYSTEM},
        },
        "kube-state-metrics": {"nodeSelector": SYSTEM},
    },
)
DCGM_EXPORTER = HelmChart(
    release="dcgm-exporter",
    component="dcgm-exporter",
    namespace=workload.MONITORING_NAMESPACE,
    values={
        # GPU nodes only (the label the GPU NodePool sets), through their taint; its
        # ServiceMonitor (on by default) is selected by the Prometheus above.
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "tolerations": [
            {"key": workload.GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
        ],
        "serviceMonitor": {"enabled": True},
        # The exporter GPU Operator v26.7 ships (catalog/charts.csv app_version), on the
        # newest chart (its values.yaml: image.tag overrides the chart's appVersion).
        "image": {"tag": chart("dcgm-exporter").app_version},
    },
    pool="gpu",
    after=(KUBE_PROMETHEUS_STACK.release,),
)
CHARTS: tuple[HelmChart, ...] = (NVIDIA_DEVICE_PLUGIN, KEDA, KUBE_PROMETHEUS_STACK, DCGM_EXPORTER)


def release_args(helm: HelmChart, values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Keyword arguments of the chart's `helm.v3.Release` (physical release name = chart's).
    A chart whose CRDs Helm would never upgrade skips them (`crd_files` applies them)."""
    pinned = helm.pinned
    args: dict[str, Any] = {
        "name": helm.release,
        "chart": pinned.chart,
        "version": pinned.version,
        "namespace": helm.namespace,
        "create_namespace": True,
        "values": dict(helm.values) if values is None else values,
    }
    if not pinned.chart.startswith("oci://"):
        args["repository_opts"] = {"repo": pinned.repository}
    if pinned.crds == "crds-dir":
        args["skip_crds"] = True
    return args


def _secret_file(secret_name: str, key: str) -> str:
    return f"{ALERTMANAGER_SECRETS_DIR}/{secret_name}/{key}"


def receiver_config(receiver: Receiver, region: str, topic_arn: str) -> dict[str, Any]:
    """One Alertmanager receiver (alertmanager docs/configuration.md, v0.34.0 field names)."""
    out: dict[str, Any] = {"name": receiver.name}
    if receiver.slack is not None:
        t = receiver.slack
        out["slack_configs"] = [{"api_url_file": _secret_file(t.secret_name, t.secret_key),
                                 "channel": t.channel, "send_resolved": True}]
    elif receiver.pagerduty is not None:
        t2 = receiver.pagerduty
        key_file = _secret_file(t2.secret_name, t2.secret_key)
        out["pagerduty_configs"] = [{"routing_key_file": key_file, "send_resolved": True}]
    elif receiver.webhook is not None:
        t3 = receiver.webhook
        out["webhook_configs"] = [{"url_file": _secret_file(t3.secret_name, t3.secret_key),
                                   "send_resolved": True}]
    else:  # email: the region's SNS topic, to which the addresses subscribe
        out["sns_configs"] = [{"topic_arn": topic_arn, "sigv4": {"region": region},
                               "send_resolved": True}]
    return out


def alertmanager_config(alerting: Alerting, region: str, topic_arn: str) -> dict[str, Any]:
    """Alertmanager's routing: each receiver gets the alerts of its severities (`continue`,
    so several receivers may hear one alert); anything else goes nowhere ("null")."""
    routes = [
        {
            "receiver": r.name,
            "matchers": [f'severity=~"{"|".join(sorted(r.severities))}"'],
            "continue": True,
        }
        for r in alerting.receivers
    ]
    return {
        "route": {
            "receiver": "null",
            "group_by": ["alertname", "region", "namespace"],
            "routes": routes,
        },
        "receivers": [{"name": "null"}]
        + [receiver_config(r, region, topic_arn) for r in alerting.receivers],
    }


def receiver_secrets(alerting: Alerting) -> list[str]:
    """The Secrets (in `monitoring`) Alertmanager mounts: each receiver's, once."""
    refs = [getattr(r, t) for r in alerting.receivers for t in r.targets if t != "email"]
    return sorted({ref.secret_name for ref in refs})


def prometheus_values(alerting: Alerting, region: str, topic_arn: str) -> dict[str, Any]:
    """kube-prometheus-stack's values with the region's Alertmanager routing."""
    values = {k: v for k, v in KUBE_PROMETHEUS_STACK.values.items()}
    alertmanager = dict(values["alertmanager"])
    spec = dict(alertmanager["alertmanagerSpec"])
    secrets = receiver_secrets(alerting)
    if secrets:
        spec["secrets"] = secrets
    alertmanager["alertmanagerSpec"] = spec
    alertmanager["config"] = alertmanager_config(alerting, region, topic_arn)
    values["alertmanager"] = alertmanager
    return values


@dataclass(frozen=True)
class ClusterAddonsArgs:
    """k8s_provider: the region's cluster provider (InferenceCluster.k8s_provider).
    pool_nodes: per pool kind, what a chart of that `pool` waits for: the pool's node group
        (its pods have nowhere to run before it). Every chart's pool must have an entry.
    charts: the releases to install (default CHARTS).
    values: per release name, values that replace the chart's own (the Prometheus stack's,
        with the region's Alertmanager routing: `prometheus_values`).
    release_after: per release name, what else it waits for (the Prometheus stack waits for
        Alertmanager's Pod Identity association).
    """

    k8s_provider: k8s.Provider
    pool_nodes: Mapping[PoolKind, Sequence[pulumi.Resource]]
    charts: Sequence[HelmChart] = CHARTS
    values: Mapping[str, pulumi.Input[Mapping[str, Any]]] = field(default_factory=dict)
    release_after: Mapping[str, Sequence[pulumi.Resource]] = field(default_factory=dict)


class ClusterAddons(pulumi.ComponentResource):
    """Children: the `monitoring` Namespace (`{name}-monitoring`: the receivers' Secret you
    create goes there), the CRDs of charts Helm would not upgrade (`{name}-<release>-crds-*`)
    and one `helm.v3.Release` per chart, named `{name}-{release}`; `releases` maps the
    release name to it."""

    releases: dict[str, k8s.helm.v3.Release]
    monitoring: k8s.core.v1.Namespace

    def __init__(
        self, name: str, args: ClusterAddonsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:ClusterAddons", name, None, opts)
        missing = sorted({c.pool for c in args.charts} - set(args.pool_nodes))
        if missing:
            raise ProgramError(f"{name}: ClusterAddonsArgs.pool_nodes has no {', '.join(missing)}")
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider)
        self.monitoring = k8s.core.v1.Namespace(
            f"{name}-monitoring",
            metadata={"name": workload.MONITORING_NAMESPACE},
            opts=k8s_opts,
        )
        self.releases = {}
        for helm in args.charts:  # in order: a chart's `after` releases come before it
            after = [self.releases[r] for r in helm.after if r in self.releases]
            crds: list[pulumi.Resource] = []
            if helm.pinned.crds == "crds-dir":
                crds = list(crd_files(f"{name}-{helm.release}", helm.component, k8s_opts))
            namespace = [self.monitoring] if helm.namespace == workload.MONITORING_NAMESPACE else []
            self.releases[helm.release] = k8s.helm.v3.Release(
                f"{name}-{helm.release}",
                **release_args(helm, args.values.get(helm.release)),  # type: ignore[arg-type]
                opts=pulumi.ResourceOptions(
                    parent=self,
                    provider=args.k8s_provider,
                    depends_on=[*args.pool_nodes[helm.pool], *after, *crds, *namespace,
                                *args.release_after.get(helm.release, ())],
                ),
            )
        self.register_outputs({"releases": {r: rel.status for r, rel in self.releases.items()}})
