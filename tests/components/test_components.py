"""Unit tests of the components' pure argument builders: no Pulumi runtime, no mocks.

Every dict a builder returns is checked against the installed SDK's signatures, so an
argument name that pulumi-aws does not have fails here, not in a real `pulumi preview`.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from typing import Any

import pulumi_aws as aws
import pytest
from plans import one_region

from components import iam
from components.cluster import (
    account_matches,
    cluster_args,
    kubeconfig_json,
    vpc_cni_addon_args,
)
from components.node_pool import (
    AMI_TYPE,
    POOL_LABEL,
    ROOT_DEVICE_NAME,
    SYSTEM_AMI_TYPE,
    PoolSpec,
    gpu_pool,
    launch_template_args,
    node_group_args,
    node_taints,
    pool_node_selector,
    system_pool,
)
from components.region import default_tags
from components.vpc import INTERNAL_ELB_TAG, subnet_tags, subnets_in_zones, zone_names
from llmfleet.catalog import hardware
from llmfleet.errors import PlanError, ProgramError
from llmfleet.fleetplan import workload
from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan
from llmfleet.fleetplan.network import subnet_layout
from llmfleet.fleetplan.region import RegionPlan

# pulumi_aws warns about its own deprecated ec2 modules when the ec2 package is imported.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_aws")

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def unknown_sdk_args(cls: type, kwargs: dict[str, Any]) -> list[str]:
    """Argument paths in `kwargs` that the installed SDK's `cls` does not accept."""
    params = inspect.signature(cls._internal_init).parameters  # type: ignore[attr-defined]
    return _unknown(params, kwargs, sys.modules[cls.__module__], cls.__name__)


def _unknown(params: Any, values: dict[str, Any], module: Any, path: str) -> list[str]:
    bad = []
    for key, value in values.items():
        if key not in params:
            bad.append(f"{path}.{key}")
            continue
        found = re.search(r"ForwardRef\('(\w+Args)'\)", str(params[key].annotation))
        if found is None:
            continue
        nested = getattr(module, found.group(1))
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict):
                bad += _unknown(
                    inspect.signature(nested.__init__).parameters,
                    item,
                    sys.modules[nested.__module__],
                    f"{path}.{key}",
                )
    return bad


@pytest.fixture(scope="module")
def dev_plan() -> FleetPlan:
    """The tests' own one-region plan (`plans.ONE_REGION`)."""
    return build_fleet_plan(one_region())


@pytest.fixture(scope="module")
def region(dev_plan: FleetPlan) -> RegionPlan:
    return dev_plan.regions[0]


def _node_group(pool: PoolSpec) -> dict[str, Any]:
    return node_group_args(
        pool,
        cluster_name="c",
        node_role_arn="arn:aws:iam::1:role/n",
        subnet_ids=["subnet-1", "subnet-2"],
        launch_template_id="lt-1",
        launch_template_version="1",
        tags={"b": "2", "a": "1"},
    )


def _pools(region: RegionPlan) -> dict[str, PoolSpec]:
    return {"gpu": gpu_pool(region), "system": system_pool(region, "chat-dev")}


@pytest.fixture(params=["gpu", "system"])
def pool(request: pytest.FixtureRequest, region: RegionPlan) -> PoolSpec:
    return _pools(region)[request.param]


# --- GPU node pool -------------------------------------------------------------------------


def test_the_gpu_node_group_holds_exactly_the_floor(region: RegionPlan) -> None:
    """min = desired = max = the floor: Karpenter, not the node group, scales above it."""
    args = _node_group(gpu_pool(region))
    floor = region.capacity.floor_nodes
    assert args["instance_types"] == [region.instance_type]
    assert args["scaling_config"] == {"min_size": floor, "desired_size": floor, "max_size": floor}


def test_node_group_runs_the_managed_nvidia_al2023_ami_on_demand(region: RegionPlan) -> None:
    args = _node_group(gpu_pool(region))
    assert args["ami_type"] == AMI_TYPE == "AL2023_x86_64_NVIDIA"
    assert args["capacity_type"] == "ON_DEMAND"
    assert args["launch_template"] == {"id": "lt-1", "version": "1"}
    assert "disk_size" not in args, "EKS rejects disk_size together with a launch template"
    assert "release_version" not in args and "version" not in args


