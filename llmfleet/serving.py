"""Stage 2: how each replica serves: vLLM engine arguments, pod sizing, probes, drain,
and the autoscaling triggers, all derived from the stage-1 operating point.

Autoscaling thresholds are the signal values the performance model predicts at the load
where a replica has used up its headroom (capacity x (1 - headroom)): scale-out starts
exactly when the fleet leaves the load it was sized for, before the SLO is at risk.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

from llmfleet import fleet
from llmfleet.catalog import Instance
from llmfleet.perf import Engine
from llmfleet.plan import CapacityPlan
from llmfleet.sizing import ReplicaSizing, length_cv2, predict_at, ttft_percentile_s

VLLM_VERSION = "0.33.0"
VLLM_CATALOG = Path(__file__).parent / "catalog" / "vllm" / f"vllm-{VLLM_VERSION}.json"
PORT = 8000
# Weights come from the model hub or a mirror at a share of the node's network; vLLM then
# reads them from local disk and captures CUDA graphs (measured start-ups: 1-3 minutes).
DOWNLOAD_SHARE_OF_NETWORK = 0.5
MAX_DOWNLOAD_GBPS = 10.0
DISK_READ_GB_S = 1.0
GRAPH_CAPTURE_AND_COMPILE_S = 180
STARTUP_PERIOD_S = 10
PRESTOP_SLEEP_S = 10
SYSTEM_RESERVED_VCPU = 2
SYSTEM_RESERVED_MEMORY_SHARE = 0.1
PROBE_PERIOD_S = 10
PROBE_TIMEOUT_S = 5
READINESS_FAILURE_THRESHOLD = 3
# A busy engine answers /health late; restart only after a minute of silence.
LIVENESS_FAILURE_THRESHOLD = 6
FALLBACK_FAILURE_THRESHOLD = 3
PDB_MAX_UNAVAILABLE = 1

# Kubernetes names shared by the rendered manifests (templates/) and the Pulumi components.
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


@cache
def vllm_catalog() -> dict[str, Any]:
    """Flags and metrics of the pinned vLLM release (derived from its own source)."""
    return dict(json.loads(VLLM_CATALOG.read_text()))


def engine_args(
    plan: CapacityPlan, hf_repo: str, native_precision: str, engine: fleet.Engine
) -> dict[str, Any]:
    """The `vllm serve --config` keys: every key is a flag of the pinned release."""
    args: dict[str, Any] = {
        "model": hf_repo,
        "served-model-name": plan.name,
        "host": "0.0.0.0",
        "port": PORT,
        "tensor-parallel-size": engine.tensor_parallel_size,
        "max-model-len": engine.max_model_len,
        "max-num-seqs": engine.max_num_seqs,
        "max-num-batched-tokens": engine.max_num_batched_tokens,
        "gpu-memory-utilization": engine.gpu_memory_utilization,
        "kv-cache-dtype": engine.kv_cache_dtype,
        "block-size": engine.block_size,
        "enable-chunked-prefill": engine.enable_chunked_prefill,
        "enable-prefix-caching": engine.enable_prefix_caching,
    }
    if plan.model.precision == "fp8" and native_precision != "fp8":
        args["quantization"] = "fp8"  # dynamic FP8 of a 16-bit checkpoint at load time
    return dict(sorted(args.items()))


def node_labels(
    fleet_name: str, gpu: str, instance_type: str, gpus_per_node: int
) -> dict[str, str]:
    """Kubernetes labels of every GPU node (GpuNodePool) = the vLLM pods' nodeSelector."""
    labels = {
        f"{NODE_LABEL_PREFIX}/fleet": fleet_name,
        f"{NODE_LABEL_PREFIX}/gpu": gpu,
        f"{NODE_LABEL_PREFIX}/instance-type": instance_type,
        f"{NODE_LABEL_PREFIX}/gpus-per-node": str(gpus_per_node),
        "nvidia.com/gpu.present": "true",
    }
    return dict(sorted(labels.items()))


