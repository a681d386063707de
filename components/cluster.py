"""InferenceCluster: one region's EKS control plane, its network, IAM and a Kubernetes provider.

Network: the RegionPlan's existing VPC (`vpc_id` + `private_subnet_ids`) when it names one,
else a new `Network` from `vpc_cidr` with one private subnet in each of
`RegionPlan.cluster_zone_ids` (zone IDs). The control plane's ENIs and every node live in the
private subnets only. `gpu_subnet_ids` are the private subnets of the GPU floor node group:
in a new VPC those in `RegionPlan.node_zone_ids` (the zones that offer the instance type);
in an existing VPC all the given subnets, because their zones are unknown without an AWS
call: give subnets only in zones that offer the instance (`llmfleet plan --json` lists
`node_zone_ids`). Karpenter's nodes need no such care: its NodePool requires the zone IDs.

Karpenter discovery: the private subnets (new, or the given ones through `aws.ec2.Tag`) and
the cluster security group EKS creates carry `karpenter.sh/discovery: <cluster name>`, which
the EC2NodeClass selects. The `eks-pod-identity-agent` add-on, created here once per cluster
(EKS answers 409 ResourceInUseException to a second CreateAddon of the same name), serves
every Pod Identity association: the VPC CNI's, Karpenter's, the load balancer controller's,
Alertmanager's and the vLLM and staging pods'. Everything that needs credentials through it
waits for `pod_identity_agent`.

VPC CNI: the managed `vpc-cni` add-on with its network-policy agent on
(`enableNetworkPolicy`), so the rendered NetworkPolicy is enforced rather than merely
accepted, and its IAM through its own Pod Identity association (`AmazonEKS_CNI_Policy` on a
role for kube-system/aws-node, not on the node role); node groups wait for it (`vpc_cni`),
so no node starts without the agent. The `eks-node-monitoring-agent` add-on reports GPU,
kernel, network and storage faults as node conditions that the node groups' auto repair acts
on (EKS user guide, node-health; it needs no IAM).

Add-on versions follow the cluster's version: every managed add-on (`vpc-cni`, the Pod
Identity agent, the node monitoring agent, and `kube-proxy` and `coredns`, which EKS installs
as self-managed bootstrap copies that a control-plane upgrade leaves behind, taken over here
with OVERWRITE by `core_addons` once the system nodes exist) pins `addon_version` to EKS's
default version for the cluster's Kubernetes version (`aws.eks.get_addon_version` on
`cluster.version`), so raising `kubernetes_version` upgrades the control plane, then the
add-ons, then the node groups (which follow `cluster.version`), in one `pulumi up`.

Access: `authentication_mode` API (EKS access entries only; the aws-auth ConfigMap is off,
and EKS allows no way back); whoever creates the cluster gets an admin access entry, and the
plan's `cluster.deploy_role_arn` (the other principal that runs `pulumi up`) and
`cluster.break_glass_role_arn` get one each with AmazonEKSClusterAdminPolicy (cluster scope).
Support: `upgrade_policy.support_type` is the plan's `kubernetes_support` (STANDARD: EKS
upgrades the control plane when standard support ends instead of billing extended support;
`catalog.kubernetes.support_notice` warns 90 days ahead, against today's date, at every
`llmfleet plan`, `llmfleet preview` and `pulumi up`).

Control plane: Kubernetes `FleetPlan.kubernetes_version`; private endpoint on; public
endpoint on by default, because `pulumi up` and kubectl usually run from outside the VPC
(a laptop, CI). Turn it off (`endpoint_public_access=False`) once they run inside the VPC
or over a VPN, or narrow it with `public_access_cidrs`. Secrets are envelope-encrypted
with a customer KMS key that rotates yearly; api, audit and authenticator logs go to a log
group created here so it has a retention (EKS would create one that never expires).

The Kubernetes provider authenticates with `aws eks get-token` at each use, so no token
lands in the state; the kubeconfig is still a secret output because it names the endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import iam
from components.vpc import Network, NetworkArgs, subnets_in_zones
from llmfleet.errors import PlanError, ProgramError
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.outputs.karpenter_manifests import DISCOVERY_TAG
from llmfleet.plan.cluster import ClusterAccess

LOG_TYPES = ("api", "audit", "authenticator")
VPC_CNI_ADDON = "vpc-cni"
VPC_CNI_SERVICE_ACCOUNT = "aws-node"
POD_IDENTITY_ADDON = "eks-pod-identity-agent"
NODE_MONITORING_ADDON = "eks-node-monitoring-agent"
KUBE_PROXY_ADDON = "kube-proxy"
COREDNS_ADDON = "coredns"
AUTHENTICATION_MODE = "API"
VPC_CNI_CONFIGURATION = {"enableNetworkPolicy": "true"}
"""The managed add-on's configuration key that starts the network-policy agent in aws-node
(EKS user guide, cni-network-policy-configure; the value is a string)."""
EXEC_API_VERSION = "client.authentication.k8s.io/v1beta1"


@dataclass(frozen=True)
class InferenceClusterArgs:
    """region_plan: the region's decisions (region, vpc_id/private_subnet_ids or vpc_cidr).
    kubernetes_version: FleetPlan.kubernetes_version, e.g. "1.33".
    aws_provider: the AWS provider for `region_plan.region`; every AWS child uses it.
    fleet_name: FleetPlan.name, for tags.
    access: FleetPlan.cluster: the public API endpoint and who may reach it (see the module
        docstring), and the NAT gateways of a new VPC (see NetworkArgs).
    log_retention_days: control-plane log retention (default 90).
    aws_profile: AWS CLI profile the kubeconfig's `aws eks get-token` uses (default: the
        environment's credentials).
    tags: extra AWS tags.
    """

    region_plan: RegionPlan
    kubernetes_version: str
    aws_provider: aws.Provider
    fleet_name: str
    access: ClusterAccess = field(default_factory=ClusterAccess)
    log_retention_days: int = 90
    aws_profile: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    kubernetes_support: str = "standard"
    """FleetPlan.kubernetes_support: the cluster's EKS upgrade policy."""
    account_id: str | None = None
    """FleetPlan.account_id: refuse credentials of another account (None: no check)."""
    logs_bucket_arn: pulumi.Input[str] | None = None
    """The region's log bucket (components.logs): a new VPC's flow logs go there."""
    logs_bucket_policy: pulumi.Resource | None = None
    """Its policy, which the flow log waits for (else CreateFlowLogs writes one of its own)."""


