"""Kubernetes names and settings the manifests and the node pools share: namespaces, labels,
the GPU taint, the serving port, the pod's user; and names bounded to what an AWS API takes."""

from __future__ import annotations

import hashlib

from pydantic import Field

from llmfleet.catalog.hardware import Instance
from llmfleet.data import Data
from llmfleet.plan.schema import CapacityPlan


def bounded_name(name: str, limit: int) -> str:
    """`name`, or when longer than `limit` its head with a hash of the whole (kept unique):
    a fleet and region name can be long, an ALB's name or an EventBridge rule's cannot."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:6]
    return f"{name[: limit - 7].rstrip('-')}-{digest}"


class Workload(Data):
    """Kubernetes names and settings the rendered manifests and the Pulumi components share.

    Derived from the plan (names) or fixed by llmfleet (documented constants in workload.py);
    a manifest and the node pool read them here, so they cannot disagree.
    """

    namespace: str = Field(description="Namespace of the vLLM Deployment and its objects.")
    name: str = Field(description="Name of the Deployment, Service, PDB, ScaledObject, ...")
    labels: dict[str, str] = Field(description="Pod labels; every selector matches them.")
    node_labels: dict[str, str] = Field(
        description="Labels of every GPU node (NodePool) = the Deployment's nodeSelector."
    )
    gpu_taint_key: str = Field(description="Taint on every GPU node (effect NoSchedule).")
    gpu_taint_value: str
    namespace_labels: dict[str, str] = Field(
        description="The namespace's labels: the workload's, Pod Security Admission "
        "`restricted` (enforced, audited, warned) at the plan's Kubernetes version, and with "
        "an entry point the load balancer controller's readiness-gate injection."
    )
    hf_token_secret: str = Field(
        description="Secret the program creates in `namespace` from the stack's secret config "
        "llmfleet:hfToken (gated repositories); only the weight-staging Job mounts it."
    )
    hf_token_secret_key: str
    pod_identity_agent_cidr: str = Field(
        description="The EKS Pod Identity agent's link-local address (/32): every pod with an "
        "association fetches its credentials there (TCP pod_identity_agent_port)."
    )
    pod_identity_agent_port: int
    run_as_user: int = Field(description="Non-root uid of the vLLM container.")
    model_cache_path: str = Field(description="Mount path of the weight cache; HF_HOME below it.")
    config_path: str = Field(description="Where the ConfigMap's vLLM config is mounted.")
    gateway_namespace: str = Field(description="Namespace of the gateway/ingress admitted.")
    monitoring_namespace: str = Field(description="Namespace of Prometheus (admitted, scrapes).")
    prometheus_pod_labels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels of Prometheus's own pods: the only pods of the monitoring "
        "namespace the NetworkPolicy admits on the serving and metrics ports.",
    )
    prometheus_url: str = Field(description="Prometheus that KEDA's triggers query.")
    pdb_max_unavailable: int = Field(
        description="Pods a voluntary disruption may take: one node's (`pods_per_node`)."
    )
    kind: str = Field(
        default="Deployment",
        description="What runs the replicas: a Deployment, or a LeaderWorkerSet (a group of "
        "pods per replica) when a replica spans nodes; KEDA scales it, the alerts watch it.",
    )


PORT = 8000
NODE_LABEL_PREFIX = "llmfleet.io"
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "true"
HF_TOKEN_SECRET = "hf-token"
"""Secret the program creates in the fleet's namespace from the stack's secret config
`llmfleet:hfToken` (`pulumi config set --secret llmfleet:hfToken hf_...`) when it is set;
only the weight-staging Job mounts it. No value is rendered."""
HF_TOKEN_SECRET_KEY = "token"
VLLM_UID = 2000
"""The `vllm` user (uid 2000, HOME /home/vllm) the vllm/vllm-openai image ships; the image's
default USER stays root, so the pod sets it explicitly."""
MODEL_CACHE_PATH = "/var/cache/vllm"
CONFIG_PATH = "/etc/vllm/config.yaml"
GATEWAY_NAMESPACE = "gateway"
MONITORING_NAMESPACE = "monitoring"
PROMETHEUS_RELEASE = "kube-prometheus-stack"
PROMETHEUS_POD_LABELS = {
    "app.kubernetes.io/name": "prometheus",
    "app.kubernetes.io/instance": f"{PROMETHEUS_RELEASE}-prometheus",
}
"""What prometheus-operator labels a Prometheus's pods (v0.93.0 pkg/prometheus/server/
operator.go makeSelectorLabels: app.kubernetes.io/name prometheus, app.kubernetes.io/instance
the Prometheus's name), and kube-prometheus-stack names its Prometheus `<fullname>-prometheus`
(templates/_helpers.tpl prometheus.crname): the chart's own selector of them."""
PROMETHEUS_URL = (
    f"http://{PROMETHEUS_RELEASE}-prometheus.{MONITORING_NAMESPACE}.svc.cluster.local:9090"
)


