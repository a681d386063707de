"""Fleet: a FleetPlan as resources: per region an AWS provider, a cluster, system nodes, the
always-on GPU floor and Karpenter above it, the weight bucket (and the image cache), the
cluster add-ons (device plugin, KEDA, Prometheus), the vLLM service and its entry point; and
once, what spans regions (the global name's certificate validation, Route53 health checks
and routed records).

One program builds what its stack holds (`FleetArgs.regions`, `FleetArgs.global_entries`):
the whole environment (one stack; a single-region environment deploys so, and
`llmfleet preview --stack ENV` shows a multi-region one so), one region (`ENV.REGION`), or
the global part (`ENV.global`, reading each region's entry point from its stack). Every
resource keeps the name and parent it has in the whole environment, so a resource's URN
differs between the two layouts only in the stack's name: `pulumi state move` carries an
existing single stack into region stacks without recreating anything.

It translates and never computes: every number (instance type, node counts, volume size,
Kubernetes version, CIDR) is read from the FleetPlan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import pulumi
import pulumi_aws as aws

from components.alarms import AlertTopic, AlertTopicArgs, LoadBalancerAlarms
from components.capacity_alarm import CapacityAlarm, CapacityAlarmArgs
from components.cluster import InferenceCluster, InferenceClusterArgs, core_addons
from components.cluster_addons import (
    KUBE_PROMETHEUS_STACK,
    ClusterAddons,
    ClusterAddonsArgs,
    prometheus_values,
)
from components.edge import EdgeGuard
from components.global_endpoint import (
    GlobalEndpoint,
    GlobalEndpointArgs,
    GlobalValidation,
    GlobalValidationArgs,
    RegionCertificate,
    RegionCertificateArgs,
    RegionEntry,
    lb_hostname,
    zone_id,
)
from components.karpenter import Karpenter, KarpenterArgs
from components.load_balancer_controller import LoadBalancerController, LoadBalancerControllerArgs
from components.logs import LogBucket, LogBucketArgs
from components.multi_node import MultiNodeArgs, MultiNodeSupport
from components.node_pool import NodePool, NodePoolArgs, PoolSpec, gpu_pool, system_pool
from components.vllm_service import VllmService, VllmServiceArgs
from components.weights import ModelStore, ModelStoreArgs
from llmfleet.fleetplan.fleet import FleetPlan


@dataclass(frozen=True)
class FleetArgs:
    """fleet_plan: the sized plan (llmfleet.fleetplan.fleet.build_fleet_plan); its `cluster`
        (API access, NAT gateways) reaches every region's InferenceCluster.
    aws_profile: AWS CLI profile the kubeconfigs use; see InferenceClusterArgs.
    tags: extra AWS tags on everything (the provider's default tags).
    """

    fleet_plan: FleetPlan
    aws_profile: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    regions: Sequence[str] | None = None
    """The regions this stack builds (None: every region of the plan)."""
    global_entries: Mapping[str, RegionEntry] | None = None
    """With `regions=[]`, the global part only: the entry point of every region, read from
    the region stacks. None: the global part (with `plan.dns`) only when every region is
    built here, from their own resources."""
    hf_token: pulumi.Input[str] | None = None
    """The stack's secret config llmfleet:hfToken (gated checkpoints): the staging Job's."""


@dataclass(frozen=True)
class RegionResources:
    provider: aws.Provider
    cluster: InferenceCluster
    system_pool: NodePool
    gpu_pool: NodePool | None
    karpenter: Karpenter
    model_store: ModelStore
    addons: ClusterAddons
    service: VllmService
    load_balancer_controller: LoadBalancerController | None = None
    certificate: RegionCertificate | None = None
    capacity_alarm: CapacityAlarm | None = None
    alert_topic: AlertTopic | None = None
    edge: EdgeGuard | None = None
    logs: LogBucket | None = None
    multi_node: MultiNodeSupport | None = None

    def entry(self) -> RegionEntry | None:
        """What the global name needs of this region (None without an entry point)."""
        if self.capacity_alarm is None:
            return None
        return RegionEntry(
            lb_hostname(self.service.resources["Ingress"]), self.capacity_alarm.alarm_name
        )


ENVIRONMENT_TAG = "llmfleet.io/environment"
"""Tag on every region's resources that InferenceCluster tags: development or production."""


def default_tags(fleet_name: str, extra: Mapping[str, str]) -> dict[str, str]:
    """Tags the region's AWS provider puts on every taggable resource."""
    return dict(sorted({**extra, "llmfleet.io/fleet": fleet_name, "managed-by": "pulumi"}.items()))


def node_pool_args(
    pool: PoolSpec,
    cluster: InferenceCluster,
    subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]],
    fleet_name: str,
) -> NodePoolArgs:
    """A pool on `cluster`: its node role, security group and fleet name; it waits for the
    role's policies and the VPC CNI add-on."""
    return NodePoolArgs(
        pool=pool,
        cluster_name=cluster.cluster.name,
        cluster_security_group_id=cluster.cluster_security_group_id,
        node_role_arn=cluster.node_role.arn,
        subnet_ids=subnet_ids,
        fleet_name=fleet_name,
        depends_on=[*cluster.node_role_attachments, cluster.vpc_cni],
        kubernetes_version=cluster.cluster.version,
    )


