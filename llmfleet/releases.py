"""Which vLLM release a prediction is for, what changed between releases, and the pinned
release's serving defaults.

Predictions and plans are for the pinned release (`catalog.vllm_release.VLLM_VERSION`);
the published measurements come from older ones (0.8-0.19). Two stated terms keep the
older rows from biasing what is predicted for the pinned release:

- memory: from v0.21.0 vLLM's start-up profiling estimates the CUDA-graph pool and takes
  it out of the KV budget inside `gpu_memory_utilization` ("CUDA graph memory profiling
  is enabled (default since v0.21.0)", vLLM 0.27.1's own log in gpustack/runner#251;
  the profiler is vllm-project/vllm#30515). Before, the pool was captured after the KV
  cache was sized, on top of it: the measured rows hold no pool, the pinned release
  does (none with --enforce-eager, which captures no graphs);
- timing: rows of V0 releases (before 0.8) are predicted and reported but not fitted on
  (`measurements.Measurement.legacy`): not the scheduler and kernels llmfleet deploys.
  Weighing the early V1 rows (0.8-0.10) half as well was tried and made the held-out
  ITL and throughput worse (benchmarks/README.md), so they count in full.
"""

from __future__ import annotations

import re

from llmfleet.catalog import Gpu
from llmfleet.catalog.vllm_release import VLLM_VERSION

V1_ENGINE = (0, 8)
"""vLLM 0.8 made the V1 engine the default (0.11 removed V0); llmfleet deploys a V1 release."""
GRAPH_POOL_PROFILED = (0, 21)
# Estimated CUDA-graph pool per GPU: 0.36 GiB in gpustack/runner#251 (vLLM 0.27.1, TP 2);
# S8 measured 0.39 GiB after capture for gpt-oss-20b on H100, S22 0.72 GiB on L40S.
# Not fitted: no measured row is of a release that reserves it.
CUDA_GRAPH_POOL_GIB = 0.4


def release(version: str | None) -> tuple[int, int] | None:
    """(major, minor) of a version as a row states it ("v0.11.0", "0.5.4 (...)"); None (no
    version given) is the pinned release; text without a version number ("", "main") gives
    None."""
    m = re.match(r"\s*v?(\d+)\.(\d+)", VLLM_VERSION if version is None else version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def graph_pool_gib(engine: str, version: str | None, enforce_eager: bool) -> float:
    """GiB per GPU this engine release reserves for CUDA graphs inside the KV budget."""
    r = release(version)
    reserves = engine == "vllm" and r is not None and r >= GRAPH_POOL_PROFILED
    return CUDA_GRAPH_POOL_GIB if reserves and not enforce_eager else 0.0


# vLLM's `vllm serve` defaults (EngineArgs.get_batch_defaults, recorded in
# catalog/vllm/vllm-<version>.json): GPUs of 70 GiB or more, except A100s, get a bigger
# batch and token budget, and 160 GiB or more a bigger budget still.
LARGE_GPU_GIB = 70
HUGE_GPU_GIB = 160


def _large(gpu: Gpu) -> bool:
    return gpu.memory_gib >= LARGE_GPU_GIB and not gpu.gpu.startswith("A100")


def default_max_num_seqs(gpu: Gpu, engine: str = "vllm") -> int:
    if engine == "trtllm":
        return 2048  # trtllm-bench / trtllm-serve max_batch_size default
    return 1024 if _large(gpu) else 256


def default_max_num_batched_tokens(gpu: Gpu) -> int:
    if gpu.memory_gib >= HUGE_GPU_GIB:
        return 16384
    return 8192 if _large(gpu) else 2048
