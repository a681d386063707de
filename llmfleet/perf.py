"""Step-level performance model of a continuous-batching engine (docs/architecture.md).

One engine step processes `decode` running sequences (one token each, at an average
context) plus `prefill` prompt tokens (a chunk). Its time is the roofline of the bytes it
reads and the FLOPs it does, plus tensor-parallel all-reduces and a fixed overhead:

    t = max(bytes / (BW * MBU), flops / (TP * F * MFU)) + allreduce + overhead

(with a fitted share of the shorter term added where memory and math do not overlap).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from llmfleet import eager
from llmfleet.architecture import Arch
from llmfleet.calibration import Constants
from llmfleet.catalog import Gpu
from llmfleet.memory import kv_dtype_bytes


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

    @property
    def step_factor(self) -> float:
        """Per-engine multiplier on GPU time, fitted on that engine's measurements."""
        return self.per_engine(self.consts.engine_step_factor)

    def per_engine(self, values: dict[str, float]) -> float:
        """This engine's value of a per-engine constant (vLLM's when it has none)."""
        return values.get(self.engine, values["vllm"])

    @property
    def compute_flops(self) -> float:
        """Dense tensor FLOP/s per GPU at the compute precision: W8A8 FP8 only on FP8 parts,
        MXFP4 at the FP4 rate only where tensor cores take FP4 (Blackwell); elsewhere the
        low-bit weights are widened and the math runs at 16-bit."""
        if self.precision == "fp8" and self.gpu.fp8_dense_tflops:
            return self.gpu.fp8_dense_tflops * 1e12
        if self.precision == "mxfp4" and self.gpu.fp4_dense_tflops:
            return self.gpu.fp4_dense_tflops * 1e12
        return self.gpu.bf16_dense_tflops * 1e12

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
        a, c, g = self.arch, self.consts, self.gpu
        shared_b, expert_b = self.weight_split
        if a.lm_head_params:  # untied input embeddings are a row lookup, not streamed
            shared_b -= 2.0 * a.embed_params
        lm_head = a.lm_head_params or a.embed_params
        routed = a.expert_params * a.experts_per_token / a.experts if a.experts else 0.0
        # Grouped expert GEMMs run at a lower efficiency than dense ones.
        body = a.active_params - lm_head - routed + routed / c.moe_efficiency
        att_dim = a.heads * (a.mla_kv_dim if a.mla_kv_dim else a.head_dim)
        link = "nvlink" if g.has_nvlink else "pcie"
        per_dir_gb_s = g.nvlink_gb_s / 2 if g.has_nvlink else g.pcie_gb_s
        latency_us = c.allreduce_latency_us[link] + c.tp_sync_overhead_us
        return StepTerms(
            shared_b=shared_b,
            expert_b=expert_b,
            kv_tok=self.kv_bytes_per_token_per_gpu,
            mem_bw=g.hbm_bandwidth_gb_s * 1e9 * c.mbu[g.architecture],
            lm_head=lm_head,
            body=body,
            att4=4.0 * a.layers * att_dim,
            flops=self.tp * self.compute_flops * c.mfu[g.architecture],
            link_bw=per_dir_gb_s * 1e9 * c.link_efficiency,
            latency_s=latency_us * 1e-6,
            ring=2 * (self.tp - 1) / self.tp,
            moe_fixed_s=a.moe_layers * c.moe_layer_overhead_us * 1e-6,
            step_overhead_s=self.per_engine(c.step_overhead_ms) / 1000,
            sequence_overhead_us=self.per_engine(c.sequence_overhead_us),
            factor=self.step_factor,
            overlap=c.roofline_overlap,
            launch_s=eager.launch_floor_s(a, self.enforce_eager),
        )


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
    link_bw: float
    latency_s: float
    ring: float
    moe_fixed_s: float
    step_overhead_s: float
    sequence_overhead_us: float
    factor: float
    overlap: float
    launch_s: float


