"""Policies over what `pulumi preview` would create: the real __main__.py under mocks.

Each stack runs once per module (fixtures below); every test reads those runs.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
import sys
from dataclasses import dataclass
from typing import Any

import pulumi._types
import pulumi_aws
import pulumi_kubernetes
import pytest
import yaml
from plans import ONE_REGION, THREE_REGIONS

import components.preview.run as preview_run
from components.preview.mocks import MOCK_ACCOUNT
from components.preview.run import PreviewResult, run_preview, run_program
from components.preview.text import format_preview
from llmfleet.cli import main
from llmfleet.errors import ProgramError, StackError
from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.fleetplan.weights import ACCOUNT_PLACEHOLDER
from llmfleet.outputs import render
from llmfleet.paths import RENDERED_DIR
from llmfleet.plan.stacks import list_stacks, parse_plan, read_stack_config, stack_config

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_aws")]

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"
CLUSTER = "aws:eks/cluster:Cluster"
ROLE = "aws:iam/role:Role"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
AWS_PROVIDER = "pulumi:providers:aws"
K8S_PROVIDER = "pulumi:providers:kubernetes"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"
NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
ADDON = "aws:eks/addon:Addon"
POOL_LABEL = "llmfleet.io/pool"
OFFICE_CIDR = "52.94.76.0/22"  # a public range: the plan refuses documentation ranges
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}
EXISTING = {
    "vpc_id": "vpc-0123456789abcdef0",
    "private_subnet_ids": ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0bbbbbbbbbbbbbbb2"],
    "load_balancer_cidrs": ["10.60.200.0/24", "10.60.201.0/24"],
}


@dataclass(frozen=True)
class Run:
    name: str
    config: dict[str, Any]
    result: PreviewResult

    @property
    def plan(self) -> FleetPlan:
        return self.result.fleet_plan

    @property
    def resources(self) -> list[dict[str, Any]]:
        return self.result.resources

    def of_type(self, typ: str) -> list[dict[str, Any]]:
        return [r for r in self.resources if r["type"] == typ]

    def by_id(self, rid: str) -> dict[str, Any]:
        [hit] = [r for r in self.resources if r["id"] == rid]
        return hit

    def region_of(self, r: dict[str, Any]) -> str:
        [provider] = [p for p in self.of_type(AWS_PROVIDER) if p["name"] == r["provider"]]
        return str(provider["inputs"]["region"])

    def node_groups(self, pool: str) -> list[dict[str, Any]]:
        """The node groups whose nodes carry llmfleet.io/pool=<pool> ("gpu" or "system")."""
        return [
            ng for ng in self.of_type(NODE_GROUP) if ng["inputs"]["labels"].get(POOL_LABEL) == pool
        ]

    def subnet_zones(self) -> dict[str, str]:
        """Subnet id -> availability zone ID, for the subnets this run creates."""
        return {s["id"]: s["inputs"]["availabilityZoneId"] for s in self.of_type(SUBNET)}


def _run(name: str, config: dict[str, Any]) -> Run:
    return Run(name, config, run_program(name, config))


def own_config(plan: dict[str, Any]) -> dict[str, Any]:
    """A stack's config holding one of the tests' own plans (`plans.OWN_STACKS`)."""
    return {"aws:region": "us-east-1", "llmfleet:plan": copy.deepcopy(plan)}


def existing_vpc_config() -> dict[str, Any]:
    """The three-region plan, with us-west-2 placed in an existing VPC and the API endpoint
    narrowed."""
    config = own_config(THREE_REGIONS)
    [west] = [r for r in config["llmfleet:plan"]["regions"] if r["name"] == "us-west-2"]
    west["network"] = EXISTING
    config["llmfleet:plan"]["cluster"]["public_access_cidrs"] = [OFFICE_CIDR]
    return config


VARIANTS = {
    "dev": lambda: _run("one-region", own_config(ONE_REGION)),
    "prod": lambda: _run("three-regions", own_config(THREE_REGIONS)),
    "prod-existing-vpc": lambda: _run("three-regions", existing_vpc_config()),
}
"""The tests' own plans (not stacks/: a user edits those): "dev" is plans.ONE_REGION,
"prod" plans.THREE_REGIONS."""


@pytest.fixture(scope="module")
def runs() -> dict[str, Run]:
    """Each variant runs at most once per module, on first use."""
    return {}


def _get(runs: dict[str, Run], variant: str) -> Run:
    if variant not in runs:
        runs[variant] = VARIANTS[variant]()
    return runs[variant]


@pytest.fixture(params=list(VARIANTS))
def run(request: pytest.FixtureRequest, runs: dict[str, Run]) -> Run:
    return _get(runs, request.param)


@pytest.fixture
def preview_own_stacks(own_stacks, monkeypatch: pytest.MonkeyPatch) -> None:
    """`llmfleet preview --stack` reads the tests' own stacks folder."""
    monkeypatch.setattr(
        preview_run, "stack_config", lambda env: stack_config(env, own_stacks)
    )


@pytest.fixture
def existing(runs: dict[str, Run]) -> Run:
    return _get(runs, "prod-existing-vpc")


# --- GPU nodes ------------------------------------------------------------------------------


def test_every_gpu_node_group_is_tainted_no_schedule(run: Run) -> None:
    assert len(run.node_groups("gpu")) == len(run.plan.regions)
    for ng in run.node_groups("gpu"):
        assert GPU_TAINT in ng["inputs"]["taints"], ng["name"]


