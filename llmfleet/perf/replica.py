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
from llmfleet.perf.architecture import PRECISIONS, Arch, from_config, kv_dtype_bytes, with_defaults
from llmfleet.perf.layout import layout_problem, parallel_for
from llmfleet.perf.load import Load, OutputLengths, Prediction, ReplicaGroup, predict
from llmfleet.perf.memory import MemoryBudget, budget
from llmfleet.perf.prefix_cache import Balancing, Conversations, max_turns, new_tokens_per_turn
from llmfleet.perf.speculation import from_flags
from llmfleet.perf.step import NO_CORRECTION, Correction, StepModel
from llmfleet.units import GIB

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
    harness: Literal["server", "offline"] = Field(
        default="server",
        description="server: requests reach the engine through its HTTP API server (vllm "
        "serve), whose request handling is in TTFT; offline: the engine's Python API "
        "(LLM.generate, benchmark_latency, trtllm-bench), with no API server.",
    )
    instance_type: str | None = Field(
        default=None,
        description="The node a replica's GPUs sit in (its GPU count, and its EFA when the "
        "replica spans nodes); default: the catalog instance with most of the GPU, preferring "
        "one a replica may span (catalog.network.node_for_gpu).",
    )
    replicas: int = Field(
        default=1, ge=1,
        description="Replicas behind one entry point sharing request_rate (the fleet's).",
    )
    balancing: Balancing = Field(
        default="least_outstanding",
        description="round_robin and least_outstanding spread a conversation's turns over "
        "every replica; prefix_aware routes a prompt to the replica caching its prefix.",
    )
    turns: float = Field(default=1.0, ge=1, description="Turns a conversation has on average.")
    shared_prefix_tokens: int = Field(default=0, ge=0,
                                      description="Leading tokens every prompt carries.")
    think_time_s: float = Field(default=60.0, gt=0,
                                description="Mean time from an answer to the next turn.")
    router_replicas: int = Field(default=1, ge=1,
                                 description="prefix_aware routers, each learning its own.")
    inter_node: Literal["efa", "tcp"] = Field(
        default="efa",
        description="What crosses between a replica's nodes: efa (an image with the EFA NCCL "
        "plugin; the measured multi-node runs had it) or tcp (NCCL's sockets, as the pinned "
        "vLLM image runs: catalog/images.csv).",
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
    calibration: str | None = None  # the calibration file applied (predict --calibration)
    calibration_warning: str | None = None  # a prompt length its runs never had
    ranges: dict[str, tuple[float, float]] | None = None  # its band around each prediction
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    expert_parallel: bool = False
    instance_type: str | None = None  # the node assumed
    nodes: int = 1  # nodes one replica spans
    inter_node: str | None = None  # what crosses between them: efa or tcp (None: one node)
    gpus: int = 1  # GPUs of one replica: TP x PP x DP
    kv_cache_tokens_per_rank: int | None = None  # with DP: each rank's own pool
    replicas: int = 1  # behind one entry point: the throughput is theirs together
    balancing: str | None = None  # with replicas or reuse: how the entry point spreads them
    requests_per_s_per_replica: float | None = None
    config_defaults: list[str] = []  # defaults a config.json model was sized with, named


@cache
def catalog_arch(model_id: str) -> Arch:
    entry = model_facts.model_entries()[model_id]
    return from_config(entry.id, entry.config)


def run_predict(
    req: PredictRequest,
    config: dict[str, object] | None = None,
    correction: Correction = NO_CORRECTION,
) -> PredictResult:
    """Predict one replica. `config` is a config.json dict when `req.model` is a path;
    `correction` a measured server's own factors (`llmfleet predict --calibration`)."""

    return run_predict_with(req, fitted(), config, correction)


def predict_served(
    req: PredictRequest,
    config: dict[str, object] | None = None,
    correction: Correction = NO_CORRECTION,
    replica: tuple[StepModel, MemoryBudget] | None = None,
    consts: Constants | None = None,
) -> PredictResult:
    """What `llmfleet predict` runs: `run_predict`, refusing what vLLM refuses rather than
    predicting it: a max_model_len beyond the model's context, a request longer than
    max_model_len (vLLM answers it with an error), and a max_model_len of which the KV pool
    cannot hold one sequence (vLLM will not start). A pool that holds nothing at all is
    predicted (`fits` false), so the memory lines say by how much the weights overrun.
    `replica`: a step model and memory budget already decided (`predict --stack`: the
    FleetPlan's replica record), predicted as they are; `consts`: the constants (default the
    fitted ones; `predict --confidence pessimistic` slows them)."""
    name, arch = _model(req, config)
    context = arch.max_context
    if req.max_model_len and context and req.max_model_len > context:
        raise PlanError(
            "max_model_len",
            req.max_model_len,
            f"{name} supports at most {context:,} tokens (max_position_embeddings); vLLM "
            f"refuses a longer max_model_len: give --max-model-len {context} or less",
        )
    max_len = req.max_model_len or context
    i, o = req.input_tokens, req.output_tokens
    if max_len and i + o > max_len:
        limit = "--max-model-len" if req.max_model_len else f"{name}'s context"
        field, value = ("input_tokens", i) if i >= o else ("output_tokens", o)
        raise PlanError(
            field,
            value,
            f"a request of {i:,} prompt + {o:,} output tokens is longer than the {max_len:,} "
            f"tokens of {limit}, and vLLM refuses it: keep --input-tokens + --output-tokens "
            f"<= {max_len}",
        )
    if replica is None:
        result = run_predict_with(req, consts or fitted(), config, correction)
    else:
        result = predict_replica(req, name, *replica, str(req.instance_type))
    if result.kv_cache_gib_per_gpu > 0 and result.max_concurrency < 1:
        spec = from_flags(
            req.speculative_method, req.num_speculative_tokens, req.acceptance_rate,
            req.draft_model, name, arch, req.precision,
        )
        kv_b = kv_dtype_bytes(req.kv_cache_dtype)
        draft = spec.draft_kv_bytes_per_token(kv_b) if spec else 0.0
        pool = result.kv_cache_gib_per_gpu * GIB * arch.kv_shards(req.tensor_parallel_size)
        longest = longest_sequence(arch, kv_b, draft, pool, max_len)
        raise PlanError(
            "max_model_len",
            max_len,
            f"vLLM will not start: set --max-model-len <= {longest} (one {max_len:,}-token "
            f"sequence needs more KV than the pool's {result.kv_cache_tokens:,} tokens, "
            f"{result.kv_cache_gib_per_gpu:.2f} GiB per GPU), or give the KV pool more "
            "memory: --gpu-memory-utilization, --tensor-parallel-size, --kv-cache-dtype fp8",
        )
    return result


def longest_sequence(
    arch: Arch, kv_b: float, draft_bytes_per_token: float, pool_bytes: float, upper: int
) -> int:
    """The longest sequence (a multiple of the 16-token block, at most `upper`) whose KV,
    over every GPU of the group, fits `pool_bytes`: what vLLM reports as the largest
    max_model_len the pool allows."""

    def fits(tokens: int) -> bool:
        need = arch.kv_bytes_per_sequence(tokens, kv_b) + draft_bytes_per_token * tokens
        return need <= pool_bytes

    lo, hi = 0, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo - lo % 16


def _model(req: PredictRequest, config: dict[str, object] | None) -> tuple[str, Arch]:
    if config is None:
        entry = model_facts.model_entry(req.model, "model")
        return entry.id, catalog_arch(entry.id)
    return req.model, from_config(req.model, config)


def run_predict_with(
    req: PredictRequest,
    consts: Constants,
    config: dict[str, object] | None = None,
    correction: Correction = NO_CORRECTION,
) -> PredictResult:
    """`run_predict` with explicit constants: what calibration refits call."""
    if req.precision not in PRECISIONS:
        raise PlanError("precision", req.precision, f"use one of {', '.join(PRECISIONS)}")
    name, arch = _model(req, config)
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
    parallel = parallel_for(node, tp, pp, dp, ep, req.inter_node)
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
        correction,
        parallel,
        api_server=req.harness == "server",
    )
    result = predict_replica(req, name, step_model, mem, node.instance_type)
    if config is None:
        return result
    return result.model_copy(update={"config_defaults": with_defaults(config)[1]})


