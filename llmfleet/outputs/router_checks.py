"""The cache-aware router's rendered command line and alert queries, checked against the
pinned vllm-router (`fleetplan.prefix_router.ROUTER_FLAGS`, `ROUTER_METRICS`: read from
its 0.1.17 sdist), as `vllm_checks` checks vLLM's config and metrics: a flag or metric
the release does not have fails the render, not the pod."""

from __future__ import annotations

import re
from collections.abc import Iterable

from llmfleet.fleetplan.prefix_router import ROUTER_FLAGS, ROUTER_METRICS

SERIES = re.compile(r"\b([A-Za-z_:][A-Za-z0-9_:]*)\s*\{")
"""A series selector in PromQL: a metric name followed by its label matchers (every query
of the router's alerts selects by namespace and service)."""


def router_flag_problems(args: Iterable[str]) -> list[str]:
    """Flags on the command line that not both of vllm-router's command lines accept."""
    return [f"{a}: not a flag both vllm-router 0.1.17 command lines accept"
            for a in args if a.startswith("--") and a not in ROUTER_FLAGS]


def router_metric_problems(queries: Iterable[str]) -> list[str]:
    """Metric names in the router's alert queries that vllm-router 0.1.17 does not export."""
    problems = []
    for query in queries:
        for name in SERIES.findall(query):
            if name not in ROUTER_METRICS:
                problems.append(f"{name}: not a metric of vllm-router 0.1.17")
    return problems