def test_every_cluster_has_exactly_one_untainted_node_group(run: Run) -> None:
    untainted = [ng for ng in run.of_type(NODE_GROUP) if not ng["inputs"].get("taints")]
    assert sorted(run.region_of(ng) for ng in untainted) == sorted(
        rp.region for rp in run.plan.regions
    )
    assert untainted == run.node_groups("system")


def test_the_gpu_node_groups_are_the_only_tainted_ones(run: Run) -> None:
    tainted = [ng for ng in run.of_type(NODE_GROUP) if ng["inputs"].get("taints")]
    assert tainted == run.node_groups("gpu")
    for ng in tainted:
        assert ng["inputs"]["amiType"] == "AL2023_x86_64_NVIDIA", ng["name"]
        assert ng["inputs"]["instanceTypes"] == [run.plan.region(run.region_of(ng)).instance_type]


def test_system_node_groups_are_sized_from_the_system_pool(run: Run) -> None:
    for ng in run.node_groups("system"):
        sp, inputs = run.plan.region(run.region_of(ng)).system_pool, ng["inputs"]
        assert inputs["instanceTypes"] == [sp.instance_type]
        assert inputs["scalingConfig"] == {
            "minSize": sp.nodes.min,
            "desiredSize": sp.nodes.desired,
            "maxSize": sp.nodes.max,
        }
        assert inputs["amiType"] == "AL2023_x86_64_STANDARD"
        assert inputs["capacityType"] == "ON_DEMAND"


def test_node_groups_are_sized_exactly_as_the_fleet_plan(run: Run) -> None:
    groups = {run.region_of(ng): ng["inputs"] for ng in run.node_groups("gpu")}
    assert sorted(groups) == sorted(r.region for r in run.plan.regions)
    for rp in run.plan.regions:
        ng = groups[rp.region]
        floor = rp.capacity.floor_nodes  # the trough's nodes; Karpenter adds the rest
        assert floor == rp.nodes.min
        assert ng["scalingConfig"] == {
            "minSize": floor,
            "desiredSize": floor,
            "maxSize": floor,
        }, rp.region
        assert ng["instanceTypes"] == [rp.instance_type]
        assert ng["amiType"] == "AL2023_x86_64_NVIDIA"
        assert ng["capacityType"] == "ON_DEMAND"


def test_the_autoscaler_owns_desired_size_after_creation(run: Run) -> None:
    for ng in run.of_type(NODE_GROUP):
        assert ng["options"]["ignore_changes"] == ["scalingConfig.desiredSize"]
        assert "desiredSize" in ng["inputs"]["scalingConfig"], "path must name a real input"


def test_nodes_wait_for_their_role_policies_and_the_vpc_cni(run: Run) -> None:
    for ng in run.of_type(NODE_GROUP):
        waits = [d for d in ng["options"]["depends_on"] if "-node-Amazon" in d]
        assert len(waits) == 2, ng["name"]
        assert f"{run.plan.name}-{run.region_of(ng)}-vpc-cni" in ng["options"]["depends_on"]


def test_every_launch_template_requires_imdsv2_and_encrypts_its_gp3_root(run: Run) -> None:
    templates = run.of_type(LAUNCH_TEMPLATE)
    assert len(templates) == 2 * len(run.plan.regions)
    for ng in run.of_type(NODE_GROUP):
        lt = run.by_id(ng["inputs"]["launchTemplate"]["id"])
        inputs, rp = lt["inputs"], run.plan.region(run.region_of(lt))
        planned = {"gpu": rp.node_volume_gib, "system": rp.system_pool.volume_gib}
        assert inputs["metadataOptions"]["httpTokens"] == "required"
        assert inputs["metadataOptions"]["httpPutResponseHopLimit"] == 1
        [root] = inputs["blockDeviceMappings"]
        assert root["deviceName"] == "/dev/xvda"
        assert root["ebs"]["volumeType"] == "gp3" and root["ebs"]["encrypted"] == "true"
        assert root["ebs"]["volumeSize"] == planned[ng["inputs"]["labels"][POOL_LABEL]]
        assert "imageId" not in inputs, "the managed AMI type picks the image"


def test_node_groups_use_their_own_launch_template(run: Run) -> None:
    for ng in run.of_type(NODE_GROUP):
        lt = run.by_id(ng["inputs"]["launchTemplate"]["id"])
        assert lt["type"] == LAUNCH_TEMPLATE and lt["parent"] == ng["parent"]


# --- network --------------------------------------------------------------------------------


def _public_subnet_ids(run: Run) -> set[str]:
    """Subnets whose route table sends traffic to an internet gateway."""
    igws = {r["id"] for r in run.of_type("aws:ec2/internetGateway:InternetGateway")}
    public_rts = {
        rt["id"]
        for rt in run.of_type("aws:ec2/routeTable:RouteTable")
        if any(route.get("gatewayId") in igws for route in rt["inputs"]["routes"])
    }
    return {
        a["inputs"]["subnetId"]
        for a in run.of_type("aws:ec2/routeTableAssociation:RouteTableAssociation")
        if a["inputs"]["routeTableId"] in public_rts
    }


