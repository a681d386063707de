"""Steady-state prediction of one replica under a load: what `llmfleet predict` prints.

Flow balance: a request spends `output` decode steps and contributes `input` prefill
tokens, so a step that runs D decodes also carries D * input / output prefill tokens
on average. The token budget (max_num_batched_tokens), max_num_seqs and the KV pool cap D.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from llmfleet.memory import MemoryBudget
from llmfleet.perf import Engine, step_time

Mode = Literal["offline", "concurrency", "rate"]


class Load(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input_tokens: int = Field(gt=0)
    output_tokens: int = Field(gt=0)
    concurrency: float | None = Field(default=None, gt=0)
    request_rate: float | None = Field(default=None, gt=0)

    @property
    def mode(self) -> Mode:
        if self.concurrency is not None:
            return "concurrency"
        if self.request_rate is not None:
            return "rate"
        return "offline"


class Prediction(BaseModel):
    model_config = ConfigDict(frozen=True)

    mode: Mode
    batch_size: float
    prefill_tokens_per_step: float
    step_bound: str
    ttft_ms: float
    itl_ms: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    requests_per_s: float
    saturated: bool


def _decode_cap(mem: MemoryBudget, load: Load, max_num_seqs: int, budget_tokens: int) -> float:
    """Most sequences that can decode together: seq limit, KV pool, token budget."""
    i, o = load.input_tokens, load.output_tokens
    kv_seqs = mem.kv_cache_tokens / (i + o / 2)
    budget_seqs = budget_tokens * o / (i + o)
    return max(0.0, min(float(max_num_seqs), kv_seqs, budget_seqs))


def _prefill_service_s(eng: Engine, load: Load, decode: float, budget_tokens: int) -> float:
    """Time to prefill one prompt in chunks of what the budget leaves after the decodes."""
    ctx = load.input_tokens + load.output_tokens / 2
    chunk = max(1.0, budget_tokens - decode)
    steps = math.ceil(load.input_tokens / chunk)
    per_step = min(chunk, load.input_tokens)
    t = step_time(eng, decode, ctx, per_step, load.input_tokens / 2).total_s
    return steps * t


def predict(
    eng: Engine, mem: MemoryBudget, load: Load, max_num_seqs: int, max_num_batched_tokens: int
) -> Prediction:
    i, o = load.input_tokens, load.output_tokens
    ctx = i + o / 2
    cap = _decode_cap(mem, load, max_num_seqs, max_num_batched_tokens)
    saturated = False
    if load.mode == "offline":
        decode = cap
        saturated = True
    elif load.mode == "concurrency":
        assert load.concurrency is not None
        decode = min(load.concurrency, cap)
        saturated = load.concurrency > cap
    else:
        assert load.request_rate is not None
        decode, saturated = _rate_fixed_point(eng, load, load.request_rate, cap)
    decode = max(decode, 1e-9)
    prefill = decode * i / o
    step = step_time(eng, decode, ctx, prefill, i / 2)
    t = step.total_s
    req_s = decode / (o * t)
    service = _prefill_service_s(eng, load, decode, max_num_batched_tokens)
    if load.mode == "offline":
        ttft = service
    elif load.mode == "concurrency":
        assert load.concurrency is not None
        waiting = max(0.0, load.concurrency - cap)
        ttft = service + waiting / req_s
    else:
        rho = min(0.999, prefill / max(1.0, max_num_batched_tokens - decode))
        ttft = service * (1 + rho / (2 * (1 - rho)))
    return Prediction(
        mode=load.mode,
        batch_size=decode,
        prefill_tokens_per_step=prefill,
        step_bound=step.bound,
        ttft_ms=ttft * 1000,
        itl_ms=t * 1000,
        output_tokens_per_s=decode / t,
        total_tokens_per_s=(decode + prefill) / t,
        requests_per_s=req_s,
        saturated=saturated,
    )


def _rate_fixed_point(eng: Engine, load: Load, rate: float, cap: float) -> tuple[float, bool]:
    """Running decodes D = rate * output * t(D) (Little's law), solved by iteration."""
    i, o = load.input_tokens, load.output_tokens
    ctx = i + o / 2
    decode = 1.0
    for _ in range(200):
        t = step_time(eng, decode, ctx, decode * i / o, i / 2).total_s
        nxt = rate * o * t
        if nxt > cap:
            return cap, True
        if abs(nxt - decode) < 1e-6 * max(1.0, decode):
            return nxt, False
        decode = 0.5 * (decode + nxt)
    return decode, False


# ---- one configuration, end to end: what `llmfleet predict` and `llmfleet validate` call ----

# vLLM's `vllm serve` defaults (engine/arg_utils.py): GPUs with 70 GiB or more get a
# bigger batch and token budget.
LARGE_GPU_GIB = 70


def default_max_num_seqs(gpu_memory_gib: float) -> int:
    return 1024 if gpu_memory_gib >= LARGE_GPU_GIB else 256


def default_max_num_batched_tokens(gpu_memory_gib: float) -> int:
    return 8192 if gpu_memory_gib >= LARGE_GPU_GIB else 2048


class PredictRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
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


class PredictResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    model: str
    gpu: str
    tensor_parallel_size: int
    precision: str
    kv_cache_dtype: str
    mode: Mode
    weights_gib_per_gpu: float
    activation_gib: float
    kv_bytes_per_token: float
    kv_cache_gib_per_gpu: float
    kv_cache_tokens: int
    max_model_len: int
    max_concurrency: float
    max_num_seqs: int
    max_num_batched_tokens: int
    batch_size: float
    step_bound: str
    ttft_ms: float
    itl_ms: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    requests_per_s: float
    saturated: bool
    fits: bool


def run_predict(req: PredictRequest, config: dict[str, object] | None = None) -> PredictResult:
    """Predict one replica. `config` is a config.json dict when `req.model` is a path."""
    from llmfleet import catalog
    from llmfleet.architecture import PRECISIONS, from_config
    from llmfleet.calibration import load
    from llmfleet.errors import PlanError
    from llmfleet.memory import budget

    if req.precision not in PRECISIONS:
        raise PlanError("--precision", req.precision, f"use one of {', '.join(PRECISIONS)}")
    if config is None:
        entry = catalog.model_entry(req.model, "--model")
        name, config = entry.id, entry.config
    else:
        name = req.model
    arch = from_config(name, config)
    gpu = catalog.gpu(req.gpu, "--gpu")
    consts = load()
    if arch.heads % req.tensor_parallel_size:
        raise PlanError(
            "--tensor-parallel-size",
            req.tensor_parallel_size,
            f"must divide the {arch.heads} attention heads",
        )
    max_len = req.max_model_len or arch.max_context
    seqs = req.max_num_seqs or default_max_num_seqs(gpu.memory_gib)
    budget_tokens = req.max_num_batched_tokens or default_max_num_batched_tokens(gpu.memory_gib)
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
    )
    eng = Engine(arch, gpu, req.tensor_parallel_size, req.precision, req.kv_cache_dtype, consts)
    load_ = Load(
        input_tokens=req.input_tokens,
        output_tokens=req.output_tokens,
        concurrency=req.concurrency,
        request_rate=req.request_rate,
    )
    fits = mem.kv_cache_tokens >= req.input_tokens + req.output_tokens
    if fits:
        p = predict(eng, mem, load_, seqs, budget_tokens)
    else:
        p = Prediction(
            mode=load_.mode,
            batch_size=0,
            prefill_tokens_per_step=0,
            step_bound="none",
            ttft_ms=math.inf,
            itl_ms=math.inf,
            output_tokens_per_s=0,
            total_tokens_per_s=0,
            requests_per_s=0,
            saturated=True,
        )
    return PredictResult(
        model=name,
        gpu=gpu.gpu,
        tensor_parallel_size=req.tensor_parallel_size,
        precision=req.precision,
        kv_cache_dtype=req.kv_cache_dtype,
        mode=p.mode,
        weights_gib_per_gpu=mem.weights_gib_per_gpu,
        activation_gib=mem.activation_gib,
        kv_bytes_per_token=mem.kv_bytes_per_token,
        kv_cache_gib_per_gpu=mem.kv_cache_gib_per_gpu,
        kv_cache_tokens=mem.kv_cache_tokens,
        max_model_len=max_len,
        max_concurrency=mem.max_concurrency,
        max_num_seqs=seqs,
        max_num_batched_tokens=budget_tokens,
        batch_size=p.batch_size,
        step_bound=p.step_bound,
        ttft_ms=p.ttft_ms,
        itl_ms=p.itl_ms,
        output_tokens_per_s=p.output_tokens_per_s,
        total_tokens_per_s=p.total_tokens_per_s,
        requests_per_s=p.requests_per_s,
        saturated=p.saturated,
        fits=fits,
    )
