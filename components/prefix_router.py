"""PrefixRouter: the cache-aware router (`edge.balancing: prefix_aware`) between a region's
entry point and its vLLM pods, deployed from its rendered documents.

It creates one typed resource per document `llmfleet.outputs.render.prefix_router_manifests`
renders (what `rendered/<env>/<region>/prefix-router-*.yaml` and `ingress.yaml` hold):
the ServiceAccount, its namespace-scoped Role to watch pods and the binding, the Service,
the NetworkPolicy (the ALB's subnets in, the engines, CoreDNS and the Kubernetes API out),
the PodDisruptionBudget, the API Ingress that targets the router, the Deployment, its
ServiceMonitor and alerts. Which router and why, its flags and sizing: the FleetPlan's
`RegionPlan.prefix_router` (`llmfleet.fleetplan.prefix_router`); nothing is decided here.

Order, as the cluster needs it: everything after the region's Namespace (`namespace`) and
`depends_on`; the Ingress after the router's Service (the controller resolves its backend)
and `ingress_depends_on` (the load balancer controller whose webhook admits it, the issued
certificate, the WAF web ACL); the Deployment last, after the Ingress and the region's
other Ingresses (`after`): the controller gives a pod its ALB readiness gate only if an
Ingress targets it when it is created."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.documents import CUSTOM, TYPED, resource_kwargs
from llmfleet.errors import ProgramError
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.outputs.render import PREFIX_ROUTER_MANIFESTS, prefix_router_manifests


@dataclass(frozen=True)
class PrefixRouterArgs:
    """fleet_plan, region_plan: what to render (the region must have `prefix_router`).
    k8s_provider: the region's cluster provider.
    namespace: the region's Namespace resource (VllmService creates it).
    depends_on: what every object waits for (nodes, the Prometheus release's CRDs).
    ingress_depends_on: what the Ingress also waits for (controller, certificate, WAF).
    after: what the router's pods also wait for (the region's other Ingresses).
    """

    fleet_plan: FleetPlan
    region_plan: RegionPlan
    k8s_provider: k8s.Provider
    namespace: pulumi.Resource
    depends_on: Sequence[pulumi.Resource] = ()
    ingress_depends_on: Sequence[pulumi.Resource] = ()
    after: Sequence[pulumi.Resource] = ()


def router_documents(fleet_plan: FleetPlan, region_plan: RegionPlan) -> dict[str, dict[str, Any]]:
    """The rendered documents by their kind name (`prefix-router-service`, `ingress`, ...)."""
    if region_plan.prefix_router is None:
        raise ProgramError(
            f"{region_plan.region}: no prefix router in the FleetPlan (edge.balancing is "
            "least_outstanding, or the region serves disaggregated)"
        )
    docs = prefix_router_manifests(fleet_plan, region_plan)
    return dict(zip(PREFIX_ROUTER_MANIFESTS, docs, strict=True))


class PrefixRouter(pulumi.ComponentResource):
    """Children `{name}-{kind}` (`-serviceaccount`, `-role`, `-rolebinding`, `-service`,
    `-networkpolicy`, `-poddisruptionbudget`, `-ingress`, `-deployment`, `-servicemonitor`,
    `-prometheusrule`); `ingress` and `service` as attributes."""

    resources: dict[str, pulumi.CustomResource]
    ingress: pulumi.CustomResource
    service: pulumi.CustomResource

    def __init__(
        self, name: str, args: PrefixRouterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:PrefixRouter", name, None, opts)
        self.resources = {}
        base = [args.namespace, *args.depends_on]
        for kind, doc in router_documents(args.fleet_plan, args.region_plan).items():
            after: list[pulumi.Resource] = list(base)
            if kind == "ingress":
                after += [self.resources["prefix-router-service"], *args.ingress_depends_on]
            if kind == "prefix-router-deployment":
                after += list(self.resources.values())
                after += list(args.after)
            self.resources[kind] = self._create(name, kind, doc, args, after)
        self.ingress = self.resources["ingress"]
        self.service = self.resources["prefix-router-service"]
        self.register_outputs({"kinds": sorted(self.resources)})

    def _create(
        self, name: str, kind: str, doc: dict[str, Any], args: PrefixRouterArgs,
        after: Sequence[pulumi.Resource],
    ) -> pulumi.CustomResource:
        api = (str(doc["apiVersion"]), str(doc["kind"]))
        child = f"{name}-{kind.removeprefix('prefix-router-')}"
        child_opts = pulumi.ResourceOptions(
            parent=self, provider=args.k8s_provider, depends_on=list(after)
        )
        kwargs = resource_kwargs(doc)
        if api in TYPED:
            return TYPED[api](child, **kwargs, opts=child_opts)
        if api in CUSTOM:
            return k8s.apiextensions.CustomResource(child, **kwargs, opts=child_opts)
        raise ProgramError(f"{name}: cannot deploy {'/'.join(api)}")