def test_no_public_ips_except_nat_and_no_nodes_in_public_subnets(run: Run) -> None:
    public = _public_subnet_ids(run)
    nat_subnets = {n["inputs"]["subnetId"] for n in run.of_type("aws:ec2/natGateway:NatGateway")}
    assert public == nat_subnets, "public subnets exist only to hold the NAT gateways"
    for subnet in run.of_type(SUBNET):
        if subnet["inputs"].get("mapPublicIpOnLaunch"):
            assert subnet["id"] in nat_subnets, subnet["name"]
    for ng in run.of_type(NODE_GROUP):
        assert not public & set(ng["inputs"]["subnetIds"]), ng["name"]
    for lt in run.of_type(LAUNCH_TEMPLATE):
        assert all(
            nic["associatePublicIpAddress"] == "false" for nic in lt["inputs"]["networkInterfaces"]
        )


def test_private_subnets_take_internal_load_balancers(run: Run) -> None:
    public = _public_subnet_ids(run)
    for subnet in run.of_type(SUBNET):
        assert (subnet["id"] not in public) == (
            subnet["inputs"]["tags"].get("kubernetes.io/role/internal-elb") == "1"
        )


def test_an_existing_vpc_is_used_rather_than_a_new_one(existing: Run) -> None:
    """Every given subnet, for the GPU nodes too: the user picks subnets in node_zones."""
    west = [r for r in existing.resources if r["provider"] == "chat-three-us-west-2-aws"]
    for typ in ("aws:ec2/vpc:Vpc", SUBNET, "aws:ec2/natGateway:NatGateway"):
        assert not [r for r in west if r["type"] == typ], typ
    [cluster] = [r for r in west if r["type"] == CLUSTER]
    groups = [r for r in west if r["type"] == NODE_GROUP]
    assert cluster["inputs"]["vpcConfig"]["subnetIds"] == EXISTING["private_subnet_ids"]
    assert len(groups) == 2
    for ng in groups:
        assert ng["inputs"]["subnetIds"] == EXISTING["private_subnet_ids"], ng["name"]
    assert len(existing.of_type("aws:ec2/vpc:Vpc")) == len(existing.plan.regions) - 1


# --- availability zones ---------------------------------------------------------------------


def _new_vpc_regions(run: Run) -> list[str]:
    return [rp.region for rp in run.plan.regions if rp.vpc_id is None]


def test_subnets_are_placed_by_zone_id_exactly_in_the_plans_cluster_zones(run: Run) -> None:
    for region in _new_vpc_regions(run):
        zones = run.plan.region(region).cluster_zone_ids
        subnets = [s for s in run.of_type(SUBNET) if run.region_of(s) == region]
        for tier in ("private", "public"):
            placed = [
                s["inputs"]["availabilityZoneId"]
                for s in subnets
                if s["inputs"]["tags"]["llmfleet.io/tier"] == tier
            ]
            assert sorted(placed) == sorted(zones), (region, tier)
    for s in run.of_type(SUBNET):
        assert "availabilityZone" not in s["inputs"], "a zone name is another zone elsewhere"


def test_clusters_use_every_private_subnet(run: Run) -> None:
    public = _public_subnet_ids(run)
    for cluster in run.of_type(CLUSTER):
        region = run.region_of(cluster)
        if region not in _new_vpc_regions(run):
            continue
        private = {s["id"] for s in run.of_type(SUBNET) if run.region_of(s) == region} - public
        assert set(cluster["inputs"]["vpcConfig"]["subnetIds"]) == private, region


def test_gpu_nodes_go_only_where_the_instance_is_offered(run: Run) -> None:
    zones_of = run.subnet_zones()
    for ng in run.node_groups("gpu"):
        rp = run.plan.region(run.region_of(ng))
        if rp.vpc_id is not None:
            continue
        assert sorted(zones_of[s] for s in ng["inputs"]["subnetIds"]) == sorted(rp.node_zone_ids)
    for ng in run.node_groups("system"):
        rp = run.plan.region(run.region_of(ng))
        if rp.vpc_id is None:
            placed = sorted(zones_of[s] for s in ng["inputs"]["subnetIds"])
            assert placed == sorted(rp.cluster_zone_ids), ng["name"]


def test_us_east_1_b200_nodes_are_only_in_use1_az6_and_the_report_says_so(runs) -> None:
    """p6-b200.48xlarge is offered only in use1-az6 (catalog/zone_id_offerings.csv)."""
    run = _get(runs, "prod")
    rp = run.plan.region("us-east-1")
    assert rp.instance_type == "p6-b200.48xlarge" and rp.node_zone_ids == ["use1-az6"]
    assert rp.capacity.single_zone
    assert any("offered in one zone of us-east-1 only" in n for n in rp.capacity.notes)
    [ng] = [g for g in run.node_groups("gpu") if run.region_of(g) == "us-east-1"]
    [subnet] = [
        s
        for s in run.of_type(SUBNET)
        if run.region_of(s) == "us-east-1"
        and s["inputs"]["availabilityZoneId"] == "use1-az6"
        and s["inputs"]["tags"]["llmfleet.io/tier"] == "private"
    ]
    assert ng["inputs"]["subnetIds"] == [subnet["id"]]
    assert len(rp.cluster_zone_ids) >= 2, "EKS still gets two zones for the control plane"


def test_gpu_nodes_span_two_or_more_zone_ids_where_offered(runs) -> None:
    run = _get(runs, "prod")
    pools = {_k8s_region(run, p): p for p in run.of_type(NODEPOOL)}
    for rp in run.plan.regions:
        reqs = pools[rp.region]["inputs"]["spec"]["template"]["spec"]["requirements"]
        [zones] = [r["values"] for r in reqs if r["key"] == "topology.k8s.aws/zone-id"]
        assert zones == rp.node_zone_ids
        assert len(zones) >= 2 or rp.capacity.single_zone, rp.region
    assert run.plan.region("us-west-2").node_zone_ids == ["usw2-az1", "usw2-az2", "usw2-az4"]


