"""The Pulumi program under mocks for a plan whose replica spans two nodes (405B bf16 on
H100 only) and for one with disaggregated pools: what AWS and the cluster get."""

from __future__ import annotations

from typing import Any

import pytest
from plans import FRONTIER, LONG_PROMPT, plan_dict

from components.preview.run import run_program

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_aws")]


def _program(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return run_program("dev", {"aws:region": "us-east-1", "llmfleet:plan": plan}).resources


@pytest.fixture(scope="module")
def frontier() -> list[dict[str, Any]]:
    return _program(plan_dict(**FRONTIER))


def _one(resources: list[dict[str, Any]], typ: str, name: str) -> dict[str, Any]:
    [r] = [r for r in resources if r["type"] == typ and r["name"] == name]
    return r


def test_gpu_nodes_get_a_cluster_placement_group_and_efa_interfaces(frontier) -> None:
    pg = _one(frontier, "aws:ec2/placementGroup:PlacementGroup", "t-us-east-1-multi-node-pg")
    assert pg["inputs"]["strategy"] == "cluster"
    lt = _one(frontier, "aws:ec2/launchTemplate:LaunchTemplate", "t-us-east-1-gpu-lt")
    interfaces = lt["inputs"]["networkInterfaces"]
    assert len(interfaces) == 33  # ENA primary + one EFA-only per network card (32)
    assert [i.get("interfaceType") for i in interfaces[:2]] == [None, "efa-only"]
    assert "groupName" in lt["inputs"]["placement"]
    floor = _one(frontier, "aws:eks/nodeGroup:NodeGroup", "t-us-east-1-gpu")
    assert floor["inputs"]["scalingConfig"]["minSize"] % 2 == 0  # whole replicas
    assert floor["inputs"]["version"] == "1.35"  # it follows the control plane, as every pool


def test_the_efa_device_plugin_and_the_leaderworkerset_controller_are_installed(frontier) -> None:
    lws = _one(frontier, "kubernetes:helm.sh/v3:Release", "t-us-east-1-multi-node-lws")
    assert (lws["inputs"]["chart"], lws["inputs"]["version"]) == (
        "oci://registry.k8s.io/lws/charts/lws", "0.10.0",
    )
    plugin = _one(
        frontier, "kubernetes:helm.sh/v3:Release", "t-us-east-1-multi-node-efa-device-plugin"
    )
    assert plugin["inputs"]["values"]["supportedInstanceLabels"]["values"] == ["p5.48xlarge"]
    kinds = {r["type"] for r in frontier}
    assert "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet" in kinds
    assert "kubernetes:apps/v1:Deployment" not in kinds


def test_a_disaggregated_plan_deploys_both_pools_the_router_and_its_rbac() -> None:
    resources = _program(plan_dict(**LONG_PROMPT))
    names = {r["name"] for r in resources}
    for suffix in ("deployment", "deployment-prefill", "deployment-router", "role",
                   "rolebinding", "scaledobject-prefill", "service-engines"):
        assert f"t-us-east-1-vllm-{suffix}" in names, suffix
