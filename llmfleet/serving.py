"""Stage 2: how each replica serves: the vLLM engine arguments, pod sizing, probes and
drain, all derived from the region's choice (`Choice`)."""

from __future__ import annotations

import math

from llmfleet import fleet
from llmfleet.autoscaling import custom_buckets
from llmfleet.catalog.vllm_release import VLLM_VERSION
from llmfleet.choice import Choice
from llmfleet.cold_start import STARTUP_PERIOD_S
from llmfleet.fleet_capacity import ColdStart
from llmfleet.images import image_ref
from llmfleet.levers import served
from llmfleet.workload import PORT

PRESTOP_SLEEP_S = 10
SYSTEM_RESERVED_VCPU = 2
SYSTEM_RESERVED_MEMORY_SHARE = 0.1
PROBE_PERIOD_S = 10
PROBE_TIMEOUT_S = 5
READINESS_FAILURE_THRESHOLD = 3
# A busy engine answers /health late; restart only after a minute of silence.
LIVENESS_FAILURE_THRESHOLD = 6


def longest_request_s(choice: Choice) -> float:
    """A p95 request at the SLO: TTFT + its p95 output tokens at the ITL target."""
    plan = choice.plan
    itl_s = plan.slo.itl_ms / 1000
    return plan.slo.ttft_ms / 1000 + plan.traffic.output_tokens.p95_or_mean * itl_s


def vllm_args(choice: Choice, cold: ColdStart) -> fleet.VllmArgs:
    """The `vllm serve --config` keys: every key a flag of the pinned release. The served
    checkpoint's weights stream from the region's S3 copy (`cold.weights_uri`); with TP > 1
    the streamer's `distributed` mode lets each rank read a share and exchange the rest."""
    plan, s, lv = choice.plan, choice.sizing, choice.lever
    checkpoint = served(plan, choice.model, lv)
    return fleet.VllmArgs(
        model=cold.weights_uri,
        load_format=cold.load_format,
        model_loader_extra_config={"distributed": True} if choice.tp > 1 else None,
        served_model_name=plan.name,
        host="0.0.0.0",
        port=PORT,
        tensor_parallel_size=choice.tp,
        max_model_len=plan.max_model_len,
        max_num_seqs=s.batch,
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
        shutdown_timeout=math.ceil(longest_request_s(choice)) + 5,
        enforce_eager=True if plan.model.enforce_eager else None,
    )


def paging(choice: Choice, block_size: int) -> fleet.Paging:
    """What PagedAttention buys over a contiguous allocator, for the plan's mean request."""
    kv_tokens = choice.sizing.memory.kv_cache_tokens
    max_model_len = choice.plan.max_model_len
    t = choice.plan.traffic
    request_tokens = t.input_tokens.mean + t.output_tokens.mean
    contiguous = kv_tokens // max_model_len
    per_request = math.ceil(request_tokens / block_size) * block_size
    paged = kv_tokens // per_request
    waste = 1 - request_tokens / max_model_len
    return fleet.Paging(
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


def serving(choice: Choice, weights_gib: float, cold: ColdStart) -> fleet.Serving:
    """The serving section: engine arguments, pod resources, probes (the startup budget is
    the cold start's, `cold_start.cold_start`) and drain."""
    inst, tp = choice.instance, choice.tp
    per_node = choice.replicas_per_node
    cpu = max(1, (inst.vcpus - SYSTEM_RESERVED_VCPU) // per_node)
    mem = int(inst.host_memory_gib * (1 - SYSTEM_RESERVED_MEMORY_SHARE) // per_node)
    startup_probes = cold.startup_budget_s // STARTUP_PERIOD_S
    args = vllm_args(choice, cold)
    shutdown = args.shutdown_timeout
    o_p95 = choice.plan.traffic.output_tokens.p95_or_mean
    return fleet.Serving(
        image=image_ref(choice.plan.startup, choice.region.name),
        vllm_version=VLLM_VERSION,
        vllm=args,
        cpu_per_pod=cpu,
        memory_gib_per_pod=mem,
        shm_gib=2 * tp,
        model_cache_gib=math.ceil(weights_gib * 1.2) + 10,
        startup_period_s=STARTUP_PERIOD_S,
        startup_failure_threshold=startup_probes,
        probe_period_s=PROBE_PERIOD_S,
        probe_timeout_s=PROBE_TIMEOUT_S,
        readiness_failure_threshold=READINESS_FAILURE_THRESHOLD,
        liveness_failure_threshold=LIVENESS_FAILURE_THRESHOLD,
        prestop_sleep_s=PRESTOP_SLEEP_S,
        termination_grace_s=shutdown + PRESTOP_SLEEP_S + 5,
        paging=paging(choice, args.block_size),
        reasons=[
            f"startup budget {cold.startup_budget_s} s: 1.5x the predicted "
            f"{cold.container_s:.0f} s from container start to ready (weights streamed "
            f"from {cold.weights_uri}; cold_start.terms)",
            f"drain: a p95 request lasts up to {longest_request_s(choice):.0f} s (TTFT + {o_p95} "
            f"tokens at the ITL target); --shutdown-timeout {shutdown} s after a "
            f"{PRESTOP_SLEEP_S} s preStop that lets endpoints drop the pod",
            f"/dev/shm {2 * tp} GiB: NCCL and the TP workers' shared-memory queues",
        ],
    )