def expected_tokens(acceptance_rate: float, k: int) -> float:
    """Tokens a sequence gains per target step when each of k drafted tokens is accepted with
    probability a until the first rejection, plus the target's own token:
    (1 - a^(k+1)) / (1 - a)."""
    a = acceptance_rate
    return float(k + 1) if a >= 1 else (1 - a ** (k + 1)) / (1 - a)


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding: k drafted tokens per sequence, verified in one target step.

    `draft` is the drafter's own step model (an EAGLE head, an MTP layer or a draft model);
    None when drafting costs no GPU time (ngram lookup in the prompt runs on the CPU)."""

    method: str
    k: int
    acceptance_rate: float
    draft: StepModel | None = None
    draft_model: str | None = None  # the drafter's checkpoint (Hugging Face repo id)

    @property
    def tokens_per_step(self) -> float:
        return expected_tokens(self.acceptance_rate, self.k)


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
        longer, shorter = max(self.memory_s, self.compute_s), min(self.memory_s, self.compute_s)
        return longer + (1 - self.overlap) * shorter + self.comm_s

    @property
    def total_s(self) -> float:
        return max(self.gpu_s * self.factor, self.launch_s) + self.overhead_s + self.draft_s

    @property
    def bound(self) -> str:
        return "memory" if self.memory_s >= self.compute_s else "compute"


def experts_touched_fraction(experts: int, top_k: int, tokens: float) -> float:
    """Expected share of experts a step reads when `tokens` route uniformly to top-k of N."""
    if experts == 0 or tokens <= 0:
        return 0.0
    return 1.0 - float(((experts - top_k) / experts) ** tokens)


def _attended_context(arch: Arch, context: float) -> float:
    """Average tokens one layer attends to: sliding-window layers stop at the window."""
    if not arch.sliding_layers or arch.sliding_window is None:
        return context
    full = arch.layers - arch.sliding_layers
    return (full * context + arch.sliding_layers * min(context, arch.sliding_window)) / arch.layers


def step_time(
    eng: StepModel,
    decode: float,
    decode_context: float,
    prefill: float = 0.0,
    prefill_context: float = 0.0,
) -> StepTime:
    """Time of one step with `decode` sequences at `decode_context` and a `prefill` chunk.

    `prefill_context` is the prompt position where the chunk starts (its prefix). With
    speculation each decoding sequence verifies its k drafted tokens plus one: the step reads
    the same weights and KV but multiplies k + 1 tokens per sequence, so the gain fades once
    the batch makes the step compute-bound.
    """
    a, t = eng.arch, eng.terms
    spec = eng.speculation
    per_seq = 1 + spec.k if spec else 1
    tokens = decode * per_seq + prefill
    # Bytes read: weights (MoE: only experts some token routes to) and the KV of the context.
    touched = experts_touched_fraction(a.experts, a.experts_per_token, tokens)
    weights = (t.shared_b + t.expert_b * touched) / eng.tp
    ctx = _attended_context(a, decode_context)
    kv_read = decode * ctx * t.kv_tok
    if prefill:
        kv_read += _attended_context(a, prefill_context) * t.kv_tok
    memory_s = (weights + kv_read) / t.mem_bw

    # FLOPs: 2 per active weight per token (the LM head only for sampled rows) + attention.
    sampled = decode * per_seq + (1 if prefill else 0)
    linear = 2.0 * t.body * tokens + 2.0 * t.lm_head * sampled
    attention = t.att4 * decode * per_seq * ctx
    if prefill:
        mid = _attended_context(a, prefill_context + prefill / 2)
        attention += t.att4 * prefill * mid
    compute_s = (linear + attention) / t.flops

    # Two all-reduces of the activations per layer across the TP group.
    comm_s = 0.0
    if eng.tp > 1:
        msg = tokens * a.hidden * 2
        comm_s = 2 * a.layers * (t.latency_s + t.ring * msg / t.link_bw)
    # MoE layers add a fixed cost per step (routing, permutation, grouped-GEMM launches).
    comm_s += t.moe_fixed_s
    overhead_s = t.step_overhead_s + decode * t.sequence_overhead_us * 1e-6
    draft_s = 0.0
    if spec and spec.draft and decode:
        # k draft passes over the running batch; the first also carries the prefill chunk.
        rest = step_time(spec.draft, decode, decode_context).total_s
        first = rest
        if prefill:
            first = step_time(spec.draft, decode, decode_context, prefill, prefill_context).total_s
        draft_s = first + (spec.k - 1) * rest
    return StepTime(
        memory_s, compute_s, comm_s, overhead_s, t.factor, t.overlap, draft_s, t.launch_s
    )


@dataclass(frozen=True)
class MixedSteps:
    """Steady state of chunked prefill: a share of steps carries a full prefill chunk.

    A request adds `input` prefill tokens per `output` decode steps, so with D running
    decodes and chunks of C tokens a share f = D * input / (output * C) of steps carries
    a chunk. The mean step (what a request's TPOT averages to) mixes the two step times.
    """

    decode_only_s: float
    mixed_s: float
    mixed_share: float
    tokens_per_step: float = 1.0  # > 1 with speculative decoding

    @property
    def mean_s(self) -> float:
        f = min(1.0, self.mixed_share)
        return f * self.mixed_s + (1 - f) * self.decode_only_s

    @property
    def mean_token_s(self) -> float:
        """A stream's mean time per output token (the step over the tokens it yields)."""
        return self.mean_s / self.tokens_per_step

    @property
    def longest_gap_s(self) -> float:
        """The longest gap between two tokens of a stream: a step that carries a prefill
        chunk stalls every running stream at once. Once more than 1 - p of steps carry one
        it is also the gap at percentile p over all gaps; below that it is still a stall a
        user sees, so the token-gap SLO holds it to the target (counted conservatively).
        With speculation a step's accepted tokens arrive together: the gap is still a step."""
        return self.mixed_s if self.mixed_share > 0 else self.decode_only_s

    def others(self, decode: float) -> MixedSteps:
        """The steps a request sees after its first token: they carry the prefill chunks of
        the other running requests, not its own (that is in its TTFT), so a share
        (D - 1) / D of the mixed steps; one request alone decodes undisturbed."""
        share = self.mixed_share * max(0.0, decode - 1) / max(decode, 1.0)
        return MixedSteps(self.decode_only_s, self.mixed_s, share, self.tokens_per_step)

    def tpot_percentile_s(self, output_tokens: int, percentile: float) -> float:
        """A request's mean inter-token time at a percentile: binomial count of mixed steps."""
        f = min(1.0, self.mixed_share)
        z = _normal_quantile(percentile / 100)
        mixed_steps = output_tokens * f + z * math.sqrt(output_tokens * f * (1 - f))
        share = min(1.0, mixed_steps / output_tokens)
        step = self.decode_only_s + share * (self.mixed_s - self.decode_only_s)
        return step / self.tokens_per_step


def mixed_steps(
    eng: StepModel, decode: float, input_tokens: int, output_tokens: int, chunk: float
) -> MixedSteps:
    ctx = input_tokens + output_tokens / 2
    t_d = step_time(eng, decode, ctx).total_s
    t_m = step_time(eng, decode, ctx, chunk, input_tokens / 2).total_s
    per_step = eng.speculation.tokens_per_step if eng.speculation else 1.0
    # A request spends output / per_step steps, so its prompt rides on fewer of them.
    share = decode * input_tokens * per_step / (output_tokens * chunk)
    return MixedSteps(t_d, t_m, share, per_step)


def prefill_s(eng: StepModel, decode: float, context: float, prompt: int, chunk: int) -> float:
    """Time to prefill one prompt in chunks of `chunk` tokens beside `decode` running sequences.

    Chunk j starts at j * chunk and attends causally from there: the full chunks' starts
    average (full - 1) * chunk / 2, the last (partial) chunk starts at full * chunk, so the
    attention adds up to the unchunked prompt's (prompt^2 / 2 per layer and head dimension).
    A step's attention and prefix read are linear in the start, so the mean start is exact."""
    full, rest = divmod(prompt, chunk)
    t = 0.0
    if full:
        t += full * step_time(eng, decode, context, chunk, (full - 1) * chunk / 2).total_s
    if rest:
        t += step_time(eng, decode, context, rest, full * chunk).total_s
    return t


def _normal_quantile(p: float) -> float:
    """Standard normal quantile."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)
