"""The replica the search sized, as one record in the FleetPlan (`RegionPlan.replica`).

Everything a step of it costs is here, after the levers and the calibration: the layout
(TP / PP / DP / EP, the nodes it spans and the link between them), the GPU's bandwidth and
tensor rates, the fitted efficiencies and overheads (at the plan's confidence), a calibrated
server's factors, the precision, KV dtype, speculation and eager mode; and the engine the
search sized: the running batch, the per-rank `max_num_seqs`, the prefill chunk, the token
budget and vLLM's memory budget (the KV pool in tokens). A disaggregated region holds its
decode pool here and its prefill pool in `prefill`.

`predict --stack`, `simulate`, `drill` and the report read this record: `step_model_of`
rebuilds the search's own `StepModel` from it (a test checks it is equal to the search's),
so none of them re-runs the search or rebuilds the replica from the catalog. The catalog
rows it starts from (`hardware.gpu`, `constants.fitted`) supply only what a step never
reads (names, memory sizes); every number a step reads is the record's."""

from __future__ import annotations

from dataclasses import replace

from pydantic import Field

from llmfleet.catalog import hardware
from llmfleet.catalog.constants import fitted
from llmfleet.catalog.hardware import Instance
from llmfleet.data import Data
from llmfleet.perf.architecture import Arch
from llmfleet.perf.disagg import Pair
from llmfleet.perf.latency import Point, at_rate
from llmfleet.perf.memory import MemoryBudget
from llmfleet.perf.parallel import Link, Parallel
from llmfleet.perf.periods import Engine, Table, table_for
from llmfleet.perf.speculation import Speculation, resolve
from llmfleet.perf.step import Correction, StepModel
from llmfleet.plan.model import ResolvedModel
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.choice import Choice, PrefillPool
from llmfleet.search.disagg import transfer_s
from llmfleet.search.levers import Levers
from llmfleet.search.operating_point import ReplicaSizing
from llmfleet.search.prefix_hold import CacheHold
from llmfleet.search.replica_slo import workload_of
from llmfleet.search.shapes import Shape


class LinkRecord(Data):
    """A link between a replica's nodes (`perf.parallel.Link`)."""

    name: str = Field(description="efa, or the link a replica's nodes share.")
    latency_s: float = Field(description="Fixed time of one collective or send.")
    bus_bytes_per_s: float = Field(description="All-reduce bus bandwidth (nccl-tests busbw).")
    p2p_bytes_per_s: float = Field(description="One GPU's share for point-to-point traffic.")
    allreduce: list[tuple[float, float]] = Field(
        default_factory=list, description="A measured all-reduce: (bytes, seconds) points."
    )


class ReplicaLayout(Data):
    """How one replica uses GPUs and nodes."""

    instance_type: str
    gpus_per_node: int
    tensor_parallel_size: int
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    expert_parallel: bool = Field(default=False, description="Experts spread over TP x DP.")
    nodes_per_replica: int = 1
    gpus: int = Field(description="GPUs of one replica: TP x PP x DP.")
    inter_node: LinkRecord | None = Field(
        default=None, description="The link between the replica's nodes (None: one node)."
    )

    @property
    def label(self) -> str:
        return Shape(
            self.tensor_parallel_size, self.pipeline_parallel_size, self.data_parallel_size,
            self.expert_parallel,
        ).label


class GpuRates(Data):
    """What a step reads of the GPU."""

    gpu: str
    architecture: str
    hbm_bandwidth_gb_s: float
    compute_tflops: float = Field(
        description="Dense tensor TFLOP/s at the compute precision (the step's F)."
    )
    bf16_dense_tflops: float
    fp8_dense_tflops: float | None
    fp4_dense_tflops: float | None
    nvlink_gb_s: float
    pcie_gb_s: float


