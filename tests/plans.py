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


PRODUCTION: dict[str, Any] = {
    "environment": "production",
    "cluster": {"public_access_cidrs": ["203.0.113.0/24"]},
    "account_id": "111122223333",
    "model.revision": "0123456789abcdef0123456789abcdef01234567",
    "alerts": {
        "receivers": [
            {"name": "oncall", "severities": ["critical"],
             "email": {"addresses": ["oncall@example.com"]}}
        ]
    },
}
"""What production requires beyond the BASE plan (no dns: no edge needed)."""
EDGE: dict[str, Any] = {
    "dns": {"zone_name": "example.com", "record_name": "llm.example.com"},
    "edge": {
        "auth": {"jwt": {"issuer": "https://auth.example.com/",
                         "jwks_url": "https://auth.example.com/jwks.json"}},
        "rate_limit": {"requests": 600, "window_s": 60},
    },
}
"""A public entry point with what production requires of it."""


def production_plan(**changes: Any) -> CapacityPlan:
    """A valid production plan (PRODUCTION over BASE), with dotted-path overrides."""
    return make_plan(**{**PRODUCTION, **changes})


def by_kind(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Rendered objects by kind, the first of each (the server's: the staging Job's
    ServiceAccount, ConfigMap and NetworkPolicy, the dashboard and the health Ingress come
    after it)."""
    out: dict[str, dict[str, Any]] = {}
    for doc in docs:
        out.setdefault(str(doc["kind"]), doc)
    return out
