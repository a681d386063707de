"""Stage 2: how each replica serves: the vLLM engine arguments, the image, pod sizing,
probes and drain, all derived from the region's choice (`Choice`).

The image: through the region's ECR pull-through cache of Docker Hub when the plan names
the account (nodes then pull from ECR, whose layers come through the VPC's S3 gateway
endpoint, not the NAT gateways, and a Docker Hub outage or rate limit does not stop a
scale-up), pinned by digest when the plan gives one. llmfleet cannot read a digest offline
and never invents one: without `startup.image_digest` the image is pinned by its release
tag only (the report says so)."""

from __future__ import annotations

import math

from pydantic import ConfigDict, Field, computed_field

from llmfleet.catalog.images import serving_image
from llmfleet.catalog.vllm_release import VLLM_VERSION
from llmfleet.data import Data
from llmfleet.fleetplan.autoscaling import custom_buckets
from llmfleet.fleetplan.cold_start import STARTUP_PERIOD_S, ColdStart
from llmfleet.fleetplan.multi_node import (
    DATA_PARALLEL_RPC_PORT,
    MASTER_PORT,
    data_parallel_ranks_per_node,
)
from llmfleet.fleetplan.workload import PORT, VLLM_UID
from llmfleet.plan.cluster import Startup
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.choice import Choice
from llmfleet.search.levers import served


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
    pipeline_parallel_size: int | None = Field(
        default=None, description="Pipeline stages (absent: 1); one per node across nodes."
    )
    data_parallel_size: int | None = Field(
        default=None, description="Data-parallel ranks, each its own engine (absent: 1)."
    )
    enable_expert_parallel: bool | None = Field(
        default=None, description="True: the routed experts spread over TP x DP GPUs."
    )
    all2all_backend: str | None = Field(
        default=None,
        description="The experts' all-to-all the step model prices (allgather_reducescatter: "
        "NCCL collectives, which run over NVLink and EFA alike).",
    )
    nnodes: int | None = Field(
        default=None, description="Nodes of one replica (vLLM's mp multi-node launch)."
    )
    data_parallel_size_local: int | None = Field(
        default=None, description="DP ranks on each node when DP ranks span nodes."
    )
    data_parallel_rpc_port: int | None = Field(
        default=None, description="The leader's DP RPC port when DP ranks span nodes."
    )
    master_port: int | None = Field(
        default=None, description="The leader's torch.distributed port (multi-node)."
    )
    distributed_executor_backend: str | None = Field(
        default=None, description="mp across nodes (no Ray): the mp or data-parallel launch."
    )
    kv_transfer_config: dict[str, object] | None = Field(
        default=None, description="Disaggregated serving: the KV connector (NixlConnector)."
    )

    def config(self) -> dict[str, object]:
        """The config file's keys (flag names), sorted; unset options are left out."""
        return dict(sorted(self.model_dump(by_alias=True, exclude_none=True).items()))


class Paging(Data):
    contiguous_sequences: int = Field(description="Sequences if each reserved max_model_len.")
    paged_sequences: int = Field(description="Mean-length sequences the paged pool holds.")
    explanation: str


class Serving(Data):
    """Stage 2: what each replica runs: its engine arguments, pod, probes and drain."""

    image: str
    image_pull_policy: str = Field(description="IfNotPresent: a node never re-pulls a tag.")
    scanner_skips: dict[str, str] = Field(
        description="checkov checks the Deployment fails on purpose, each with the reason "
        "(rendered as checkov.io/skipN annotations)."
    )
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
    gpus_per_pod: int = Field(
        default=1, description="nvidia.com/gpu of one pod: a replica's GPUs, or a node's."
    )
    probe_period_s: int = Field(description="Readiness and liveness probe period.")
    probe_timeout_s: int
    readiness_failure_threshold: int
    liveness_failure_threshold: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def startup_budget_s(self) -> int:
        """The startup probe's failures x period: `cold_start.startup_budget_s` as probes
        (derived, not stored: the cold start is its one home)."""
        return self.startup_failure_threshold * self.startup_period_s


