"""FleetRegion: one region of a Fleet as resources, built by keyword from the FleetPlan: its
AWS provider, the cluster, system nodes, the always-on GPU floor and Karpenter above it, the
weight bucket, the alert topic, the cluster add-ons, the vLLM service and, with `plan.dns`,
its entry point (load balancer controller, WAF, certificate, alarms).

Its resources are the Fleet's own children, named `{fleet}-{region}-...`, as they were when
the Fleet built them inline: a ComponentResource per region would put its type into the URN
of everything below it, and `pulumi up` would replace the whole region
(tests/components/test_urns.py pins the URNs). It translates and never computes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
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
    RegionCertificate,
    RegionCertificateArgs,
    RegionEntry,
    lb_hostname,
)
from components.karpenter import Karpenter, KarpenterArgs
from components.load_balancer_controller import LoadBalancerController, LoadBalancerControllerArgs
from components.logs import LogBucket, LogBucketArgs
from components.multi_node import MultiNodeArgs, MultiNodeSupport
from components.node_pool import NodePool, NodePoolArgs, PoolSpec, gpu_pool, system_pool
from components.vllm_service import VllmService, VllmServiceArgs
from components.weights import ModelStore, ModelStoreArgs
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan

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


@dataclass(frozen=True)
class HostedZone:
    """The global name's Route53 zone, as a region's certificate validates in it.
    provider: us-east-1's (Route53 is global). validation_fqdn: the global name's validation
    record when this program creates it (`GlobalValidation.fqdn`), else None."""

    zone_id: pulumi.Output[str]
    provider: aws.Provider
    validation_fqdn: pulumi.Output[str] | None = None


class FleetRegion:
    """Resources of region r, named from `name` (`{fleet}-{r}`): `{name}-aws` (provider),
    `{name}` (InferenceCluster), `{name}-system` and `{name}-gpu` (NodePools; no GPU floor
    group when a reservation holds the floor), `{name}-multi-node` (where traffic crosses GPU
    nodes), `{name}-karpenter` (the GPU NodePool up to the ceiling), `{name}-model`
    (ModelStore: weights bucket, Pod Identity, image cache), `{name}-logs` (LogBucket),
    `{name}-alerts` (AlertTopic), `{name}-addons` (ClusterAddons), `{name}-vllm` (VllmService:
    the rendered manifests) and, with a hosted zone and the region's entry point,
    `{name}-lbc`, `{name}-waf` (EdgeGuard, with a rate limit), `{name}-cert`,
    `{name}-capacity` (CapacityAlarm) and `{name}-alb-alarms` (LoadBalancerAlarms).

    The system pool runs in all of the cluster's private subnets, the GPU floor only in the
    zones that offer its instance type (InferenceCluster.gpu_subnet_ids). Both wait for the
    node role's policies and the VPC CNI add-on.
    """

    provider: aws.Provider
    cluster: InferenceCluster
    system_pool: NodePool
    gpu_pool: NodePool | None
    karpenter: Karpenter
    model_store: ModelStore
    addons: ClusterAddons
    service: VllmService
    load_balancer_controller: LoadBalancerController | None
    certificate: RegionCertificate | None
    capacity_alarm: CapacityAlarm | None
    alert_topic: AlertTopic
    edge: EdgeGuard | None
    logs: LogBucket | None
    multi_node: MultiNodeSupport | None

    def __init__(
        self,
        *,
        name: str,
        parent: pulumi.Resource,
        fleet_plan: FleetPlan,
        region_plan: RegionPlan,
        tags: Mapping[str, str],
        aws_profile: str | None = None,
        hosted_zone: HostedZone | None = None,
        hf_token: pulumi.Input[str] | None = None,
    ) -> None:
        """parent: the Fleet. tags: extra tags on the region's AWS resources (the provider's
        default tags). aws_profile: the kubeconfig's (InferenceClusterArgs). hf_token: the
        staging Job's, for a gated checkpoint."""
        self._name, self._plan, self._rp = name, fleet_plan, region_plan
        self._opts = pulumi.ResourceOptions(parent=parent)
        self.provider = aws.Provider(
            f"{name}-aws",
            region=region_plan.region,
            default_tags={"tags": default_tags(fleet_plan.name, tags)},
            opts=self._opts,
        )
        # With the provider: what the region's own resources use unless told otherwise.
        self._in_region = pulumi.ResourceOptions(parent=parent, providers=[self.provider])
        # The deploying account: a plan without account_id names its buckets with a
        # placeholder the program replaces (components.account).
        self._account = fleet_plan.account_id or aws.get_caller_identity_output(
            opts=pulumi.InvokeOutputOptions(provider=self.provider)
        ).account_id
        self.logs = self._log_bucket()
        self.cluster = self._cluster(aws_profile)
        self.system_pool = NodePool(
            f"{name}-system",
            node_pool_args(system_pool(region_plan, fleet_plan.name), self.cluster,
                           self.cluster.private_subnet_ids, fleet_plan.name),
            opts=self._in_region,
        )
        core_addons(name, self.cluster, self.provider, [self.system_pool.node_group])
        self.multi_node = self._multi_node_support()
        self.gpu_pool = self._gpu_floor()
        self.karpenter = Karpenter(
            f"{name}-karpenter",
            KarpenterArgs(
                fleet_plan=fleet_plan,
                region_plan=region_plan,
                cluster=self.cluster.cluster,
                k8s_provider=self.cluster.k8s_provider,
                depends_on=[self.system_pool.node_group, self.cluster.pod_identity_agent,
                            self.cluster.vpc_cni],
            ),
            opts=self._in_region,
        )
        self.model_store = ModelStore(
            f"{name}-model",
            ModelStoreArgs(
                fleet_plan=fleet_plan,
                region_plan=region_plan,
                cluster_name=self.cluster.cluster.name,
                node_roles=[self.cluster.node_role, self.karpenter.node_role],
                depends_on=[self.cluster.pod_identity_agent],
                account=self._account,
            ),
            opts=self._in_region,
        )
        self.alert_topic = AlertTopic(
            f"{name}-alerts",
            AlertTopicArgs(
                fleet_plan=fleet_plan,
                region_plan=region_plan,
                cluster_name=self.cluster.cluster.name,
                aws_provider=self.provider,
                account=self._account,
                depends_on=[self.cluster.pod_identity_agent],
            ),
            opts=self._opts,
        )
        self.addons = self._cluster_addons()
        self.load_balancer_controller = self.certificate = self.edge = None
        ingress_after = self._entry_point(hosted_zone)
        self.service = self._vllm_service(ingress_after, hf_token)
        self.capacity_alarm = self._load_balancer_alarms()

    def entry(self) -> RegionEntry | None:
        """What the global name needs of this region (None without an entry point)."""
        if self.capacity_alarm is None:
            return None
        return RegionEntry(
            lb_hostname(self.service.resources["Ingress"]), self.capacity_alarm.alarm_name
        )

    def _gpu_nodes(self) -> list[pulumi.Resource]:
        """The floor's node group, or nothing when a reservation holds the floor."""
        return [self.gpu_pool.node_group] if self.gpu_pool else []

    def _log_bucket(self) -> LogBucket | None:
        rp = self._rp
        if rp.logs_bucket is None:
            return None
        return LogBucket(
            f"{self._name}-logs",
            LogBucketArgs(rp.logs_bucket, rp.region, self._account, self.provider,
                          retiring=rp.retiring),
            opts=self._opts,
        )

    def _cluster(self, aws_profile: str | None) -> InferenceCluster:
        plan, logs = self._plan, self.logs
        return InferenceCluster(
            self._name,
            InferenceClusterArgs(
                region_plan=self._rp,
                kubernetes_version=plan.kubernetes_version,
                aws_provider=self.provider,
                kubernetes_support=plan.kubernetes_support,
                account_id=plan.account_id,
                logs_bucket_arn=logs.bucket.arn if logs else None,
                logs_bucket_policy=logs.policy if logs else None,
                fleet_name=plan.name,
                access=plan.cluster,
                aws_profile=aws_profile,
                # what the policy pack reads to apply production-only rules
                tags={ENVIRONMENT_TAG: plan.environment},
            ),
            opts=self._in_region,
        )

    def _multi_node_support(self) -> MultiNodeSupport | None:
        """Traffic between GPU nodes: placement group, EFA device plugin, LWS controller."""
        rp = self._rp
        if rp.fabric is None or (rp.multi_node is None and rp.fabric.transport != "efa"):
            return None
        return MultiNodeSupport(
            f"{self._name}-multi-node",
            MultiNodeArgs(rp, self.cluster.k8s_provider, [self.system_pool.node_group]),
            opts=self._in_region,
        )

    def _gpu_floor(self) -> NodePool | None:
        """The always-on GPU nodes (none when the floor is 0), with the node fabric and
        placement group where a replica spans nodes."""
        rp = self._rp
        if rp.capacity.floor_nodes == 0:
            return None
        floor_args = node_pool_args(
            gpu_pool(rp), self.cluster, self.cluster.gpu_subnet_ids, self._plan.name
        )
        multi = self.multi_node
        if multi is not None:
            group: pulumi.Input[str] | None = (
                multi.placement_group.name if multi.placement_group is not None
                else rp.multi_node.placement_group if rp.multi_node is not None
                else None)
            floor_args = replace(floor_args, fabric=rp.fabric, placement_group=group)
        return NodePool(f"{self._name}-gpu", floor_args, opts=self._in_region)

    def _cluster_addons(self) -> ClusterAddons:
        # The device plugin runs on GPU nodes: the floor's, or Karpenter's first one.
        gpu_nodes = self._gpu_nodes() or [self.karpenter.node_pool]
        topic = self.alert_topic
        return ClusterAddons(
            f"{self._name}-addons",
            ClusterAddonsArgs(
                k8s_provider=self.cluster.k8s_provider,
                pool_nodes={"system": [self.system_pool.node_group], "gpu": gpu_nodes},
                values={
                    KUBE_PROMETHEUS_STACK.release: topic.topic.arn.apply(
                        partial(prometheus_values, self._plan.alerting, self._rp.region)
                    )
                },
                # Alertmanager's pods get their credentials only if its association exists
                # when they are created.
                release_after={KUBE_PROMETHEUS_STACK.release: [topic.alertmanager_association]},
            ),
            opts=self._opts,
        )

    def _entry_point(self, zone: HostedZone | None) -> list[pulumi.Resource]:
        """Stage 4: the regional entry point (controller, WAF, certificate), which the
        Ingress waits for; returns what it waits for besides the controller and certificate."""
        rp = self._rp
        if rp.entry_point is None or zone is None:
            return []
        self.load_balancer_controller = LoadBalancerController(
            f"{self._name}-lbc",
            LoadBalancerControllerArgs(
                cluster_name=self.cluster.cluster.name,
                vpc_id=self.cluster.vpc_id,
                region=rp.region,
                aws_provider=self.provider,
                k8s_provider=self.cluster.k8s_provider,
                pod_identity_agent=self.cluster.pod_identity_agent,
                depends_on=[self.system_pool.node_group],
            ),
            opts=self._opts,
        )
        ingress_after: list[pulumi.Resource] = []
        if rp.entry_point.rate_rule is not None:
            self.edge = EdgeGuard(
                f"{self._name}-waf", rp.entry_point.rate_rule, self.provider, opts=self._opts
            )
            ingress_after.append(self.edge.web_acl)
        if self.logs is not None:  # the ALB's access logs need the bucket's policy
            ingress_after.append(self.logs.policy)
        self.certificate = RegionCertificate(
            f"{self._name}-cert",
            RegionCertificateArgs(rp.entry_point, zone.zone_id, self.provider, zone.provider,
                                  zone.validation_fqdn),
            opts=self._opts,
        )
        return ingress_after

    def _vllm_service(
        self, ingress_after: list[pulumi.Resource], hf_token: pulumi.Input[str] | None
    ) -> VllmService:
        """The rendered manifests: after the GPU nodes, the weights and the add-ons; the
        Ingress after the entry point; the staging Job after its Pod Identity."""
        lbc, cert, store = self.load_balancer_controller, self.certificate, self.model_store
        return VllmService(
            f"{self._name}-vllm",
            VllmServiceArgs(
                fleet_plan=self._plan,
                region_plan=self._rp,
                k8s_provider=self.cluster.k8s_provider,
                depends_on=[*self._gpu_nodes(), self.karpenter.node_pool, store]
                + list(self.addons.releases.values())
                + (list(self.multi_node.releases.values()) if self.multi_node else []),
                ingress_depends_on=[lbc.release, cert.issued, *ingress_after]
                if lbc and cert
                else (),
                staging_depends_on=[
                    self.system_pool.node_group, store.stager_association, store.bucket
                ],
                hf_token=hf_token,
                account=self._account,
            ),
            opts=self._opts,
        )

    def _load_balancer_alarms(self) -> CapacityAlarm | None:
        """The capacity alarm the global health check reads, and the ALB's 5xx and latency
        alarms (with a load balancer controller only)."""
        if self.load_balancer_controller is None:
            return None
        rp, ingress = self._rp, self.service.resources["Ingress"]
        alarm = CapacityAlarm(
            f"{self._name}-capacity",
            CapacityAlarmArgs(
                fleet_name=self._plan.name,
                region_plan=rp,
                cluster_name=self.cluster.cluster.name,
                ingress=ingress,
                aws_provider=self.provider,
            ),
            opts=self._opts,
        )
        topic = self.alert_topic
        LoadBalancerAlarms(
            f"{self._name}-alb-alarms",
            rp,
            topic.topic.arn if topic.reaches_someone else None,
            lb_hostname(ingress),
            self.provider,
            opts=self._opts,
        )
        return alarm
