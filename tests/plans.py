"""Plan builders for tests: a small valid plan, overridable field by field."""

from __future__ import annotations

import copy
from typing import Any

from llmfleet.plan.schema import CapacityPlan
from llmfleet.plan.stacks import parse_plan

BASE: dict[str, Any] = {
    "name": "t",
    "model": {"id": "Llama-3.1-8B-Instruct", "precision": "bf16", "kv_cache_dtype": "auto"},
    "max_model_len": 8192,
    "traffic": {
        "peak_requests_per_s": 10,
        "trough_requests_per_s": 2,
        "input_tokens": {"mean": 1000, "p95": 3000},
        "output_tokens": {"mean": 250},
    },
    "slo": {"ttft_ms": 1500, "itl_ms": 50, "percentile": 99},
    "regions": [{"name": "us-east-1", "traffic_share": 1.0}],
}


def plan_dict(**changes: Any) -> dict[str, Any]:
    """BASE with dotted-path overrides: plan_dict(**{"slo.itl_ms": 5})."""
    d = copy.deepcopy(BASE)
    for path, value in changes.items():
        node = d
        *parents, last = path.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return d


def make_plan(**changes: Any) -> CapacityPlan:
    return parse_plan(plan_dict(**changes))
