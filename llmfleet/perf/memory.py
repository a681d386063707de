"""GPU memory with vLLM's accounting: weights, activation peak, runtime, and the KV pool.

vLLM V1 sizes its KV cache at start-up as
    gpu_memory_utilization * total - (weights + peak activation + non-torch memory)
per GPU, and logs "Available KV cache memory", "GPU KV cache size: N tokens" and
"Maximum concurrency for L tokens per request". `budget` predicts those three lines."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from llmfleet.catalog.constants import Constants
from llmfleet.catalog.hardware import Gpu
from llmfleet.perf.architecture import Arch, kv_dtype_bytes
from llmfleet.perf.parallel import SINGLE, Parallel, stage_layers, weights_per_gpu
from llmfleet.perf.speculation import Speculation
from llmfleet.units import GIB

BLOCK_SIZE_TOKENS = 16


def cuda_total_gib(gpu: Gpu, consts: Constants) -> float:
    """Memory CUDA reports as total: the measured figure, else AWS memory x visible fraction."""
    if gpu.cuda_total_gib is not None:
        return gpu.cuda_total_gib
    return gpu.memory_gib * consts.cuda_visible_fraction


class MemoryBudget(BaseModel):
    model_config = ConfigDict(frozen=True)

    total_gib: float
    requested_gib: float
    weights_gib_per_gpu: float
    activation_gib: float
    non_torch_gib: float
    kv_cache_gib_per_gpu: float
    kv_bytes_per_token: float
    kv_bytes_per_token_per_gpu: float
    kv_cache_tokens: int
    max_model_len: int
    max_concurrency: float
    block_size: int = BLOCK_SIZE_TOKENS

    @property
    def holds_one_sequence(self) -> bool:
        return self.max_concurrency >= 1.0


def activation_gib(
    arch: Arch, tp: int, max_num_seqs: int, max_num_batched_tokens: int, consts: Constants
) -> float:
    """Peak of vLLM's profiling pass: the larger of the forward pass's token activations and
    the sampler's fp32 logits (the dummy sampler run follows the forward pass, whose
    intermediates are freed by then; only the last hidden states are kept)."""
    inter = arch.expert_intermediate * arch.experts_per_token if arch.is_moe else 0
    inter = max(inter, 0 if arch.dense_mlp_params == 0 else _dense_intermediate(arch))
    per_token = consts.token_activation_factor * (arch.hidden + 2 * inter / tp) * 2
    tokens_b = max_num_batched_tokens * per_token
    sampled_rows = min(max_num_seqs, max_num_batched_tokens)
    logits_b = consts.sampler_logit_copies * sampled_rows * arch.vocab * 4
    kept_b = max_num_batched_tokens * arch.hidden * 2
    return max(tokens_b, kept_b + logits_b) / GIB


def _dense_intermediate(arch: Arch) -> int:
    dense_layers = arch.layers - arch.moe_layers
    return arch.dense_mlp_params // max(1, 3 * arch.hidden * dense_layers)


def budget(
    arch: Arch,
    gpu: Gpu,
    tp: int,
    precision: str,
    kv_cache_dtype: str,
    gpu_memory_utilization: float,
    max_model_len: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    consts: Constants,
    engine: str = "vllm",
    speculation: Speculation | None = None,
    graph_pool_gib: float = 0.0,
    parallel: Parallel = SINGLE,
) -> MemoryBudget:
    """vLLM and SGLang take a fraction of total memory for weights + KV; TensorRT-LLM's
    kv_cache_free_gpu_mem_fraction is a fraction of what is free after the weights.
    A speculative drafter adds its weights and its KV per token (sharded like the target's).
    `graph_pool_gib`: the CUDA-graph pool a vLLM release reserves inside the fraction
    (`releases.graph_pool_gib`). `parallel`: pipeline stages hold their layers' weights and
    KV; data-parallel ranks each hold a KV pool of their own (the replica's tokens and
    concurrency add up over them); expert parallelism spreads the routed experts
    (`perf.parallel.weights_per_gpu`)."""
    kv_b = kv_dtype_bytes(kv_cache_dtype)
    draft_weight_bytes = speculation.draft_weight_bytes() if speculation else 0.0
    draft_kv_bytes_per_token = speculation.draft_kv_bytes_per_token(kv_b) if speculation else 0.0
    total = cuda_total_gib(gpu, consts)
    weights = (arch.weight_bytes(precision, tp) + draft_weight_bytes) / tp / GIB
    stage_share = 1.0
    if not parallel.plain:
        shared_b, expert_b = arch.weight_bytes_split(precision, tp)
        embed_b, lm_head_b = 2.0 * arch.embed_params, 2.0 * arch.lm_head_params
        weights = weights_per_gpu(
            shared_b + draft_weight_bytes, expert_b, embed_b, lm_head_b, arch.layers, tp, parallel
        ) / GIB
        stage_share = stage_layers(arch.layers, parallel.pp) / arch.layers
    act = activation_gib(arch, tp, max_num_seqs, max_num_batched_tokens, consts)
    ranks = parallel.ranks(tp)
    non_torch = consts.non_torch_gib if ranks == 1 else consts.non_torch_gib_multi_gpu
    if engine == "trtllm":
        free = total - weights - act - non_torch
        kv_gib = gpu_memory_utilization * free if free > 0 else free
        requested = weights + act + non_torch + kv_gib
    else:
        requested = gpu_memory_utilization * total
        kv_gib = requested - weights - act - non_torch - graph_pool_gib
    per_token = arch.kv_bytes_per_token(kv_b) + draft_kv_bytes_per_token
    per_token_gpu = per_token / arch.kv_shards(tp) * stage_share
    if kv_gib > 0:
        blocks = int(kv_gib * GIB // (BLOCK_SIZE_TOKENS * per_token_gpu))
        tokens = blocks * BLOCK_SIZE_TOKENS * parallel.dp
        per_seq = arch.kv_bytes_per_sequence(max_model_len, kv_b)
        per_seq_gpu = (per_seq + draft_kv_bytes_per_token * max_model_len) / arch.kv_shards(tp)
        concurrency = kv_gib * GIB / (per_seq_gpu * stage_share) * parallel.dp
    else:
        tokens, concurrency = 0, 0.0
    return MemoryBudget(
        total_gib=total,
        requested_gib=requested,
        weights_gib_per_gpu=weights,
        activation_gib=act,
        non_torch_gib=non_torch,
        kv_cache_gib_per_gpu=kv_gib,
        kv_bytes_per_token=per_token,
        kv_bytes_per_token_per_gpu=per_token_gpu,
        kv_cache_tokens=tokens,
        max_model_len=max_model_len,
        max_concurrency=concurrency,
    )