def test_node_group_is_tainted_and_labelled_for_gpus(region: RegionPlan) -> None:
    args = _node_group(gpu_pool(region))
    assert args["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    assert args["labels"]["nvidia.com/gpu.present"] == "true"
    assert args["labels"][POOL_LABEL] == "gpu"
    assert region.workload.node_labels.items() <= args["labels"].items()
    assert args["labels"]["llmfleet.io/gpu"] == region.gpu
    assert args["labels"]["llmfleet.io/instance-type"] == region.instance_type
    assert list(args["labels"]) == sorted(args["labels"])
    assert node_taints(region) == args["taints"]


def test_labels_are_valid_for_every_catalog_instance(region: RegionPlan) -> None:
    for inst in hardware.instances().values():
        labels = workload.node_labels("chat-dev", inst.gpu, inst.instance_type, inst.gpu_count)
        for key, value in labels.items():
            assert len(value) <= 63 and LABEL_VALUE.match(value), (key, value)


# --- system node pool ----------------------------------------------------------------------


def test_system_pool_is_sized_from_the_region_plans_system_pool(region: RegionPlan) -> None:
    sp = region.system_pool
    args = _node_group(system_pool(region, "chat-dev"))
    assert args["instance_types"] == [sp.instance_type]
    assert args["scaling_config"] == {
        "min_size": sp.nodes.min,
        "desired_size": sp.nodes.desired,
        "max_size": sp.nodes.max,
    }
    assert args["ami_type"] == SYSTEM_AMI_TYPE == "AL2023_x86_64_STANDARD"
    assert args["capacity_type"] == "ON_DEMAND"


def test_system_pool_is_untainted_and_selectable(region: RegionPlan) -> None:
    args = _node_group(system_pool(region, "chat-dev"))
    assert "taints" not in args, "cluster services run here without tolerations"
    assert args["labels"] == {"llmfleet.io/fleet": "chat-dev", "llmfleet.io/pool": "system"}
    assert pool_node_selector("system").items() <= args["labels"].items()
    assert (
        not pool_node_selector("system").items()
        <= _node_group(gpu_pool(region))["labels"].items()
    ), "a system-pool nodeSelector must not match GPU nodes"


# --- both pools: the same secure launch template --------------------------------------------


def test_launch_template_requires_imdsv2_with_one_hop(pool: PoolSpec) -> None:
    """Hop limit 1: a pod's network namespace is a second hop, so no pod reaches the node
    role through the metadata service; every pod has its own Pod Identity instead."""
    meta = launch_template_args(pool, "sg-1", {})["metadata_options"]
    assert meta["http_tokens"] == "required"
    assert meta["http_put_response_hop_limit"] == 1
    assert meta["http_endpoint"] == "enabled"


def test_node_groups_follow_the_control_plane_and_repair_themselves(pool: PoolSpec) -> None:
    args = node_group_args(
        pool, cluster_name="c", node_role_arn="r", subnet_ids=["s"], launch_template_id="lt",
        launch_template_version="1", tags={}, kubernetes_version="1.35",
    )
    assert args["version"] == "1.35"
    assert args["node_repair_config"] == {"enabled": True}


def test_launch_template_encrypts_a_gp3_root_volume_of_the_planned_size(region: RegionPlan) -> None:
    planned = {"gpu": region.node_volume_gib, "system": region.system_pool.volume_gib}
    for kind, pool in _pools(region).items():
        [root] = launch_template_args(pool, "sg-1", {})["block_device_mappings"]
        assert root["device_name"] == ROOT_DEVICE_NAME == "/dev/xvda"
        assert root["ebs"] == {
            "volume_size": planned[kind],
            "volume_type": "gp3",
            "encrypted": "true",
            "delete_on_termination": "true",
        }, kind


def test_launch_template_leaves_ami_and_placement_to_the_node_group(pool: PoolSpec) -> None:
    args = launch_template_args(pool, "sg-1", {"team": "ml"})
    for managed in (
        "image_id",
        "instance_type",
        "user_data",
        "iam_instance_profile",
        "vpc_security_group_ids",
        "key_name",
    ):
        assert managed not in args
    [nic] = args["network_interfaces"]
    assert "subnet_id" not in nic
    assert nic["associate_public_ip_address"] == "false"
    assert nic["security_groups"] == ["sg-1"], "the cluster security group must stay on nodes"
    assert {t["resource_type"] for t in args["tag_specifications"]} == {
        "instance",
        "volume",
        "network-interface",
    }
    assert all(t["tags"] == {"team": "ml"} for t in args["tag_specifications"])


def test_node_pool_builders_use_only_real_sdk_arguments(pool: PoolSpec) -> None:
    assert unknown_sdk_args(aws.eks.NodeGroup, _node_group(pool)) == []
    assert (
        unknown_sdk_args(aws.ec2.LaunchTemplate, launch_template_args(pool, "sg-1", {"a": "b"}))
        == []
    )


def test_sdk_check_catches_an_invented_argument() -> None:
    bad = {"scaling_config": {"min_size": 1, "desired": 2}, "gpu_count": 8}
    assert sorted(unknown_sdk_args(aws.eks.NodeGroup, bad)) == [
        "NodeGroup.gpu_count",
        "NodeGroup.scaling_config.desired",
    ]


# --- network -------------------------------------------------------------------------------


def test_private_subnets_take_internal_lbs_and_karpenters_tag_public_ones_internet_lbs() -> None:
    discovery = {"karpenter.sh/discovery": "n-us-east-1"}
    for spec in subnet_layout("10.40.0.0/16", "us-east-1", ["use1-az1", "use1-az2"]):
        tags = subnet_tags(spec, "n", discovery)
        assert (INTERNAL_ELB_TAG in tags) == (not spec.public)
        assert ("karpenter.sh/discovery" in tags) == (not spec.public)
        assert ("kubernetes.io/role/elb" in tags) == spec.public  # internet-facing ALBs
        assert tags["Name"] == f"n-{spec.tier}-{spec.zone_id}"


def test_planned_zone_ids_resolve_to_the_accounts_names_or_fail_by_id() -> None:
    names, ids = ["us-east-1a", "us-east-1b"], ["use1-az4", "use1-az6"]
    assert zone_names(["use1-az6"], names, ids) == {"use1-az6": "us-east-1b"}
    with pytest.raises(ProgramError, match="use1-az2 are not available to this account"):
        zone_names(["use1-az2", "use1-az6"], names, ids)


def test_gpu_nodes_get_only_the_subnets_of_the_zones_that_offer_the_instance() -> None:
    subnets = {"us-east-1c": "subnet-c", "us-east-1a": "subnet-a"}
    assert subnets_in_zones(subnets, ["us-east-1c"], "node_zones") == ["subnet-c"]
    assert subnets_in_zones(subnets, ["us-east-1a", "us-east-1c"], "z") == ["subnet-a", "subnet-c"]
    with pytest.raises(PlanError, match="no subnet in us-east-1d") as e:
        subnets_in_zones(subnets, ["us-east-1c", "us-east-1d"], "regions[us-east-1].node_zones")
    assert e.value.field == "regions[us-east-1].node_zones"
    with pytest.raises(PlanError, match="no subnet in any zone"):
        subnets_in_zones(subnets, [], "node_zones")


def test_every_stack_plans_node_zones_inside_its_cluster_zones(stack_plans) -> None:
    """What the components rely on from the core: subnets exist where GPU nodes go."""
    for fp in stack_plans.values():
        for rp in fp.regions:
            assert rp.node_zone_ids and set(rp.node_zone_ids) <= set(rp.cluster_zone_ids)
            assert rp.cluster_zone_ids[: len(rp.node_zone_ids)] == rp.node_zone_ids


# --- cluster -------------------------------------------------------------------------------


def _cluster(public: bool = True) -> dict[str, Any]:
    return cluster_args(
        "chat-dev-us-east-1",
        kubernetes_version="1.35",
        role_arn="arn:r",
        subnet_ids=["subnet-1", "subnet-2"],
        kms_key_arn="arn:k",
        endpoint_public_access=public,
        public_access_cidrs=["203.0.113.0/24"],
        tags={"z": "1", "a": "2"},
    )


def test_cluster_encrypts_secrets_logs_the_control_plane_and_keeps_a_private_endpoint() -> None:
    args = _cluster()
    assert args["encryption_config"] == {"resources": ["secrets"], "provider": {"key_arn": "arn:k"}}
    assert args["enabled_cluster_log_types"] == ["api", "audit", "authenticator"]
    assert args["vpc_config"]["endpoint_private_access"] is True
    assert args["version"] == "1.35" and args["name"] == "chat-dev-us-east-1"
    assert list(args["tags"]) == ["a", "z"]


def test_public_endpoint_is_optional_and_narrowable() -> None:
    assert _cluster(public=True)["vpc_config"]["public_access_cidrs"] == ["203.0.113.0/24"]
    closed = _cluster(public=False)["vpc_config"]
    assert closed["endpoint_public_access"] is False and "public_access_cidrs" not in closed


def test_cluster_builder_uses_only_real_sdk_arguments() -> None:
    assert unknown_sdk_args(aws.eks.Cluster, _cluster()) == []


def test_vpc_cni_addon_turns_on_the_network_policy_agent_and_takes_over_aws_node() -> None:
    args = vpc_cni_addon_args("c1")
    assert args["addon_name"] == "vpc-cni" and args["cluster_name"] == "c1"
    assert json.loads(args["configuration_values"]) == {"enableNetworkPolicy": "true"}
    assert args["resolve_conflicts_on_create"] == "OVERWRITE"
    assert args["resolve_conflicts_on_update"] == "OVERWRITE"
    assert "addon_version" not in args, "EKS picks the default version for the cluster"
    assert unknown_sdk_args(aws.eks.Addon, args) == []


def test_the_vpc_cni_gets_its_policy_through_its_own_pod_identity() -> None:
    args = vpc_cni_addon_args("c1", "arn:aws:iam::111122223333:role/cni")
    assert args["pod_identity_associations"] == [
        {"role_arn": "arn:aws:iam::111122223333:role/cni", "service_account": "aws-node"}
    ]
    assert unknown_sdk_args(aws.eks.Addon, args) == []


def test_the_cluster_takes_access_entries_only_and_the_plans_support_policy() -> None:
    args = _cluster()
    assert args["access_config"]["authentication_mode"] == "API"
    assert args["upgrade_policy"] == {"support_type": "STANDARD"}


def test_credentials_of_another_account_stop_the_program() -> None:
    assert account_matches("111122223333", "111122223333") == "111122223333"
    assert account_matches("111122223333", None) == "111122223333"
    with pytest.raises(ProgramError, match="credentials are for account 444455556666"):
        account_matches("444455556666", "111122223333")


def test_kubeconfig_gets_a_token_from_aws_eks_and_is_deterministic() -> None:
    text = kubeconfig_json("c1", "https://x.eks", "Q0E=", "eu-west-1")
    assert text == kubeconfig_json("c1", "https://x.eks", "Q0E=", "eu-west-1")
    doc = json.loads(text)
    assert text == json.dumps(doc, sort_keys=True, indent=2)
    assert doc["clusters"][0]["cluster"] == {
        "server": "https://x.eks",
        "certificate-authority-data": "Q0E=",
    }
    assert doc["current-context"] == "c1"
    exec_cfg = doc["users"][0]["user"]["exec"]
    assert exec_cfg["command"] == "aws"
    assert exec_cfg["args"][:4] == ["eks", "get-token", "--cluster-name", "c1"]
    assert exec_cfg["args"][4:6] == ["--region", "eu-west-1"]
    assert "env" not in exec_cfg
    with_profile = json.loads(kubeconfig_json("c1", "e", "d", "eu-west-1", aws_profile="ml"))
    assert with_profile["users"][0]["user"]["exec"]["env"] == [
        {"name": "AWS_PROFILE", "value": "ml"}
    ]


# --- IAM and tags --------------------------------------------------------------------------


def test_node_role_policies_are_the_least_privilege_two_and_the_cni_has_its_own() -> None:
    """AmazonEKS_CNI_Policy lives on the VPC CNI's Pod Identity role, not on every node's."""
    assert sorted(iam.NODE_POLICIES) == [
        "AmazonEC2ContainerRegistryPullOnly",
        "AmazonEKSWorkerNodePolicy",
    ]
    assert iam.CNI_POLICIES == ("AmazonEKS_CNI_Policy",)
    assert iam.CLUSTER_POLICIES == ("AmazonEKSClusterPolicy",)


def test_managed_policy_arns_follow_the_partition() -> None:
    assert (
        iam.managed_policy_arn("AmazonEKS_CNI_Policy", "us-east-1")
        == "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"
    )
    assert iam.managed_policy_arn("X", "cn-north-1").startswith("arn:aws-cn:")
    assert iam.managed_policy_arn("X", "us-gov-west-1").startswith("arn:aws-us-gov:")


def test_trust_policies_name_one_service() -> None:
    doc = json.loads(iam.assume_role_policy("ec2", "us-east-1"))
    assert doc["Statement"] == [
        {
            "Effect": "Allow",
            "Action": "sts:AssumeRole",
            "Principal": {"Service": "ec2.amazonaws.com"},
        }
    ]


def test_default_tags_name_the_fleet() -> None:
    assert default_tags("chat-dev", {"team": "ml"}) == {
        "llmfleet.io/fleet": "chat-dev",
        "managed-by": "pulumi",
        "team": "ml",
    }
