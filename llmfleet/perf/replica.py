"""One configuration, end to end: what `llmfleet predict` prints and `llmfleet validate`
predicts for every measured row. A request names the model, GPU, parallelism, precision,
engine flags and load; the result is the memory budget and the load's prediction."""

from __future__ import annotations

from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from llmfleet.catalog import hardware, model_facts, network, vllm_release
from llmfleet.catalog.constants import Constants, fitted
from llmfleet.errors import PlanError
from llmfleet.perf.architecture import PRECISIONS, Arch, from_config
from llmfleet.perf.layout import layout_problem, parallel_for
from llmfleet.perf.load import Load, OutputLengths, Prediction, predict
from llmfleet.perf.memory import budget
from llmfleet.perf.speculation import from_flags
from llmfleet.perf.step import StepModel

EngineName = Literal["vllm", "trtllm", "sglang"]


ENGINES: tuple[str, ...] = ("vllm", "trtllm", "sglang")


class PredictRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    engine: EngineName = "vllm"
    gpu: str
    tensor_parallel_size: int = Field(default=1, ge=1)
    precision: str = "bf16"
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    input_tokens: int = Field(gt=0)
    output_tokens: int = Field(gt=0)
    concurrency: float | None = Field(default=None, gt=0)
    request_rate: float | None = Field(default=None, gt=0)
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    max_model_len: int | None = Field(default=None, gt=0)
    max_num_seqs: int | None = Field(default=None, gt=0)
    max_num_batched_tokens: int | None = Field(default=None, gt=0)
    num_requests: int | None = Field(default=None, gt=0)
    output_lengths: OutputLengths = "fixed"
    speculative_method: Literal["ngram", "eagle", "eagle3", "mtp", "draft_model"] | None = None
    num_speculative_tokens: int | None = Field(default=None, ge=1, le=10)
    acceptance_rate: float | None = Field(default=None, gt=0, lt=1)
    draft_model: str | None = None
    enforce_eager: bool = False
    engine_version: str | None = None  # the release measured (validate); None: the pinned one
    pipeline_parallel_size: int = Field(default=1, ge=1)
    data_parallel_size: int = Field(default=1, ge=1)
    enable_expert_parallel: bool = False
    instance_type: str | None = Field(
        default=None,
        description="The node a replica's GPUs sit in (its GPU count, and its EFA when the "
        "replica spans nodes); default: the catalog instance with most of the GPU, preferring "
        "one a replica may span (catalog.network.node_for_gpu).",
    )


class PredictResult(Prediction):
    """A Prediction with the configuration and memory it was made for."""

    model: str
    engine: str
    gpu: str
    tensor_parallel_size: int
    precision: str
    kv_cache_dtype: str
    weights_gib_per_gpu: float
    activation_gib: float
    kv_bytes_per_token: float
    kv_cache_gib_per_gpu: float
    kv_cache_tokens: int
    max_model_len: int
    max_concurrency: float
    max_num_seqs: int
    max_num_batched_tokens: int
    fits: bool
    speculative_method: str | None = None
    tokens_per_step: float = 1.0
    enforce_eager: bool = False
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    expert_parallel: bool = False
    instance_type: str | None = None  # the node assumed
    nodes: int = 1  # nodes one replica spans
    gpus: int = 1  # GPUs of one replica: TP x PP x DP
    kv_cache_tokens_per_rank: int | None = None  # with DP: each rank's own pool


@cache
def catalog_arch(model_id: str) -> Arch:
    entry = model_facts.model_entries()[model_id]
    return from_config(entry.id, entry.config)


def run_predict(req: PredictRequest, config: dict[str, object] | None = None) -> PredictResult:
    """Predict one replica. `config` is a config.json dict when `req.model` is a path."""

    return run_predict_with(req, fitted(), config)


