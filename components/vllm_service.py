"""VllmService: deploys a region's rendered Kubernetes documents, exactly as rendered.

It calls the core renderer (`llmfleet.outputs.render.region_manifests`, the same call that writes
`rendered/<env>/<region>/*.yaml`), and creates one typed resource per parsed document on the
region's cluster provider. It changes nothing: what a reviewer reads in `rendered/` is what
gets deployed (the tests compare both). The one object it adds is never rendered because
it is a value: the Hugging Face token Secret, from the stack's secret config
`llmfleet:hfToken` when it is set (a Pulumi secret end to end).

Order, as the cluster needs it:
- the Namespace first (its Pod Security and readiness-gate labels apply to every pod);
- the weight-staging Job after its ServiceAccount, ConfigMap, NetworkPolicy and the token
  Secret, and after `staging_depends_on` (its Pod Identity association, the bucket, the
  system nodes), so `pulumi up` waits for the weights to be staged;
- the Ingresses after `ingress_depends_on` (the load balancer controller, whose validating
  webhook admits them, the issued certificate, the WAF web ACL they name) and the Service;
- the servers (Deployments, or a LeaderWorkerSet) last: after the Job (the weights are there), its
  ServiceAccount, ConfigMaps, NetworkPolicy and Service, and the Ingresses (a pod gets its ALB
  readiness gates only if its Ingress exists when it is created: the controller's pod_readiness_gate
  docs);
- everything but the staging objects after `depends_on` (the GPU nodes, the device plugin,
  and the KEDA and Prometheus releases whose CRDs the ScaledObject and ServiceMonitor need).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.apiextensions import CustomResource

from components.account import with_account
from components.documents import CUSTOM, TYPED, resource_kwargs
from components.prefix_router import PrefixRouter, PrefixRouterArgs
from llmfleet.errors import ProgramError
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.outputs.render import region_manifests


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
    """What the Ingresses also wait for: the load balancer controller, the issued
    certificate it discovers and the WAF web ACL they name."""
    staging_depends_on: Sequence[pulumi.Resource] = ()
    """What the weight-staging Job waits for: its Pod Identity association, the bucket and
    the system nodes it runs on."""
    hf_token: pulumi.Input[str] | None = None
    """The Hugging Face token (a Pulumi secret) for gated repositories, or None."""
    account: pulumi.Input[str] = ""
    """The deploying account: it replaces the placeholder a plan without account_id renders
    in bucket names (components.account); nothing else in a document changes."""


STAGING = ("configmap-weights", "serviceaccount-stager", "networkpolicy-stager")
"""What the staging Job mounts, runs as and is confined by (suffixes of its siblings)."""
JOB = "Job"
SERVERS = ("Deployment", "LeaderWorkerSet")
"""The kinds that run model-server pods: a Deployment per pool (the decode servers, and a
disaggregated region's prefill servers and router), or a LeaderWorkerSet (multi-node)."""
SERVER_NEEDS = ("ServiceAccount", "ConfigMap", "configmap-weights", "NetworkPolicy", "Service")
"""What the server pods need before they are created (those the region renders)."""


class VllmService(pulumi.ComponentResource):
    """Children `{name}-{kind}` (lower-case kind), one per rendered document; `resources`
    maps the kind to it (a second object of a kind: its suffix, e.g. `configmap-dashboard`)."""

    resources: dict[str, pulumi.CustomResource]

    def __init__(
        self, name: str, args: VllmServiceArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:VllmService", name, None, opts)
        self.resources = {}
        docs = region_manifests(args.fleet_plan, args.region_plan)
        keyed: dict[str, dict[str, Any]] = {}
        for doc in docs:
            first = str(doc["kind"]) not in keyed
            suffix = resource_suffix(doc, args.region_plan.workload.name, first)
            keyed[str(doc["kind"]) if first else suffix] = doc
        ingresses = [k for k, d in keyed.items() if d["kind"] == "Ingress"]
        # The servers last: they wait for what their pods need (see the module docstring).
        servers = [k for k, d in keyed.items() if d["kind"] in SERVERS]
        order = [k for k in keyed if k not in servers] + servers
        self.router: PrefixRouter | None = None
        for key in order:
            if key == (servers[0] if servers else None) and args.region_plan.prefix_router:
                # its pods, as the engines', after the Ingresses and the staged weights (no
                # engine serves before them)
                self.router = self._router(name, args, [self.resources[k] for k in
                                                        (*ingresses, JOB) if k in self.resources])
            doc = keyed[key]
            after: list[pulumi.Resource] = [self.resources[k] for k in ("Namespace",)
                                            if k in self.resources]
            if key == "Namespace":
                after = []
            elif key == JOB:
                after += [self.resources[k] for k in STAGING] + list(args.staging_depends_on)
                if args.hf_token is not None:
                    after.append(self._hf_token_secret(name, args))
            elif key in STAGING:
                pass
            else:
                after += list(args.depends_on)
            if doc["kind"] == "Ingress":
                after += [self.resources["Service"], *args.ingress_depends_on]
            if key in servers:
                after += [self.resources[k] for k in (*SERVER_NEEDS, JOB, *ingresses)
                          if k in self.resources]
                if self.router is not None:  # the API Ingress is the router's
                    after.append(self.router.ingress)
            self.resources[key] = self._create(name, key, doc, args, after)
        workload = args.region_plan.workload
        self.register_outputs({"namespace": workload.namespace, "kinds": sorted(self.resources)})

    def _router(
        self, name: str, args: VllmServiceArgs, ingresses: Sequence[pulumi.Resource]
    ) -> PrefixRouter:
        """edge.balancing prefix_aware: the router and the API Ingress that targets it,
        after this component's Namespace, Ingresses and staging Job, before the vLLM pods."""
        return PrefixRouter(
            f"{name}-router",
            PrefixRouterArgs(
                fleet_plan=args.fleet_plan,
                region_plan=args.region_plan,
                k8s_provider=args.k8s_provider,
                namespace=self.resources["Namespace"],
                depends_on=list(args.depends_on),
                ingress_depends_on=list(args.ingress_depends_on),
                after=list(ingresses),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _create(
        self,
        name: str,
        key: str,
        doc: Mapping[str, Any],
        args: VllmServiceArgs,
        after: Sequence[pulumi.Resource],
    ) -> pulumi.CustomResource:
        kind = (str(doc["apiVersion"]), str(doc["kind"]))
        child = f"{name}-{key.lower()}"
        child_opts = pulumi.ResourceOptions(
            parent=self, provider=args.k8s_provider, depends_on=list(after)
        )
        kwargs = with_account(resource_kwargs(doc), args.account)
        if kind in TYPED:
            return TYPED[kind](child, **kwargs, opts=child_opts)
        if kind in CUSTOM:
            return CustomResource(child, **kwargs, opts=child_opts)
        known = ", ".join(sorted(k for _, k in [*TYPED, *CUSTOM]))
        raise ProgramError(f"{name}: cannot deploy {'/'.join(kind)}; known kinds: {known}")

    def _hf_token_secret(self, name: str, args: VllmServiceArgs) -> k8s.core.v1.Secret:
        """The Hugging Face token as a Secret (never rendered: it is a value)."""
        workload = args.region_plan.workload
        if args.hf_token is None:
            raise ProgramError(f"{name}: no Hugging Face token to put in a Secret")
        token: pulumi.Output[str] = pulumi.Output.secret(args.hf_token)
        return k8s.core.v1.Secret(
            f"{name}-hf-token",
            metadata={
                "name": workload.hf_token_secret,
                "namespace": workload.namespace,
                "labels": dict(workload.labels),
            },
            type="Opaque",
            string_data={workload.hf_token_secret_key: token},
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.k8s_provider,
                depends_on=[self.resources["Namespace"]],
            ),
        )
