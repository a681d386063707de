"""What a preview of a change checks beyond what each run's own checks find.

- stateful-replaced / stateful-deleted: a resource that holds state (a cluster, a bucket of
  data, hosted-zone records, a node group with a warm floor, a KMS key, a hand-filled
  secret, a namespace, what installs CRDs) replaced or deleted, unless the change says so:
  `--allow-replace PATTERN` (a resource name, URN or type; shell wildcards), which the PR
  workflow reads from `Llmfleet-Allow-Replace:` trailers of the PR's commits, or the plan's
  `regions[].retire` for that region's resources. A resource deleted with retain_on_delete
  is left in place: neither a finding nor a blocker.
- update-refused: an update the API refuses and the provider does not replace (an EKS
  version skipping a minor, a CEL transition rule, a webhook's immutable field).
- replace-collides: a replacement of a resource with a fixed identity (its name, set by the
  program) without delete_before_replace: Pulumi creates the new one first, with the old
  one's name (limits.IDENTITIES; pulumi-kubernetes deletes first by itself).
- delete-order: a custom resource with a finalizer deleted with the controller that clears
  it, without waiting for it (it stays Terminating).
- permission-narrowed: an IAM statement or a NetworkPolicy rule narrowed in the update whose
  rollout stops needing it: the permission changes at the start, pods of the old revision
  keep running (and restarting) until the rollout is done.

Deletion blockers (ALB deletion protection, non-empty buckets, what controllers made in the
VPC, nodes Karpenter launched) are listed with the step that clears them.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.preview.change import Resource, ResourceChange
from components.preview.graph import Finding
from components.preview.limits import CRD_SOURCES, IDENTITIES, Identity

RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
LB_ATTRIBUTES = "alb.ingress.kubernetes.io/load-balancer-attributes"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


@dataclass(frozen=True)
class Blocker:
    """What stops a delete, and the step that clears it."""

    resource: str
    what: str
    step: str
    source: str
    rank: int = 0
    """Where its step goes in a removal: deletion protection first, what holds data, then
    what controllers made (their objects go while they run)."""


@dataclass(frozen=True)
class Stateful:
    type: str
    what: str
    source: str
    holds: Callable[[Resource], bool] = lambda _: True


def _inputs(r: Resource) -> Mapping[str, Any]:
    return r.get("inputs") or {}


def _floor(r: Resource) -> bool:
    return int((_inputs(r).get("scalingConfig") or {}).get("minSize") or 0) > 0


def _installs_crds(r: Resource) -> bool:
    inputs = _inputs(r)
    if r["type"] == RELEASE:
        chart = str(inputs.get("chart", ""))
        return not inputs.get("skipCrds") and any(
            s.chart and chart.endswith(s.chart) for s in CRD_SOURCES
        )
    return any(s.url_part and s.url_part in str(inputs.get("file", "")) for s in CRD_SOURCES)


STATEFUL: tuple[Stateful, ...] = (
    Stateful("aws:eks/cluster:Cluster", "an EKS cluster: every Kubernetes object in it; a new "
             "one has a new endpoint and CA", "EKS API DeleteCluster"),
    Stateful("aws:s3/bucket:Bucket", "a bucket holding data (staged weights, logs)",
             "S3 API DeleteBucket"),
    Stateful("aws:route53/record:Record", "a hosted-zone record: clients lose its answer "
             "(a renamed record stops answering at its old name; resolvers cache the gap for "
             "the zone's negative TTL)", "RFC 2308; Route 53 ChangeResourceRecordSets"),
    Stateful("aws:eks/nodeGroup:NodeGroup", "a node group with a warm floor: every node drains "
             "and the GPU capacity must be had again", "EKS API DeleteNodegroup", _floor),
    Stateful("aws:kms/key:Key", "a KMS key: deleting schedules it, and what it encrypts (the "
             "cluster's Secrets) is unreadable after the window", "KMS API ScheduleKeyDeletion"),
    Stateful("aws:secretsmanager/secret:Secret", "a secret whose value is put in by hand; its "
             "name stays taken for the recovery window", "Secrets Manager API DeleteSecret"),
    Stateful("kubernetes:core/v1:Namespace", "a namespace: deleting it deletes everything in "
             "it, Secrets put in by hand included", "Kubernetes Namespaces"),
    Stateful(RELEASE, "a chart that installs CRDs: deleting it deletes every custom resource "
             "of them", "Helm: CRDs in templates/ are deleted with the release", _installs_crds),
    Stateful(CONFIG_FILE, "CRDs: deleting one deletes every custom resource of it",
             "Kubernetes CustomResourceDefinitions", _installs_crds),
    Stateful("kubernetes:karpenter.sh/v1:NodePool", "a Karpenter NodePool: Karpenter drains and "
             "terminates every node it launched for it", "Karpenter docs, NodePools"),
)


@dataclass(frozen=True)
class FinalizerRule:
    type: str
    finalizer: str
    controller_chart: str
    source: str


FINALIZERS: tuple[FinalizerRule, ...] = (
    FinalizerRule(INGRESS, "ingress.k8s.aws/resources", "aws-load-balancer-controller",
                  "aws-load-balancer-controller v3.5.0: the Ingress group finalizer"),
    FinalizerRule("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "karpenter.k8s.aws/termination",
                  "karpenter", "Karpenter v1: EC2NodeClass termination finalizer"),
    FinalizerRule("kubernetes:keda.sh/v1alpha1:ScaledObject", "finalizer.keda.sh", "keda",
                  "KEDA: ScaledObject finalizer"),
)


REPLACED_IDENTITIES: tuple[Identity, ...] = (
    *IDENTITIES,
    Identity("aws:eks/nodeGroup:NodeGroup", ("clusterName", "nodeGroupName"), "region",
             "ResourceInUseException: NodeGroup already exists", "EKS API CreateNodegroup"),
    Identity("aws:ec2/launchTemplate:LaunchTemplate", ("name",), "region",
             "InvalidLaunchTemplateName.AlreadyExistsException", "EC2 API CreateLaunchTemplate"),
    Identity("aws:cloudwatch/logGroup:LogGroup", ("name",), "region",
             "ResourceAlreadyExistsException", "CloudWatch Logs API CreateLogGroup"),
    Identity("aws:ec2/placementGroup:PlacementGroup", ("name",), "region",
             "InvalidPlacementGroup.Duplicate", "EC2 API CreatePlacementGroup"),
)
"""What a second create collides on (limits.IDENTITIES, and names only a replacement makes
twice)."""


def allowed(change: ResourceChange, patterns: Sequence[str]) -> bool:
    return any(
        fnmatch.fnmatchcase(value, p)
        for p in patterns
        for value in (change.name, change.urn, change.type)
    )


def change_findings(
    changes: Sequence[ResourceChange], before: Sequence[Resource], allow: Sequence[str] = ()
) -> list[Finding]:
    out = []
    for change in changes:
        if change.op in ("replace", "delete"):
            out += _stateful(change, allow)
        if change.op == "replace":
            out += _collides(change)
        for reason in change.of("refused"):
            out.append(Finding("update-refused", change.name,
                               f"{change.type}: {reason.text()}; `pulumi up` fails here: "
                               "make it a replacement (replace_on_changes) or a new resource"))
    out += _delete_order(changes, before)
    out += _narrowed_policies(changes)
    out += _narrowed_network_policies(changes)
    return out


def retained(change: ResourceChange) -> bool:
    """A delete of a resource with retain_on_delete: the engine drops it from the stack and
    leaves it in place (Pulumi resource option retainOnDelete), so nothing is lost or blocked."""
    return change.op == "delete" and bool(
        ((change.before or {}).get("options") or {}).get("retain_on_delete"))


def retiring_patterns(regions: Sequence[str]) -> list[str]:
    """--allow-replace patterns for the resources of regions the plan retires
    (regions[].retire says the change means their deletion): names carrying the region."""
    return [p for r in regions for p in (f"*-{r}", f"*-{r}-*")]


def _stateful(change: ResourceChange, allow: Sequence[str]) -> list[Finding]:
    r = change.resource
    rule = next((s for s in STATEFUL if s.type == change.type and s.holds(r)), None)
    if rule is None or allowed(change, allow) or retained(change):
        return []
    verb = "replaced" if change.op == "replace" else "deleted"
    why = ", ".join(dict.fromkeys(x.property for x in change.of("replace")))
    because = f" (its {why} changes)" if why else ""
    return [Finding(f"stateful-{verb}", change.name,
                    f"{verb}{because}: {rule.what}. If the change means it, say so: "
                    f"--allow-replace {change.name} (or a Llmfleet-Allow-Replace: trailer)")]


def _collides(change: ResourceChange) -> list[Finding]:
    if not change.type.startswith("aws:") or change.after is None or change.before is None:
        return []
    if change.after["options"].get("delete_before_replace"):
        return []
    out = []
    for ident in REPLACED_IDENTITIES:
        if ident.type != change.type:
            continue
        old = [_inputs(change.before).get(k) for k in ident.key]
        new = [_inputs(change.after).get(k) for k in ident.key]
        if None not in new and old == new:
            out.append(Finding("replace-collides", change.name,
                               f"replaced create-before-delete, the new {change.type} has the "
                               f"old one's {', '.join(ident.key)} ({ident.error}): set "
                               "delete_before_replace=True on it, or change its name"))
    return out


# --- delete order -----------------------------------------------------------------------


def _needs(before: Sequence[Resource]) -> Callable[[str], set[str]]:
    """What each old resource waits for (its dependencies, parent and provider, transitively):
    the engine deletes a resource before what it waits for."""
    edges: dict[str, set[str]] = {}
    for r in before:
        opts = r.get("options") or {}
        deps = set(opts.get("depends_on_urns", []))
        for urns in (opts.get("property_dependency_urns") or {}).values():
            deps.update(urns)
        deps.update(u for u in (r.get("parent_urn"), r.get("provider_urn")) if u)
        edges[r["urn"]] = deps
    memo: dict[str, set[str]] = {}

    def closure(urn: str) -> set[str]:
        if urn not in memo:
            memo[urn] = set()
            for dep in edges.get(urn, ()):
                memo[urn] |= {dep} | closure(dep)
        return memo[urn]

    return closure


def _delete_order(changes: Sequence[ResourceChange], before: Sequence[Resource]) -> list[Finding]:
    deleted = [c for c in changes if c.op == "delete"]
    releases = [c for c in deleted if c.type == RELEASE]
    needs = _needs(before)
    out = []
    for rule in FINALIZERS:
        controllers = [c for c in releases
                       if str(_inputs(c.resource).get("chart", "")).endswith(rule.controller_chart)]
        for c in (c for c in deleted if c.type == rule.type):
            for ctl in controllers:
                if ctl.urn not in needs(c.urn):
                    out.append(Finding(
                        "delete-order", c.name,
                        f"carries the finalizer {rule.finalizer}, which only {ctl.name} removes; "
                        f"the change deletes both and {c.name} does not wait for it: it stays "
                        f"Terminating ({rule.source}). Delete it in an earlier update, or make "
                        "it depend on the controller"))
    return out


# --- permissions narrowed before the rollout --------------------------------------------


def _rolls(change: ResourceChange) -> bool:
    """Pods of the old revision run on while this workload's rollout goes (or a replaced
    Job's new pods start)."""
    return change.op == "replace" or bool(change.of("recreates"))