# --- IAM, cluster, providers ----------------------------------------------------------------


def _policies_of(run: Run, role_name: str) -> list[str]:
    return sorted(
        a["inputs"]["policyArn"].split("/")[-1]
        for a in run.of_type(ATTACHMENT)
        if a["inputs"]["role"] == role_name
    )


def test_node_role_has_exactly_the_two_managed_policies(run: Run) -> None:
    """The CNI's policy is on aws-node's own Pod Identity role, not every node's."""
    for ng in run.of_type(NODE_GROUP):
        role = ng["inputs"]["nodeRoleArn"].split("/")[-1]
        assert _policies_of(run, role) == [
            "AmazonEC2ContainerRegistryPullOnly",
            "AmazonEKSWorkerNodePolicy",
        ]
        [doc] = [
            json.loads(r["inputs"]["assumeRolePolicy"])
            for r in run.of_type(ROLE)
            if r["id"] == role
        ]
        assert doc["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    inline = {r["name"] for r in run.of_type("aws:iam/rolePolicy:RolePolicy")}
    expected = {
        f"{run.plan.name}-{r.region}-{what}"
        for r in run.plan.regions
        for what in ("karpenter-controller", "model-reader", "model-stager", "alerts-alertmanager")
    } | {f"{run.plan.name}-{r.region}-lbc-waf-lookup" for r in run.plan.regions if r.entry_point}
    startup = run.plan.startup
    if startup.ecr_account_id and startup.pull_through_ready:  # nodes pull through the cache
        expected |= {f"{run.plan.name}-{r.region}-model-pull-through-{k}"
                     for r in run.plan.regions for k in (0, 1)}
    assert inline == expected, "inline: Karpenter, the weights, alerts, WAF lookup, ECR cache"


def test_cluster_role_has_only_the_eks_cluster_policy(run: Run) -> None:
    for cluster in run.of_type(CLUSTER):
        role = cluster["inputs"]["roleArn"].split("/")[-1]
        assert _policies_of(run, role) == ["AmazonEKSClusterPolicy"]


def test_one_cluster_per_region_each_in_its_region(run: Run) -> None:
    clusters = run.of_type(CLUSTER)
    assert len(clusters) == len(run.plan.regions)
    assert sorted(run.region_of(c) for c in clusters) == sorted(r.region for r in run.plan.regions)
    regional = [p for p in run.of_type(AWS_PROVIDER) if p["name"] != _route53(run)]
    assert sorted(p["inputs"]["region"] for p in regional) == sorted(
        r.region for r in run.plan.regions
    )
    assert {c["inputs"]["version"] for c in clusters} == {run.plan.kubernetes_version}


def _route53(run: Run) -> str:
    return f"{run.plan.name}-route53-aws"


def test_every_aws_resource_uses_its_regions_explicit_provider(run: Run) -> None:
    """Route53 is global: its records and health checks use the one us-east-1 provider."""
    for r in run.resources:
        if r["type"].startswith("aws:") and r["provider"] != _route53(run):
            assert r["provider"] is not None, r["name"]
            assert r["name"].startswith(f"{run.plan.name}-{run.region_of(r)}"), r["name"]
        elif r["type"].startswith("aws:route53/"):
            assert r["provider"] == _route53(run), r["name"]


def test_clusters_encrypt_secrets_with_a_rotating_key_in_their_region(run: Run) -> None:
    for cluster in run.of_type(CLUSTER):
        enc = cluster["inputs"]["encryptionConfig"]
        assert enc["resources"] == ["secrets"]
        [key] = [
            k for k in run.of_type("aws:kms/key:Key") if enc["provider"]["keyArn"].endswith(k["id"])
        ]
        assert key["inputs"]["enableKeyRotation"] is True
        assert run.region_of(key) == run.region_of(cluster)


def test_clusters_keep_a_private_endpoint_and_log_the_control_plane(run: Run) -> None:
    for cluster in run.of_type(CLUSTER):
        assert cluster["inputs"]["vpcConfig"]["endpointPrivateAccess"] is True
        assert cluster["inputs"]["enabledClusterLogTypes"] == ["api", "audit", "authenticator"]
        [group] = [
            g
            for g in run.of_type("aws:cloudwatch/logGroup:LogGroup")
            if g["inputs"]["name"] == f"/aws/eks/{cluster['inputs']['name']}/cluster"
        ]
        assert group["name"] in cluster["options"]["depends_on"]


def test_every_cluster_enforces_network_policy_with_the_vpc_cni_addon(run: Run) -> None:
    """Without the agent the rendered NetworkPolicy is accepted but not enforced."""
    addons = {(run.region_of(a), a["inputs"]["addonName"]): a for a in run.of_type(ADDON)}
    for cluster in run.of_type(CLUSTER):
        addon = addons[(run.region_of(cluster), "vpc-cni")]
        assert addon["inputs"]["clusterName"] == cluster["inputs"]["name"]
        assert json.loads(addon["inputs"]["configurationValues"]) == {"enableNetworkPolicy": "true"}
        assert addon["inputs"]["resolveConflictsOnCreate"] == "OVERWRITE"
        assert addon["inputs"]["resolveConflictsOnUpdate"] == "OVERWRITE"
    assert sorted(name for _, name in addons) == sorted(
        ["vpc-cni", "eks-pod-identity-agent", "eks-node-monitoring-agent", "kube-proxy",
         "coredns"] * len(run.plan.regions)
    ), "one of each add-on per cluster: EKS answers a second CreateAddon with 409"
    for cluster in run.of_type(CLUSTER):
        cni = addons[(run.region_of(cluster), "vpc-cni")]
        [association] = cni["inputs"]["podIdentityAssociations"]
        assert association["serviceAccount"] == "aws-node"
        agent = addons[(run.region_of(cluster), "eks-pod-identity-agent")]
        assert agent["name"] in cni["options"]["depends_on"], "the agent before its users"


def test_everything_hangs_under_the_fleet(run: Run) -> None:
    [fleet] = [r for r in run.resources if r["parent"] is None]
    assert (fleet["type"], fleet["name"]) == ("llmfleet:index:Fleet", run.plan.name)
    assert all(r["name"].startswith(run.plan.name) for r in run.resources)


def test_every_input_is_a_real_sdk_argument(run: Run) -> None:
    """AWS resources, providers and Helm releases; the Kubernetes objects are the rendered
    documents, validated against the Kubernetes and CRD schemas (test_schemas.py)."""
    for r in run.resources:
        if r["id"] is not None and not _is_rendered_object(r["type"]):
            assert _unknown_wire_args(r["type"], r["inputs"]) == [], r["name"]


def _is_rendered_object(token: str) -> bool:
    return token.startswith("kubernetes:") and token not in (HELM_RELEASE, CONFIG_FILE)


def _args_class(token: str) -> type:
    package, module, name = token.split(":")
    if package == "pulumi":
        return {"aws": pulumi_aws.ProviderArgs, "kubernetes": pulumi_kubernetes.ProviderArgs}[name]
    if token == HELM_RELEASE:
        return pulumi_kubernetes.helm.v3.ReleaseArgs
    if token == CONFIG_FILE:
        return pulumi_kubernetes.yaml.v2.ConfigFileArgs
    # the resource's own module; where a nested input type has the name (s3's
    # BucketServerSideEncryptionConfigurationArgs is the Bucket's inline block) the
    # resource's arguments are <name>InitArgs
    resource = getattr(getattr(pulumi_aws, module.split("/")[0]), name)
    namespace = sys.modules[resource.__module__]
    return getattr(namespace, f"{name}InitArgs", None) or getattr(namespace, f"{name}Args")


def _unknown_wire_args(token: str, inputs: dict[str, Any]) -> list[str]:
    return _unknown(_args_class(token), inputs, token)


def _unknown(cls: type, values: dict[str, Any], path: str) -> list[str]:
    py_names = {wire: py for py, wire in pulumi._types.input_type_py_to_pulumi_names(cls).items()}
    params = inspect.signature(cls.__init__).parameters
    bad = []
    for key, value in values.items():
        if key not in py_names:
            bad.append(f"{path}.{key}")
            continue
        found = re.search(r"ForwardRef\('(\w+Args)'\)", str(params[py_names[key]].annotation))
        if found is None:
            continue
        nested = getattr(sys.modules[cls.__module__], found.group(1))
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict):
                bad += _unknown(nested, item, f"{path}.{key}")
    return bad


