"""The preview's checks: what AWS or Kubernetes would refuse or break although Pulumi's
mocks accept it, run over the resources the mocked program registered.

- identity-once: an identity AWS or Kubernetes holds once (an EKS add-on per cluster and
  name, a Pod Identity association per service account, a Route 53 record per zone, name,
  type and set identifier, IAM and S3 names, Kubernetes objects per cluster) is created
  once (`limits.IDENTITIES`, with the error a second create gets).
- global-names-carry-the-account: S3 names are global across accounts; a bucket name
  without the account may be someone else's (BucketAlreadyExists).
- name-limits: names fit their API's length and characters (`limits.NAME_LIMITS`), counting
  Pulumi's 8-character suffix for auto-named resources.
- crds-before-use / crds-upgraded: a custom resource waits for what installs its CRD, and a
  chart whose CRDs Helm never upgrades (its `crds/`) skips them for an installer that does.
- webhooks-before-use: nothing creates a Service (or installs a chart) while a fail-closed
  Service webhook is not yet served; an ALB Ingress waits for the controller; pods wait for
  their Ingress (readiness gates are injected only if it exists), their Pod Identity
  association (credentials are injected at pod creation; a chart whose values name a
  ServiceAccount with an association waits for it too) and the weights' staging Job;
  every association waits for the cluster's Pod Identity agent.
- network-policy-admits: every endpoint a pod needs is admitted by its NetworkPolicies
  (`netpol`), and of the monitoring namespace only Prometheus's pods reach a serving port
  (it serves the API unauthenticated inside the cluster).
- ingress-backends-exist, discovery-permitted, pdb-allows-a-drain: an Ingress's backend
  Service exists before it, a pod that watches pods may, a PodDisruptionBudget lets a drain
  evict one pod (`wiring`).
- aws-api: the AWS resources replayed into moto fail where moto's API does (`emulated`).
- alarms-reach-someone, rate-limits-cover-every-request, pull-through-credentials,
  least-privilege-policies, log-delivery-after-policy: rules of AWS services neither the mocks
  nor moto enforce (`aws_rules`, each with its source).

`run_checks` returns the findings; `llmfleet preview` prints them and exits 1.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from components.preview import aws_rules, netpol, wiring
from components.preview.graph import Finding, Graph, Resource
from components.preview.limits import (
    AUTONAME_SUFFIX,
    CRD_SOURCES,
    DNS_LABEL,
    DNS_SUBDOMAIN,
    IDENTITIES,
    K8S_LABEL_NAMES,
    LBC_CHART,
    LOAD_BALANCER_NAME_MAX,
    NAME_LIMITS,
    POD_IDENTITY_AGENT,
    READINESS_GATE_LABEL,
    SERVICE_MUTATOR,
)
from llmfleet.catalog.kubernetes import charts
from llmfleet.fleetplan.workload import (
    MONITORING_NAMESPACE,
    PROMETHEUS_POD_LABELS,
    PROMETHEUS_RELEASE,
)

RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"
CORE_GROUPS = {
    "core", "apps", "batch", "networking.k8s.io", "policy", "rbac.authorization.k8s.io",
    "helm.sh", "yaml",
}
"""API groups every cluster serves (Kubernetes' built-in APIs: no CRD installs them)."""
POD_IDENTITY = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
ADDON = "aws:eks/addon:Addon"


def _meta(r: Resource) -> Mapping[str, Any]:
    return (r.get("inputs") or {}).get("metadata") or {}


def _k8s_kind(r: Resource) -> tuple[str, str] | None:
    """(group, kind) of a Kubernetes object; None for other resources."""
    typ = str(r["type"])
    if not typ.startswith("kubernetes:") or typ in (RELEASE, CONFIG_FILE):
        return None
    group_version, kind = typ.split(":")[1], typ.split(":")[2]
    return group_version.split("/")[0], kind


def _norm(value: Any) -> str:
    return str(value).lower().rstrip(".") if value is not None else ""


# --- identities -------------------------------------------------------------------------------


def identity_once(g: Graph, _: str | None) -> list[Finding]:
    seen: dict[tuple[Any, ...], str] = {}
    out: list[Finding] = []

    def claim(key: tuple[Any, ...], name: str, error: str) -> None:
        if key in seen:
            out.append(Finding("identity-once", name,
                               f"{key[0]} {key[2:]} is also {seen[key]}'s: {error}"))
        else:
            seen[key] = name

    shared = ("one record owned by two resources (allow_overwrite UPSERTs it): deleting "
              "either deletes the record the other renews its certificate with")

    for ident in IDENTITIES:
        for r in g.of_type(ident.type):
            inputs = r.get("inputs") or {}
            if ident.type == "aws:route53/record:Record":
                values = tuple(_norm(inputs.get(k)) for k in ident.key)
            else:
                if any(inputs.get(k) is None for k in ident.key):
                    continue  # auto-named: unique by construction
                values = tuple(str(inputs[k]) for k in ident.key)
            scope = g.region_of(r) if ident.scope == "region" else ident.scope
            error = shared if inputs.get("allowOverwrite") else ident.error
            claim((ident.type, scope, *values), r["name"], error)
            if ident.type == ADDON:  # the associations an add-on owns are associations too
                for assoc in inputs.get("podIdentityAssociations") or []:
                    key = (POD_IDENTITY, g.region_of(r), str(inputs.get("clusterName")),
                           "kube-system", str(assoc.get("serviceAccount")))
                    claim(key, r["name"], "409 ResourceInUseException")
    for r in g.by_urn.values():
        kind = _k8s_kind(r)
        meta = _meta(r)
        if kind is not None and meta.get("name"):
            object_key: tuple[Any, ...] = (
                "kubernetes", g.cluster_of(r), kind, meta.get("namespace", ""), meta["name"]
            )
            claim(object_key, r["name"], "AlreadyExists (one object per kind, namespace and name)")
        if r["type"] == RELEASE:
            inputs = r.get("inputs") or {}
            release_key: tuple[Any, ...] = (
                "helm", g.cluster_of(r), inputs.get("namespace"), inputs.get("name")
            )
            claim(release_key, r["name"], "cannot re-use a name that is still in use")
    return out


def global_names_carry_the_account(g: Graph, account: str | None) -> list[Finding]:
    out = []
    for r in g.of_type("aws:s3/bucket:Bucket"):
        name = str((r.get("inputs") or {}).get("bucket") or r["name"])
        if account is None or account not in name:
            out.append(Finding(
                "global-names-carry-the-account", r["name"],
                f"bucket {name} does not carry the account id: S3 names are global, and a "
                "name another account holds fails with BucketAlreadyExists (set account_id)"))
    return out


# --- names ------------------------------------------------------------------------------------


def name_limits(g: Graph, _: str | None) -> list[Finding]:
    out = []
    for limit in NAME_LIMITS:
        for r in g.of_type(limit.type):
            given = (r.get("inputs") or {}).get(limit.field)
            name = str(given) if given is not None else f"{r['name']}-xxxxxxx"
            if given is None and not limit.autonamed:
                continue
            length = len(name) if given is not None else len(r["name"]) + AUTONAME_SUFFIX
            if not limit.min_len <= length <= limit.max_len:
                out.append(Finding("name-limits", r["name"],
                                   f"{limit.field} {name!r} is {length} characters; "
                                   f"{limit.source}"))
            elif given is not None and limit.pattern and not _re(limit.pattern, name):
                out.append(Finding("name-limits", r["name"],
                                   f"{limit.field} {name!r} has characters {limit.source}"))
    for r in g.by_urn.values():
        kind = _k8s_kind(r)
        name = str(_meta(r).get("name") or "")
        if kind is None or not name:
            continue
        label = kind[1] in K8S_LABEL_NAMES
        ok = (DNS_LABEL.match(name) and len(name) <= 63) if label else (
            DNS_SUBDOMAIN.match(name) and len(name) <= 253)
        if not ok:
            out.append(Finding("name-limits", r["name"],
                               f"{kind[1]} name {name!r} is not an RFC 1123 "
                               f"{'label (63)' if label else 'subdomain (253)'}"))
        annotations = _meta(r).get("annotations") or {}
        lb = annotations.get("alb.ingress.kubernetes.io/load-balancer-name")
        if lb is not None and len(str(lb)) > LOAD_BALANCER_NAME_MAX:
            out.append(Finding("name-limits", r["name"],
                               f"load-balancer-name {lb!r} is over 32 characters (the "
                               "controller refuses it)"))
    return out


def _re(pattern: str, text: str) -> bool:
    return re.match(pattern, text) is not None


# --- order: CRDs and webhooks -----------------------------------------------------------------


def _installers(g: Graph, group: str, cluster: str | None) -> list[Resource]:
    out = []
    for src in (s for s in CRD_SOURCES if s.group == group):
        for r in g.by_urn.values():
            if g.cluster_of(r) != cluster:
                continue
            inputs = r.get("inputs") or {}
            if src.chart and r["type"] == RELEASE and str(inputs.get("chart", "")).endswith(
                src.chart.split("/")[-1]
            ):
                out.append(r)
            if src.url_part and r["type"] == CONFIG_FILE and src.url_part in str(
                inputs.get("file", "")
            ):
                out.append(r)
    return out


def crds_before_use(g: Graph, _: str | None) -> list[Finding]:
    out = []
    for r in g.by_urn.values():
        kind = _k8s_kind(r)
        if kind is None or kind[0] in CORE_GROUPS:
            continue
        installers = _installers(g, kind[0], g.cluster_of(r))
        if not installers:
            out.append(Finding("crds-before-use", r["name"],
                               f"nothing on its cluster installs the {kind[0]} CRDs"))
        elif not any(g.waits_for(r, i) for i in installers):
            names = ", ".join(sorted(i["name"] for i in installers))
            out.append(Finding("crds-before-use", r["name"],
                               f"{kind[1]} is created without waiting for {names}, which "
                               f"installs its CRD: 'no matches for kind {kind[1]}'"))
    return out


def crds_upgraded(g: Graph, _: str | None) -> list[Finding]:
    by_chart = {c.chart: c for c in charts().values()}
    out = []
    for r in g.of_type(RELEASE):
        inputs = r.get("inputs") or {}
        pinned = by_chart.get(str(inputs.get("chart")))
        if pinned is not None and pinned.crds == "crds-dir" and not inputs.get("skipCrds"):
            out.append(Finding("crds-upgraded", r["name"],
                               f"{pinned.chart} keeps its CRDs in crds/, which Helm installs "
                               "once and never upgrades: skip them and install them with "
                               "something that upgrades (a CRD chart or the manifests)"))
    return out


def _waits(g: Graph, r: Resource, others: Iterable[Resource], check: str,
           why: Callable[[Resource], str]) -> list[Finding]:
    return [Finding(check, r["name"], why(o)) for o in others if not g.waits_for(r, o)]


def webhooks_before_use(g: Graph, _: str | None) -> list[Finding]:
    out: list[Finding] = []
    releases = g.of_type(RELEASE)
    for lbc in (r for r in releases if str((r.get("inputs") or {}).get("chart")) == LBC_CHART):
        values = (lbc.get("inputs") or {}).get("values") or {}
        cluster = g.cluster_of(lbc)
        if values.get(SERVICE_MUTATOR, True) is not False:
            for r in g.by_urn.values():
                creates_service = r["type"] == "kubernetes:core/v1:Service" or (
                    r["type"] == RELEASE and r is not lbc)
                if creates_service and g.cluster_of(r) == cluster and not g.waits_for(r, lbc):
                    out.append(Finding(
                        "webhooks-before-use", r["name"],
                        f"creates Services while {lbc['name']}'s fail-closed Service webhook "
                        "may not be served yet (aws-load-balancer-controller#4140): set "
                        "enableServiceMutatorWebhook false, or wait for it"))
    for ing in g.of_type("kubernetes:networking.k8s.io/v1:Ingress"):
        if ((ing.get("inputs") or {}).get("spec") or {}).get("ingressClassName") != "alb":
            continue
        lbcs = [r for r in releases if str((r.get("inputs") or {}).get("chart")) == LBC_CHART
                and g.cluster_of(r) == g.cluster_of(ing)]
        if not lbcs or not any(g.waits_for(ing, r) for r in lbcs):
            out.append(Finding("webhooks-before-use", ing["name"],
                               "an ALB Ingress created before the load balancer controller "
                               "(its validating webhook and readiness-gate webhook) serves"))
    out += _pods_wait(g) + _releases_wait(g)
    agents = [a for a in g.of_type(ADDON)
              if (a.get("inputs") or {}).get("addonName") == POD_IDENTITY_AGENT]
    for assoc in g.of_type(POD_IDENTITY):
        cluster = (assoc.get("inputs") or {}).get("clusterName")
        mine = [a for a in agents if (a.get("inputs") or {}).get("clusterName") == cluster
                and g.region_of(a) == g.region_of(assoc)]
        if not mine or not any(g.waits_for(assoc, a) for a in mine):
            out.append(Finding("webhooks-before-use", assoc["name"],
                               f"a Pod Identity association on {cluster} without waiting for "
                               "its eks-pod-identity-agent add-on: pods get no credentials"))
    return out


def _association_key(g: Graph, a: Resource) -> tuple[Any, ...]:
    inputs = a.get("inputs") or {}
    cluster = (g.region_of(a), str(inputs.get("clusterName")))
    return cluster, inputs.get("namespace"), inputs.get("serviceAccount")


def _service_accounts(values: Any) -> set[str]:
    """ServiceAccount names a chart's values give (`serviceAccount: {name: ...}` anywhere)."""
    found: set[str] = set()
    if isinstance(values, Mapping):
        for k, v in values.items():
            if k == "serviceAccount" and isinstance(v, Mapping) and v.get("name"):
                found.add(str(v["name"]))
            else:
                found |= _service_accounts(v)
    elif isinstance(values, list):
        for v in values:
            found |= _service_accounts(v)
    return found


def _releases_wait(g: Graph) -> list[Finding]:
    """A chart whose pods run as a ServiceAccount with a Pod Identity association waits for
    it: EKS injects the credentials when a pod is created, never later."""
    out: list[Finding] = []
    for rel in g.of_type(RELEASE):
        inputs = rel.get("inputs") or {}
        accounts = _service_accounts(inputs.get("values") or {})
        assocs = [a for a in g.of_type(POD_IDENTITY)
                  if _association_key(g, a)[0] == g.eks_cluster_of(rel)
                  and (a.get("inputs") or {}).get("namespace") == inputs.get("namespace")
                  and (a.get("inputs") or {}).get("serviceAccount") in accounts]
        out += _waits(g, rel, assocs, "webhooks-before-use", lambda a: (
            f"its pods start before {a['name']} exists and get no Pod Identity credentials "
            f"({(a.get('inputs') or {}).get('serviceAccount')}: credentials are injected at "
            "pod creation)"))
    return out


def _pod_spec(r: Resource) -> Mapping[str, Any]:
    spec = (r.get("inputs") or {}).get("spec") or {}
    return ((spec.get("template") or {}).get("spec")) or {}


def _pods_wait(g: Graph) -> list[Finding]:
    out: list[Finding] = []
    namespaces = {
        (g.cluster_of(n), _meta(n).get("name")): n
        for n in g.of_type("kubernetes:core/v1:Namespace")
    }
    workloads = g.of_type("kubernetes:apps/v1:Deployment", "kubernetes:batch/v1:Job")
    for w in workloads:
        ns = _meta(w).get("namespace")
        same = [r for r in g.by_urn.values()
                if g.cluster_of(r) == g.cluster_of(w) and _meta(r).get("namespace") == ns]
        labels = _meta(namespaces.get((g.cluster_of(w), ns)) or {}).get("labels") or {}
        if w["type"].endswith(":Deployment"):
            if labels.get(READINESS_GATE_LABEL) == "enabled":
                ingresses = [r for r in same if r["type"].endswith(":Ingress")]
                out += _waits(g, w, ingresses, "webhooks-before-use", lambda i: (
                    f"pods created before {i['name']} get no ALB readiness gate"))
            jobs = [r for r in same if r["type"] == "kubernetes:batch/v1:Job"]
            out += _waits(g, w, jobs, "webhooks-before-use", lambda j: (
                f"pods start before {j['name']} has staged their weights"))
        account = _pod_spec(w).get("serviceAccountName")
        assocs = [a for a in g.of_type(POD_IDENTITY)
                  if _association_key(g, a) == (g.eks_cluster_of(w), ns, account)]
        out += _waits(g, w, assocs, "webhooks-before-use", lambda a: (
            f"pods created before {a['name']} exists get no Pod Identity credentials"))
    return out


# --- network policy ---------------------------------------------------------------------------


def network_policy_admits(g: Graph, _: str | None) -> list[Finding]:
    out = []
    assocs = {_association_key(g, a) for a in g.of_type(POD_IDENTITY)}
    for addon in g.of_type(ADDON):
        inputs = addon.get("inputs") or {}
        for assoc in inputs.get("podIdentityAssociations") or []:
            eks = (g.region_of(addon), str(inputs.get("clusterName")))
            assocs.add((eks, "kube-system", assoc.get("serviceAccount")))
    for w in g.of_type("kubernetes:apps/v1:Deployment", "kubernetes:batch/v1:Job"):
        provider, ns = g.cluster_of(w), _meta(w).get("namespace")
        local = [r for r in g.by_urn.values() if g.cluster_of(r) == provider]
        policies = [r["inputs"] for r in local if r["type"].endswith(":NetworkPolicy")]
        configmaps = {
            str(_meta(r).get("name")): (r.get("inputs") or {}).get("data") or {}
            for r in local
            if r["type"].endswith(":ConfigMap") and _meta(r).get("namespace") == ns
        }
        pod = _pod_spec(w)
        account = pod.get("serviceAccountName")
        sa = next((r for r in local if r["type"].endswith(":ServiceAccount")
                   and _meta(r).get("namespace") == ns and _meta(r).get("name") == account), None)
        irsa = netpol.IRSA_ANNOTATION in ((_meta(sa).get("annotations") or {}) if sa else {})
        labels = ((((w.get("inputs") or {}).get("spec") or {}).get("template") or {})
                  .get("metadata") or {}).get("labels") or {}
        identity = (g.eks_cluster_of(w), ns, account) in assocs
        for end in netpol.needs(pod, has_pod_identity=identity, irsa=irsa,
                                configmaps=configmaps):
            if not netpol.admitted(policies, str(ns), labels, end):
                where = end.address or f"{end.namespace}/{dict(end.labels or {})}"
                out.append(Finding("network-policy-admits", w["name"],
                                   f"its NetworkPolicy blocks {end.what} ({where} "
                                   f"{end.protocol} {end.port})"))
    return out + only_prometheus_scrapes(g)


GRAFANA_LABELS = {"app.kubernetes.io/name": "grafana",
                  "app.kubernetes.io/instance": PROMETHEUS_RELEASE}
"""Grafana's pods in kube-prometheus-stack (the grafana subchart's selector labels): stands
for every pod of the monitoring namespace that is not Prometheus."""


def _serving_ports(pod: Mapping[str, Any]) -> list[int]:
    return [int(p["containerPort"]) for c in pod.get("containers") or []
            for p in c.get("ports") or [] if "containerPort" in p]


def only_prometheus_scrapes(g: Graph) -> list[Finding]:
    """Of the monitoring namespace, Prometheus's pods reach a serving port, and only they:
    the port serves the API without authentication inside the cluster."""
    out = []
    for w in g.of_type("kubernetes:apps/v1:Deployment"):
        ns = str(_meta(w).get("namespace"))
        pod = _pod_spec(w)
        labels = ((((w.get("inputs") or {}).get("spec") or {}).get("template") or {})
                  .get("metadata") or {}).get("labels") or {}
        policies = [r["inputs"] for r in g.by_urn.values()
                    if g.cluster_of(r) == g.cluster_of(w) and r["type"].endswith(":NetworkPolicy")]
        for port in _serving_ports(pod):
            def peer(who: Mapping[str, str], port: int = port) -> netpol.Endpoint:
                return netpol.Endpoint("a monitoring pod", "TCP", port,
                                       namespace=MONITORING_NAMESPACE, labels=who)
            if netpol.admitted_from(policies, ns, labels, peer(GRAFANA_LABELS)):
                out.append(Finding("network-policy-admits", w["name"], (
                    f"any pod of {MONITORING_NAMESPACE} (Grafana, exporters) may call port "
                    f"{port}, which serves the API unauthenticated: admit Prometheus's pods "
                    f"only ({dict(PROMETHEUS_POD_LABELS)})")))
            if not netpol.admitted_from(policies, ns, labels, peer(PROMETHEUS_POD_LABELS)):
                out.append(Finding("network-policy-admits", w["name"], (
                    f"its NetworkPolicy blocks Prometheus's scrape of port {port}")))
    return out


def aws_api(g: Graph, _: str | None) -> list[Finding]:
    # moto and its EC2 models (about 0.5 s to import) load only when the checks run, not for
    # `preview --no-checks`, `diff --resources` or the program's own runs.
    from components.preview import emulated

    return [Finding("aws-api", name, message) for name, message in emulated.replay(g)]


Check = Callable[[Graph, str | None], list[Finding]]
CHECKS: dict[str, Check] = {
    "alarms-reach-someone": aws_rules.alarms_reach_someone,
    "rate-limits-cover-every-request": aws_rules.rate_limits_cover_every_request,
    "pull-through-credentials": aws_rules.pull_through_credentials,
    "least-privilege-policies": aws_rules.least_privilege_policies,
    "log-delivery-after-policy": aws_rules.log_delivery_after_policy,
    "identity-once": identity_once,
    "global-names-carry-the-account": global_names_carry_the_account,
    "name-limits": name_limits,
    "crds-before-use": crds_before_use,
    "crds-upgraded": crds_upgraded,
    "webhooks-before-use": webhooks_before_use,
    "network-policy-admits": network_policy_admits,
    "ingress-backends-exist": wiring.ingress_backends_exist,
    "discovery-permitted": wiring.discovery_permitted,
    "pdb-allows-a-drain": wiring.pdb_allows_a_drain,
    "aws-api": aws_api,
}


def run_checks(
    resources: list[dict[str, Any]], account_id: str | None, only: Iterable[str] | None = None
) -> list[Finding]:
    """Every check's findings over a preview's resources (sorted; `only`: those checks)."""
    graph = Graph(resources)
    names = list(only) if only is not None else list(CHECKS)
    found = [f for name in names for f in CHECKS[name](graph, account_id)]
    return sorted(set(found), key=lambda f: (f.check, f.resource, f.message))