def _pod_template(r: Resource) -> Mapping[str, Any]:
    spec = _inputs(r).get("spec") or {}
    if "leaderWorkerTemplate" in spec:
        return spec["leaderWorkerTemplate"].get("workerTemplate") or {}
    return spec.get("template") or {}


ROLLED_KINDS = ("apps/v1:Deployment", "apps/v1:StatefulSet", "apps/v1:DaemonSet",
                "leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")
"""Workloads whose old pods run on through a rollout (a replaced Job's old pods are not
rolled: the old Job is deleted once the new one exists)."""


def _workloads(changes: Sequence[ResourceChange]) -> list[ResourceChange]:
    return [c for c in changes
            if c.after is not None and c.type.endswith(ROLLED_KINDS) and _rolls(c)]


def _grants(document: Any) -> set[tuple[str, str, tuple[tuple[str, str, str], ...]]]:
    """An IAM policy's Allow statements as (action, resource, conditions) units: one per
    action, resource and choice of each condition's values."""
    try:
        doc = json.loads(document) if isinstance(document, str) else document
    except json.JSONDecodeError:
        return set()
    statements = (doc or {}).get("Statement") or []
    if isinstance(statements, Mapping):
        statements = [statements]
    out = set()
    for s in statements:
        if s.get("Effect") != "Allow":
            continue
        conditions: list[list[tuple[str, str, str]]] = [[]]
        for op, keys in sorted((s.get("Condition") or {}).items()):
            for key, values in sorted(keys.items()):
                values = values if isinstance(values, list) else [values]
                conditions = [[*c, (op, key, str(v))] for c in conditions for v in values]
        for action in _listed(s.get("Action")):
            for resource in _listed(s.get("Resource")):
                out |= {(action, resource, tuple(sorted(c))) for c in conditions}
    return out


