"""The pinned vLLM release (its flags, metrics and histogram buckets, derived from its own
source and shipped as `vllm/vllm-<version>.json`, how it was made: `vllm/README.md`), which
release a prediction is for, what changed between releases, and `vllm serve`'s defaults.

Predictions and plans are for the pinned release (`VLLM_VERSION`); the published
measurements come from older ones (0.8-0.19). Two stated terms keep the older rows from
biasing what is predicted for the pinned release:

- memory: from v0.21.0 vLLM's start-up profiling estimates the CUDA-graph pool and takes
  it out of the KV budget inside `gpu_memory_utilization` ("CUDA graph memory profiling
  is enabled (default since v0.21.0)", vLLM 0.27.1's own log in gpustack/runner#251;
  the profiler is vllm-project/vllm#30515). Before, the pool was captured after the KV
  cache was sized, on top of it: the measured rows hold no pool, the pinned release
  does (none with --enforce-eager, which captures no graphs);
- timing: rows of V0 releases (before 0.8) are predicted and reported but not fitted on
  (`calibration.measurements.Measurement.legacy`): not the scheduler and kernels llmfleet
  deploys. Weighing the early V1 rows (0.8-0.10) half as well was tried and made the
  held-out ITL and throughput worse (benchmarks/README.md), so they count in full."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from llmfleet.catalog.hardware import Gpu

VLLM_VERSION = "0.33.0"
VLLM_CATALOG = Path(__file__).parent / "vllm" / f"vllm-{VLLM_VERSION}.json"


@cache
def vllm_release() -> dict[str, Any]:
    """Flags, metrics and image of the pinned vLLM release."""
    return dict(json.loads(VLLM_CATALOG.read_text()))


BUCKETS_CATALOG = Path(__file__).parent / "vllm" / f"histogram-buckets-{VLLM_VERSION}.json"


@cache
def _buckets() -> dict[str, Any]:
    return dict(json.loads(BUCKETS_CATALOG.read_text()))


def bucket_family(metric: str) -> str | None:
    """The bucket family a `vllm:*` histogram takes its bounds from (None: not a histogram
    the engine's stat logger owns)."""
    family: str | None = _buckets()["metric_family"].get(metric)
    return family


def default_buckets(family: str) -> list[float]:
    """The pinned release's default upper bounds of a bucket family (not request_tokens,
    whose bounds follow max_model_len)."""
    return [float(b) for b in _buckets()["families"][family]]


def quantile_problem(
    metric: str, threshold: float, custom: dict[str, list[float]] | None = None
) -> str | None:
    """Why a `histogram_quantile` over `metric` cannot resolve `threshold`, or None.

    Prometheus interpolates linearly inside a bucket (and inside the lowest one from 0), so
    a quantile is only as fine as the bucket it falls in: a threshold below the lowest bound
    or inside a bucket wider than the threshold would flap or never clear."""
    family = bucket_family(metric)
    if family is None or family == "request_tokens":
        return f"{metric}: no known bucket bounds in vLLM {VLLM_VERSION}"
    bounds = (custom or {}).get(family) or default_buckets(family)
    if threshold < bounds[0]:
        return (
            f"{metric}: threshold {threshold:g} is below its lowest bucket bound {bounds[0]:g} "
            f"(family {family}); histogram_quantile reads every sample below {bounds[0]:g} as "
            "up to that bound. Scale on a finer signal or render --custom-histogram-buckets"
        )
    lower = max((b for b in [0.0, *bounds] if b < threshold), default=0.0)
    upper = min((b for b in bounds if b >= threshold), default=None)
    if upper is None:
        return f"{metric}: threshold {threshold:g} is above its highest bucket bound {bounds[-1]:g}"
    if upper - lower > threshold:
        return (
            f"{metric}: threshold {threshold:g} falls in bucket ({lower:g}, {upper:g}], wider "
            f"than the threshold (family {family}); render --custom-histogram-buckets"
        )
    return None


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
