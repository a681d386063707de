"""The Pulumi program under mocks for a prefix-aware region: the router previews with no
finding of the checks, in the order the cluster needs, and the ALB's API goes to it."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from plans import ONE_REGION

from components.preview.run import PreviewResult, run_program

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_aws")]


@pytest.fixture(scope="module")
def preview() -> PreviewResult:
    plan = copy.deepcopy(ONE_REGION)
    plan["traffic"].update({"shared_prefix_tokens": 400, "turns": 4, "think_time_s": 30})
    plan["edge"] = {"balancing": "prefix_aware"}
    return run_program("fleet", {"aws:region": "us-east-1", "llmfleet:plan": plan})


def _named(result: PreviewResult) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in result.resources}


def test_a_prefix_aware_region_previews_with_no_finding(preview) -> None:
    assert [f"{f.check} {f.resource}: {f.message}" for f in preview.findings()] == []


def test_the_router_sits_between_the_albs_api_and_the_engines(preview) -> None:
    named = _named(preview)
    base = "chat-one-us-east-1-vllm-router"
    assert named[base]["type"] == "llmfleet:index:PrefixRouter"
    ingress = named[f"{base}-ingress"]["inputs"]
    backends = {p["backend"]["service"]["name"] for rule in ingress["spec"]["rules"]
                for p in rule["http"]["paths"]}
    assert backends == {"chat-one-router"}
    health = named["chat-one-us-east-1-vllm-ingress"]["inputs"]
    assert {p["backend"]["service"]["name"] for rule in health["spec"]["rules"]
            for p in rule["http"]["paths"]} == {"chat-one"}


def test_the_routers_objects_wait_as_the_cluster_needs(preview) -> None:
    named = _named(preview)
    base = "chat-one-us-east-1-vllm-router"

    def waits(name: str) -> set[str]:
        return set(named[name]["options"]["depends_on_urns"])

    assert named[f"{base}-service"]["urn"] in waits(f"{base}-ingress")
    assert named[f"{base}-ingress"]["urn"] in waits(f"{base}-deployment")
    assert named["chat-one-us-east-1-vllm-ingress"]["urn"] in waits(f"{base}-deployment")
    assert named[f"{base}-ingress"]["urn"] in waits("chat-one-us-east-1-vllm-deployment")