def cluster_args(
    name: str,
    *,
    kubernetes_version: str,
    role_arn: pulumi.Input[str],
    subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]],
    kms_key_arn: pulumi.Input[str],
    endpoint_public_access: bool,
    public_access_cidrs: Sequence[str],
    tags: Mapping[str, str],
    kubernetes_support: str = "standard",
) -> dict[str, Any]:
    """Keyword arguments of the region's `aws.eks.Cluster` (physical name = `name`)."""
    vpc_config: dict[str, Any] = {
        "subnet_ids": subnet_ids,
        "endpoint_private_access": True,
        "endpoint_public_access": endpoint_public_access,
    }
    if endpoint_public_access:
        vpc_config["public_access_cidrs"] = list(public_access_cidrs)
    return {
        "name": name,
        "version": kubernetes_version,
        "role_arn": role_arn,
        "vpc_config": vpc_config,
        "encryption_config": {"resources": ["secrets"], "provider": {"key_arn": kms_key_arn}},
        "enabled_cluster_log_types": list(LOG_TYPES),
        "access_config": {
            "authentication_mode": AUTHENTICATION_MODE,
            "bootstrap_cluster_creator_admin_permissions": True,
        },
        "upgrade_policy": {"support_type": kubernetes_support.upper()},
        "tags": dict(sorted(tags.items())),
    }