# --- outputs and determinism ----------------------------------------------------------------


def test_stack_outputs_agree_with_the_fleet_plan(run: Run) -> None:
    out = run.result.outputs
    assert out["monthly_cost_usd"] == pytest.approx(run.plan.monthly_cost_usd)
    for rp in run.plan.regions:
        assert out["regions"][rp.region] == {
            "instance_type": rp.instance_type,
            "nodes": rp.nodes.model_dump(),
            "replicas": rp.replicas.model_dump(),
        }
    names = {run.region_of(c): c["inputs"]["name"] for c in run.of_type(CLUSTER)}
    assert out["cluster_names"] == names


def test_kubeconfigs_are_secret_and_use_aws_eks_get_token(run: Run) -> None:
    assert "kubeconfigs" in run.result.secret_outputs
    for region, text in run.result.outputs["kubeconfigs"].items():
        user = json.loads(text)["users"][0]["user"]["exec"]
        assert user["args"][:6] == [
            "eks",
            "get-token",
            "--cluster-name",
            run.result.outputs["cluster_names"][region],
            "--region",
            region,
        ]
    for provider in run.of_type("pulumi:providers:kubernetes"):
        assert provider["inputs"]["kubeconfig"] == "[secret]"


def test_format_preview_summarises_each_region_and_shows_the_node_groups(run: Run) -> None:
    text = format_preview(run.resources, run.plan)
    for rp in run.plan.regions:
        assert f"{rp.region}: {rp.instance_type}" in text
        assert f"nodes {rp.nodes.min}/{rp.nodes.desired}/{rp.nodes.max}" in text
    assert text.count(f"{NODE_GROUP}  ") == 2 * len(run.plan.regions)
    for rp in run.plan.regions:
        assert f"GPU nodes in zone IDs {', '.join(rp.node_zone_ids)} of the cluster's" in text
    assert f"{len(run.resources)} resources" in text


def test_the_preview_keeps_the_fleet_plan_the_program_sized(run: Run) -> None:
    assert run.plan == build_fleet_plan(parse_plan(run.config["llmfleet:plan"]))


