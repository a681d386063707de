"""VllmService: deploys a region's rendered Kubernetes documents, exactly as rendered.

It calls the core renderer (`llmfleet.outputs.render.region_manifests`, the same call that writes
`rendered/<env>/<region>/*.yaml`), and creates one typed resource per parsed document on the
region's cluster provider. It adds nothing and changes nothing: what a reviewer reads in
`rendered/` is what gets deployed (the tests compare both).

Order: the Namespace first; every other object depends on it and on `depends_on` (the GPU
node pool, the device plugin, and the KEDA and Prometheus releases whose CRDs the
ScaledObject and ServiceMonitor need).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.apiextensions import CustomResource

from llmfleet.errors import ProgramError
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.outputs.render import region_manifests

TYPED: Mapping[tuple[str, str], Callable[..., pulumi.CustomResource]] = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "Service"): k8s.core.v1.Service,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("policy/v1", "PodDisruptionBudget"): k8s.policy.v1.PodDisruptionBudget,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
    ("networking.k8s.io/v1", "Ingress"): k8s.networking.v1.Ingress,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
}
"""Core objects get their typed class; the CRDs below are `apiextensions.CustomResource`."""
CUSTOM = {
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
}
TOP_LEVEL = {
    "apiVersion": "api_version",
    "kind": "kind",
    "metadata": "metadata",
    "automountServiceAccountToken": "automount_service_account_token",
    "roleRef": "role_ref",
}


def resource_kwargs(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A parsed document as resource keyword arguments: top-level keys become the SDK's
    argument names (`apiVersion` -> `api_version`); everything below is passed verbatim."""
    return {TOP_LEVEL.get(key, key): value for key, value in doc.items()}


def resource_suffix(doc: Mapping[str, Any], workload_name: str = "", first: bool = True) -> str:
    """`deployment`, `configmap`, ...: the kind; a second object of a kind (the dashboard's
    ConfigMap) adds its name past the workload's (`configmap-dashboard`)."""
    kind = str(doc["kind"]).lower()
    if first:
        return kind
    return f"{kind}-{str(doc['metadata']['name']).removeprefix(workload_name + '-')}"


@dataclass(frozen=True)
class VllmServiceArgs:
    """fleet_plan, region_plan: what to render (the region's serving decisions).
    k8s_provider: the region's cluster provider (InferenceCluster.k8s_provider).
    depends_on: resources every object waits for (node pool, cluster add-ons).
    """

    fleet_plan: FleetPlan
    region_plan: RegionPlan
    k8s_provider: k8s.Provider
    depends_on: Sequence[pulumi.Resource] = ()
    ingress_depends_on: Sequence[pulumi.Resource] = ()
    """What the Ingress also waits for: the load balancer controller and the issued
    certificate it discovers."""


class VllmService(pulumi.ComponentResource):
    """Children `{name}-{kind}` (lower-case kind), one per rendered document; `resources`
    maps the kind to it (a second object of a kind: its suffix, e.g. `configmap-dashboard`)."""

    resources: dict[str, pulumi.CustomResource]

    def __init__(
        self, name: str, args: VllmServiceArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:VllmService", name, None, opts)
        self.resources = {}
        namespace: list[pulumi.Resource] = []
        for doc in region_manifests(args.fleet_plan, args.region_plan):
            key = (str(doc["apiVersion"]), str(doc["kind"]))
            child_opts = pulumi.ResourceOptions(
                parent=self,
                provider=args.k8s_provider,
                depends_on=[
                    *args.depends_on,
                    *namespace,
                    *(args.ingress_depends_on if doc["kind"] == "Ingress" else ()),
                ],
            )
            first = str(doc["kind"]) not in self.resources
            suffix = resource_suffix(doc, args.region_plan.workload.name, first)
            child = f"{name}-{suffix}"
            resource: pulumi.CustomResource
            if key in TYPED:
                resource = TYPED[key](child, **resource_kwargs(doc), opts=child_opts)
            elif key in CUSTOM:
                resource = CustomResource(child, **resource_kwargs(doc), opts=child_opts)
            else:
                known = ", ".join(sorted(k for _, k in [*TYPED, *CUSTOM]))
                raise ProgramError(f"{name}: cannot deploy {'/'.join(key)}; known kinds: {known}")
            if doc["kind"] == "Namespace":
                namespace = [resource]
            self.resources[str(doc["kind"]) if first else suffix] = resource
        workload = args.region_plan.workload
        self.register_outputs({"namespace": workload.namespace, "kinds": sorted(self.resources)})