ECR_PREFIX = "docker-hub"
"""Repository prefix of the pull-through cache rule (components.weights)."""
DOCKER_HUB = "registry-1.docker.io"


def docker_hub_ref(startup: Startup, image: str, region: str) -> str:
    """A Docker Hub image as the pods pull it: through the region's ECR pull-through cache
    once the plan says its credentials are in (`startup.pull_through_ready`: ECR refuses a
    Docker Hub pull without them, so a pod pulling through it before would sit in
    ErrImagePull), else from Docker Hub directly."""
    if startup.ecr_account_id and startup.pull_through_ready:
        registry = f"{startup.ecr_account_id}.dkr.ecr.{region}.amazonaws.com"
        return f"{registry}/{ECR_PREFIX}/{image}"
    return image


def image_ref(startup: Startup, region: str) -> str:
    row = serving_image(startup.image)
    image = row.ref(region)
    if row.registry == "docker-hub":
        image = docker_hub_ref(startup, image, region)
    return f"{image}@{startup.image_digest}" if startup.image_digest else image


def image_through_nat(startup: Startup) -> bool:
    """Whether nodes pull the serving image from Docker Hub through the NAT gateways (an ECR
    image, or one through the cache, comes through the VPC's S3 endpoint)."""
    row = serving_image(startup.image)
    return row.registry == "docker-hub" and not (
        startup.ecr_account_id and startup.pull_through_ready
    )


def scanner_skips(startup: Startup) -> dict[str, str]:
    """The checkov checks the vLLM Deployment fails on purpose, and why (no `=` in a reason:
    checkov splits the annotation on it)."""
    skips = {
        "CKV_K8S_22": "vLLM, torch and Triton write compile and JIT caches under HOME and /tmp "
        "at start; a read-only root is not verified for the pinned image (the init "
        "container and the staging Job run read-only)",
        "CKV_K8S_40": f"uid {VLLM_UID} is the vllm user of the vllm/vllm-openai image (HOME "
        "/home/vllm); a uid outside its passwd loses HOME; runAsNonRoot, no capabilities and "
        "no privilege escalation hold",
    }
    if not startup.image_digest:
        skips["CKV_K8S_43"] = ("the digest of the pinned vLLM image cannot be read offline and "
                               "llmfleet never invents one; give startup.image_digest")
        skips["CKV_K8S_15"] = ("pinned by its release tag until startup.image_digest is given; "
                               "IfNotPresent keeps nodes from re-pulling the tag mid-rollout")
    return dict(sorted(skips.items()))


def image_notes(startup: Startup) -> list[str]:
    notes = []
    if not startup.image_digest:
        notes.append("image pinned by tag only: give startup.image_digest to pin the digest")
    if not startup.ecr_account_id:
        notes.append(
            "image pulled from Docker Hub through the NAT gateways: give "
            "startup.ecr_account_id to pull through the region's ECR cache"
        )
    elif not startup.pull_through_ready:
        notes.append(
            "image pulled from Docker Hub until the ECR pull-through cache's secret holds a "
            "Docker Hub username and access token: put them in, then set "
            "startup.pull_through_ready: true"
        )
    return notes


ALB_HEALTH_CHECK_INTERVAL_S = 15
ALB_UNHEALTHY_THRESHOLD = 2
"""The AWS Load Balancer Controller's target health check defaults (annotations
healthcheck-interval-seconds '15', unhealthy-threshold-count '2'; v3.5.0 annotation docs)."""
PRESTOP_SLEEP_S = ALB_HEALTH_CHECK_INTERVAL_S * ALB_UNHEALTHY_THRESHOLD
"""A terminating pod keeps serving this long before vLLM hears SIGTERM: the controller
deregisters it when its endpoint goes, and even a missed deregistration is detected by the
ALB's health check in two failed checks 15 s apart. A 10 s pause let the ALB send requests
to a pod that had stopped accepting them: a 502 on every rollout."""
SYSTEM_RESERVED_VCPU = 2
SYSTEM_RESERVED_MEMORY_SHARE = 0.1
PROBE_PERIOD_S = 10
PROBE_TIMEOUT_S = 5
READINESS_FAILURE_THRESHOLD = 3
# A busy engine answers /health late; restart only after a minute of silence.
LIVENESS_FAILURE_THRESHOLD = 6