def pods_per_node(replicas_per_node: int, nodes_per_replica: int) -> int:
    """The PodDisruptionBudget's maxUnavailable: one node's pods (its replicas, or or the pods of
    one replica across nodes, which restart together). A smaller
    budget lets a node drain only after its first pod's replacement is Ready, one cold start
    later, and an EKS managed node group update fails a node whose pods do not leave within
    15 minutes (PodEvictionFailure: EKS user guide, managed-node-update-behavior)."""
    return replicas_per_node if nodes_per_replica == 1 else nodes_per_replica
POD_IDENTITY_AGENT_CIDR = "169.254.170.23/32"
POD_IDENTITY_AGENT_PORT = 80
"""EKS user guide, pod-id-considerations: the agent 'uses port 80 and port 2703 on a
link-local address on the node ... 169.254.170.23 for IPv4'; pods get
AWS_CONTAINER_CREDENTIALS_FULL_URI=http://169.254.170.23/v1/credentials (2703 is the agent's
own probe port). The VPC CNI's policy agent enforces link-local destinations too."""
PSA_LEVEL = "restricted"
PSA = "pod-security.kubernetes.io"
READINESS_GATE_LABEL = "elbv2.k8s.aws/pod-readiness-gate-inject"
"""AWS Load Balancer Controller docs (deploy/pod_readiness_gate.md): label the namespace and
create the Ingress before the pods, and the controller's webhook adds a readiness gate per
target group, so a new pod is Ready only once the ALB sees it healthy."""


def namespace_labels(plan: CapacityPlan, labels: dict[str, str]) -> dict[str, str]:
    """The workload's labels, Pod Security Admission at `restricted` for the plan's
    Kubernetes version, and the readiness-gate injection where an ALB serves the pods."""
    version = f"v{plan.kubernetes_version}"
    out = dict(labels)
    for mode in ("enforce", "audit", "warn"):
        out[f"{PSA}/{mode}"] = PSA_LEVEL
        out[f"{PSA}/{mode}-version"] = version
    if plan.dns is not None:
        out[READINESS_GATE_LABEL] = "enabled"
    return dict(sorted(out.items()))


def node_labels(
    fleet_name: str, gpu: str, instance_type: str, gpus_per_node: int
) -> dict[str, str]:
    """Kubernetes labels of every GPU node = the vLLM pods' nodeSelector (sorted keys)."""
    labels = {
        f"{NODE_LABEL_PREFIX}/fleet": fleet_name,
        f"{NODE_LABEL_PREFIX}/gpu": gpu,
        f"{NODE_LABEL_PREFIX}/instance-type": instance_type,
        f"{NODE_LABEL_PREFIX}/gpus-per-node": str(gpus_per_node),
        "nvidia.com/gpu.present": "true",
    }
    return dict(sorted(labels.items()))


def build_workload(
    plan: CapacityPlan, instance: Instance, kind: str = "Deployment", pdb_max_unavailable: int = 1
) -> Workload:
    """The workload section of a region's plan (`pdb_max_unavailable`: `pods_per_node`)."""
    labels = {
        "app.kubernetes.io/component": "inference",
        "app.kubernetes.io/name": "vllm",
        "app.kubernetes.io/instance": plan.name,
        "app.kubernetes.io/managed-by": "llmfleet",
    }
    return Workload(
        kind=kind,
        namespace=plan.name,
        name=plan.name,
        labels=labels,
        namespace_labels=namespace_labels(plan, labels),
        node_labels=node_labels(
            plan.name, instance.gpu, instance.instance_type, instance.gpu_count
        ),
        gpu_taint_key=GPU_TAINT_KEY,
        gpu_taint_value=GPU_TAINT_VALUE,
        hf_token_secret=HF_TOKEN_SECRET,
        hf_token_secret_key=HF_TOKEN_SECRET_KEY,
        pod_identity_agent_cidr=POD_IDENTITY_AGENT_CIDR,
        pod_identity_agent_port=POD_IDENTITY_AGENT_PORT,
        run_as_user=VLLM_UID,
        model_cache_path=MODEL_CACHE_PATH,
        config_path=CONFIG_PATH,
        gateway_namespace=GATEWAY_NAMESPACE,
        monitoring_namespace=MONITORING_NAMESPACE,
        prometheus_pod_labels=dict(PROMETHEUS_POD_LABELS),
        prometheus_url=PROMETHEUS_URL,
        pdb_max_unavailable=pdb_max_unavailable,
    )
