"""The rendered NodePool and EC2NodeClass validate against Karpenter 1.14.1's CRDs, and carry
the FleetPlan's numbers: the GPU ceiling above the floor, zones by ID, the cold start."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from crd_schema import problems

from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.outputs import karpenter_manifests


def _docs(plans: dict[str, FleetPlan]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (env, rp.region, doc)
        for env, fp in plans.items()
        for rp in fp.regions
        for doc in karpenter_manifests.karpenter_manifests(fp, rp).values()
    ]


def test_every_nodepool_and_ec2nodeclass_validates_against_the_pinned_crds(stack_plans) -> None:
    docs = _docs(stack_plans)
    assert {d["kind"] for _, _, d in docs} == {"NodePool", "EC2NodeClass"}
    for env, region, doc in docs:
        assert problems(doc) == [], (env, region, doc["kind"])


def test_the_validator_rejects_a_misspelt_field_and_a_bad_enum(own_plans) -> None:
    fp = own_plans["three-regions"]
    pool = karpenter_manifests.nodepool(fp, fp.regions[0])
    typo = copy.deepcopy(pool)
    typo["spec"]["disruption"]["consolidateAfterr"] = "5m"
    assert problems(typo) == ["undeclared .spec.disruption.consolidateAfterr"]
    bad = copy.deepcopy(pool)
    bad["spec"]["disruption"]["consolidationPolicy"] = "WhenIdle"
    assert any("WhenIdle" in p for p in problems(bad))


def test_the_nodepool_ceiling_covers_the_peak_above_the_floor(own_plans) -> None:
    # eu-north-1 of the three regions: 5 nodes at the peak, 1 on the floor node group:
    # Karpenter adds 4 x 8 = 32 GPUs (4 and 1, 24 GPUs, before #28's SLO model). (us-east-1
    # keeps its whole resilience floor warm: 0 above it.)
    rp = own_plans["three-regions"].region("eu-north-1")
    assert (rp.nodes.max, rp.capacity.floor_nodes, rp.gpus_per_node) == (5, 1, 8)
    pool = karpenter_manifests.nodepool(own_plans["three-regions"], rp)
    assert pool["spec"]["limits"] == {"nvidia.com/gpu": "32"}
    assert "replicas" not in pool["spec"]  # static pools may not carry GPU limits (CEL rule)


def test_gpu_zones_are_zone_ids_and_two_or_more_where_offered(stack_plans, own_plans) -> None:
    for env, fp in stack_plans.items():
        for rp in fp.regions:
            reqs = karpenter_manifests.nodepool(fp, rp)["spec"]["template"]["spec"]["requirements"]
            zone = next(r for r in reqs if r["key"] == "topology.k8s.aws/zone-id")
            assert zone["values"] == rp.capacity.node_zone_ids
            assert len(zone["values"]) >= 2 or rp.capacity.single_zone, (env, rp.region)
    assert own_plans["three-regions"].region("us-west-2").capacity.node_zone_ids == [
        "usw2-az1",
        "usw2-az2",
        "usw2-az4",
    ]


def test_consolidation_waits_at_least_one_predicted_cold_start(own_plans) -> None:
    rp = own_plans["three-regions"].region("us-east-1")
    # 410 s node + 180.4 s image + 95 s bootstrap + 77.1 s weights (67.7 GiB of FP8 at
    # 0.88 GiB/s, four TP 2 replicas sharing the node's stream) + 195 s engine = 957.5 s
    # -> 16m (two TP 4 replicas at 1.75 GiB/s, 918.9 s, before #28's SLO model)
    assert rp.cold_start.total_s == pytest.approx(957.5, abs=0.1)
    disruption = karpenter_manifests.nodepool(own_plans["three-regions"], rp)["spec"]["disruption"]
    assert disruption == {
        "budgets": [{"nodes": "1"}],
        "consolidateAfter": "16m",
        "consolidationPolicy": "WhenEmpty",
    }


def test_ec2nodeclass_pins_the_ami_requires_imdsv2_and_encrypts_the_root_volume(
    own_plans,
) -> None:
    fp = own_plans["three-regions"]
    rp = fp.region("eu-north-1")
    spec = karpenter_manifests.ec2nodeclass(fp, rp)["spec"]
    assert spec["amiSelectorTerms"] == [{"alias": "al2023@v20260714"}]
    assert spec["metadataOptions"]["httpTokens"] == "required"
    assert spec["metadataOptions"]["httpPutResponseHopLimit"] == 1
    assert spec["blockDeviceMappings"][0]["ebs"] == {
        "deleteOnTermination": True,
        "encrypted": True,
        "volumeSize": f"{rp.node_volume_gib}Gi",
        "volumeType": "gp3",
    }
    assert spec["subnetSelectorTerms"] == [
        {"tags": {"karpenter.sh/discovery": "chat-three-eu-north-1"}}
    ]
    assert spec["role"] == "chat-three-eu-north-1-karpenter-node"
