"""The FleetPlan: every decided number, with its predictions and reasons. Plain data.

Components, templates and the CLI read it; none of them recompute anything.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from llmfleet import __version__


class Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MinDesiredMax(Data):
    min: int
    desired: int
    max: int


class Predicted(Data):
    """Per replica, at the region's peak load unless a name says otherwise."""

    ttft_ms: float = Field(description="TTFT at the SLO percentile at the peak load per replica.")
    itl_ms: float = Field(description="A request's mean inter-token time (TPOT) at the percentile.")
    decode_only_itl_ms: float = Field(description="Gap between tokens in a step without prefill.")
    mixed_step_ms: float = Field(
        description="Gap in a step that carries a prefill chunk (max gap)."
    )
    output_tokens_per_s: float = Field(
        description="Output tokens/s one replica sustains inside the SLOs."
    )
    requests_per_s: float = Field(description="Requests/s one replica sustains inside the SLOs.")
    requests_per_s_at_peak: float = Field(description="Requests/s each replica serves at the peak.")
    kv_cache_tokens: int = Field(description="KV capacity of a replica, as vLLM logs it.")
    max_concurrency: float = Field(description="Sequences of max_model_len the KV pool holds.")
    batch_size: int = Field(description="Running sequences at the operating point (max_num_seqs).")
    ranges: dict[str, tuple[float, float]] = Field(
        description="Per metric, where the measured value is expected (p10-p90 of the "
        "calibration's held-out measured/predicted ratios)."
    )


class Memory(Data):
    gpu_total_gib: float
    weights_gib_per_gpu: float
    activation_gib: float
    non_torch_gib: float
    kv_cache_gib_per_gpu: float
    kv_bytes_per_token: float


class Engine(Data):
    """The vLLM engine arguments that stage 1 decides."""

    tensor_parallel_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    gpu_memory_utilization: float
    kv_cache_dtype: str
    block_size: int
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True


class Paging(Data):
    contiguous_sequences: int = Field(description="Sequences if each reserved max_model_len.")
    paged_sequences: int = Field(description="Mean-length sequences the paged pool holds.")
    explanation: str


class Autoscaling(Data):
    """KEDA ScaledObject settings; thresholds are per-replica averages."""

    min_replicas: int
    max_replicas: int
    fallback_replicas: int
    polling_interval_s: int
    cooldown_period_s: int
    scale_down_stabilization_s: int
    queue_depth_per_replica: float = Field(description="vllm:num_requests_waiting per replica.")
    kv_cache_usage: float = Field(description="vllm:kv_cache_usage_perc (0-1) per replica.")
    queue_wait_p99_s: float = Field(description="p99 of vllm:request_queue_time_seconds.")
    reasons: list[str]
    fallback_failure_threshold: int = Field(
        description="Failed Prometheus polls in a row before KEDA holds fallback_replicas."
    )


class Workload(Data):
    """Kubernetes names and settings the rendered manifests and the Pulumi components share.

    Derived from the plan (names) or fixed by llmfleet (documented constants in serving.py);
    a manifest and the node pool read them here, so they cannot disagree.
    """

    namespace: str = Field(description="Namespace of the vLLM Deployment and its objects.")
    name: str = Field(description="Name of the Deployment, Service, PDB, ScaledObject, ...")
    labels: dict[str, str] = Field(description="Pod labels; every selector matches them.")
    node_labels: dict[str, str] = Field(
        description="Labels GpuNodePool puts on its nodes; the Deployment's nodeSelector."
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


class Serving(Data):
    """Stage 2: what each replica runs and how the fleet scales."""

    image: str
    vllm_version: str
    args: dict[str, Any] = Field(description="`vllm serve --config` keys, sorted.")
    gpus_per_pod: int
    cpu_per_pod: int
    memory_gib_per_pod: int
    shm_gib: int
    model_cache_gib: int
    startup_budget_s: int
    startup_period_s: int
    shutdown_timeout_s: int
    prestop_sleep_s: int
    termination_grace_s: int
    paging: Paging
    autoscaling: Autoscaling
    reasons: list[str]
    startup_failure_threshold: int = Field(
        description="startup_budget_s / startup_period_s: failed /health probes before a restart."
    )
    probe_period_s: int = Field(description="Readiness and liveness probe period.")
    probe_timeout_s: int
    readiness_failure_threshold: int
    liveness_failure_threshold: int
    workload: Workload


class SystemPool(Data):
    """Untainted CPU nodes for cluster services (CoreDNS, KEDA, Prometheus, the operators)."""

    instance_type: str
    nodes: MinDesiredMax
    volume_gib: int
    priced: bool = Field(description="False: not in the price catalog, not in monthly_cost_usd.")
    reason: str


class BatchPoint(Data):
    """One replica at a running batch: what the performance model predicts (curves.py)."""

    batch: int = Field(description="Running sequences (max_num_seqs at the operating point).")
    itl_ms: float = Field(description="TPOT at the SLO percentile, with the chosen chunk.")
    ttft_ms: float | None = Field(description="TTFT at the percentile; None: prefill saturated.")
    output_tokens_per_s: float = Field(description="batch / mean step time.")


class Alternative(Data):
    instance_type: str
    tensor_parallel_size: int
    feasible: bool
    monthly_cost_usd: float | None
    reason: str


class RegionPlan(Data):
    region: str
    traffic_share: float
    peak_requests_per_s: float
    trough_requests_per_s: float
    instance_type: str
    gpu: str
    gpus_per_node: int
    gpus_per_replica: int
    tensor_parallel_size: int
    replicas_per_node: int
    replicas: MinDesiredMax
    nodes: MinDesiredMax
    price_usd_per_hour: float
    price_source: str
    monthly_cost_usd: float = Field(description="At desired nodes (provisioned for the peak).")
    monthly_cost_usd_at_trough: float
    predicted: Predicted
    memory: Memory
    engine: Engine
    serving: Serving
    system_pool: SystemPool
    node_zones: list[str] = Field(description="Zones that offer the instance: GPU node subnets.")
    availability_zones: list[str] = Field(
        description="Zones of the cluster's subnets: the node zones, topped up to 2-3 zones."
    )
    node_volume_gib: int = Field(description="Root volume per node: images and weights.")
    vpc_id: str | None
    private_subnet_ids: list[str] | None
    vpc_cidr: str
    reasons: list[str]
    alternatives: list[Alternative]
    batch_curve: list[BatchPoint] = Field(
        description="ITL, TTFT and throughput against the running batch, from one sequence to "
        "what the KV pool holds; includes the operating point (the report's chart)."
    )


class ModelSummary(Data):
    id: str
    hf_repo: str | None
    source: str
    params_b: float
    active_params_b: float
    precision: str
    kv_cache_dtype: str
    weights_gib: float
    kv_bytes_per_token: float


class RuleOfThumb(Data):
    rule: str
    rule_value: str
    computed: str
    verdict: str


class ClusterAccess(Data):
    endpoint_public_access: bool
    public_access_cidrs: list[str]
    nat_gateways: str


class FleetPlan(Data):
    name: str
    llmfleet_version: str = __version__
    model: ModelSummary
    slo: dict[str, float]
    traffic: dict[str, float]
    headroom: float
    confidence: str
    kubernetes_version: str
    cluster: ClusterAccess
    regions: list[RegionPlan]
    monthly_cost_usd: float
    monthly_cost_usd_at_trough: float
    gpus: MinDesiredMax
    rules_of_thumb: list[RuleOfThumb]

    def region(self, name: str) -> RegionPlan:
        return next(r for r in self.regions if r.region == name)