def predict_replica(
    req: PredictRequest,
    name: str,
    step_model: StepModel,
    mem: MemoryBudget,
    instance_type: str,
) -> PredictResult:
    """The request's load on a replica of this step model and memory budget (`predict
    --stack`: a FleetPlan's replica record). vLLM's batch flags are one engine's: a MoE
    replica's DP ranks each run max_num_seqs sequences, so the replica decodes DP times as
    many, beside one prefill chunk (the step model's)."""
    par, tp = step_model.parallel, step_model.tp
    seqs = req.max_num_seqs or vllm_release.default_max_num_seqs(step_model.gpu, req.engine)
    budget_tokens = req.max_num_batched_tokens or vllm_release.default_max_num_batched_tokens(
        step_model.gpu
    )
    fleet = fleet_of(req)
    load_ = Load(
        input_tokens=req.input_tokens,
        output_tokens=req.output_tokens,
        concurrency=req.concurrency,
        request_rate=req.request_rate if fleet is None or req.request_rate is None
        else req.request_rate / fleet.replicas,
        num_requests=req.num_requests,
        output_lengths=req.output_lengths,
        fleet=fleet,
    )
    fits = mem.kv_cache_tokens >= req.input_tokens + req.output_tokens
    if fits:
        extra = seqs * (par.dp - 1)  # the other ranks' sequences
        p = predict(step_model, mem, load_, seqs + extra, budget_tokens + extra)
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
    spec = step_model.speculation
    fleet_fields = {} if fleet is None else {
        "replicas": fleet.replicas,
        "balancing": fleet.balancing,
        "requests_per_s_per_replica": p.requests_per_s,
        "requests_per_s": p.requests_per_s * fleet.replicas,
        "output_tokens_per_s": p.output_tokens_per_s * fleet.replicas,
        "total_tokens_per_s": p.total_tokens_per_s * fleet.replicas,
        "capacity_requests_per_s": None if p.capacity_requests_per_s is None
        else p.capacity_requests_per_s * fleet.replicas,
    }
    return PredictResult(
        **{**p.model_dump(), **fleet_fields},
        model=name,
        engine=req.engine,
        gpu=step_model.gpu.gpu,
        tensor_parallel_size=tp,
        precision=step_model.precision,
        kv_cache_dtype=step_model.kv_cache_dtype,
        weights_gib_per_gpu=mem.weights_gib_per_gpu,
        activation_gib=mem.activation_gib,
        kv_bytes_per_token=mem.kv_bytes_per_token,
        kv_cache_gib_per_gpu=mem.kv_cache_gib_per_gpu,
        kv_cache_tokens=mem.kv_cache_tokens,
        max_model_len=mem.max_model_len,
        max_concurrency=mem.max_concurrency,
        max_num_seqs=seqs,
        max_num_batched_tokens=budget_tokens,
        fits=fits,
        speculative_method=spec.method if spec else None,
        tokens_per_step=spec.tokens_per_step if spec else 1.0,
        enforce_eager=step_model.enforce_eager,
        pipeline_parallel_size=par.pp,
        data_parallel_size=par.dp,
        expert_parallel=par.ep,
        instance_type=instance_type,
        nodes=par.nodes(tp),
        inter_node=par.inter_node.name if par.inter_node is not None else None,
        gpus=par.ranks(tp),
        kv_cache_tokens_per_rank=mem.kv_cache_tokens // par.dp if par.dp > 1 else None,
    )


