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
        node[last] = copy.deepcopy(value)  # a later dotted path must not edit the caller's dict
    return d


def make_plan(**changes: Any) -> CapacityPlan:
    return parse_plan(plan_dict(**changes))


FRONTIER: dict[str, Any] = {
    "model.id": "Llama-3.1-405B-Instruct",
    "model.precision": "bf16",
    "max_model_len": 16384,
    "allowed.gpus": ["H100"],
    "slo": {"ttft_ms": 5000, "itl_ms": 150, "percentile": 99},
}
"""Llama-3.1-405B in bf16 (812 GB of weights) where only H100 nodes (640 GB) are allowed:
a replica must span two nodes."""

LONG_PROMPT: dict[str, Any] = {
    "model.id": "Llama-3.3-70B-Instruct",
    "model.precision": "fp8",
    "model.kv_cache_dtype": "fp8",
    "max_model_len": 32768,
    "traffic.peak_requests_per_s": 20,
    "traffic.input_tokens": {"mean": 8000, "p95": 16000},
    "traffic.output_tokens": {"mean": 300, "p95": 600},
    "slo": {"ttft_ms": 3000, "itl_ms": 20, "percentile": 99},
    "allowed.gpus": ["H100", "H200"],
}
"""8,000-token prompts (p95 16,000) and a 20 ms gap between any two tokens at p99: every
prompt chunk beside the decodes stalls them, so prefill and decode split cheaper."""


def frontier_plan(**changes: Any) -> CapacityPlan:
    return make_plan(**{**FRONTIER, **changes})


def long_prompt_plan(**changes: Any) -> CapacityPlan:
    return make_plan(**{**LONG_PROMPT, **changes})