class StepEfficiencies(Data):
    """The fitted constants a step reads, for this GPU and engine, at the plan's confidence
    (`confidence: pessimistic` raises engine_step_factor)."""

    mbu: float = Field(description="Share of HBM bandwidth a step streams at.")
    mfu: float = Field(description="Share of the tensor rate a step computes at.")
    roofline_overlap: float
    moe_efficiency: float
    moe_layer_overhead_us: float
    step_overhead_ms: float
    sequence_overhead_us: float
    engine_step_factor: float
    link_efficiency: float
    node_link: str = Field(description="nvlink or pcie: the link inside a node.")
    node_link_latency_us: float = Field(description="An all-reduce's latency on node_link.")
    tp_sync_overhead_us: float
    request_handling_ms: float = Field(
        description="The engine's API server before the first token (no step carries it)."
    )


class CorrectionRecord(Data):
    """A calibrated server's factors on a step's terms (1: none; `perf.step.Correction`)."""

    memory: float = 1.0
    compute: float = 1.0
    overhead: float = 1.0
    ttft_overhead: float = 1.0
    calibration: str | None = Field(
        default=None, description="The plan's calibration file they come from (None: none)."
    )


class SpeculationRecord(Data):
    method: str
    num_speculative_tokens: int
    acceptance_rate: float
    draft_model: str | None
    draft_precision: str
    source: str


class StepInputs(Data):
    """Everything `perf.step.StepModel` reads besides the model and the layout."""

    engine: str
    precision: str
    kv_cache_dtype: str
    enforce_eager: bool
    speculation: SpeculationRecord | None
    gpu: GpuRates
    efficiencies: StepEfficiencies
    correction: CorrectionRecord


class PrefixCacheRecord(Data):
    """What the search sized the replica's prefix cache to hold (`search.prefix_hold`)."""

    balancing: str = Field(description="least_outstanding or prefix_aware (edge.balancing).")
    replicas_assumed: int = Field(
        description="Replicas sharing the traffic when the hit rate was computed: the most "
        "the largest region deploys at the shared-prefix-only sizing (at least the final)."
    )
    shared_prefix_cached_tokens: float = Field(
        description="traffic.shared_prefix_tokens, or 0 when the pool cannot hold it."
    )
    history_hit_rate: float = Field(
        description="Chance a prompt finds the earlier turns it resends in the cache."
    )
    hit_rate: float = Field(
        description="Cached share of the prompt tokens (vLLM's prefix cache hits / queries)."
    )
    cached_tokens_per_prompt: float
    uncached_tokens_per_prompt: float = Field(
        description="Tokens a prompt's prefill computes on average."
    )
    same_replica_probability: float = Field(
        description="An earlier turn ran on the replica a turn lands on."
    )
    turnover_s: float = Field(
        description="How long an untouched cached block stays in the pool (LRU)."
    )


class PoolRecord(Data):
    """One pool of replicas as the search sized it: layout, step inputs, engine, memory."""

    layout: ReplicaLayout
    step: StepInputs
    slots: int = Field(
        description="Running sequences the whole replica admits: max_num_seqs x its "
        "data-parallel ranks."
    )
    batch: int = Field(
        description="Alias of `slots` (the name before the SLO model told the slots from "
        "the running batch); kept for scripts that read it."
    )
    running_at_limit: float = Field(
        description="Mean sequences decoding at the SLO-limit rate (fewer than the slots)."
    )
    max_num_seqs: int = Field(description="vLLM's max_num_seqs: one engine's (a DP rank's).")
    chunk_tokens: int = Field(
        description="Prompt tokens a scheduled batch carries beside its decodes at the SLO "
        "limit (max_num_batched_tokens less its share of the running batch)."
    )
    max_num_batched_tokens: int = Field(
        description="One engine's token budget a scheduled batch (a pipeline microbatch)."
    )
    gpu_memory_utilization: float
    memory: MemoryBudget = Field(
        description="vLLM's start-up memory budget; kv_cache_tokens is the KV pool."
    )
    capacity_requests_per_s: float = Field(description="Requests/s inside every SLO.")
    loss_requests_per_s: float = Field(
        description="Requests/s one replica carries in a region loss: its SLO-limit rate, at "
        "which an arrival finds the slots full at most 1 - p of the time."
    )
    prefix_cache: PrefixCacheRecord | None = Field(
        default=None,
        description="What its prefix cache holds of each prompt (None: the traffic shares no "
        "prefix, or a disaggregated pool, sized without a cache).",
    )