def fleet_of(req: PredictRequest) -> ReplicaGroup | None:
    """The fleet behind one entry point the request describes (None: one replica, no
    prefix reuse): an open-loop steady rate only, the SLO model's."""
    reuse = req.shared_prefix_tokens > 0 or req.turns > 1
    if req.replicas == 1 and not reuse:
        return None
    flag = "replicas" if req.replicas > 1 else (
        "shared_prefix_tokens" if req.shared_prefix_tokens > 0 else "turns")
    if req.request_rate is None or req.num_requests is not None:
        raise PlanError(flag, getattr(req, flag),
                        "a fleet behind one entry point is predicted in steady state under an "
                        "open-loop rate: give --request-rate (the fleet's) without "
                        "--num-requests or --concurrency")
    conv = Conversations(float(req.input_tokens), float(req.output_tokens),
                         float(req.shared_prefix_tokens), req.turns, req.think_time_s)
    if req.shared_prefix_tokens >= req.input_tokens:
        raise PlanError("shared_prefix_tokens", req.shared_prefix_tokens,
                        f"give fewer than --input-tokens ({req.input_tokens})")
    if new_tokens_per_turn(conv.prompt_mean_tokens, conv.output_mean_tokens,
                           conv.shared_prefix_tokens, conv.turns) < 1:
        most = max_turns(conv.prompt_mean_tokens, conv.output_mean_tokens,
                         conv.shared_prefix_tokens)
        raise PlanError("turns", req.turns,
                        f"a {req.input_tokens}-token prompt holds at most {most:g} turns of "
                        f"{req.output_tokens} output tokens after the shared prefix")
    return ReplicaGroup(req.replicas, req.balancing, conv, req.router_replicas)


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
