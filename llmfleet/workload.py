"""Kubernetes names and fixed settings that the rendered manifests and the Pulumi
components share: the namespace, labels, GPU taint, Secret and paths of a fleet's vLLM
workload. One home, so a manifest and the node pool cannot disagree."""

from __future__ import annotations

from llmfleet.catalog import Instance
from llmfleet.fleet import Workload
from llmfleet.plan import CapacityPlan

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


def workload(plan: CapacityPlan, instance: Instance) -> Workload:
    """The workload section of a region's plan."""
    return Workload(
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
