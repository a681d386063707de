"""The Pulumi program under mocks for a plan whose replica spans two nodes (405B bf16 on
H100 only) and for one with disaggregated pools: what AWS and the cluster get."""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import pytest
from plans import CPG, FRONTIER, LONG_PROMPT, RESERVED_FRONTIER, plan_dict

from components.preview.run import run_program
from llmfleet.catalog import images as catalog_images

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_aws")]


def _program(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return run_program("dev", {"aws:region": "us-east-1", "llmfleet:plan": plan}).resources


@pytest.fixture(scope="module")
def frontier() -> list[dict[str, Any]]:
    return _program(plan_dict(**FRONTIER))


def _one(resources: list[dict[str, Any]], typ: str, name: str) -> dict[str, Any]:
    [r] = [r for r in resources if r["type"] == typ and r["name"] == name]
    return r


def test_gpu_nodes_join_a_cluster_placement_group_with_their_one_ena_interface(frontier) -> None:
    """The default image has no EFA NCCL plugin: the pipeline hop crosses over TCP, so the
    nodes get no EFA interface (and no EFA device plugin)."""
    pg = _one(frontier, "aws:ec2/placementGroup:PlacementGroup", "t-us-east-1-multi-node-pg")
    assert pg["inputs"]["strategy"] == "cluster"
    lt = _one(frontier, "aws:ec2/launchTemplate:LaunchTemplate", "t-us-east-1-gpu-lt")
    assert len(lt["inputs"]["networkInterfaces"]) == 1
    assert "userData" not in lt["inputs"]
    assert "groupName" in lt["inputs"]["placement"]
    floor = _one(frontier, "aws:eks/nodeGroup:NodeGroup", "t-us-east-1-gpu")
    assert floor["inputs"]["scalingConfig"]["minSize"] % 2 == 0  # whole replicas
    assert floor["inputs"]["version"] == "1.36"  # it follows the control plane, as every pool
    assert floor["inputs"]["updateConfig"]["maxUnavailable"] == 2  # one replica's nodes
    releases = {r["name"] for r in frontier if r["type"] == "kubernetes:helm.sh/v3:Release"}
    assert "t-us-east-1-multi-node-efa-device-plugin" not in releases


def test_the_leaderworkerset_controller_and_its_crds_from_the_tag_are_installed(frontier) -> None:
    lws = _one(frontier, "kubernetes:helm.sh/v3:Release", "t-us-east-1-multi-node-lws")
    assert (lws["inputs"]["chart"], lws["inputs"]["version"]) == (
        "oci://registry.k8s.io/lws/charts/lws", "0.10.0",
    )
    assert lws["inputs"]["skipCrds"] is True  # Helm never upgrades a chart's crds/
    crds = sorted(r["inputs"]["file"].rsplit("/", 1)[-1] for r in frontier
                  if r["type"] == "kubernetes:yaml/v2:ConfigFile" and "lws" in r["name"])
    assert crds == ["disaggregatedset.x-k8s.io_disaggregatedsetrolescalers.yaml",
                    "disaggregatedset.x-k8s.io_disaggregatedsets.yaml",
                    "leaderworkerset.x-k8s.io_leaderworkersets.yaml"]
    kinds = {r["type"] for r in frontier}
    assert "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet" in kinds
    assert "kubernetes:apps/v1:Deployment" not in kinds


def test_reserved_nodes_join_the_users_placement_group_and_the_program_creates_none() -> None:
    """Production on reservations created in the group CPG: no floor node group (the
    reservation is the floor), no placement group of the program's (its name would be a
    second group beside the user's), Karpenter launching into the reservation in CPG."""
    resources = _program(plan_dict(**RESERVED_FRONTIER))
    types = {r["type"] for r in resources}
    assert "aws:ec2/placementGroup:PlacementGroup" not in types
    assert not [r for r in resources if r["type"] == "aws:eks/nodeGroup:NodeGroup"
                and r["name"].endswith("-gpu")]
    [node_class] = [r for r in resources
                    if r["type"] == "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"]
    spec = node_class["inputs"]["spec"]
    assert spec["placementGroupSelector"] == {"name": CPG}
    assert spec["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef0"}]


def test_on_an_image_with_the_efa_plugin_the_nodes_get_efa(monkeypatch) -> None:
    """A catalog row for the pinned image built with the EFA installer: an EFA-only interface
    per network card, the NodeConfig lifting RLIMIT_MEMLOCK, the EFA device plugin."""
    base = catalog_images.default_image()
    row = dataclasses.replace(base, image="efa", registry="ecr", efa_nccl_plugin=True,
                              repository="111122223333.dkr.ecr.{region}.amazonaws.com/vllm")
    known = {**catalog_images.images(), "efa": row}
    monkeypatch.setattr(catalog_images, "images", lambda: known)
    monkeypatch.setattr("llmfleet.plan.checks.images", lambda: known)
    monkeypatch.setenv("LLMFLEET_CACHE", "off")  # the catalog changed in memory, not on disk
    resources = _program(plan_dict(**FRONTIER, **{"startup.image": "efa"}))
    lt = _one(resources, "aws:ec2/launchTemplate:LaunchTemplate", "t-us-east-1-gpu-lt")
    interfaces = lt["inputs"]["networkInterfaces"]
    assert len(interfaces) == 33  # ENA primary + one EFA-only per network card (32)
    assert [i.get("interfaceType") for i in interfaces[:2]] == [None, "efa-only"]
    assert "RLIMIT_MEMLOCK" in base64.b64decode(lt["inputs"]["userData"]).decode()
    plugin = _one(
        resources, "kubernetes:helm.sh/v3:Release", "t-us-east-1-multi-node-efa-device-plugin"
    )
    assert plugin["inputs"]["values"]["supportedInstanceLabels"]["values"] == ["p5.48xlarge"]


def test_a_disaggregated_plan_deploys_both_pools_the_router_and_its_rbac() -> None:
    resources = _program(plan_dict(**LONG_PROMPT))
    names = {r["name"] for r in resources}
    for suffix in ("deployment", "deployment-prefill", "deployment-router", "role",
                   "rolebinding", "scaledobject-prefill", "service-engines"):
        assert f"t-us-east-1-vllm-{suffix}" in names, suffix