def test_the_cli_prints_the_summary_and_tree_of_the_program_it_ran(
    runs, capsys, preview_own_stacks
) -> None:
    assert main(["preview", "--stack", "one-region"]) == 0
    out = capsys.readouterr().out
    dev = _get(runs, "dev")
    assert out == format_preview(dev.resources, dev.plan)
    assert out.startswith(f"fleet {dev.plan.name}: {dev.plan.model.id}")


def test_the_cli_prints_the_resources_as_json(runs, capsys, preview_own_stacks) -> None:
    assert main(["preview", "--stack", "one-region", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == _get(runs, "dev").resources


def test_a_preview_is_deterministic() -> None:
    config = own_config(ONE_REGION)
    assert run_preview("one-region", config) == run_preview("one-region", config)


def test_a_bad_plan_fails_the_preview_with_the_plan_error() -> None:
    config = own_config(ONE_REGION)
    config["llmfleet:plan"]["regions"][0]["vpc_cidr"] = "10.40.0.0/24"
    with pytest.raises(StackError, match=r"plan\.regions\.0\.vpc_cidr = '10.40.0.0/24'"):
        run_preview("one-region", config)


def test_an_error_raised_while_the_program_settles_fails_the_preview(monkeypatch) -> None:
    """The zone lookup resolves after the program body returns: an account without the GPU's
    zone fails inside an output, and that error still reaches the caller."""
    from components.preview import mocks

    def without_zones(region: str) -> dict[str, Any]:
        return {"id": region, "names": [], "zoneIds": [], "groupNames": []}

    monkeypatch.setattr(mocks, "availability_zones", without_zones)
    with pytest.raises(ProgramError, match="not available to this account"):
        run_preview("one-region", own_config(ONE_REGION))


# --- Kubernetes: the rendered documents, the cluster add-ons ---------------------------------


def _rendered(env: str, rp: RegionPlan, account: str) -> list[dict[str, Any]]:
    """The region's rendered documents, with the deploying account where a plan without
    account_id renders its placeholder (the program puts it in: components.account)."""
    root = RENDERED_DIR / env / rp.region
    kinds = render.manifest_kinds(rp)
    return [
        yaml.safe_load((root / f"{kind}.yaml").read_text().replace(ACCOUNT_PLACEHOLDER, account))
        for kind in kinds
    ]


def _objects_of(run: Run, region: str) -> list[dict[str, Any]]:
    prefix = f"{run.plan.name}-{region}-vllm"
    return [r for r in run.resources if r["parent"] == prefix and r["id"] is not None]


def _k8s_region(run: Run, r: dict[str, Any]) -> str:
    [provider] = [p for p in run.of_type(K8S_PROVIDER) if p["name"] == r["provider"]]
    return str(provider["name"]).removeprefix(f"{run.plan.name}-").removesuffix("-k8s")


@pytest.mark.parametrize("env", list_stacks())
def test_the_program_deploys_exactly_the_documents_rendered_holds(env: str) -> None:
    """Every stack in stacks/: what its program deploys is what rendered/<env>/ holds."""
    run = _run(env, read_stack_config(env))
    for rp in run.plan.regions:
        deployed = sorted(
            (r["inputs"] for r in _objects_of(run, rp.region)), key=lambda d: d["kind"]
        )
        account = run.plan.account_id or MOCK_ACCOUNT
        assert deployed == sorted(_rendered(env, rp, account), key=lambda d: d["kind"])


def test_the_rendered_objects_are_typed_resources_on_the_regions_cluster(run: Run) -> None:
    for rp in run.plan.regions:
        objects = _objects_of(run, rp.region)
        assert sorted(r["type"] for r in objects) == sorted(
            [
                "kubernetes:core/v1:Namespace",
                "kubernetes:core/v1:ServiceAccount",
                "kubernetes:core/v1:ConfigMap",
                "kubernetes:core/v1:ConfigMap",  # the Grafana dashboard
                "kubernetes:core/v1:Service",
                "kubernetes:apps/v1:Deployment",
                "kubernetes:policy/v1:PodDisruptionBudget",
                "kubernetes:networking.k8s.io/v1:NetworkPolicy",
                "kubernetes:keda.sh/v1alpha1:ScaledObject",
                "kubernetes:monitoring.coreos.com/v1:ServiceMonitor",
                "kubernetes:monitoring.coreos.com/v1:PrometheusRule",
                # the weight-staging Job with its ConfigMap, ServiceAccount and NetworkPolicy
                "kubernetes:batch/v1:Job",
                "kubernetes:core/v1:ConfigMap",
                "kubernetes:core/v1:ServiceAccount",
                "kubernetes:networking.k8s.io/v1:NetworkPolicy",
                *(["kubernetes:networking.k8s.io/v1:Ingress"] if rp.entry_point else []),
                *(
                    ["kubernetes:networking.k8s.io/v1:Ingress"]  # the unauthenticated /health
                    if rp.entry_point and rp.entry_point.health_paths
                    else []
                ),
            ]
        )
        for r in objects:
            assert _k8s_region(run, r) == rp.region, r["name"]
            if r["type"] != "kubernetes:core/v1:Namespace":
                assert f"{run.plan.name}-{rp.region}-vllm-namespace" in r["options"]["depends_on"]


STAGING_OBJECTS = (
    "namespace", "job", "configmap-weights", "serviceaccount-stager", "networkpolicy-stager",
)
"""The Namespace and the staging Job with what it runs with: on the system nodes, staging the
weights while the GPU nodes launch, not after them."""


def test_the_service_waits_for_the_gpu_nodes_and_the_addons_crds(run: Run) -> None:
    for rp in run.plan.regions:
        base = f"{run.plan.name}-{rp.region}"
        for r in _objects_of(run, rp.region):
            if r["name"].removeprefix(f"{base}-vllm-") in STAGING_OBJECTS:
                continue
            assert {
                f"{base}-gpu",
                f"{base}-addons-keda",
                f"{base}-addons-kube-prometheus-stack",
                f"{base}-addons-nvidia-device-plugin",
            } <= set(r["options"]["depends_on"]), r["name"]


def test_pods_select_the_labels_the_node_group_sets(run: Run) -> None:
    groups = {run.region_of(ng): ng["inputs"]["labels"] for ng in run.node_groups("gpu")}
    for rp in run.plan.regions:
        [deployment] = [
            r for r in _objects_of(run, rp.region) if r["type"] == "kubernetes:apps/v1:Deployment"
        ]
        selector = deployment["inputs"]["spec"]["template"]["spec"]["nodeSelector"]
        assert selector.items() <= groups[rp.region].items()


def test_every_cluster_gets_pinned_helm_releases_for_gpus_scaling_and_metrics(run: Run) -> None:
    releases = run.of_type(HELM_RELEASE)
    entry = {"aws-load-balancer-controller"} if run.plan.dns else set()
    assert len(releases) == (6 + len(entry)) * len(run.plan.regions)
    by_region: dict[str, set[str]] = {}
    for r in releases:
        inputs = r["inputs"]
        assert re.fullmatch(r"\d+\.\d+\.\d+", inputs["version"]), (r["name"], inputs["version"])
        oci = inputs["chart"].startswith("oci://")
        assert oci or inputs["repositoryOpts"]["repo"].startswith("https://"), r["name"]
        by_region.setdefault(_k8s_region(run, r), set()).add(inputs["chart"])
    assert by_region == {
        rp.region: {
            "nvidia-device-plugin",
            "keda",
            "kube-prometheus-stack",
            "dcgm-exporter",
            "oci://public.ecr.aws/karpenter/karpenter",
            "oci://public.ecr.aws/karpenter/karpenter-crd",
        }
        | entry
        for rp in run.plan.regions
    }


def test_cluster_services_wait_for_the_system_pool_and_the_device_plugin_for_gpus(
    run: Run,
) -> None:
    """A release waits for its pods; they must have nodes to run on when it is installed."""
    pools = {
        (run.region_of(ng), ng["inputs"]["labels"][POOL_LABEL]): ng["name"]
        for ng in run.of_type(NODE_GROUP)
    }
    for r in run.of_type(HELM_RELEASE):
        region = _k8s_region(run, r)
        on_gpus = r["inputs"]["chart"] in ("nvidia-device-plugin", "dcgm-exporter")
        pool = "gpu" if on_gpus else "system"
        assert pools[(region, pool)] in r["options"]["depends_on"], r["name"]
        if pool == "system":
            assert pools[(region, "gpu")] not in r["options"]["depends_on"], r["name"]


def test_prometheus_is_where_the_scaled_objects_query_it(run: Run) -> None:
    for rp in run.plan.regions:
        [prom] = [
            r
            for r in run.of_type(HELM_RELEASE)
            if r["inputs"]["chart"] == "kube-prometheus-stack" and _k8s_region(run, r) == rp.region
        ]
        w = rp.workload
        name, namespace = prom["inputs"]["name"], prom["inputs"]["namespace"]
        assert prom["inputs"]["values"]["fullnameOverride"] == name
        assert w.prometheus_url.startswith(f"http://{name}-prometheus.{namespace}.svc")
        assert namespace == w.monitoring_namespace


def test_no_secret_value_reaches_a_resource_input(run: Run) -> None:
    text = json.dumps([r["inputs"] for r in run.resources])
    assert not re.search(r"\bhf_[A-Za-z0-9]{8,}", text)
    assert not [r for r in run.resources if r["type"] == "kubernetes:core/v1:Secret"]
    for r in run.of_type("kubernetes:apps/v1:Deployment"):
        for c in r["inputs"]["spec"]["template"]["spec"]["containers"]:
            assert all("value" not in e for e in c["env"] if e["name"] == "HF_TOKEN")
    for r in run.of_type(HELM_RELEASE):
        assert "password" not in json.dumps(r["inputs"].get("values", {})).lower(), r["name"]


# --- API endpoint -----------------------------------------------------------------------------


def test_the_plan_narrows_who_reaches_the_public_api_endpoint(existing: Run) -> None:
    clusters = existing.of_type(CLUSTER)
    assert clusters
    for c in clusters:
        assert c["inputs"]["vpcConfig"]["publicAccessCidrs"] == [OFFICE_CIDR]
        assert c["inputs"]["vpcConfig"]["endpointPrivateAccess"] is True


# --- Stage 4: a TLS entry point per region, health-checked routed records -------------------


def _one(run: Run, typ: str, name: str) -> dict[str, Any]:
    [hit] = [r for r in run.of_type(typ) if r["name"] == name]
    return hit


def test_every_region_has_a_cluster_nodes_serving_an_entry_point_and_a_routed_record(
    run: Run,
) -> None:
    dns = run.plan.dns
    assert dns is not None
    for rp in run.plan.regions:
        base, ep = f"{run.plan.name}-{rp.region}", rp.entry_point
        assert ep is not None
        _one(run, CLUSTER, base)
        assert {ng["name"] for ng in run.of_type(NODE_GROUP)} >= {f"{base}-gpu", f"{base}-system"}
        ingress = _one(run, "kubernetes:networking.k8s.io/v1:Ingress", f"{base}-vllm-ingress")
        cert = _one(run, "aws:acm/certificate:Certificate", f"{base}-cert")
        assert cert["inputs"]["domainName"] == dns.record_name
        assert cert["inputs"]["subjectAlternativeNames"] == [ep.regional_hostname]
        assert cert["inputs"]["validationMethod"] == "DNS"
        assert run.region_of(cert) == rp.region
        issued = f"{base}-cert-issued"
        assert issued in ingress["options"]["depends_on"]
        assert f"{base}-lbc" in ingress["options"]["depends_on"]
        check = _one(
            run, "aws:route53/healthCheck:HealthCheck", f"{run.plan.name}-dns-{rp.region}-health"
        )
        assert check["inputs"]["fqdn"] == ep.regional_hostname
        assert check["inputs"]["requestInterval"] == dns.health_check_interval_s
        assert check["inputs"]["failureThreshold"] == dns.failure_threshold
        capacity = _one(
            run, "aws:route53/healthCheck:HealthCheck", f"{run.plan.name}-dns-{rp.region}-capacity"
        )
        assert ep.capacity_check is not None
        assert capacity["inputs"]["type"] == "CLOUDWATCH_METRIC"
        assert capacity["inputs"]["cloudwatchAlarmRegion"] == rp.region
        alarm = _one(run, "aws:cloudwatch/metricAlarm:MetricAlarm", f"{base}-capacity")
        assert capacity["inputs"]["cloudwatchAlarmName"] == alarm["inputs"]["name"]
        assert alarm["inputs"]["threshold"] == ep.capacity_check.min_healthy_targets
        assert run.region_of(alarm) == rp.region
        serving = _one(
            run, "aws:route53/healthCheck:HealthCheck", f"{run.plan.name}-dns-{rp.region}-serving"
        )
        assert serving["inputs"]["type"] == "CALCULATED"
        assert serving["inputs"]["childHealthchecks"] == [check["id"], capacity["id"]]
        assert serving["inputs"]["childHealthThreshold"] == 2
        record = _one(run, "aws:route53/record:Record", f"{run.plan.name}-dns-{rp.region}")
        assert record["inputs"]["name"] == dns.record_name
        assert record["inputs"]["setIdentifier"] == rp.region
        assert record["inputs"]["healthCheckId"] == serving["id"]
        assert record["inputs"]["latencyRoutingPolicies"] == [{"region": rp.region}]
        [alias] = record["inputs"]["aliases"]
        assert alias["evaluateTargetHealth"] is True
        assert alias["name"].endswith(".mock.elb.amazonaws.com")


def test_the_load_balancer_controller_gets_its_official_policy_through_pod_identity(
    run: Run,
) -> None:
    from components.load_balancer_controller import COMPONENT, POLICY_PATH
    from llmfleet.catalog.kubernetes import chart

    official = json.loads(POLICY_PATH.read_text())
    for rp in run.plan.regions:
        base = f"{run.plan.name}-{rp.region}-lbc"
        policy = _one(run, "aws:iam/policy:Policy", f"{base}-policy")
        assert json.loads(policy["inputs"]["policy"]) == official
        role = _one(run, "aws:iam/role:Role", f"{base}-role")
        [statement] = json.loads(role["inputs"]["assumeRolePolicy"])["Statement"]
        assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
        association = _one(
            run, "aws:eks/podIdentityAssociation:PodIdentityAssociation", f"{base}-association"
        )
        assert (association["inputs"]["namespace"], association["inputs"]["serviceAccount"]) == (
            "kube-system",
            "aws-load-balancer-controller",
        )
        release = _one(run, HELM_RELEASE, base)
        assert release["inputs"]["version"] == chart(COMPONENT).version
        values = release["inputs"]["values"]
        assert values["serviceAccount"]["name"] == "aws-load-balancer-controller"
        assert values["enableServiceMutatorWebhook"] is False, "aws-load-balancer-controller#4140"
        assert release["inputs"]["skipCrds"] is True, "its CRDs come from crds.yaml at its tag"
        agent = f"{run.plan.name}-{rp.region}-pod-identity"
        assert agent in association["options"]["depends_on"], "the cluster's one agent add-on"


def test_the_stack_exports_the_global_name_and_each_regions_endpoint(run: Run) -> None:
    out = run.result.outputs
    assert run.plan.dns is not None
    assert out["hostname"] == run.plan.dns.record_name
    assert out["endpoints"] == {
        rp.region: f"{rp.region}.{run.plan.dns.record_name}" for rp in run.plan.regions
    }


def test_no_resource_type_the_program_registers_is_deprecated(run: Run) -> None:
    """pulumi-aws 7 keeps the V2 S3 resources (BucketVersioningV2, ...) and
    ec2.EncryptionControl as deprecated aliases; the program uses their replacements. (The
    SDK itself warns about them at import, whatever a program uses: those DeprecationWarnings
    come from pulumi_aws's own modules and are filtered in the tests.)"""
    deprecated = []
    for token in sorted({r["type"] for r in run.resources if r["type"].startswith("aws:")}):
        _, module, name = token.split(":")
        resource = getattr(getattr(pulumi_aws, module.split("/")[0]), name)
        if "has been deprecated" in inspect.getsource(sys.modules[resource.__module__]):
            deprecated.append(token)
    assert deprecated == []