def run_predict_with(
    req: PredictRequest, consts: Constants, config: dict[str, object] | None = None
) -> PredictResult:
    """`run_predict` with explicit constants: what calibration refits call."""
    if req.precision not in PRECISIONS:
        raise PlanError("precision", req.precision, f"use one of {', '.join(PRECISIONS)}")
    if config is None:
        entry = model_facts.model_entry(req.model, "model")
        name, arch = entry.id, catalog_arch(entry.id)
    else:
        name, arch = req.model, from_config(req.model, config)
    gpu = hardware.gpu(req.gpu, "gpu")
    node = _node(req, gpu.gpu)
    tp, pp, dp = req.tensor_parallel_size, req.pipeline_parallel_size, req.data_parallel_size
    ep = req.enable_expert_parallel
    problem = layout_problem(arch, node, tp, pp, dp, ep)
    if problem:
        field, why = problem
        raise PlanError(field, getattr(req, field), why)
    if dp > 1 and not arch.is_moe:
        return _dense_data_parallel(req, consts, config)
    parallel = parallel_for(node, tp, pp, dp, ep)
    flags = (req.speculative_method, req.num_speculative_tokens, req.acceptance_rate)
    spec = from_flags(*flags, req.draft_model, name, arch, req.precision)
    max_len = req.max_model_len or arch.max_context
    seqs = req.max_num_seqs or vllm_release.default_max_num_seqs(gpu, req.engine)
    budget_tokens = req.max_num_batched_tokens or vllm_release.default_max_num_batched_tokens(gpu)
    mem = budget(
        arch,
        gpu,
        req.tensor_parallel_size,
        req.precision,
        req.kv_cache_dtype,
        req.gpu_memory_utilization,
        max_len,
        seqs,
        budget_tokens,
        consts,
        req.engine,
        speculation=spec,
        graph_pool_gib=vllm_release.graph_pool_gib(
            req.engine, req.engine_version, req.enforce_eager
        ),
        parallel=parallel,
    )
    step_model = StepModel(
        arch,
        gpu,
        req.tensor_parallel_size,
        req.precision,
        req.kv_cache_dtype,
        consts,
        req.engine,
        spec,
        req.enforce_eager,
        parallel,
    )
    load_ = Load(
        input_tokens=req.input_tokens,
        output_tokens=req.output_tokens,
        concurrency=req.concurrency,
        request_rate=req.request_rate,
        num_requests=req.num_requests,
        output_lengths=req.output_lengths,
    )
    fits = mem.kv_cache_tokens >= req.input_tokens + req.output_tokens
    if fits:
        p = predict(step_model, mem, load_, seqs, budget_tokens)
    else:
        p = Prediction(
            mode=load_.mode,
            batch_size=0,
            prefill_tokens_per_step=0,
            step_bound="none",
            ttft_ms=None,
            itl_ms=None,
            e2e_latency_ms=None,
            output_tokens_per_s=0,
            total_tokens_per_s=0,
            requests_per_s=0,
            saturated=True,
        )
    return PredictResult(
        **p.model_dump(),
        model=name,
        engine=req.engine,
        gpu=gpu.gpu,
        tensor_parallel_size=req.tensor_parallel_size,
        precision=req.precision,
        kv_cache_dtype=req.kv_cache_dtype,
        weights_gib_per_gpu=mem.weights_gib_per_gpu,
        activation_gib=mem.activation_gib,
        kv_bytes_per_token=mem.kv_bytes_per_token,
        kv_cache_gib_per_gpu=mem.kv_cache_gib_per_gpu,
        kv_cache_tokens=mem.kv_cache_tokens,
        max_model_len=max_len,
        max_concurrency=mem.max_concurrency,
        max_num_seqs=seqs,
        max_num_batched_tokens=budget_tokens,
        fits=fits,
        speculative_method=req.speculative_method,
        tokens_per_step=spec.tokens_per_step if spec else 1.0,
        enforce_eager=req.enforce_eager,
        pipeline_parallel_size=pp,
        data_parallel_size=dp,
        expert_parallel=ep,
        instance_type=node.instance_type,
        nodes=parallel.nodes(tp),
        gpus=parallel.ranks(tp),
        kv_cache_tokens_per_rank=mem.kv_cache_tokens // dp if dp > 1 else None,
    )


def _node(req: PredictRequest, gpu: str) -> hardware.Instance:
    """The node the replica's GPUs sit in: the request's instance type (it must carry the
    GPU), or the catalog's default node for the GPU."""
    if req.instance_type is None:
        return network.node_for_gpu(gpu)
    inst = hardware.instance(req.instance_type, "instance_type")
    if inst.gpu != gpu:
        why = f"{inst.instance_type} carries {inst.gpu}, not {gpu}"
        raise PlanError("instance_type", req.instance_type, why)
    return inst


def _dense_data_parallel(
    req: PredictRequest, consts: Constants, config: dict[str, object] | None
) -> PredictResult:
    """DP of a dense model: vLLM runs DP independent engines behind one API server, so the
    replica is DP copies of one rank, each with a DP-th of the load (no step is shared)."""
    dp = req.data_parallel_size
    share = {
        "concurrency": req.concurrency / dp if req.concurrency else None,
        "request_rate": req.request_rate / dp if req.request_rate else None,
        "num_requests": max(1, req.num_requests // dp) if req.num_requests else None,
        "data_parallel_size": 1,
    }
    one = run_predict_with(req.model_copy(update=share), consts, config)
    scaled = {k: getattr(one, k) * dp for k in _PER_REPLICA}
    scaled["max_concurrency"] = one.max_concurrency * dp
    return one.model_copy(
        update={
            **scaled,
            "kv_cache_tokens": one.kv_cache_tokens * dp,
            "kv_cache_tokens_per_rank": one.kv_cache_tokens,
            "data_parallel_size": dp,
            "gpus": one.gpus * dp,
            "nodes": max(one.nodes, -(-one.gpus * dp // _node(req, one.gpu).gpu_count)),
            "batch_size": one.batch_size * dp,
            "capacity_requests_per_s": one.capacity_requests_per_s * dp
            if one.capacity_requests_per_s
            else None,
        }
    )


_PER_REPLICA = ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s")
"""Throughputs a dense DP replica multiplies by DP (latencies are one rank's)."""
