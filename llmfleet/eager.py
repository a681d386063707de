"""`--enforce-eager`: vLLM without CUDA graphs.

Time: every kernel is launched from Python each step. A decode step of a small batch,
whose kernels take microseconds, then waits on the host instead of the GPU: the step
takes at least `EAGER_LAYER_LAUNCH_US` per layer. Long prefill chunks, whose GPU time is
far above that floor, are unchanged.

Memory: no CUDA-graph pool is captured. The pinned release (from vLLM 0.21 on) takes the
pool, ~0.4 GiB per GPU, out of the KV budget of a graph run (`releases.graph_pool_gib`),
so an eager run keeps that much more KV cache. The measured rows' releases (before 0.21)
allocated the pool on top of gpu_memory_utilization, so their KV budgets hold none.
"""

from __future__ import annotations

from llmfleet.architecture import Arch

# Qwen2.5-Omni-7B's thinker (28 layers) on A800 decodes at 22-23 ms TPOT eager against
# 13 ms with CUDA graphs (vllm-project/vllm-omni#7960): about 9.5 ms, 330 us per layer.
# Not fitted: no measured row runs eager with a timing metric.
EAGER_LAYER_LAUNCH_US = 330.0


def launch_floor_s(arch: Arch, enforce_eager: bool) -> float:
    """Least time of a step launched eagerly (0 with CUDA graphs)."""
    return arch.layers * EAGER_LAYER_LAUNCH_US * 1e-6 if enforce_eager else 0.0