def vpc_cni_addon_args(
    cluster_name: pulumi.Input[str],
    role_arn: pulumi.Input[str] | None = None,
    addon_version: pulumi.Input[str] | None = None,
) -> dict[str, Any]:
    """Keyword arguments of the cluster's `aws.eks.Addon` for the VPC CNI.

    `addon_version`: EKS's default for the cluster's version (`addon_version`), so it moves
    with an upgrade. Network policies need VPC CNI 1.14 or later on Kubernetes 1.25 or later
    (EKS user guide); `aws eks describe-addon-versions --addon-name vpc-cni` shows the default.
    OVERWRITE on create and update: EKS installs a self-managed aws-node with every
    cluster, and the managed add-on takes it over (and reverts hand edits on update).
    `role_arn`: the CNI's own role, given to kube-system/aws-node through a Pod Identity
    association the add-on owns.
    """
    args: dict[str, Any] = {
        "cluster_name": cluster_name,
        "addon_name": VPC_CNI_ADDON,
        "configuration_values": json.dumps(VPC_CNI_CONFIGURATION, sort_keys=True),
        "resolve_conflicts_on_create": "OVERWRITE",
        "resolve_conflicts_on_update": "OVERWRITE",
    }
    if addon_version is not None:
        args["addon_version"] = addon_version
    if role_arn is not None:
        args["pod_identity_associations"] = [
            {"role_arn": role_arn, "service_account": VPC_CNI_SERVICE_ACCOUNT}
        ]
    return args


def addon_version(
    addon: str, kubernetes_version: pulumi.Input[str], provider: aws.Provider
) -> pulumi.Output[str]:
    """EKS's default version of `addon` for the cluster's Kubernetes version (EKS API
    DescribeAddonVersions, `defaultVersion`): an upgrade of the cluster moves it."""
    return aws.eks.get_addon_version_output(
        addon_name=addon,
        kubernetes_version=kubernetes_version,
        opts=pulumi.InvokeOutputOptions(provider=provider),
    ).version


ACCESS_POLICY = "AmazonEKSClusterAdminPolicy"


def access_policy_arn(region: str) -> str:
    return f"arn:{iam.partition(region)}:eks::aws:cluster-access-policy/{ACCESS_POLICY}"


def account_matches(account: str, expected: str | None) -> str:
    """The deploying credentials' account, when it is the plan's (ProgramError otherwise)."""
    if expected is not None and account != expected:
        raise ProgramError(
            f"the AWS credentials are for account {account}, the plan's account_id is "
            f"{expected}: switch credentials (AWS_PROFILE) or correct account_id"
        )
    return account


def kubeconfig_json(
    cluster_name: str, endpoint: str, ca_data: str, region: str, aws_profile: str | None = None
) -> str:
    """A kubeconfig for one EKS cluster that gets a token from `aws eks get-token`.

    Keys are sorted so the same cluster always gives the same string (no spurious diffs).
    """
    exec_cfg: dict[str, Any] = {
        "apiVersion": EXEC_API_VERSION,
        "command": "aws",
        "args": [
            "eks",
            "get-token",
            "--cluster-name",
            cluster_name,
            "--region",
            region,
            "--output",
            "json",
        ],
    }
    if aws_profile:
        exec_cfg["env"] = [{"name": "AWS_PROFILE", "value": aws_profile}]
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster_name,
                "cluster": {"server": endpoint, "certificate-authority-data": ca_data},
            }
        ],
        "contexts": [
            {"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}
        ],
        "current-context": cluster_name,
        "users": [{"name": cluster_name, "user": {"exec": exec_cfg}}],
    }
    return json.dumps(doc, sort_keys=True, indent=2)


def _cluster_security_group(vpc_config: aws.eks.outputs.ClusterVpcConfig) -> str:
    if vpc_config.cluster_security_group_id is None:
        raise ProgramError("EKS reported no cluster security group for the cluster")
    return vpc_config.cluster_security_group_id