def workload(plan: CapacityPlan, instance: Instance) -> fleet.Workload:
    return fleet.Workload(
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


def _paged(kv_tokens: int, max_model_len: int, request_tokens: int, block: int) -> fleet.Paging:
    contiguous = kv_tokens // max_model_len
    per_request = math.ceil(request_tokens / block) * block
    paged = kv_tokens // per_request
    waste = 1 - request_tokens / max_model_len
    return fleet.Paging(
        contiguous_sequences=contiguous,
        paged_sequences=paged,
        explanation=(
            f"A contiguous allocator reserves max_model_len ({max_model_len:,} tokens) per "
            f"sequence: {kv_tokens:,} KV tokens hold {contiguous} sequences and "
            f"{waste:.0%} of each reservation sits empty for a mean request of "
            f"{request_tokens:,} tokens. PagedAttention allocates {block}-token blocks as a "
            f"sequence grows, so the same pool holds {paged} such sequences "
            f"({paged / max(1, contiguous):.1f}x)."
        ),
    )


def autoscaling(
    plan: CapacityPlan, eng: Engine, sizing: ReplicaSizing, replicas: fleet.MinDesiredMax
) -> fleet.Autoscaling:
    """Thresholds are the signals at the load where a replica has used its headroom."""
    i, o = plan.traffic.input_tokens.mean, plan.traffic.output_tokens.mean
    rate = sizing.capacity_rps * (1 - plan.headroom)
    steps, ttft_s = predict_at(eng, plan, sizing, rate)
    running = rate * o * steps.mean_s
    kv_use = running * (i + o / 2) / sizing.memory.kv_cache_tokens
    rho = steps.mixed_share
    service = i / sizing.chunk_tokens * steps.mixed_s
    cv2 = length_cv2(i, plan.traffic.input_tokens.p95_or_mean)
    wait_mean = rho * service * (1 + cv2) / (2 * (1 - rho))
    queued = rate * wait_mean  # Little's law
    p = plan.slo.percentile / 100
    wait_p = wait_mean / rho * math.log(rho / (1 - p)) if rho > 1 - p else wait_mean
    limit_ttft = ttft_percentile_s(eng, plan, sizing.steps, sizing.batch, sizing.chunk_tokens)
    return fleet.Autoscaling(
        min_replicas=replicas.min,
        max_replicas=replicas.max,
        fallback_replicas=replicas.desired,
        polling_interval_s=15,
        cooldown_period_s=300,
        scale_down_stabilization_s=600,
        fallback_failure_threshold=FALLBACK_FAILURE_THRESHOLD,
        queue_depth_per_replica=round(max(queued, 0.5), 2),
        kv_cache_usage=round(min(max(kv_use, 0.05), 0.95), 3),
        queue_wait_p99_s=round(max(wait_p, 0.01), 3),
        reasons=[
            f"a replica sustains {sizing.capacity_rps:.2f} req/s at the SLO; with "
            f"{plan.headroom:.0%} headroom it is sized for {rate:.2f} req/s",
            f"at {rate:.2f} req/s the model predicts {running:.1f} running sequences "
            f"({kv_use:.0%} of the KV pool), {queued:.2f} queued requests and a p"
            f"{plan.slo.percentile:g} queue wait of {wait_p * 1000:.0f} ms (TTFT "
            f"{ttft_s * 1000:.0f} ms; at capacity {limit_ttft * 1000:.0f} ms)",
            "each trigger fires at that value, so scale-out starts when a replica leaves "
            "the load it was sized for, before the headroom is consumed",
            f"min {replicas.min} replicas carry the trough, max {replicas.max} the peak; if "
            f"Prometheus is unreachable KEDA holds {replicas.desired} (the peak size)",
        ],
    )


def serving(
    plan: CapacityPlan,
    hf_repo: str,
    native_precision: str,
    weights_gib: float,
    instance: Instance,
    eng: Engine,
    sizing: ReplicaSizing,
    engine: fleet.Engine,
    replicas: fleet.MinDesiredMax,
) -> fleet.Serving:
    per_node = instance.gpu_count // engine.tensor_parallel_size
    cpu = max(1, (instance.vcpus - SYSTEM_RESERVED_VCPU) // per_node)
    mem = int(instance.host_memory_gib * (1 - SYSTEM_RESERVED_MEMORY_SHARE) // per_node)
    gbps = min(instance.sustained_network_gbps * DOWNLOAD_SHARE_OF_NETWORK, MAX_DOWNLOAD_GBPS)
    weights_gb = weights_gib * 1.073741824
    startup = weights_gb * 8 / gbps + weights_gb / DISK_READ_GB_S + GRAPH_CAPTURE_AND_COMPILE_S
    o_p95 = plan.traffic.output_tokens.p95_or_mean
    longest_s = plan.slo.ttft_ms / 1000 + o_p95 * plan.slo.itl_ms / 1000
    shutdown = math.ceil(longest_s) + 5
    i, o = plan.traffic.input_tokens.mean, plan.traffic.output_tokens.mean
    return fleet.Serving(
        image=vllm_catalog()["image"],
        vllm_version=VLLM_VERSION,
        args=dict(
            sorted(
                {
                    **engine_args(plan, hf_repo, native_precision, engine),
                    # graceful drain: finish in-flight requests for this long after SIGTERM
                    "shutdown-timeout": shutdown,
                }.items()
            )
        ),
        gpus_per_pod=engine.tensor_parallel_size,
        cpu_per_pod=cpu,
        memory_gib_per_pod=mem,
        shm_gib=2 * engine.tensor_parallel_size,
        model_cache_gib=math.ceil(weights_gib * 1.2) + 10,
        startup_budget_s=int(math.ceil(startup / STARTUP_PERIOD_S) * STARTUP_PERIOD_S),
        startup_period_s=STARTUP_PERIOD_S,
        startup_failure_threshold=int(math.ceil(startup / STARTUP_PERIOD_S)),
        probe_period_s=PROBE_PERIOD_S,
        probe_timeout_s=PROBE_TIMEOUT_S,
        readiness_failure_threshold=READINESS_FAILURE_THRESHOLD,
        liveness_failure_threshold=LIVENESS_FAILURE_THRESHOLD,
        workload=workload(plan, instance),
        shutdown_timeout_s=shutdown,
        prestop_sleep_s=PRESTOP_SLEEP_S,
        termination_grace_s=shutdown + PRESTOP_SLEEP_S + 5,
        paging=_paged(sizing.memory.kv_cache_tokens, plan.max_model_len, i + o, engine.block_size),
        autoscaling=autoscaling(plan, eng, sizing, replicas),
        reasons=[
            f"startup budget {startup:.0f} s: {weights_gb:.0f} GB of weights at {gbps:g} Gbps, "
            f"read at {DISK_READ_GB_S:g} GB/s, plus {GRAPH_CAPTURE_AND_COMPILE_S} s of "
            "compilation and CUDA-graph capture",
            f"drain: a p95 request lasts up to {longest_s:.0f} s (TTFT + {o_p95} tokens at the ITL "
            f"target); --shutdown-timeout {shutdown} s after a {PRESTOP_SLEEP_S} s preStop "
            "that lets endpoints drop the pod",
            f"/dev/shm {2 * engine.tensor_parallel_size} GiB: NCCL and the TP workers' "
            "shared-memory queues",
        ],
    )