class Fleet(pulumi.ComponentResource):
    """Children per region r: `{name}-{r}-aws` (provider), `{name}-{r}` (InferenceCluster),
    `{name}-{r}-system` and `{name}-{r}-gpu` (NodePools; no GPU floor group when a
    reservation holds the floor), `{name}-{r}-karpenter` (Karpenter: the GPU NodePool up to
    the ceiling), `{name}-{r}-model` (ModelStore: weights bucket, Pod Identity, image
    cache), `{name}-{r}-logs` (LogBucket, with an account id), `{name}-{r}-alerts`
    (AlertTopic), `{name}-{r}-addons` (ClusterAddons), `{name}-{r}-vllm` (VllmService: the
    rendered manifests) and with `plan.dns` `{name}-{r}-lbc`, `{name}-{r}-waf` (EdgeGuard,
    with a rate limit), `{name}-{r}-cert`, `{name}-{r}-capacity` (CapacityAlarm) and
    `{name}-{r}-alb-alarms` (LoadBalancerAlarms). `regions` maps region name to those. With
    `plan.dns`: `{name}-route53-aws` (us-east-1) and, in the global part,
    `{name}-global-cert` (GlobalValidation) and `{name}-dns` (GlobalEndpoint).

    The system pool runs in all of the cluster's private subnets, the GPU floor only in the
    zones that offer its instance type (InferenceCluster.gpu_subnet_ids). Both wait for the
    node role's policies and the VPC CNI add-on.
    """

    regions: dict[str, RegionResources]
    global_validation: GlobalValidation | None
    global_endpoint: GlobalEndpoint | None

    def __init__(
        self, name: str, args: FleetArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:Fleet", name, None, opts)
        plan = args.fleet_plan
        built = [rp.region for rp in plan.regions] if args.regions is None else list(args.regions)
        global_part = args.global_entries is not None or len(built) == len(plan.regions)
        self.regions = {}
        self.global_validation = self.global_endpoint = None
        # Stage 4 (plan.dns): Route53 is global, so its records and checks use us-east-1.
        route53 = zone = None
        if plan.dns is not None:
            route53 = aws.Provider(
                f"{name}-route53-aws",
                region="us-east-1",
                default_tags={"tags": default_tags(plan.name, args.tags)},
                opts=pulumi.ResourceOptions(parent=self),
            )
            zone = zone_id(plan.dns, route53)
            if global_part:
                self.global_validation = GlobalValidation(
                    f"{name}-global-cert",
                    GlobalValidationArgs(plan, zone, route53),
                    opts=pulumi.ResourceOptions(parent=self),
                )
        for rp in plan.regions:
            if rp.region not in built:
                continue  # another stack's region
            base = f"{name}-{rp.region}"
            provider = aws.Provider(
                f"{base}-aws",
                region=rp.region,
                default_tags={"tags": default_tags(plan.name, args.tags)},
                opts=pulumi.ResourceOptions(parent=self),
            )
            # The deploying account: a plan without account_id names its buckets with a
            # placeholder the program replaces (components.account).
            account = plan.account_id or aws.get_caller_identity_output(
                opts=pulumi.InvokeOutputOptions(provider=provider)
            ).account_id
            logs = None
            if rp.logs_bucket is not None:
                logs = LogBucket(
                    f"{base}-logs",
                    LogBucketArgs(rp.logs_bucket, rp.region, account, provider,
                                  retiring=rp.retiring),
                    opts=pulumi.ResourceOptions(parent=self),
                )
            cluster = InferenceCluster(
                base,
                InferenceClusterArgs(
                    region_plan=rp,
                    kubernetes_version=plan.kubernetes_version,
                    aws_provider=provider,
                    kubernetes_support=plan.kubernetes_support,
                    account_id=plan.account_id,
                    logs_bucket_arn=logs.bucket.arn if logs else None,
                    logs_bucket_policy=logs.policy if logs else None,
                    fleet_name=plan.name,
                    access=plan.cluster,
                    aws_profile=args.aws_profile,
                    # what the policy pack reads to apply production-only rules
                    tags={ENVIRONMENT_TAG: plan.environment},
                ),
                opts=pulumi.ResourceOptions(parent=self, providers=[provider]),
            )
            pool_opts = pulumi.ResourceOptions(parent=self, providers=[provider])
            system = NodePool(
                f"{base}-system",
                node_pool_args(
                    system_pool(rp, plan.name), cluster, cluster.private_subnet_ids, plan.name
                ),
                opts=pool_opts,
            )
            core_addons(base, cluster, provider, [system.node_group])
            # Traffic between GPU nodes: placement group, EFA device plugin, LWS controller.
            multi = None
            fabric = rp.fabric
            if fabric is not None and (rp.multi_node is not None or fabric.transport == "efa"):
                multi = MultiNodeSupport(
                    f"{base}-multi-node",
                    MultiNodeArgs(rp, cluster.k8s_provider, [system.node_group]),
                    opts=pool_opts,
                )
            gpu: NodePool | None = None
            if rp.capacity.floor_nodes > 0:
                floor_args = node_pool_args(
                    gpu_pool(rp), cluster, cluster.gpu_subnet_ids, plan.name
                )
                if multi is not None:
                    group: pulumi.Input[str] | None = (
                        multi.placement_group.name if multi.placement_group is not None
                        else rp.multi_node.placement_group if rp.multi_node is not None
                        else None)
                    floor_args = replace(floor_args, fabric=rp.fabric, placement_group=group)
                gpu = NodePool(f"{base}-gpu", floor_args, opts=pool_opts)
            karpenter = Karpenter(
                f"{base}-karpenter",
                KarpenterArgs(
                    fleet_plan=plan,
                    region_plan=rp,
                    cluster=cluster.cluster,
                    k8s_provider=cluster.k8s_provider,
                    depends_on=[system.node_group, cluster.pod_identity_agent, cluster.vpc_cni],
                ),
                opts=pulumi.ResourceOptions(parent=self, providers=[provider]),
            )
            store = ModelStore(
                f"{base}-model",
                ModelStoreArgs(
                    fleet_plan=plan,
                    region_plan=rp,
                    cluster_name=cluster.cluster.name,
                    node_roles=[cluster.node_role, karpenter.node_role],
                    depends_on=[cluster.pod_identity_agent],
                    account=account,
                ),
                opts=pulumi.ResourceOptions(parent=self, providers=[provider]),
            )
            floor_group: list[pulumi.Resource] = [gpu.node_group] if gpu else []
            # The device plugin runs on GPU nodes: the floor's, or Karpenter's first one.
            gpu_nodes = floor_group or [karpenter.node_pool]
            topic = AlertTopic(
                f"{base}-alerts",
                AlertTopicArgs(
                    fleet_plan=plan,
                    region_plan=rp,
                    cluster_name=cluster.cluster.name,
                    aws_provider=provider,
                    account=account,
                    depends_on=[cluster.pod_identity_agent],
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            addons = ClusterAddons(
                f"{base}-addons",
                ClusterAddonsArgs(
                    k8s_provider=cluster.k8s_provider,
                    pool_nodes={"system": [system.node_group], "gpu": gpu_nodes},
                    values={
                        KUBE_PROMETHEUS_STACK.release: topic.topic.arn.apply(
                            partial(prometheus_values, plan.alerting, rp.region)
                        )
                    },
                    # Alertmanager's pods get their credentials only if its association
                    # exists when they are created.
                    release_after={
                        KUBE_PROMETHEUS_STACK.release: [topic.alertmanager_association]
                    },
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            # Stage 4: the regional entry point (controller + certificate) before the Ingress.
            lbc = cert = edge = None
            ingress_after: list[pulumi.Resource] = []
            if rp.entry_point is not None and route53 is not None and zone is not None:
                lbc = LoadBalancerController(
                    f"{base}-lbc",
                    LoadBalancerControllerArgs(
                        cluster_name=cluster.cluster.name,
                        vpc_id=cluster.vpc_id,
                        region=rp.region,
                        aws_provider=provider,
                        k8s_provider=cluster.k8s_provider,
                        pod_identity_agent=cluster.pod_identity_agent,
                        depends_on=[system.node_group],
                    ),
                    opts=pulumi.ResourceOptions(parent=self),
                )
                if rp.entry_point.rate_rule is not None:
                    edge = EdgeGuard(
                        f"{base}-waf",
                        rp.entry_point.rate_rule,
                        provider,
                        opts=pulumi.ResourceOptions(parent=self),
                    )
                    ingress_after.append(edge.web_acl)
                if logs is not None:  # the ALB's access logs need the bucket's policy
                    ingress_after.append(logs.policy)
                shared = self.global_validation.fqdn if self.global_validation else None
                cert = RegionCertificate(
                    f"{base}-cert",
                    RegionCertificateArgs(rp.entry_point, zone, provider, route53, shared),
                    opts=pulumi.ResourceOptions(parent=self),
                )
            service = VllmService(
                f"{base}-vllm",
                VllmServiceArgs(
                    fleet_plan=plan,
                    region_plan=rp,
                    k8s_provider=cluster.k8s_provider,
                    depends_on=[*floor_group, karpenter.node_pool, store]
                    + list(addons.releases.values())
                    + (list(multi.releases.values()) if multi else []),
                    ingress_depends_on=[lbc.release, cert.issued, *ingress_after]
                    if lbc and cert
                    else (),
                    staging_depends_on=[
                        system.node_group, store.stager_association, store.bucket
                    ],
                    hf_token=args.hf_token,
                    account=account,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            alarm = None
            if lbc is not None:
                alarm = CapacityAlarm(
                    f"{base}-capacity",
                    CapacityAlarmArgs(
                        fleet_name=plan.name,
                        region_plan=rp,
                        cluster_name=cluster.cluster.name,
                        ingress=service.resources["Ingress"],
                        aws_provider=provider,
                    ),
                    opts=pulumi.ResourceOptions(parent=self),
                )
                LoadBalancerAlarms(
                    f"{base}-alb-alarms",
                    rp,
                    topic.topic.arn if topic.reaches_someone else None,
                    lb_hostname(service.resources["Ingress"]),
                    provider,
                    opts=pulumi.ResourceOptions(parent=self),
                )
            self.regions[rp.region] = RegionResources(
                provider, cluster, system, gpu, karpenter, store, addons, service, lbc, cert, alarm,
                topic, edge, logs, multi,
            )

        entries = args.global_entries
        if entries is None:
            entries = {r: e for r, res in self.regions.items() if (e := res.entry())}
        # A retiring region leaves the global name first (docs/day2.md).
        retiring = {rp.region for rp in plan.regions if rp.retiring}
        entries = {r: e for r, e in entries.items() if r not in retiring}
        # No entry at all: a global stack before any region (certificate validation only).
        if route53 is not None and zone is not None and global_part and entries:
            self.global_endpoint = GlobalEndpoint(
                f"{name}-dns",
                GlobalEndpointArgs(
                    fleet_plan=plan, zone_id=zone, entries=entries, route53_provider=route53
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )

        self.register_outputs(
            {
                "cluster_names": {r: res.cluster.cluster.name for r, res in self.regions.items()},
                "node_groups": {
                    r: {
                        "system": res.system_pool.node_group.node_group_name,
                        **(
                            {"gpu": res.gpu_pool.node_group.node_group_name}
                            if res.gpu_pool
                            else {}
                        ),
                    }
                    for r, res in self.regions.items()
                },
            }
        )
