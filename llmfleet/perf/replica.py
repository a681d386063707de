"""One configuration, end to end: what `llmfleet predict` prints and `llmfleet validate`
predicts for every measured row. A request names the model, GPU, parallelism, precision,
engine flags and load; the result is the memory budget and the load's prediction."""

from __future__ import annotations

from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from llmfleet.catalog import hardware, model_facts, vllm_release
from llmfleet.catalog.constants import Constants, fitted
from llmfleet.errors import PlanError
from llmfleet.perf.architecture import PRECISIONS, Arch, from_config, tp_problem
from llmfleet.perf.load import Load, OutputLengths, Prediction, predict
from llmfleet.perf.memory import budget
from llmfleet.perf.speculation import from_flags
from llmfleet.perf.step import NO_CORRECTION, Correction, StepModel

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
    ranges: dict[str, tuple[float, float]] | None = None  # its band around each prediction


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


def run_predict_with(
    req: PredictRequest,
    consts: Constants,
    config: dict[str, object] | None = None,
    correction: Correction = NO_CORRECTION,
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
    split = tp_problem(arch, req.tensor_parallel_size)
    if split:
        raise PlanError("tensor_parallel_size", req.tensor_parallel_size, split)
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
    )