class InferenceCluster(pulumi.ComponentResource):
    """A region's EKS cluster with its network, IAM roles, KMS key and Kubernetes provider.

    Attributes: `cluster`, `cluster_security_group_id` (the one EKS creates), `node_role`
    (for every node group; its policy attachments are `node_role_attachments`), `vpc_cni`
    (the add-on node groups wait for), `pod_identity_agent` (the one add-on every Pod
    Identity association needs), `node_monitoring`, `account_id` (the deploying account,
    checked against the plan's), `private_subnet_ids` (all: the control plane and the
    system nodes), `gpu_subnet_ids` (see the module docstring), `vpc_id`, `network` (None
    when the plan names an existing VPC), `kms_key`, `kubeconfig` (secret), `k8s_provider`.
    """

    cluster: aws.eks.Cluster
    node_role: aws.iam.Role
    node_role_attachments: list[aws.iam.RolePolicyAttachment]
    network: Network | None
    private_subnet_ids: pulumi.Output[list[str]]
    gpu_subnet_ids: pulumi.Output[list[str]]
    vpc_cni: aws.eks.Addon
    pod_identity_agent: aws.eks.Addon
    node_monitoring: aws.eks.Addon
    account_id: pulumi.Output[str]
    vpc_id: pulumi.Output[str]
    kms_key: aws.kms.Key
    cluster_security_group_id: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    k8s_provider: k8s.Provider
    access_entries: list[aws.eks.AccessPolicyAssociation]

    def __init__(
        self, name: str, args: InferenceClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:InferenceCluster", name, None, opts)
        plan = args.region_plan
        region = plan.region
        self.region = region
        tags = dict(
            sorted(
                {
                    **args.tags,
                    "llmfleet.io/fleet": args.fleet_name,
                    "llmfleet.io/region": region,
                }.items()
            )
        )

        def aws_opts(depends_on: Sequence[pulumi.Resource] = ()) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(
                parent=self, provider=args.aws_provider, depends_on=list(depends_on)
            )

        if (plan.vpc_id is None) != (not plan.private_subnet_ids):
            raise PlanError(
                f"regions[{region}].network",
                {"vpc_id": plan.vpc_id, "private_subnet_ids": plan.private_subnet_ids},
                "give both vpc_id and private_subnet_ids, or neither for a new VPC",
            )
        discovery = {DISCOVERY_TAG: name}
        if plan.vpc_id is not None and plan.private_subnet_ids:
            self.network = None
            self.vpc_id = pulumi.Output.from_input(plan.vpc_id)
            self.private_subnet_ids = pulumi.Output.from_input(list(plan.private_subnet_ids))
            self.gpu_subnet_ids = self.private_subnet_ids
            for subnet_id in plan.private_subnet_ids:
                aws.ec2.Tag(
                    f"{name}-{subnet_id}-discovery",
                    resource_id=subnet_id,
                    key=DISCOVERY_TAG,
                    value=name,
                    opts=aws_opts(),
                )
        else:
            self.network = Network(
                f"{name}-vpc",
                NetworkArgs(
                    vpc_cidr=plan.vpc_cidr,
                    region=region,
                    subnets=plan.subnets,
                    nat_gateways=args.access.nat_gateways,
                    discovery_tags=discovery,
                    tags=tags,
                ),
                opts=pulumi.ResourceOptions(parent=self, providers=[args.aws_provider]),
            )
            private = self.network.private_subnets
            self.vpc_id = self.network.vpc.id
            self.private_subnet_ids = pulumi.Output.all(*[s.id for s in private.values()])
            gpu_subnets = subnets_in_zones(
                private, plan.node_zone_ids, f"regions[{region}].node_zone_ids"
            )
            self.gpu_subnet_ids = pulumi.Output.all(*[s.id for s in gpu_subnets])

        cluster_role = aws.iam.Role(
            f"{name}-cluster-role",
            assume_role_policy=iam.assume_role_policy("eks", region),
            description=f"EKS control plane of {name}",
            tags=tags,
            opts=aws_opts(),
        )
        cluster_attachments = self._attach(
            f"{name}-cluster", cluster_role, iam.CLUSTER_POLICIES, region, aws_opts
        )
        self.node_role = aws.iam.Role(
            f"{name}-node-role",
            assume_role_policy=iam.assume_role_policy("ec2", region),
            description=f"Nodes of {name}",
            tags=tags,
            opts=aws_opts(),
        )
        self.node_role_attachments = self._attach(
            f"{name}-node", self.node_role, iam.NODE_POLICIES, region, aws_opts
        )

        self.kms_key = aws.kms.Key(
            f"{name}-secrets",
            description=f"EKS secrets envelope encryption for {name}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            tags=tags,
            opts=aws_opts(),
        )
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-control-plane",
            name=f"/aws/eks/{name}/cluster",
            retention_in_days=args.log_retention_days,
            tags=tags,
            opts=aws_opts(),
        )

        # The deploying account, checked against the plan's before the cluster is created.
        caller = aws.get_caller_identity_output(
            opts=pulumi.InvokeOutputOptions(provider=args.aws_provider)
        )
        self.account_id = caller.account_id.apply(
            lambda account: account_matches(account, args.account_id)
        )
        self.cluster = aws.eks.Cluster(
            name,
            **cluster_args(
                name,
                kubernetes_version=args.kubernetes_version,
                # waits for the account check: no cluster in the wrong account
                role_arn=pulumi.Output.all(cluster_role.arn, self.account_id).apply(
                    lambda a: str(a[0])
                ),
                subnet_ids=self.private_subnet_ids,
                kms_key_arn=self.kms_key.arn,
                endpoint_public_access=args.access.endpoint_public_access,
                public_access_cidrs=args.access.public_access_cidrs,
                tags=tags,
                kubernetes_support=args.kubernetes_support,
            ),
            opts=aws_opts(depends_on=[*cluster_attachments, log_group]),
        )
        if self.network is not None and args.logs_bucket_arn is not None:
            aws.ec2.FlowLog(
                f"{name}-flow-logs",
                vpc_id=self.vpc_id,
                traffic_type="ALL",
                log_destination_type="s3",
                log_destination=pulumi.Output.concat(args.logs_bucket_arn, "/vpc-flow-logs/"),
                max_aggregation_interval=600,
                tags=tags,
                opts=aws_opts(
                    depends_on=[args.logs_bucket_policy] if args.logs_bucket_policy else []
                ),
            )

        self.cluster_security_group_id = self.cluster.vpc_config.apply(_cluster_security_group)
        def version_of(addon: str) -> pulumi.Output[str]:
            return addon_version(addon, self.cluster.version, args.aws_provider)

        self.pod_identity_agent = aws.eks.Addon(
            f"{name}-pod-identity",
            cluster_name=self.cluster.name,
            addon_name=POD_IDENTITY_ADDON,
            addon_version=version_of(POD_IDENTITY_ADDON),
            opts=aws_opts(),
        )
        cni_role = aws.iam.Role(
            f"{name}-vpc-cni-role",
            assume_role_policy=iam.pod_identity_trust(),
            description=f"VPC CNI (kube-system/aws-node) of {name}",
            tags=tags,
            opts=aws_opts(),
        )
        cni_attachments = self._attach(
            f"{name}-vpc-cni", cni_role, iam.CNI_POLICIES, region, aws_opts
        )
        # aws-node crash-loops when its association exists before the agent
        # (amazon-vpc-cni-k8s#3840): the add-on waits for the agent and the role's policy.
        self.vpc_cni = aws.eks.Addon(
            f"{name}-vpc-cni",
            **vpc_cni_addon_args(self.cluster.name, cni_role.arn, version_of(VPC_CNI_ADDON)),
            opts=aws_opts(depends_on=[self.pod_identity_agent, *cni_attachments]),
        )
        self.node_monitoring = aws.eks.Addon(
            f"{name}-node-monitoring",
            cluster_name=self.cluster.name,
            addon_name=NODE_MONITORING_ADDON,
            addon_version=version_of(NODE_MONITORING_ADDON),
            opts=aws_opts(),
        )
        self.access_entries = [
            self._admin_entry(name, key, arn, aws_opts)
            for key, arn in (
                ("deploy", args.access.deploy_role_arn),
                ("break-glass", args.access.break_glass_role_arn),
            )
            if arn is not None
        ]
        aws.ec2.Tag(
            f"{name}-cluster-sg-discovery",
            resource_id=self.cluster_security_group_id,
            key=DISCOVERY_TAG,
            value=name,
            opts=aws_opts(),
        )

        profile = args.aws_profile
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(
                self.cluster.name,
                self.cluster.endpoint,
                self.cluster.certificate_authority.apply(lambda ca: ca.data),
            ).apply(lambda a: kubeconfig_json(a[0], a[1], a[2], region, profile))
        )
        self.k8s_provider = k8s.Provider(
            f"{name}-k8s", kubeconfig=self.kubeconfig, opts=pulumi.ResourceOptions(parent=self)
        )

        self.register_outputs(
            {
                "cluster_name": self.cluster.name,
                "endpoint": self.cluster.endpoint,
                "vpc_id": self.vpc_id,
                "private_subnet_ids": self.private_subnet_ids,
                "gpu_subnet_ids": self.gpu_subnet_ids,
                "node_role_arn": self.node_role.arn,
                "kubeconfig": self.kubeconfig,
            }
        )

    def _admin_entry(
        self,
        name: str,
        key: str,
        principal_arn: str,
        aws_opts: Callable[[], pulumi.ResourceOptions],
    ) -> aws.eks.AccessPolicyAssociation:
        """An access entry for `principal_arn` with cluster admin (EKS access policies)."""
        entry = aws.eks.AccessEntry(
            f"{name}-{key}",
            cluster_name=self.cluster.name,
            principal_arn=principal_arn,
            type="STANDARD",
            opts=aws_opts(),
        )
        return aws.eks.AccessPolicyAssociation(
            f"{name}-{key}",
            cluster_name=self.cluster.name,
            principal_arn=entry.principal_arn,
            policy_arn=access_policy_arn(self.region),
            access_scope={"type": "cluster"},
            opts=aws_opts(),
        )

    def _attach(
        self,
        prefix: str,
        role: aws.iam.Role,
        policies: Sequence[str],
        region: str,
        aws_opts: Callable[[], pulumi.ResourceOptions],
    ) -> list[aws.iam.RolePolicyAttachment]:
        return [
            aws.iam.RolePolicyAttachment(
                f"{prefix}-{policy}",
                role=role.name,
                policy_arn=iam.managed_policy_arn(policy, region),
                opts=aws_opts(),
            )
            for policy in policies
        ]


def core_addons(
    name: str,
    cluster: InferenceCluster,
    aws_provider: aws.Provider,
    system_nodes: Sequence[pulumi.Resource],
) -> list[aws.eks.Addon]:
    """`kube-proxy` and `coredns` as managed add-ons at the cluster's version: EKS creates
    them self-managed with the cluster and never upgrades them; OVERWRITE takes them over.
    They wait for the system nodes (CoreDNS turns ACTIVE only once its pods run)."""
    return [
        aws.eks.Addon(
            f"{name}-{addon}",
            cluster_name=cluster.cluster.name,
            addon_name=addon,
            addon_version=addon_version(addon, cluster.cluster.version, aws_provider),
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            opts=pulumi.ResourceOptions(
                parent=cluster, provider=aws_provider, depends_on=list(system_nodes)
            ),
        )
        for addon in (KUBE_PROXY_ADDON, COREDNS_ADDON)
    ]
