"""The Pulumi program under mocks for the fleets a user starts with: a minimal new user's stack
(no account_id), a production fleet in three regions, a replica across two nodes (on demand,
and in production on reservations), a disaggregated region and a production fleet whose ECR
pull-through cache's secret is still empty preview with no finding of the checks
(components.preview.checks), and what a real account gives them (the caller's account,
add-on versions for the cluster's Kubernetes version)."""

from __future__ import annotations

from typing import Any

import pytest
from plans import (
    EDGE,
    FRONTIER,
    LONG_PROMPT,
    PRODUCTION,
    RESERVED_FRONTIER,
    THREE_REGIONS,
    plan_dict,
)

from components.preview.mocks import MOCK_ACCOUNT
from components.preview.run import PreviewResult, run_program

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_aws")]

FLEETS = {
    "minimal": plan_dict(),
    "production": THREE_REGIONS,
    "two-node": plan_dict(**FRONTIER),
    "two-node, production, on reservations": plan_dict(**RESERVED_FRONTIER),
    "disaggregated": plan_dict(**LONG_PROMPT),
    "production, its image cache not yet filled": plan_dict(
        **PRODUCTION, **EDGE, **{"startup.ecr_account_id": "111122223333"}),
}


def _preview(plan: dict[str, Any]) -> PreviewResult:
    aws_region = plan["regions"][0]["name"]
    return run_program("fleet", {"aws:region": aws_region, "llmfleet:plan": plan})


@pytest.fixture(scope="module")
def previews() -> dict[str, PreviewResult]:
    return {name: _preview(plan) for name, plan in FLEETS.items()}


@pytest.mark.parametrize("fleet", list(FLEETS))
def test_the_fleet_previews_with_no_finding(previews, fleet: str) -> None:
    found = [f"{f.check} {f.resource}: {f.message}" for f in previews[fleet].findings()]
    assert found == []


def test_a_minimal_stack_names_its_buckets_with_the_callers_account(previews) -> None:
    """No account_id: the program reads the caller's account (the mocks answer
    aws.get_caller_identity with 123456789012) and puts it in every bucket name and in the
    rendered documents that name a bucket."""
    result = previews["minimal"]
    buckets = sorted(r["inputs"]["bucket"] for r in result.resources
                     if r["type"] == "aws:s3/bucket:Bucket")
    assert buckets == [f"t-logs-us-east-1-{MOCK_ACCOUNT}", f"t-weights-us-east-1-{MOCK_ACCOUNT}"]
    [config] = [r for r in result.resources if r["name"] == "t-us-east-1-vllm-configmap"]
    assert f"s3://t-weights-us-east-1-{MOCK_ACCOUNT}/" in config["inputs"]["data"]["config.yaml"]
    assert "{account}" not in str([r["inputs"] for r in result.resources])


def test_every_managed_addon_pins_the_version_of_the_clusters_kubernetes(previews) -> None:
    """kube-proxy and CoreDNS too: EKS installs them self-managed and never upgrades them."""
    addons = {r["inputs"]["addonName"]: r["inputs"] for r in previews["minimal"].resources
              if r["type"] == "aws:eks/addon:Addon"}
    assert sorted(addons) == ["coredns", "eks-node-monitoring-agent", "eks-pod-identity-agent",
                              "kube-proxy", "vpc-cni"]
    for inputs in addons.values():
        assert inputs["addonVersion"].startswith("v1.36.0-")  # the mocks' default for 1.36
    for name in ("coredns", "kube-proxy"):
        assert addons[name]["resolveConflictsOnCreate"] == "OVERWRITE"


def test_an_upgrade_moves_the_addons_the_nodes_and_the_ami_alias_with_the_version() -> None:
    """The procedure of docs/day2.md: kubernetes_version 1.35 -> 1.36 is one plan edit."""
    old, new = (_preview(plan_dict(kubernetes_version=v)).resources for v in ("1.35", "1.36"))

    def versions(resources: list[dict[str, Any]]) -> dict[str, str]:
        out = {r["inputs"]["addonName"]: r["inputs"]["addonVersion"] for r in resources
               if r["type"] == "aws:eks/addon:Addon"}
        out |= {r["name"]: r["inputs"]["version"] for r in resources
                if r["type"] in ("aws:eks/cluster:Cluster", "aws:eks/nodeGroup:NodeGroup")}
        return out

    before, after = versions(old), versions(new)
    assert before.keys() == after.keys()
    assert all(before[k] != after[k] for k in before)
    assert {v[:5] for v in after.values()} <= {"1.36", "v1.36"}


def test_a_retiring_region_is_routed_no_more_and_its_buckets_do_not_block_destroy() -> None:
    """regions[eu-north-1].retire: the global part builds no record or health check for it;
    its weight bucket may be emptied by `pulumi destroy` (a copy of the checkpoint) and its
    ALB carries no deletion protection; the preview has no finding."""
    regions = [dict(r) for r in THREE_REGIONS["regions"]]
    regions[2]["retire"] = True
    result = _preview({**THREE_REGIONS, "regions": regions})
    assert [f.message for f in result.findings()] == []
    records = [r["name"] for r in result.resources if r["type"] == "aws:route53/record:Record"]
    assert not any("eu-north-1" in n and "cert" not in n for n in records), records
    weights = {r["name"]: r["inputs"]["forceDestroy"] for r in result.resources
               if r["type"] == "aws:s3/bucket:Bucket" and "weights" in r["name"]}
    assert weights == {"chat-three-eu-north-1-model-weights": True,
                       "chat-three-us-east-1-model-weights": False,
                       "chat-three-us-west-2-model-weights": False}
