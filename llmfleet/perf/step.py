"""One engine step of a continuous-batching engine (docs/architecture.md).

One step processes `decode` running sequences (one token each, at an average context)
plus `prefill` prompt tokens (a chunk). Its time is the roofline of the bytes it reads and
the FLOPs it does, plus tensor-parallel all-reduces and a fixed overhead:

    t = max(bytes / (BW * MBU), flops / (TP * F * MFU)) + allreduce + overhead

(with a fitted share of the shorter term added where memory and math do not overlap).

`--enforce-eager` (vLLM without CUDA graphs): every kernel is launched from Python each
step, so a decode step of a small batch, whose kernels take microseconds, waits on the
host: the step takes at least `EAGER_LAYER_LAUNCH_US` per layer. Long prefill chunks, far
above that floor, are unchanged. (Its memory side, no CUDA-graph pool, is
`vllm_release.graph_pool_gib`.)

A measured server's own factors on these terms (`Correction`, fitted by `llmfleet calibrate
--bench` on the user's `vllm bench serve` runs) multiply the HBM time, the tensor time, the
host time and the request handling before the first token; without one they are 1."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import cast

import numpy as np

from llmfleet.catalog.constants import Constants
from llmfleet.catalog.hardware import Gpu
from llmfleet.perf.architecture import Arch, kv_dtype_bytes
from llmfleet.perf.elementwise import emax, emin, present
from llmfleet.perf.parallel import (
    SINGLE,
    Link,
    Parallel,
    all_reduce_s,
    all_to_all_s,
    ep_imbalance,
    hop_s,
    microbatch,
    pipeline_cycle_s,
    stage_imbalance,
)
from llmfleet.perf.speculation import Speculation

# Qwen2.5-Omni-7B's thinker (28 layers) on A800 decodes at 22-23 ms TPOT eager against
# 13 ms with CUDA graphs (vllm-project/vllm-omni#7960): about 9.5 ms, 330 us per layer.
# Not fitted: no measured row runs eager with a timing metric.
EAGER_LAYER_LAUNCH_US = 330.0


def eager_launch_s(arch: Arch, enforce_eager: bool) -> float:
    """Least time of a step launched eagerly (0 with CUDA graphs)."""
    return arch.layers * EAGER_LAYER_LAUNCH_US * 1e-6 if enforce_eager else 0.0


@dataclass(frozen=True)
class Correction:
    """One server's measured departure from the shipped constants, as factors on the terms of
    a step (1: none). Plain numbers: perf never reads a calibration file.

    - `memory`: time to stream weights and KV from HBM (what a decode step is bound by);
    - `compute`: tensor-core time (what a prefill chunk is bound by);
    - `overhead`: host time per step and per running sequence (scheduling, sampling);
    - `ttft_overhead`: request handling before the first token (HTTP, tokenisation)."""

    memory: float = 1.0
    compute: float = 1.0
    overhead: float = 1.0
    ttft_overhead: float = 1.0


NO_CORRECTION = Correction()


def dense_flops(gpu: Gpu, precision: str) -> float:
    """Dense tensor FLOP/s per GPU of the layers a checkpoint keeps at its compute
    precision: W8A8 FP8 only on FP8 parts; elsewhere low-bit weights are widened and the math
    runs at 16-bit. An MXFP4 checkpoint quantizes only the routed experts (attention, router,
    embeddings and LM head stay BF16: `expert_flops` has the experts' rate)."""
    if precision == "fp8" and gpu.fp8_dense_tflops:
        return gpu.fp8_dense_tflops * 1e12
    return gpu.bf16_dense_tflops * 1e12


def expert_flops(gpu: Gpu, precision: str) -> float:
    """Dense tensor FLOP/s per GPU of the routed experts. MXFP4 experts multiply with 8-bit
    activations where tensor cores take FP8 (vLLM's FlashInfer MXFP4 x MXFP8 MoE on
    Blackwell, as InferenceMAX runs it: VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1), never at the
    FP4 rate, which needs 4-bit activations; on parts without FP8 with 16-bit activations."""
    if precision == "mxfp4" and gpu.fp4_dense_tflops and gpu.fp8_dense_tflops:
        return gpu.fp8_dense_tflops * 1e12
    return dense_flops(gpu, precision)


def prefill_floor_s(arch: Arch, gpu: Gpu, tp: int, precision: str, prompt_tokens: float) -> float:
    """The least time any engine can prefill `prompt_tokens`: 2 FLOPs per active weight per
    token at the GPUs' full dense tensor peak (no attention, no overhead). A measured first
    token sooner than this was not computed: a prefix-cache hit."""
    peak = max(dense_flops(gpu, precision), expert_flops(gpu, precision))
    return 2.0 * arch.active_params * prompt_tokens / (tp * peak)


@dataclass(frozen=True)
class StepModel:
    """What a step's cost depends on besides the batch: model, GPU, parallelism, precision."""

    arch: Arch
    gpu: Gpu
    tp: int
    precision: str
    kv_cache_dtype: str
    consts: Constants
    engine: str = "vllm"
    speculation: Speculation | None = None
    enforce_eager: bool = False  # no CUDA graphs: a step waits on Python's kernel launches
    correction: Correction = NO_CORRECTION  # a measured server's own factors (calibrate --bench)
    parallel: Parallel = SINGLE  # pipeline stages, DP ranks with EP, nodes (perf.parallel)
    api_server: bool = True  # requests reach the engine through its HTTP API server

    @property
    def ttft_overhead_s(self) -> float:
        """Request handling before the first token that no step carries: the engine's API
        server (HTTP, templating and tokenisation, detokenising the first chunk); none when
        requests come through the engine's Python API (an offline harness)."""
        if not self.api_server:
            return 0.0
        handling_ms = self.per_engine(self.consts.request_handling_ms)
        return handling_ms / 1000 * self.correction.ttft_overhead

    @property
    def step_factor(self) -> float:
        """Per-engine multiplier on GPU time, fitted on that engine's measurements."""
        return self.per_engine(self.consts.engine_step_factor)

    @cached_property
    def draft(self) -> StepModel | None:
        """The drafter's own step model (at the target's TP and KV dtype), or None without
        one (no speculation, or ngram's CPU lookup)."""
        spec = self.speculation
        if spec is None or spec.draft_arch is None:
            return None
        return StepModel(
            spec.draft_arch, self.gpu, self.tp, spec.draft_precision, self.kv_cache_dtype,
            self.consts, correction=self.correction,  # the drafter runs on the same server
        )

    def per_engine(self, values: dict[str, float]) -> float:
        """This engine's value of a per-engine constant (vLLM's when it has none)."""
        return values.get(self.engine, values["vllm"])

    @property
    def compute_flops(self) -> float:
        return dense_flops(self.gpu, self.precision)

    @property
    def weight_bytes_per_gpu(self) -> float:
        return self.arch.weight_bytes(self.precision, self.tp) / self.tp

    @cached_property
    def weight_split(self) -> tuple[float, float]:
        """(shared, expert) weight bytes of the whole model as this precision and TP store them."""
        return self.arch.weight_bytes_split(self.precision, self.tp)

    @cached_property
    def kv_bytes_per_token_per_gpu(self) -> float:
        a = self.arch
        return a.kv_bytes_per_token(kv_dtype_bytes(self.kv_cache_dtype)) / a.kv_shards(self.tp)

    @cached_property
    def terms(self) -> StepTerms:
        """What `step_time` needs that does not depend on the batch, computed once (the
        search calls step_time tens of thousands of times)."""
        a, c, g, k = self.arch, self.consts, self.gpu, self.correction
        shared_b, expert_b = self.weight_split
        if a.lm_head_params:  # untied input embeddings are a row lookup, not streamed
            shared_b -= 2.0 * a.embed_params
        lm_head = a.lm_head_params or a.embed_params
        routed = a.expert_params * a.experts_per_token / a.experts if a.experts else 0.0
        # Grouped expert GEMMs run at a lower efficiency than dense ones.
        body = a.active_params - lm_head - routed + routed / c.moe_efficiency
        att_dim = a.heads * (a.mla_kv_dim if a.mla_kv_dim else a.head_dim)
        tp_link = self.tp_link
        return StepTerms(
            shared_b=shared_b,
            expert_b=expert_b,
            kv_tok=self.kv_bytes_per_token_per_gpu,
            mem_bw=g.hbm_bandwidth_gb_s * 1e9 * c.mbu[g.architecture] / k.memory,
            lm_head=lm_head,
            body=body,
            att4=4.0 * a.layers * att_dim,
            flops=self.tp * self.compute_flops * c.mfu[g.architecture] / k.compute,
            expert_flops=self.tp * expert_flops(g, self.precision) * c.mfu[g.architecture]
            / k.compute,
            link_bw=tp_link.bus_b_s,
            latency_s=tp_link.latency_s,
            ring=2 * (self.tp - 1) / self.tp,
            moe_fixed_s=a.moe_layers * c.moe_layer_overhead_us * 1e-6,
            step_overhead_s=self.per_engine(c.step_overhead_ms) / 1000 * k.overhead,
            sequence_overhead_us=self.per_engine(c.sequence_overhead_us) * k.overhead,
            factor=self.step_factor,
            overlap=c.roofline_overlap,
            launch_s=eager_launch_s(a, self.enforce_eager),
            routed=routed / c.moe_efficiency,
        )

    @cached_property
    def node_link(self) -> Link:
        """The link inside a node: NVLink, else PCIe (latency of an all-reduce plus the TP
        sync, the fitted share of the per-direction bandwidth)."""
        c, g = self.consts, self.gpu
        name = "nvlink" if g.has_nvlink else "pcie"
        per_dir_gb_s = g.nvlink_gb_s / 2 if g.has_nvlink else g.pcie_gb_s
        bw = per_dir_gb_s * 1e9 * c.link_efficiency
        latency_s = (c.allreduce_latency_us[name] + c.tp_sync_overhead_us) * 1e-6
        return Link(name, latency_s, bw, bw)

    @cached_property
    def tp_link(self) -> Link:
        """What the TP all-reduces cross: the node's link, or EFA when TP spans nodes."""
        par = self.parallel
        if par.tp_crosses_nodes(self.tp) and par.inter_node is not None:
            inter = par.inter_node
            sync_s = self.consts.tp_sync_overhead_us * 1e-6
            return Link(
                inter.name, inter.latency_s + sync_s, inter.bus_b_s, inter.p2p_b_s,
                inter.allreduce,
            )
        return self.node_link

    @cached_property
    def ep_link(self) -> Link:
        """What the experts' all-to-all crosses: the node's link, or EFA across nodes."""
        par = self.parallel
        if par.ep_crosses_nodes(self.tp) and par.inter_node is not None:
            return par.inter_node
        return self.node_link

    @cached_property
    def pp_link(self) -> Link:
        """What a pipeline hop crosses: EFA when stages sit on different nodes."""
        par = self.parallel
        if par.pp_crosses_nodes(self.tp) and par.inter_node is not None:
            return par.inter_node
        return self.node_link


@dataclass(frozen=True)
class StepTerms:
    shared_b: float
    expert_b: float
    kv_tok: float
    mem_bw: float
    lm_head: float
    body: float
    att4: float
    flops: float
    expert_flops: float  # the routed experts' FLOP/s (`expert_flops`)
    link_bw: float
    latency_s: float
    ring: float
    moe_fixed_s: float
    step_overhead_s: float
    sequence_overhead_us: float
    factor: float
    overlap: float
    launch_s: float
    routed: float = 0.0  # routed-expert parameters a token multiplies, over the MoE efficiency


@dataclass(frozen=True)
class StepTime:
    memory_s: float
    compute_s: float
    comm_s: float
    overhead_s: float
    factor: float = 1.0  # the engine's GPU time relative to vLLM's kernels
    overlap: float = 1.0  # 1: memory and math overlap fully (the ideal roofline)
    draft_s: float = 0.0  # the drafter's k passes (speculative decoding)
    launch_s: float = 0.0  # host time to launch the step's kernels eagerly (0: CUDA graphs)

    @property
    def gpu_s(self) -> float:
        longer, shorter = emax(self.memory_s, self.compute_s), emin(self.memory_s, self.compute_s)
        return longer + (1 - self.overlap) * shorter + self.comm_s

    @property
    def total_s(self) -> float:
        return emax(self.gpu_s * self.factor, self.launch_s) + self.overhead_s + self.draft_s

    @property
    def bound(self) -> str:
        return "memory" if self.memory_s >= self.compute_s else "compute"


def experts_touched_fraction(experts: int, top_k: int, tokens: float) -> float:
    """Expected share of experts a step reads when `tokens` route uniformly to top-k of N."""
    if experts == 0:
        return 0.0
    untouched: float = ((experts - top_k) / experts) ** emax(tokens, 0.0)
    return 1.0 - untouched


def _attended_context(arch: Arch, context: float) -> float:
    """Average tokens one layer attends to: sliding-window layers stop at the window."""
    if not arch.sliding_layers or arch.sliding_window is None:
        return context
    full = arch.layers - arch.sliding_layers
    window = emin(context, float(arch.sliding_window))
    return (full * context + arch.sliding_layers * window) / arch.layers


def step_time(
    step_model: StepModel,
    decode: float,
    decode_context: float,
    prefill: float = 0.0,
    prefill_context: float = 0.0,
    other_prefill: float = 0.0,
) -> StepTime:
    """Time of one step with `decode` sequences at `decode_context` and a `prefill` chunk.

    `prefill_context` is the prompt position where the chunk starts (its prefix). With
    speculation each decoding sequence verifies its k drafted tokens plus one: the step reads
    the same weights and KV but multiplies k + 1 tokens per sequence, so the gain fades once
    the batch makes the step compute-bound. `other_prefill`: prompt tokens the other
    data-parallel ranks carry in the same step (their chunks pass the shared experts too).
    """
    if not step_model.parallel.plain:
        return _parallel_step_time(step_model, decode, decode_context, prefill, prefill_context,
                                   other_prefill)
    a, t = step_model.arch, step_model.terms
    spec = step_model.speculation
    per_seq = 1 + spec.k if spec else 1
    tokens = decode * per_seq + prefill
    # Bytes read: weights (MoE: only experts some token routes to) and the KV of the context.
    touched = experts_touched_fraction(a.experts, a.experts_per_token, tokens)
    weights = (t.shared_b + t.expert_b * touched) / step_model.tp
    ctx = _attended_context(a, decode_context)
    chunked = present(prefill)
    kv_read = decode * ctx * t.kv_tok + chunked * _attended_context(a, prefill_context) * t.kv_tok
    memory_s = (weights + kv_read) / t.mem_bw

    # FLOPs: 2 per active weight per token (the LM head only for sampled rows) + attention.
    sampled = decode * per_seq + chunked
    linear = 2.0 * (t.body - t.routed) * tokens + 2.0 * t.lm_head * sampled
    experts = 2.0 * t.routed * tokens
    attention = t.att4 * decode * per_seq * ctx
    attention += t.att4 * prefill * _attended_context(a, prefill_context + prefill / 2)
    compute_s = (linear + attention) / t.flops + experts / t.expert_flops

    # Two all-reduces of the activations per layer across the TP group.
    comm_s = 0.0
    if step_model.tp > 1:
        msg = tokens * a.hidden * 2
        if step_model.tp_link.allreduce:  # TP across nodes: the measured EFA curve
            comm_s = 2 * a.layers * (
                all_reduce_s(msg, step_model.tp, step_model.tp_link)
                + step_model.consts.tp_sync_overhead_us * 1e-6
            )
        else:
            comm_s = 2 * a.layers * (t.latency_s + t.ring * msg / t.link_bw)
    # MoE layers add a fixed cost per step (routing, permutation, grouped-GEMM launches).
    comm_s += t.moe_fixed_s
    overhead_s = t.step_overhead_s + decode * t.sequence_overhead_us * 1e-6
    draft_s = 0.0
    draft = step_model.draft
    if spec and draft:
        # k draft passes over the running batch; the first also carries the prefill chunk.
        rest = step_time(draft, decode, decode_context).total_s
        first = step_time(draft, decode, decode_context, prefill, prefill_context).total_s
        draft_s = (first + (spec.k - 1) * rest) * present(decode)
    return StepTime(
        memory_s, compute_s, comm_s, overhead_s, t.factor, t.overlap, draft_s, t.launch_s
    )


def step_times(
    step_model: StepModel,
    decode: np.ndarray | float,
    decode_context: np.ndarray | float,
    prefill: np.ndarray | float = 0.0,
    prefill_context: np.ndarray | float = 0.0,
    other_prefill: np.ndarray | float = 0.0,
) -> np.ndarray:
    """`step_time`'s total for arrays of batches, contexts, chunks and starts (broadcast
    together): a table of steps in one pass of the same arithmetic."""
    t = step_time(step_model, cast(float, decode), cast(float, decode_context),
                  cast(float, prefill), cast(float, prefill_context),
                  cast(float, other_prefill))
    return np.asarray(t.total_s, dtype=float)


def _parallel_step_time(
    step_model: StepModel,
    decode: float,
    decode_context: float,
    prefill: float,
    prefill_context: float,
    other_prefill: float = 0.0,
) -> StepTime:
    """A replica with pipeline stages or data-parallel ranks (`perf.parallel`): `decode` is
    the replica's running sequences, `prefill` one chunk (in one microbatch, on one rank).

    PP: the token period is a microbatch's whole-model time on one TP group, stretched by the
    slowest stage, plus PP hops; a chunk adds what it adds to its microbatch. The host
    time of one microbatch's schedule is on the critical path, the others' overlap the GPUs."""
    par = step_model.parallel
    if par.pp <= 1:
        return _rank_step(step_model, decode, decode_context, prefill, prefill_context,
                          other_prefill)
    spec = step_model.speculation
    per_seq = 1 + spec.k if spec else 1
    b = microbatch(decode, par.pp)
    plain = _rank_step(step_model, b, decode_context, 0.0, 0.0)
    mixed = _rank_step(step_model, b, decode_context, prefill, prefill_context)
    stretch = stage_imbalance(step_model.arch.layers, par.pp)

    def cycle(x: float, y: float) -> float:
        return stretch * pipeline_cycle_s(x, y, par.pp)

    tokens = b * per_seq + prefill / par.pp
    hops = par.pp * hop_s(tokens, step_model.arch.hidden, step_model.tp, step_model.pp_link)
    return StepTime(
        cycle(plain.memory_s, mixed.memory_s),
        cycle(plain.compute_s, mixed.compute_s),
        cycle(plain.comm_s, mixed.comm_s) + hops,
        mixed.overhead_s,
        plain.factor,
        plain.overlap,
        0.0,
        plain.launch_s,
    )


def _rank_step(
    step_model: StepModel,
    decode: float,
    decode_context: float,
    prefill: float,
    prefill_context: float,
    other_prefill: float = 0.0,
) -> StepTime:
    """One step of the whole model on one TP group, as the busiest data-parallel rank sees
    it: its own `decode / DP` sequences (and the chunk) through attention and the dense
    layers; with EP the experts on its GPUs serve every rank's tokens (the other ranks'
    chunks, `other_prefill`, included), the busiest GPU's share
    (`ep_imbalance`), and each MoE layer gathers and scatters them (`all_to_all_s`) instead of
    the TP all-reduce. DP without EP is not modeled here (vLLM then shards the experts by TP
    across DP x TP ranks)."""
    a, t, par = step_model.arch, step_model.terms, step_model.parallel
    tp = step_model.tp
    spec = step_model.speculation
    per_seq = 1 + spec.k if spec else 1
    own = decode / par.dp
    own_tokens = own * per_seq + prefill
    all_tokens = decode * per_seq + prefill + other_prefill
    ep = par.ep_size(tp)
    touched = experts_touched_fraction(a.experts, a.experts_per_token, all_tokens)
    experts_b = t.expert_b * touched / (ep if par.ep else tp)
    ctx = _attended_context(a, decode_context)
    chunked = present(prefill)
    kv_read = own * ctx * t.kv_tok + chunked * _attended_context(a, prefill_context) * t.kv_tok
    memory_s = (t.shared_b / tp + experts_b + kv_read) / t.mem_bw

    sampled = own * per_seq + chunked
    imbalance = ep_imbalance(all_tokens * a.experts_per_token, ep) if par.ep else 1.0
    routed_tokens = all_tokens * imbalance / par.dp if par.ep else own_tokens
    linear = 2.0 * (t.body - t.routed) * own_tokens + 2.0 * t.lm_head * sampled
    experts = 2.0 * t.routed * routed_tokens
    attention = t.att4 * own * per_seq * ctx
    attention += t.att4 * prefill * _attended_context(a, prefill_context + prefill / 2)
    compute_s = (linear + attention) / t.flops + experts / t.expert_flops

    comm_s = t.moe_fixed_s
    msg = own_tokens * a.hidden * 2
    link = step_model.tp_link
    if par.ep:
        comm_s += (2 * a.layers - a.moe_layers) * all_reduce_s(msg, tp, link)
        comm_s += a.moe_layers * all_to_all_s(all_tokens, a.hidden, ep, step_model.ep_link)
    elif tp > 1:
        comm_s += 2 * a.layers * (t.latency_s + t.ring * msg / t.link_bw)
    overhead_s = t.step_overhead_s + own * t.sequence_overhead_us * 1e-6
    return StepTime(memory_s, compute_s, comm_s, overhead_s, t.factor, t.overlap, 0.0, t.launch_s)
