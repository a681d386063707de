"""Stage 2's sections of the FleetPlan: the vLLM engine arguments, the pod and its probes,
the autoscaling triggers and the Kubernetes names (re-exported by `fleet`)."""

from __future__ import annotations

from pydantic import ConfigDict, Field, computed_field

from llmfleet.data import Data


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class VllmArgs(Data):
    """The `vllm serve --config` file: one field per flag of the pinned release, serialised
    under the flag's name (`config()`). It is the one home of the engine's numbers: TP,
    batch, token budget, context, memory share, KV dtype, drain time."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=_kebab, populate_by_name=True
    )

    model: str = Field(description="The checkpoint served: the region's S3 copy of it.")
    served_model_name: str
    host: str
    port: int
    tensor_parallel_size: int
    max_model_len: int
    max_num_seqs: int = Field(description="Running sequences at the operating point.")
    max_num_batched_tokens: int = Field(description="Decode tokens + one prefill chunk a step.")
    gpu_memory_utilization: float
    kv_cache_dtype: str
    block_size: int
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    quantization: str | None = Field(default=None, description="Absent: the checkpoint's own.")
    speculative_config: dict[str, object] | None = Field(
        default=None, description="vLLM SpeculativeConfig keys; absent: no speculation."
    )
    revision: str | None = Field(
        default=None, description="The checkpoint's commit (plan model.revision); absent: main."
    )
    custom_histogram_buckets: dict[str, list[float]] | None = Field(
        default=None,
        description="Bucket families whose default bounds cannot resolve a trigger's threshold.",
    )
    shutdown_timeout: int = Field(description="Seconds to finish in-flight requests on SIGTERM.")
    enforce_eager: bool | None = Field(
        default=None, description="True: no CUDA graphs (plan.model.enforce_eager); absent: graphs."
    )
    load_format: str | None = Field(
        default=None, description="runai_streamer: stream safetensors from S3 to the GPUs."
    )
    model_loader_extra_config: dict[str, object] | None = Field(
        default=None, description="The Run:ai streamer's options (distributed with TP > 1)."
    )

    def config(self) -> dict[str, object]:
        """The config file's keys (flag names), sorted; unset options are left out."""
        return dict(sorted(self.model_dump(by_alias=True, exclude_none=True).items()))


class Paging(Data):
    contiguous_sequences: int = Field(description="Sequences if each reserved max_model_len.")
    paged_sequences: int = Field(description="Mean-length sequences the paged pool holds.")
    explanation: str


class Trigger(Data):
    """One KEDA prometheus trigger, AverageValue: the HPA wants ceil(query / threshold)
    replicas. Every query reads a signal the pinned vLLM exports at a resolution that can
    cross the threshold (checked by `render`)."""

    name: str
    metric: str = Field(description="The vllm:* metric family the query reads.")
    query: str = Field(description="PromQL over this namespace's and model's series.")
    threshold: float = Field(description="Per replica, in the metric's unit.")
    quantile: float | None = Field(
        default=None, description="histogram_quantile's q (0-1) when the query takes one."
    )
    reason: str


class Autoscaling(Data):
    """KEDA ScaledObject settings. The replica bounds are `RegionPlan.replicas` (min, max;
    the fallback holds the desired count)."""

    polling_interval_s: int
    cooldown_period_s: int
    scale_down_stabilization_s: int
    fallback_failure_threshold: int = Field(
        description="Failed Prometheus polls in a row before KEDA holds the desired replicas."
    )
    triggers: list[Trigger]
    reasons: list[str]


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


class Serving(Data):
    """Stage 2: what each replica runs: its engine arguments, pod, probes and drain."""

    image: str
    vllm_version: str
    vllm: VllmArgs
    cpu_per_pod: int
    memory_gib_per_pod: int
    shm_gib: int
    model_cache_gib: int
    startup_period_s: int
    startup_failure_threshold: int = Field(
        description="Failed /health probes, startup_period_s apart, before a restart."
    )
    prestop_sleep_s: int
    termination_grace_s: int
    paging: Paging
    reasons: list[str]
    probe_period_s: int = Field(description="Readiness and liveness probe period.")
    probe_timeout_s: int
    readiness_failure_threshold: int
    liveness_failure_threshold: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def startup_budget_s(self) -> int:
        """How long a pod may take to start: the startup probe's failures x period."""
        return self.startup_failure_threshold * self.startup_period_s