class PrefillPoolRecord(PoolRecord):
    """A disaggregated region's prefill pool: an engine that decodes nothing, and the link
    each prompt's KV crosses to the decode pool."""

    kv_link: LinkRecord = Field(
        description="What the KV crosses: EFA, or NIXL's UCX TCP transport (one connection)."
    )
    kv_readers: int = Field(
        description="GPUs of a decode replica that each pull a share of a prompt's KV (1 "
        "over TCP)."
    )


class ReplicaRecord(PoolRecord):
    """The region's replica (a disaggregated region's decode pool, with its prefill pool)."""

    prefill: PrefillPoolRecord | None = Field(
        default=None, description="Disaggregated: the prefill pool (this record is the decode)."
    )


def _link(link: Link | None) -> LinkRecord | None:
    if link is None:
        return None
    return LinkRecord(
        name=link.name, latency_s=link.latency_s, bus_bytes_per_s=link.bus_b_s,
        p2p_bytes_per_s=link.p2p_b_s, allreduce=list(link.allreduce),
    )


def _layout(sm: StepModel, instance: Instance) -> ReplicaLayout:
    par, gpn = sm.parallel, instance.gpu_count
    return ReplicaLayout(
        instance_type=instance.instance_type,
        gpus_per_node=gpn,
        tensor_parallel_size=sm.tp,
        pipeline_parallel_size=par.pp,
        data_parallel_size=par.dp,
        expert_parallel=par.ep,
        nodes_per_replica=max(1, par.ranks(sm.tp) // gpn),
        gpus=par.ranks(sm.tp),
        inter_node=_link(par.inter_node),
    )


def _step_inputs(sm: StepModel, calibration: str | None) -> StepInputs:
    g, c, k, spec = sm.gpu, sm.consts, sm.correction, sm.speculation
    link = sm.node_link.name
    return StepInputs(
        engine=sm.engine,
        precision=sm.precision,
        kv_cache_dtype=sm.kv_cache_dtype,
        enforce_eager=sm.enforce_eager,
        speculation=None if spec is None else SpeculationRecord(
            method=spec.method, num_speculative_tokens=spec.k,
            acceptance_rate=spec.acceptance_rate, draft_model=spec.draft_model,
            draft_precision=spec.draft_precision, source=spec.source,
        ),
        gpu=GpuRates(
            gpu=g.gpu, architecture=g.architecture, hbm_bandwidth_gb_s=g.hbm_bandwidth_gb_s,
            compute_tflops=sm.compute_flops / 1e12, bf16_dense_tflops=g.bf16_dense_tflops,
            fp8_dense_tflops=g.fp8_dense_tflops, fp4_dense_tflops=g.fp4_dense_tflops,
            nvlink_gb_s=g.nvlink_gb_s, pcie_gb_s=g.pcie_gb_s,
        ),
        efficiencies=StepEfficiencies(
            mbu=c.mbu[g.architecture],
            mfu=c.mfu[g.architecture],
            roofline_overlap=c.roofline_overlap,
            moe_efficiency=c.moe_efficiency,
            moe_layer_overhead_us=c.moe_layer_overhead_us,
            step_overhead_ms=sm.per_engine(c.step_overhead_ms),
            sequence_overhead_us=sm.per_engine(c.sequence_overhead_us),
            engine_step_factor=sm.step_factor,
            link_efficiency=c.link_efficiency,
            node_link=link,
            node_link_latency_us=c.allreduce_latency_us[link],
            tp_sync_overhead_us=c.tp_sync_overhead_us,
            request_handling_ms=sm.per_engine(c.request_handling_ms),
        ),
        correction=CorrectionRecord(
            memory=k.memory, compute=k.compute, overhead=k.overhead,
            ttft_overhead=k.ttft_overhead, calibration=calibration,
        ),
    )


def _pool(
    sm: StepModel, instance: Instance, calibration: str | None, sizing: ReplicaSizing,
    gpu_memory_utilization: float,
) -> dict[str, object]:
    return {
        "layout": _layout(sm, instance),
        "step": _step_inputs(sm, calibration),
        "slots": sizing.slots,
        "batch": sizing.slots,
        "running_at_limit": round(sizing.running, 3),
        "max_num_seqs": sizing.max_num_seqs,
        "chunk_tokens": sizing.chunk_tokens,
        "max_num_batched_tokens": sizing.max_num_batched_tokens,
        "gpu_memory_utilization": gpu_memory_utilization,
        "memory": sizing.memory,
        "capacity_requests_per_s": sizing.capacity_requests_per_s,
        "loss_requests_per_s": sizing.loss_requests_per_s,
        "prefix_cache": _prefix_cache(sizing.hold),
    }


def _prefix_cache(hold: CacheHold | None) -> PrefixCacheRecord | None:
    if hold is None or hold.cache is None:
        return None
    c = hold.cache
    return PrefixCacheRecord(
        balancing=hold.balancing,
        replicas_assumed=hold.replicas,
        shared_prefix_cached_tokens=hold.shared_tokens,
        history_hit_rate=round(hold.history_hit_rate, 6),
        hit_rate=round(c.hit_rate, 4),
        cached_tokens_per_prompt=round(c.cached_tokens_per_prompt, 1),
        uncached_tokens_per_prompt=round(c.uncached_tokens_per_prompt, 1),
        same_replica_probability=round(c.same_replica_probability, 4),
        turnover_s=round(min(c.turnover_s, 1e9), 1),
    )


def hold_of(pool: PoolRecord) -> CacheHold | None:
    """The cache the search sized the pool with, from the record alone."""
    r = pool.prefix_cache
    if r is None:
        return None
    return CacheHold(r.shared_prefix_cached_tokens, r.history_hit_rate)


def _prefill(choice: Choice, pool: PrefillPool) -> PrefillPoolRecord:
    link = _link(pool.link)
    assert link is not None
    return PrefillPoolRecord(
        **_pool(pool.step_model, choice.instance, None, pool.sizing,
                choice.plan.gpu_memory_utilization),
        kv_link=link,
        kv_readers=1 if pool.link.name == "tcp" else choice.tp,
    )


def build_replica_record(choice: Choice) -> ReplicaRecord:
    """The record of the replica the search chose (its step model, engine and memory)."""
    covered = choice.calibration
    # A covered server's factors apply to an aggregated replica only (search.disagg sizes
    # both pools on the shipped constants).
    calibration = covered.path if covered and choice.prefill is None else None
    return ReplicaRecord(
        **_pool(choice.step_model, choice.instance, calibration, choice.sizing,
                choice.plan.gpu_memory_utilization),
        prefill=None if choice.prefill is None else _prefill(choice, choice.prefill),
    )


def parallel_of(layout: ReplicaLayout) -> Parallel:
    """The layout's `perf.parallel.Parallel` (one TP group inside a node: plain)."""
    one_node = layout.gpus <= layout.gpus_per_node
    plain = layout.pipeline_parallel_size == 1 and layout.data_parallel_size == 1
    if plain and not layout.expert_parallel and one_node:
        return Parallel()
    link = layout.inter_node
    return Parallel(
        pp=layout.pipeline_parallel_size,
        dp=layout.data_parallel_size,
        ep=layout.expert_parallel,
        gpus_per_node=layout.gpus_per_node,
        inter_node=None if link is None else Link(
            link.name, link.latency_s, link.bus_bytes_per_s, link.p2p_bytes_per_s,
            tuple(link.allreduce),
        ),
    )


def speculation_of(step: StepInputs, model_id: str, arch: Arch) -> Speculation | None:
    s = step.speculation
    if s is None:
        return None
    spec = resolve(
        s.method, s.num_speculative_tokens, s.acceptance_rate, s.draft_model,
        "speculative", model_id, arch, step.precision,
    )
    return replace(spec, draft_precision=s.draft_precision, source=s.source)


def step_model_of(pool: PoolRecord, model: ResolvedModel) -> StepModel:
    """The search's StepModel, rebuilt from the record alone (`model`: the plan's)."""
    arch = model.arch
    step, g, e, k = pool.step, pool.step.gpu, pool.step.efficiencies, pool.step.correction
    gpu = hardware.gpu(g.gpu).model_copy(
        update={
            "architecture": g.architecture,
            "hbm_bandwidth_gb_s": g.hbm_bandwidth_gb_s,
            "bf16_dense_tflops": g.bf16_dense_tflops,
            "fp8_dense_tflops": g.fp8_dense_tflops,
            "fp4_dense_tflops": g.fp4_dense_tflops,
            "nvlink_gb_s": g.nvlink_gb_s,
            "pcie_gb_s": g.pcie_gb_s,
        }
    )
    base = fitted()
    consts = base.model_copy(
        update={
            "mbu": {**base.mbu, g.architecture: e.mbu},
            "mfu": {**base.mfu, g.architecture: e.mfu},
            "roofline_overlap": e.roofline_overlap,
            "moe_efficiency": e.moe_efficiency,
            "moe_layer_overhead_us": e.moe_layer_overhead_us,
            "step_overhead_ms": {**base.step_overhead_ms, step.engine: e.step_overhead_ms},
            "sequence_overhead_us": {
                **base.sequence_overhead_us, step.engine: e.sequence_overhead_us
            },
            "engine_step_factor": {**base.engine_step_factor, step.engine: e.engine_step_factor},
            "link_efficiency": e.link_efficiency,
            "allreduce_latency_us": {
                **base.allreduce_latency_us, e.node_link: e.node_link_latency_us
            },
            "tp_sync_overhead_us": e.tp_sync_overhead_us,
            "request_handling_ms": {
                **base.request_handling_ms, step.engine: e.request_handling_ms
            },
        }
    )
    return StepModel(
        arch,
        gpu,
        pool.layout.tensor_parallel_size,
        step.precision,
        step.kv_cache_dtype,
        consts,
        step.engine,
        speculation_of(step, model.id, arch),
        step.enforce_eager,
        Correction(k.memory, k.compute, k.overhead, k.ttft_overhead),
        parallel_of(pool.layout),
    )


def engine_of(pool: PoolRecord, model: ResolvedModel) -> Engine:
    """The engine the search sized, from the record alone: a disaggregated region's decode
    pool prefills nothing, its prefill pool decodes nothing."""
    split = isinstance(pool, ReplicaRecord) and pool.prefill is not None
    return Engine(
        step_model_of(pool, model), pool.slots, pool.max_num_batched_tokens,
        pool.memory.kv_cache_tokens, prefills=not split,
        decodes=not isinstance(pool, PrefillPoolRecord),
    )


def table_of(pool: PoolRecord, plan: CapacityPlan, model: ResolvedModel) -> Table:
    """The engine's periods under the plan's traffic (`perf.periods`)."""
    return table_for(engine_of(pool, model), workload_of(plan, hold_of(pool)))


def slo_at(
    record: ReplicaRecord,
    plan: CapacityPlan,
    model: ResolvedModel,
    requests_per_s: float,
    prefill_requests_per_s: float = 0.0,
) -> tuple[Point, Pair | None]:
    """The replica at `requests_per_s` per replica (a disaggregated region's decode pool, and
    the pair with its prefill replicas at `prefill_requests_per_s`), from the record alone:
    what the FleetPlan's `predicted` holds at the peak."""
    p = plan.slo.percentile
    point = at_rate(table_of(record, plan, model), requests_per_s, p)
    pre = record.prefill
    if pre is None:
        return point, None
    k = pre.kv_link
    link = Link(k.name, k.latency_s, k.bus_bytes_per_s, k.p2p_bytes_per_s, tuple(k.allreduce))
    prefill = table_of(pre, plan, model)
    lever = Levers(pre.step.precision, pre.step.kv_cache_dtype)
    moved = transfer_s(model, lever, prefill.workload.prompts.tokens, link, pre.kv_readers)
    return point, Pair(Point(prefill, prefill_requests_per_s, 0.0, p), point, moved)
