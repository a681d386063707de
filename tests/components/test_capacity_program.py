"""The mocked program of the tests' three-region plan (`plans.THREE_REGIONS`), per region:
Karpenter whose GPU ceiling covers the peak, GPU nodes in zones named by ID, weights that
never come from Hugging Face at pod start, a startup probe that outlasts the FleetPlan's
predicted container start, and IAM scoped to one cluster and one model."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from plans import THREE_REGIONS, three_regions

from components.preview.run import PreviewResult, run_program
from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan

pytestmark = pytest.mark.slow  # runs the Pulumi program under mocks


@pytest.fixture(scope="module")
def program() -> tuple[FleetPlan, list[dict[str, Any]]]:
    config = {"aws:region": "us-east-1", "llmfleet:plan": THREE_REGIONS}
    result: PreviewResult = run_program("three-regions", config)
    return build_fleet_plan(three_regions()), result.resources


def _of(resources: list[dict[str, Any]], typ: str, name: str) -> dict[str, Any]:
    [r] = [r for r in resources if r["type"] == typ and r["name"] == name]
    return r


def test_each_regions_karpenter_ceiling_plus_floor_covers_the_peak(program) -> None:
    fp, resources = program
    for rp in fp.regions:
        base = f"{fp.name}-{rp.region}"
        pool = _of(resources, "kubernetes:karpenter.sh/v1:NodePool", f"{base}-karpenter-nodepool")
        limit = int(pool["inputs"]["spec"]["limits"]["nvidia.com/gpu"])
        floor = _of(resources, "aws:eks/nodeGroup:NodeGroup", f"{base}-gpu")
        floor_nodes = floor["inputs"]["scalingConfig"]["maxSize"]
        assert limit + floor_nodes * rp.gpus_per_node >= rp.nodes.desired * rp.gpus_per_node
        assert limit == (rp.nodes.max - floor_nodes) * rp.gpus_per_node, rp.region


def test_the_karpenter_chart_runs_on_the_system_nodes_and_knows_its_queue(program) -> None:
    fp, resources = program
    for rp in fp.regions:
        base = f"{fp.name}-{rp.region}"
        chart = _of(resources, "kubernetes:helm.sh/v3:Release", f"{base}-karpenter-chart")
        values = chart["inputs"]["values"]
        assert values["nodeSelector"]["llmfleet.io/pool"] == "system"
        assert values["settings"] == {"clusterName": base, "interruptionQueue": base}
        assert chart["inputs"]["version"] == "1.14.1"


def test_the_controller_may_pass_only_its_node_role_and_delete_only_what_it_launched(
    program,
) -> None:
    fp, resources = program
    rp = fp.regions[0]
    base = f"{fp.name}-{rp.region}"
    policy = json.loads(
        _of(resources, "aws:iam/rolePolicy:RolePolicy", f"{base}-karpenter-controller")["inputs"][
            "policy"
        ]
    )
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    assert by_sid["AllowPassingInstanceRole"]["Resource"].endswith(f":role/{base}-karpenter-node")
    deletion = by_sid["AllowScopedDeletion"]["Condition"]["StringEquals"]
    assert deletion == {f"aws:ResourceTag/kubernetes.io/cluster/{base}": "owned"}
    assert all(s["Effect"] == "Allow" for s in policy["Statement"])


def test_pods_stream_the_regions_s3_copy_and_may_read_only_that_model(program) -> None:
    fp, resources = program
    for rp in fp.regions:
        base = f"{fp.name}-{rp.region}"
        config = _of(resources, "kubernetes:core/v1:ConfigMap", f"{base}-vllm-configmap")
        args = yaml.safe_load(config["inputs"]["data"]["config.yaml"])
        assert args["model"] == rp.cold_start.weights_uri
        assert not args["model"].startswith(("meta-llama/", "https://huggingface.co"))
        reader = json.loads(
            _of(resources, "aws:iam/rolePolicy:RolePolicy", f"{base}-model-reader")["inputs"][
                "policy"
            ]
        )
        [read] = [s for s in reader["Statement"] if s["Action"] == "s3:GetObject"]
        assert read["Resource"] == [f"arn:aws:s3:::{rp.staging.bucket}/{rp.staging.prefix}/*"]
        assert rp.staging.prefix.startswith("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic/")
        assert rp.staging.bucket.endswith(f"-weights-{rp.region}-{fp.account_id}")
        assoc = _of(
            resources,
            "aws:eks/podIdentityAssociation:PodIdentityAssociation",
            f"{base}-model-reader",
        )
        assert (assoc["inputs"]["namespace"], assoc["inputs"]["serviceAccount"]) == (
            rp.workload.namespace,
            rp.workload.name,
        )


def test_the_startup_probe_outlasts_the_predicted_container_start(program) -> None:
    fp, resources = program
    for rp in fp.regions:
        base = f"{fp.name}-{rp.region}"
        deployment = _of(resources, "kubernetes:apps/v1:Deployment", f"{base}-vllm-deployment")
        [container] = deployment["inputs"]["spec"]["template"]["spec"]["containers"]
        probe = container["startupProbe"]
        budget = probe["failureThreshold"] * probe["periodSeconds"]
        assert budget == rp.serving.startup_budget_s > rp.cold_start.container_s
        annotations = deployment["inputs"]["metadata"]["annotations"]
        assert "pulumi.com/skipAwait" not in annotations, "a crash loop must fail the update"
        timeout = int(annotations["pulumi.com/timeoutSeconds"])
        assert timeout == rp.cold_start.rollout_timeout_s > budget + rp.cold_start.node_s


def test_gpu_subnets_are_placed_by_zone_id(program) -> None:
    fp, resources = program
    subnets = {r["id"]: r for r in resources if r["type"] == "aws:ec2/subnet:Subnet"}
    for rp in fp.regions:
        floor = _of(resources, "aws:eks/nodeGroup:NodeGroup", f"{fp.name}-{rp.region}-gpu")
        zone_ids = [
            subnets[s]["inputs"]["availabilityZoneId"] for s in floor["inputs"]["subnetIds"]
        ]
        assert zone_ids == rp.node_zone_ids
