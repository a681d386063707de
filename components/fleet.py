"""Fleet: a FleetPlan as resources: per region a `FleetRegion` (components.region: an AWS
provider, a cluster, system nodes, the always-on GPU floor and Karpenter above it, the weight
bucket (and the image cache), the cluster add-ons (device plugin, KEDA, Prometheus), the vLLM
service and its entry point); and once, what spans regions (the global name's certificate
validation, Route53 health checks and routed records).

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
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.global_endpoint import (
    GlobalEndpoint,
    GlobalEndpointArgs,
    GlobalValidation,
    GlobalValidationArgs,
    RegionEntry,
    zone_id,
)
from components.region import FleetRegion, HostedZone, default_tags
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


class Fleet(pulumi.ComponentResource):
    """Children: per region r, what `FleetRegion` builds from the name `{name}-{r}` (its
    provider `{name}-{r}-aws`, cluster `{name}-{r}`, node pools, Karpenter, weights, add-ons,
    the vLLM service, its entry point); `regions` maps region name to it. With `plan.dns`:
    `{name}-route53-aws` (us-east-1) and, in the global part, `{name}-global-cert`
    (GlobalValidation) and `{name}-dns` (GlobalEndpoint).
    """

    regions: dict[str, FleetRegion]
    global_validation: GlobalValidation | None
    global_endpoint: GlobalEndpoint | None

    def __init__(
        self, name: str, args: FleetArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:Fleet", name, None, opts)
        plan = args.fleet_plan
        built = [rp.region for rp in plan.regions] if args.regions is None else list(args.regions)
        global_part = args.global_entries is not None or len(built) == len(plan.regions)
        self.global_validation = self.global_endpoint = None
        # Stage 4 (plan.dns): Route53 is global, so its records and checks use us-east-1.
        zone = None
        if plan.dns is not None:
            route53 = aws.Provider(
                f"{name}-route53-aws",
                region="us-east-1",
                default_tags={"tags": default_tags(plan.name, args.tags)},
                opts=pulumi.ResourceOptions(parent=self),
            )
            zone = HostedZone(zone_id(plan.dns, route53), route53)
            if global_part:
                self.global_validation = GlobalValidation(
                    f"{name}-global-cert",
                    GlobalValidationArgs(plan, zone.zone_id, route53),
                    opts=pulumi.ResourceOptions(parent=self),
                )
                zone = HostedZone(zone.zone_id, route53, self.global_validation.fqdn)
        self.regions = {
            rp.region: FleetRegion(
                name=f"{name}-{rp.region}",
                parent=self,
                fleet_plan=plan,
                region_plan=rp,
                tags=args.tags,
                aws_profile=args.aws_profile,
                hosted_zone=zone,
                hf_token=args.hf_token,
            )
            for rp in plan.regions
            if rp.region in built  # else another stack's region
        }
        if zone is not None and global_part:
            self.global_endpoint = self._global_endpoint(name, args, zone)
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

    def _global_endpoint(
        self, name: str, args: FleetArgs, zone: HostedZone
    ) -> GlobalEndpoint | None:
        """Health checks and routed records for every region with an entry point, from the
        regions built here or (a global stack) read from the region stacks."""
        plan = args.fleet_plan
        entries = args.global_entries
        if entries is None:
            entries = {r: e for r, res in self.regions.items() if (e := res.entry())}
        # A retiring region leaves the global name first (docs/day2.md).
        retiring = {rp.region for rp in plan.regions if rp.retiring}
        entries = {r: e for r, e in entries.items() if r not in retiring}
        if not entries:
            return None  # a global stack before any region: certificate validation only
        return GlobalEndpoint(
            f"{name}-dns",
            GlobalEndpointArgs(
                fleet_plan=plan, zone_id=zone.zone_id, entries=entries,
                route53_provider=zone.provider,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