def _listed(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _covered(unit: tuple[str, str, tuple[tuple[str, str, str], ...]],
             grants: Iterable[tuple[str, str, tuple[tuple[str, str, str], ...]]]) -> bool:
    action, resource, conditions = unit
    for a, r, cond in grants:
        # IAM action names are case-insensitive, ARNs are not
        if not (fnmatch.fnmatch(action.lower(), a.lower()) and fnmatch.fnmatchcase(resource, r)):
            continue
        if all(any(o == op and k == key and fnmatch.fnmatchcase(val, v)
                   for op, key, val in conditions) for o, k, v in cond):
            return True
    return False


def _narrowed_policies(changes: Sequence[ResourceChange]) -> list[Finding]:
    by_urn = {c.urn: c for c in changes}
    accounts: dict[str, list[tuple[str, str]]] = {}  # role URN -> (namespace, service account)
    for c in changes:
        if c.type == "aws:eks/podIdentityAssociation:PodIdentityAssociation" and c.after:
            for role in c.after["options"].get("property_dependency_urns", {}).get("roleArn", []):
                inputs = _inputs(c.after)
                accounts.setdefault(role, []).append(
                    (str(inputs.get("namespace")), str(inputs.get("serviceAccount"))))
    workloads = _workloads(changes)
    out = []
    for c in changes:
        if c.type != ROLE_POLICY or c.op != "update" or "policy" not in c.changed:
            continue
        assert c.before is not None and c.after is not None
        old, new = _grants(_inputs(c.before).get("policy")), _grants(_inputs(c.after).get("policy"))
        lost = sorted(u for u in old if not _covered(u, new))
        if not lost:
            continue
        roles = c.after["options"].get("property_dependency_urns", {}).get("role", [])
        users = {acct for role in roles for acct in accounts.get(role, [])}
        for w in workloads:
            assert w.after is not None
            namespace = str((_inputs(w.after).get("metadata") or {}).get("namespace", "default"))
            account = str((_pod_template(w.after).get("spec") or {}).get("serviceAccountName"))
            if (namespace, account) in users:
                role = by_urn[roles[0]].name if roles and roles[0] in by_urn else "its role"
                action, resource, cond = lost[0]
                where = f" where {' and '.join(f'{k} {v}' for _, k, v in cond)}" if cond else ""
                out.append(Finding(
                    "permission-narrowed", c.name,
                    f"{role} loses {action} on {resource}{where} ({len(lost)} grant(s)) at the "
                    f"start of the update, while {w.name}'s pods (service account {account}) "
                    "run the old revision until its rollout is done: grant both in this change "
                    "and narrow in the next one"))
    return out


def _rules(r: Resource) -> set[tuple[str, str, str]]:
    """A NetworkPolicy's rules as (direction, peer, port) units; a direction the policy
    does not isolate admits everything."""
    spec = _inputs(r).get("spec") or {}
    types = spec.get("policyTypes") or ["Ingress"]
    out = set()
    for direction, key, peers_key in (("Ingress", "ingress", "from"), ("Egress", "egress", "to")):
        if direction not in types:
            out.add((direction, "*", "*"))
            continue
        for rule in spec.get(key) or []:
            peers = [json.dumps(p, sort_keys=True) for p in rule.get(peers_key) or []] or ["*"]
            ports = [json.dumps(p, sort_keys=True) for p in rule.get("ports") or []] or ["*"]
            out |= {(direction, p, q) for p in peers for q in ports}
    return out


def _narrowed_network_policies(changes: Sequence[ResourceChange]) -> list[Finding]:
    workloads = _workloads(changes)
    out = []
    for c in changes:
        if c.type != NETWORK_POLICY or c.op != "update":
            continue
        assert c.before is not None and c.after is not None
        new = _rules(c.after)
        lost = sorted(u for u in _rules(c.before) if not any(
            d == u[0] and p in ("*", u[1]) and q in ("*", u[2]) for d, p, q in new))
        if not lost:
            continue
        meta = _inputs(c.after).get("metadata") or {}
        selector = ((_inputs(c.after).get("spec") or {}).get("podSelector") or {}).get(
            "matchLabels") or {}
        for w in workloads:
            assert w.after is not None
            labels = (_pod_template(w.after).get("metadata") or {}).get("labels") or {}
            namespace = (_inputs(w.after).get("metadata") or {}).get("namespace")
            if namespace == meta.get("namespace") and selector.items() <= labels.items():
                direction, peer, port = lost[0]
                out.append(Finding(
                    "permission-narrowed", c.name,
                    f"{direction} rule (peer {peer}, port {port}) goes at the start of the "
                    f"update while {w.name}'s old pods still run: keep it until the rollout is "
                    "done, drop it in the next change"))
    return out


# --- deletion blockers --------------------------------------------------------------------


def blockers(changes: Sequence[ResourceChange]) -> list[Blocker]:
    out = []
    for c in changes:
        if c.op not in ("delete", "replace") or retained(c):
            continue
        r = c.before or {}
        inputs = _inputs(r)
        if c.type == "aws:s3/bucket:Bucket" and not inputs.get("forceDestroy"):
            bucket = inputs.get("bucket") or c.name
            out.append(Blocker(
                c.name, f"DeleteBucket fails (BucketNotEmpty) while {bucket} holds objects",
                f"empty it first: `aws s3 rm s3://{bucket} --recursive` (and its object versions "
                "if versioned), or set force_destroy in an update before the delete",
                "S3 API DeleteBucket: every object and version must be deleted first", 1))
        if c.type == INGRESS:
            attrs = str(((inputs.get("metadata") or {}).get("annotations") or {}).get(
                LB_ATTRIBUTES, ""))
            if "deletion_protection.enabled=true" in attrs:
                out.append(Blocker(
                    c.name, "the ALB has deletion protection: the controller cannot delete it "
                    "and the Ingress keeps its finalizer (the delete hangs)",
                    "turn deletion protection off first: deletion_protection.enabled=false in "
                    f"{LB_ATTRIBUTES} and `pulumi up`, then delete",
                    "Elastic Load Balancing: a load balancer with deletion protection cannot be "
                    "deleted; aws-load-balancer-controller v3.5.0 annotations", 0))
        if c.op == "delete" and c.type in ("aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet"):
            out.append(Blocker(
                c.name, "DeleteVpc/DeleteSubnet fail (DependencyViolation) while the load "
                "balancer controller's ALB and security groups or nodes Karpenter launched "
                "(neither in the stack) still have network interfaces there",
                "delete the Ingresses and NodePools first, while their controllers run (they "
                "remove what they made); check `aws ec2 describe-network-interfaces --filters "
                "Name=vpc-id,Values=<vpc>` lists nothing",
                "EC2 API DeleteVpc and DeleteSubnet; aws-load-balancer-controller security "
                "groups; Karpenter docs, Uninstall", 3))
        if c.op == "delete" and c.type == "aws:eks/cluster:Cluster":
            out.append(Blocker(
                c.name, "nodes Karpenter launched are not in the stack: deleting the cluster "
                "leaves them running (and their interfaces in the subnets)",
                "delete the NodePools while Karpenter runs (it drains and terminates its nodes) "
                "before the cluster goes",
                "Karpenter docs, Uninstall: delete NodePools (and their nodes) first", 2))
        if c.type == "aws:secretsmanager/secret:Secret" and c.op == "replace":
            out.append(Blocker(
                c.name, "a deleted secret's name stays taken for its recovery window (7-30 "
                "days): creating the new one with the same name fails",
                "restore the old one (`aws secretsmanager restore-secret`) or delete it "
                "without recovery before the update",
                "Secrets Manager API DeleteSecret (RecoveryWindowInDays)", 1))
    return out
