"""Preview checks of how traffic reaches pods, where Kubernetes and the AWS Load Balancer
Controller accept an object the cluster then cannot serve (a router in front of the
engines adds one hop each of these can break):

- ingress-backends-exist: every backend Service an Ingress names exists in its namespace
  and the Ingress waits for it. The controller cannot build a target group for a missing
  Service (it reports the Ingress failed and retries), and Pulumi's await for an Ingress
  waits for its backends' Endpoints, so an Ingress created before its Service stalls
  `pulumi up` until it times out.
- discovery-permitted: a pod that discovers its peers through the Kubernetes API
  (vllm-router `--service-discovery`, kube-rs watching pods) mounts a token and its
  ServiceAccount is bound to a Role or ClusterRole that may get, list and watch pods in
  the namespace it watches; the API server answers 403 otherwise and the router finds no
  engine.
- pdb-allows-a-drain: a PodDisruptionBudget whose minAvailable is at least its Deployment's
  replicas lets no pod be evicted, so every node drain stalls: a managed node group's update
  fails with PodEvictionFailure, and Karpenter cannot consolidate or expire the node."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.preview.graph import Finding, Graph, Resource

DISCOVERY_FLAG = "--service-discovery"
NAMESPACE_FLAG = "--service-discovery-namespace"
DISCOVERY_VERBS = {"get", "list", "watch"}


def _meta(r: Resource) -> Mapping[str, Any]:
    return (r.get("inputs") or {}).get("metadata") or {}


def _local(g: Graph, r: Resource, kind: str) -> list[Resource]:
    """Resources of a kind (type suffix) on r's cluster in r's namespace."""
    ns = _meta(r).get("namespace")
    return [o for o in g.by_urn.values() if o["type"].endswith(f":{kind}")
            and g.cluster_of(o) == g.cluster_of(r) and _meta(o).get("namespace") == ns]


def ingress_backends_exist(g: Graph, _: str | None) -> list[Finding]:
    out = []
    for ingress in g.of_type("kubernetes:networking.k8s.io/v1:Ingress"):
        spec = (ingress.get("inputs") or {}).get("spec") or {}
        names = {
            str(((path.get("backend") or {}).get("service") or {}).get("name"))
            for rule in spec.get("rules") or []
            for path in ((rule.get("http") or {}).get("paths") or [])
            if (path.get("backend") or {}).get("service")
        }
        services = {str(_meta(s).get("name")): s for s in _local(g, ingress, "Service")}
        for name in sorted(names):
            service = services.get(name)
            if service is None:
                out.append(Finding("ingress-backends-exist", ingress["name"], (
                    f"its backend Service {name} is not created in namespace "
                    f"{_meta(ingress).get('namespace')}: the load balancer controller builds "
                    "no target group for it and the Ingress never becomes ready")))
            elif not g.waits_for(ingress, service):
                out.append(Finding("ingress-backends-exist", ingress["name"], (
                    f"it is created before its backend Service {name}: the controller "
                    "fails it until the Service exists and Pulumi's await may time out")))
    return out


def _container_args(deployment: Resource) -> list[list[str]]:
    pod = ((((deployment.get("inputs") or {}).get("spec") or {}).get("template") or {})
           .get("spec") or {})
    return [[str(a) for a in [*(c.get("command") or []), *(c.get("args") or [])]]
            for c in pod.get("containers") or []]


def _grants_pods(rules: list[Mapping[str, Any]]) -> bool:
    verbs: set[str] = set()
    for rule in rules:
        if "" in (rule.get("apiGroups") or []) and {"pods", "*"} & set(rule.get("resources")
                                                                       or []):
            verbs |= set(rule.get("verbs") or [])
    return "*" in verbs or verbs >= DISCOVERY_VERBS


def discovery_permitted(g: Graph, _: str | None) -> list[Finding]:
    out = []
    for d in g.of_type("kubernetes:apps/v1:Deployment"):
        pod = ((((d.get("inputs") or {}).get("spec") or {}).get("template") or {})
               .get("spec") or {})
        for args in _container_args(d):
            if DISCOVERY_FLAG not in args:
                continue
            ns = str(_meta(d).get("namespace"))
            watched = args[args.index(NAMESPACE_FLAG) + 1] if NAMESPACE_FLAG in args else None
            account = pod.get("serviceAccountName") or "default"
            if pod.get("automountServiceAccountToken") is False:
                out.append(Finding("discovery-permitted", d["name"], (
                    "it watches pods through the Kubernetes API but mounts no "
                    "ServiceAccount token (automountServiceAccountToken: false)")))
            if watched is None:
                out.append(Finding("discovery-permitted", d["name"], (
                    f"it watches pods of every namespace ({DISCOVERY_FLAG} without "
                    f"{NAMESPACE_FLAG}), which needs a ClusterRole: give it the namespace")))
                continue
            if not _bound_to_pod_reader(g, d, ns, watched, account):
                out.append(Finding("discovery-permitted", d["name"], (
                    f"its ServiceAccount {ns}/{account} may not get, list and watch pods in "
                    f"{watched}: the API server answers 403 and it discovers no engine")))
    return out


def _bound_to_pod_reader(g: Graph, d: Resource, ns: str, watched: str, account: str) -> bool:
    roles = {str(_meta(r).get("name")): r for r in g.by_urn.values()
             if r["type"].endswith(":Role") and g.cluster_of(r) == g.cluster_of(d)
             and _meta(r).get("namespace") == watched}
    for binding in g.by_urn.values():
        if not (binding["type"].endswith(":RoleBinding") and g.cluster_of(binding)
                == g.cluster_of(d) and _meta(binding).get("namespace") == watched):
            continue
        inputs = binding.get("inputs") or {}
        subjects = inputs.get("subjects") or []
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == account
                   and s.get("namespace", watched) == ns for s in subjects):
            continue
        ref = inputs.get("roleRef") or {}
        role = roles.get(str(ref.get("name"))) if ref.get("kind") == "Role" else None
        if role is not None and _grants_pods((role.get("inputs") or {}).get("rules") or []):
            return True
    return False


def pdb_allows_a_drain(g: Graph, _: str | None) -> list[Finding]:
    out = []
    for pdb in g.of_type("kubernetes:policy/v1:PodDisruptionBudget"):
        spec = (pdb.get("inputs") or {}).get("spec") or {}
        least = spec.get("minAvailable")
        if not isinstance(least, int):
            continue
        wanted = (spec.get("selector") or {}).get("matchLabels") or {}
        for d in _local(g, pdb, "Deployment"):
            dspec = (d.get("inputs") or {}).get("spec") or {}
            labels = ((dspec.get("template") or {}).get("metadata") or {}).get("labels") or {}
            replicas = dspec.get("replicas")
            if not wanted or any(labels.get(k) != v for k, v in wanted.items()):
                continue
            if isinstance(replicas, int) and least >= replicas:
                out.append(Finding("pdb-allows-a-drain", pdb["name"], (
                    f"minAvailable {least} with {replicas} replica(s) of {d['name']}: no pod "
                    "may be evicted, so a node drain stalls (a node group update fails with "
                    "PodEvictionFailure)")))
    return out
