"""Kubernetes names and settings the manifests and the node pools share: namespaces, labels,
the GPU taint, the serving port, the pod's user."""

from __future__ import annotations

from pydantic import Field

from llmfleet.catalog.hardware import Instance
from llmfleet.data import Data
from llmfleet.plan.schema import CapacityPlan


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
    hf_token_secret: str = Field(
        description="Secret the user creates in `namespace` holding the Hugging Face token; "
        "the pod reads it only through a secretKeyRef."
    )
    hf_token_secret_key: str
    run_as_user: int = Field(description="Non-root uid of the vLLM container.")
    model_cache_path: str = Field(description="Mount path of the weight cache; HF_HOME below it.")
    config_path: str = Field(description="Where the ConfigMap's vLLM config is mounted.")
    gateway_namespace: str = Field(description="Namespace of the gateway/ingress admitted.")
    monitoring_namespace: str = Field(description="Namespace of Prometheus (admitted, scrapes).")
    prometheus_url: str = Field(description="Prometheus that KEDA's triggers query.")
    pdb_max_unavailable: int = Field(description="Replicas a voluntary disruption may take.")
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
"""Secret the user creates in the fleet's namespace: `kubectl create secret generic hf-token
--from-literal=token=hf_...`; llmfleet never renders or deploys its value."""
HF_TOKEN_SECRET_KEY = "token"
VLLM_UID = 2000
"""The `vllm` user (uid 2000, HOME /home/vllm) the vllm/vllm-openai image ships; the image's
default USER stays root, so the pod sets it explicitly."""
MODEL_CACHE_PATH = "/var/cache/vllm"
CONFIG_PATH = "/etc/vllm/config.yaml"
GATEWAY_NAMESPACE = "gateway"
MONITORING_NAMESPACE = "monitoring"
PROMETHEUS_RELEASE = "kube-prometheus-stack"
PROMETHEUS_URL = (
    f"http://{PROMETHEUS_RELEASE}-prometheus.{MONITORING_NAMESPACE}.svc.cluster.local:9090"
)
PDB_MAX_UNAVAILABLE = 1


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


def build_workload(plan: CapacityPlan, instance: Instance, kind: str = "Deployment") -> Workload:
    """The workload section of a region's plan."""
    return Workload(
        kind=kind,
        namespace=plan.name,
        name=plan.name,
        labels={
            "app.kubernetes.io/component": "inference",
            "app.kubernetes.io/name": "vllm",
            "app.kubernetes.io/instance": plan.name,
            "app.kubernetes.io/managed-by": "llmfleet",
        },
        node_labels=node_labels(
            plan.name, instance.gpu, instance.instance_type, instance.gpu_count
        ),
        gpu_taint_key=GPU_TAINT_KEY,
        gpu_taint_value=GPU_TAINT_VALUE,
        hf_token_secret=HF_TOKEN_SECRET,
        hf_token_secret_key=HF_TOKEN_SECRET_KEY,
        run_as_user=VLLM_UID,
        model_cache_path=MODEL_CACHE_PATH,
        config_path=CONFIG_PATH,
        gateway_namespace=GATEWAY_NAMESPACE,
        monitoring_namespace=MONITORING_NAMESPACE,
        prometheus_url=PROMETHEUS_URL,
        pdb_max_unavailable=PDB_MAX_UNAVAILABLE,
    )
