"""Plan builders for tests: a small valid plan, overridable field by field."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from llmfleet.plan.schema import CapacityPlan
from llmfleet.plan.stacks import parse_plan

OFFICE_EGRESS = "52.94.76.0/22"
"""Stands in for an office's and CI's egress range in production plans: a public range (the
plan refuses documentation ranges such as 203.0.113.0/24, which no deployer comes from)."""

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


V = TypeVar("V")


class PerStack(Mapping[str, V]):
    """A value per stack, each built on first use and kept: a stack that fails to build
    fails the tests that read it, never those of another stack (a user's new stack cannot
    turn prod's tests into errors through a shared fixture)."""

    def __init__(self, stacks: list[str], build: Callable[[str], V]) -> None:
        self._stacks, self._build = list(stacks), build
        self._built: dict[str, V] = {}

    def __getitem__(self, stack: str) -> V:
        if stack not in self._stacks:
            raise KeyError(stack)
        if stack not in self._built:
            self._built[stack] = self._build(stack)
        return self._built[stack]

    def __iter__(self) -> Iterator[str]:
        return iter(self._stacks)

    def __len__(self) -> int:
        return len(self._stacks)


def plan_dict(**changes: Any) -> dict[str, Any]:
    """BASE with dotted-path overrides: plan_dict(**{"slo.itl_ms": 5})."""
    return _changed(BASE, changes)


def make_plan(**changes: Any) -> CapacityPlan:
    return parse_plan(plan_dict(**changes))


# --- plans the tests own --------------------------------------------------------------------
# Tests that need a particular shape of fleet (three regions with a global name, one small
# region) build it from these, never from stacks/: a user edits, removes or adds stacks, and
# the suite must stay green. Worked numbers in tests refer to these plans.

THREE_REGIONS: dict[str, Any] = {
    "name": "chat-three",
    "model": {"id": "Llama-3.3-70B-Instruct",
              "revision": "0123456789abcdef0123456789abcdef01234567"},
    "max_model_len": 16384,
    "traffic": {
        "peak_requests_per_s": 300,
        "trough_requests_per_s": 60,
        "input_tokens": {"mean": 1000, "p95": 2500},
        "output_tokens": {"mean": 300, "p95": 900},
    },
    "slo": {"ttft_ms": 500, "itl_ms": 40, "percentile": 99},
    "regions": [
        {"name": "us-east-1", "traffic_share": 0.45, "vpc_cidr": "10.40.0.0/16"},
        {"name": "us-west-2", "traffic_share": 0.35, "vpc_cidr": "10.41.0.0/16"},
        {"name": "eu-north-1", "traffic_share": 0.20, "vpc_cidr": "10.42.0.0/16"},
    ],
    "allowed": {"speculative": [{"method": "eagle3"}]},
    "headroom": 0.20,
    "environment": "production",
    "cluster": {"public_access_cidrs": [OFFICE_EGRESS],
                "break_glass_role_arn": "arn:aws:iam::111122223333:role/eks-break-glass"},
    "account_id": "111122223333",
    "alerts": {
        "receivers": [
            {"name": "oncall", "severities": ["critical"],
             "email": {"addresses": ["oncall@example.com"]}}
        ]
    },
    "dns": {
        "zone_name": "example.com",
        "record_name": "chat.example.com",
        "health_check_interval_s": 10,
        "failure_threshold": 3,
    },
    "edge": {
        "auth": {"jwt": {"issuer": "https://auth.example.com/",
                         "jwks_url": "https://auth.example.com/jwks.json"}},
        "rate_limit": {"requests": 600, "window_s": 60},
    },
}
"""Llama-3.3-70B at TTFT 500 ms / a 40 ms token gap (p99) in us-east-1, us-west-2 and
eu-north-1, with a global name; the search picks precision, KV dtype and speculation."""

ONE_REGION: dict[str, Any] = {
    "name": "chat-one",
    "model": {"id": "Llama-3.1-8B-Instruct", "precision": "bf16", "kv_cache_dtype": "auto"},
    "max_model_len": 8192,
    "traffic": {
        "peak_requests_per_s": 6,
        "trough_requests_per_s": 1,
        "input_tokens": {"mean": 1000, "p95": 3000},
        "output_tokens": {"mean": 250, "p95": 800},
    },
    "slo": {"ttft_ms": 800, "itl_ms": 50, "itl": "tpot", "percentile": 95},
    "regions": [{"name": "us-east-1", "traffic_share": 1.0}],
    "allowed": {"gpus": ["L4", "A10G", "L40S"]},
    "headroom": 0.20,
    "account_id": "111122223333",
    "dns": {
        "zone_name": "example.com",
        "record_name": "chat-one.example.com",
        "health_check_interval_s": 30,
        "failure_threshold": 3,
    },
}
"""Llama-3.1-8B in one region on L4, A10G or L40S at TTFT 800 ms / TPOT 50 ms (p95)."""

OWN_STACKS: dict[str, dict[str, Any]] = {"three-regions": THREE_REGIONS, "one-region": ONE_REGION}
"""The stacks tests that run commands write to a stacks folder of their own."""


def three_regions(**changes: Any) -> CapacityPlan:
    return parse_plan(_changed(THREE_REGIONS, changes))


def one_region(**changes: Any) -> CapacityPlan:
    return parse_plan(_changed(ONE_REGION, changes))


def _changed(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    d = copy.deepcopy(base)
    for path, value in changes.items():
        node = d
        *parents, last = path.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = copy.deepcopy(value)  # a later dotted path must not edit the caller's dict
    return d


def stack_text(plan: dict[str, Any]) -> str:
    """A stack file holding `plan` as its llmfleet:plan (and the provider's region, as the
    shipped stacks give it)."""
    config = {"aws:region": plan["regions"][0]["name"], "llmfleet:plan": plan}
    return yaml.safe_dump({"config": config}, sort_keys=False)


def write_stacks(stacks_dir: Path, plans: dict[str, dict[str, Any]] = OWN_STACKS) -> Path:
    stacks_dir.mkdir(parents=True, exist_ok=True)
    for env, plan in plans.items():
        (stacks_dir / f"Pulumi.{env}.yaml").write_text(stack_text(plan))
    return stacks_dir
PRODUCTION: dict[str, Any] = {
    "environment": "production",
    "cluster": {"public_access_cidrs": [OFFICE_EGRESS],
                "break_glass_role_arn": "arn:aws:iam::111122223333:role/eks-break-glass"},
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


def gpu_pod_specs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod specs of a rendered Deployment, or of a LeaderWorkerSet's leader and workers
    (a replica across nodes), that request GPUs: the vLLM pods, however a region serves."""
    if doc["kind"] == "Deployment":
        specs = [doc["spec"]["template"]["spec"]]
    elif doc["kind"] == "LeaderWorkerSet":
        t = doc["spec"]["leaderWorkerTemplate"]
        specs = [t[k]["spec"] for k in ("leaderTemplate", "workerTemplate") if k in t]
    else:
        return []
    return [s for s in specs
            if any("nvidia.com/gpu" in c.get("resources", {}).get("limits", {})
                   for c in s["containers"])]


def by_kind(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Rendered objects by kind, the first of each (the server's: the staging Job's
    ServiceAccount, ConfigMap and NetworkPolicy, the dashboard and the health Ingress come
    after it)."""
    out: dict[str, dict[str, Any]] = {}
    for doc in docs:
        out.setdefault(str(doc["kind"]), doc)
    return out


FRONTIER: dict[str, Any] = {
    "model.id": "Llama-3.1-405B-Instruct",
    "model.precision": "bf16",
    "max_model_len": 16384,
    "allowed.gpus": ["H100"],
    "slo": {"ttft_ms": 8000, "itl_ms": 150, "percentile": 99},
}
"""Llama-3.1-405B in bf16 (812 GB of weights) where only H100 nodes (640 GB) are allowed:
a replica must span two nodes (TP 8 x PP 2, its pipeline hop over TCP: 3 replicas of 5.35
req/s on 6 nodes since #28; 8 nodes before)."""

LONG_PROMPT: dict[str, Any] = {
    "model.id": "Llama-3.3-70B-Instruct",
    "model.precision": "fp8",
    "model.kv_cache_dtype": "fp8",
    "max_model_len": 32768,
    "traffic.peak_requests_per_s": 20,
    "traffic.input_tokens": {"mean": 8000, "p95": 16000},
    "traffic.output_tokens": {"mean": 300, "p95": 600},
    "slo": {"ttft_ms": 8000, "itl_ms": 12, "percentile": 99},
    "allowed.gpus": ["H100", "H200"],
}
"""8,000-token prompts (p95 16,000) and a 12 ms gap between any two tokens at p99: every
prompt chunk beside the decodes stalls them, so prefill and decode split cheaper (decode TP 8
and prefill TP 8 x PP 4 on 14 p5 nodes against 19 colocated TP 8 ones), the TTFT target
leaving room for the KV's crossing: the pinned image has no EFA plugin, so NIXL moves a
prompt's 1.3 GB over TCP at 0.5 GB/s (at TTFT 3,000 ms only colocated replicas hold it)."""


MOE_DP: dict[str, Any] = {
    "model.id": "DeepSeek-V3",
    "model.precision": "fp8",
    "max_model_len": 32768,
    "allowed.instance_types": ["p5en.48xlarge"],
    "traffic.peak_requests_per_s": 20,
    "traffic.input_tokens": {"mean": 8000, "p95": 16000},
    "traffic.output_tokens": {"mean": 1000},
    "slo": {"ttft_ms": 10000, "itl_ms": 150, "itl": "tpot", "percentile": 99},
}
"""DeepSeek-V3 (MLA) in FP8 on 8 x H200 nodes with 8,000-token prompts: the KV pool binds, and
data-parallel attention (each rank its own sequences' latent KV) with the experts over the
node's 8 GPUs holds twice what TP 8 does: TP 4 x DP 2 (EP 8) is the cheapest."""


GPT_OSS_TP1 = {
    "model": {"id": "gpt-oss-120b", "precision": "mxfp4", "kv_cache_dtype": "fp8"},
    "allowed": {"gpus": ["B200"]},
    "max_model_len": 16384,
    "traffic.input_tokens": {"mean": 2000, "p95": 6000},
    "traffic.output_tokens": {"mean": 1000, "p95": 3000},
    "slo": {"ttft_ms": 1000, "itl_ms": 40, "percentile": 95},
    "calibration": ["stacks/calibrations/gpt-oss-120b-b200-tp1.json"],
}
"""A plan on the calibration file shipped for gpt-oss-120b on B200 TP 1."""


CPG = "chat-frontier-cpg"
"""The cluster placement group a user created with its reservations."""
RESERVED_FRONTIER: dict[str, Any] = {
    **FRONTIER,
    **PRODUCTION,
    "regions": [{"name": "us-east-1", "traffic_share": 1.0, "capacity": {
        "type": "reservation", "reservation_ids": ["cr-0123456789abcdef0"],
        "instance_type": "p5.48xlarge", "reserved_nodes": 8, "placement_group": CPG}}],
}
"""FRONTIER in production: its two-node replicas on On-Demand Capacity Reservations created
in the placement group CPG (production refuses them on demand)."""


def frontier_plan(**changes: Any) -> CapacityPlan:
    return make_plan(**{**FRONTIER, **changes})


def long_prompt_plan(**changes: Any) -> CapacityPlan:
    return make_plan(**{**LONG_PROMPT, **changes})


def moe_dp_plan(**changes: Any) -> CapacityPlan:
    return make_plan(**{**MOE_DP, **changes})
