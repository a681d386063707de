"""The pinned vLLM release: its flags, metrics and image, derived from its own source and
shipped as `vllm/vllm-<version>.json` (how it was made: `vllm/README.md`)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

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