MAX_DRAIN_S = 3600 - PRESTOP_SLEEP_S
"""The longest drain: the ALB keeps a draining target's requests at most 3600 s
(deregistration_delay.timeout_seconds 0-3600), preStop included."""


def longest_request_s(plan: CapacityPlan) -> float:
    """The longest request `max_model_len` allows: the TTFT target plus a whole context of
    tokens at the ITL target (a short prompt answered to the end of the context). The drain,
    the ALB's idle timeout and the grace periods are sized for it, not for the p95: a scale-in
    or a rollout would otherwise cut every longer request."""
    return (plan.slo.ttft_ms + plan.max_model_len * plan.slo.itl_ms) / 1000


def drain_s(plan: CapacityPlan) -> int:
    """vLLM's --shutdown-timeout: the longest request, within the ALB's 3600 s."""
    return min(MAX_DRAIN_S, math.ceil(longest_request_s(plan)) + 5)


def build_vllm_args(choice: Choice, cold: ColdStart) -> VllmArgs:
    """The `vllm serve --config` keys: every key a flag of the pinned release. The served
    checkpoint's weights stream from the region's S3 copy (`cold.weights_uri`); with TP > 1
    the streamer's `distributed` mode lets each rank read a share and exchange the rest."""
    plan, s, lv = choice.plan, choice.sizing, choice.served_levers
    checkpoint = served(plan, choice.model, lv)
    shape, nodes = choice.layout, choice.nodes_per_replica
    dp_local = data_parallel_ranks_per_node(choice)
    return VllmArgs(
        model=cold.weights_uri,
        load_format=cold.load_format,
        model_loader_extra_config={"distributed": True} if shape.ranks > 1 else None,
        served_model_name=plan.name,
        host="0.0.0.0",
        port=PORT,
        tensor_parallel_size=choice.tp,
        max_model_len=plan.max_model_len,
        max_num_seqs=s.max_num_seqs,
        max_num_batched_tokens=s.max_num_batched_tokens,
        gpu_memory_utilization=plan.gpu_memory_utilization,
        kv_cache_dtype=lv.kv_cache_dtype,
        block_size=s.memory.block_size,
        enable_chunked_prefill=True,
        enable_prefix_caching=True,
        # fp8 without a published FP8 checkpoint: dynamic FP8 of the 16-bit one at load time
        quantization=checkpoint.quantization,
        speculative_config=lv.spec.vllm_config(choice.tp) if lv.spec else None,
        revision=plan.model.revision,
        custom_histogram_buckets=custom_buckets(choice),
        shutdown_timeout=drain_s(plan),
        enforce_eager=True if plan.model.enforce_eager else None,
        pipeline_parallel_size=shape.pp if shape.pp > 1 else None,
        data_parallel_size=shape.dp if shape.dp > 1 else None,
        enable_expert_parallel=True if shape.ep else None,
        all2all_backend=ALL2ALL_BACKEND if shape.ep else None,
        nnodes=nodes if nodes > 1 and dp_local is None else None,
        master_port=MASTER_PORT if nodes > 1 and dp_local is None else None,
        data_parallel_size_local=dp_local,
        data_parallel_rpc_port=DATA_PARALLEL_RPC_PORT if dp_local is not None else None,
        distributed_executor_backend="mp" if nodes > 1 else None,
    )


ALL2ALL_BACKEND = "allgather_reducescatter"
"""vLLM's default MoE all-to-all since 0.11, NCCL-based: it runs over EFA, where DeepEP's
internode kernels need InfiniBand's IBGDA (deepseek-ai/DeepEP#9, vllm-project/vllm#27898);
it is the backend perf.parallel.all_to_all_s prices."""


def build_paging(choice: Choice, block_size: int) -> Paging:
    """What PagedAttention buys over a contiguous allocator, for the plan's mean request."""
    kv_tokens = choice.sizing.memory.kv_cache_tokens
    max_model_len = choice.plan.max_model_len
    t = choice.plan.traffic
    request_tokens = t.input_tokens.mean + t.output_tokens.mean
    contiguous = kv_tokens // max_model_len
    per_request = math.ceil(request_tokens / block_size) * block_size
    paged = kv_tokens // per_request
    waste = 1 - request_tokens / max_model_len
    return Paging(
        contiguous_sequences=contiguous,
        paged_sequences=paged,
        explanation=(
            f"A contiguous allocator reserves max_model_len ({max_model_len:,} tokens) per "
            f"sequence: {kv_tokens:,} KV tokens hold {contiguous} sequences and "
            f"{waste:.0%} of each reservation sits empty for a mean request of "
            f"{request_tokens:,} tokens. PagedAttention allocates {block_size}-token blocks as "
            f"a sequence grows, so the same pool holds {paged} such sequences "
            f"({paged / max(1, contiguous):.1f}x)."
        ),
    )


def build_serving(choice: Choice, weights_gib: float, cold: ColdStart) -> Serving:
    """The serving section: engine arguments, pod resources, probes (the startup budget is
    the cold start's, `cold_start.cold_start`) and drain."""
    inst = choice.instance
    gpus = min(choice.layout.ranks, inst.gpu_count)
    per_node = choice.replicas_per_node
    cpu = max(1, (inst.vcpus - SYSTEM_RESERVED_VCPU) // per_node)
    mem = int(inst.host_memory_gib * (1 - SYSTEM_RESERVED_MEMORY_SHARE) // per_node)
    startup_probes = cold.startup_budget_s // STARTUP_PERIOD_S
    args = build_vllm_args(choice, cold)
    shutdown = args.shutdown_timeout
    plan = choice.plan
    longest = longest_request_s(plan)
    cut = (
        f"; requests over {MAX_DRAIN_S} s are cut (the ALB drains at most 3600 s)"
        if math.ceil(longest) + 5 > MAX_DRAIN_S
        else ""
    )
    return Serving(
        image=image_ref(choice.plan.startup, choice.region.name),
        image_pull_policy="IfNotPresent",
        scanner_skips=scanner_skips(choice.plan.startup),
        vllm_version=VLLM_VERSION,
        vllm=args,
        cpu_per_pod=cpu,
        memory_gib_per_pod=mem,
        shm_gib=2 * gpus,
        gpus_per_pod=gpus,
        model_cache_gib=math.ceil(weights_gib / choice.nodes_per_replica * 1.2) + 10,
        startup_period_s=STARTUP_PERIOD_S,
        startup_failure_threshold=startup_probes,
        probe_period_s=PROBE_PERIOD_S,
        probe_timeout_s=PROBE_TIMEOUT_S,
        readiness_failure_threshold=READINESS_FAILURE_THRESHOLD,
        liveness_failure_threshold=LIVENESS_FAILURE_THRESHOLD,
        prestop_sleep_s=PRESTOP_SLEEP_S,
        termination_grace_s=shutdown + PRESTOP_SLEEP_S + 5,
        paging=build_paging(choice, args.block_size),
        reasons=[
            f"startup budget {cold.startup_budget_s} s: 1.5x the predicted "
            f"{cold.container_s:.0f} s from container start to ready (weights streamed "
            f"from {cold.weights_uri}; cold_start.terms)",
            f"drain: the longest request max_model_len allows lasts {longest:.0f} s (TTFT + "
            f"{plan.max_model_len:,} tokens at the ITL target); --shutdown-timeout {shutdown} s "
            f"after a {PRESTOP_SLEEP_S} s preStop (the ALB's two failed 15 s health checks) "
            "that lets the load balancer and endpoints drop the pod first; a pod exits as soon "
            f"as its last request ends{cut}",
            f"/dev/shm {2 * gpus} GiB: NCCL and the TP workers' shared-memory queues",
        ],
    )
