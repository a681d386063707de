"""The policy rules, as pure functions over a stack's resources.

A resource is a dict `{"type", "name", "id", "inputs"}`: what `llmfleet preview --json`
prints, and what `__main__.py` builds from each `pulumi_policy.PolicyResource` (its type,
name and properties; a Pulumi secret becomes "[secret]"). Each rule returns its violations;
the pack reports them and the tests run the same functions over the mocked program and
over a deliberately bad fixture per rule.

A rule checks what it can see: resources created elsewhere (an existing VPC's subnets) and
values still unknown in a preview (ids of resources not yet created) are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Resource = Mapping[str, Any]
SECRET = "[secret]"
ENVIRONMENT_TAG = "llmfleet.io/environment"
"""Tag InferenceCluster puts on the cluster: `production` turns on production-only rules.
A stack tag `environment: production` (`pulumi stack tag set environment production`) does
the same for the pack."""
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod")
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|CREDENTIAL", re.I)
SECRET_VALUE = re.compile(r"\b(hf_[A-Za-z0-9]{8,}|sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16})")
ROUTING_POLICIES = (
    "failoverRoutingPolicies",
    "latencyRoutingPolicies",
    "weightedRoutingPolicies",
    "geolocationRoutingPolicies",
    "geoproximityRoutingPolicies",
    "cidrRoutingPolicies",
)


@dataclass(frozen=True)
class Violation:
    rule: str
    resource: str
    message: str


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    enforcement: Literal["mandatory", "advisory"]
    scope: Literal["resource", "stack"]
    """resource: judged one resource at a time; stack: needs other resources to judge."""
    check: Callable[[list[Resource], Mapping[str, str]], list[Violation]]


def _true(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


def _of(resources: Iterable[Resource], *types: str) -> list[Resource]:
    return [r for r in resources if r["type"] in types]


def _kind(r: Resource) -> str | None:
    """The Kubernetes kind of a `kubernetes:*` resource (None for others)."""
    if not str(r["type"]).startswith("kubernetes:"):
        return None
    return str(r["type"]).rsplit(":", 1)[-1]


def pod_spec(r: Resource) -> Mapping[str, Any] | None:
    """The pod template of a Kubernetes workload, or None."""
    kind, spec = _kind(r), r["inputs"].get("spec") or {}
    if kind == "Pod":
        return spec
    if kind == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    if kind == "LeaderWorkerSet":  # its workers' template (the leader's differs in probes)
        lwt = spec.get("leaderWorkerTemplate") or {}
        return ((lwt.get("workerTemplate") or {}).get("spec")) or {}
    if kind in WORKLOAD_KINDS:
        return ((spec.get("template") or {}).get("spec")) or {}
    return None


def containers(r: Resource) -> list[Mapping[str, Any]]:
    spec = pod_spec(r) or {}
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


# --- nodes ------------------------------------------------------------------------------------


def _public_subnet_ids(resources: list[Resource]) -> tuple[set[str], set[str]]:
    """(ids of subnets that are public, ids of every subnet the stack creates)."""
    igws = {r["id"] for r in _of(resources, "aws:ec2/internetGateway:InternetGateway")}
    public_rts = {
        r["id"]
        for r in _of(resources, "aws:ec2/routeTable:RouteTable")
        if any(str(rt.get("gatewayId", "")).startswith("igw") or rt.get("gatewayId") in igws
               for rt in r["inputs"].get("routes") or [])
    }
    subnets = _of(resources, "aws:ec2/subnet:Subnet")
    public = {s["id"] for s in subnets if _true(s["inputs"].get("mapPublicIpOnLaunch"))}
    for a in _of(resources, "aws:ec2/routeTableAssociation:RouteTableAssociation"):
        if a["inputs"].get("routeTableId") in public_rts:
            public.add(a["inputs"].get("subnetId"))
    return public, {s["id"] for s in subnets}


def nodes_private(resources: list[Resource], _: Mapping[str, str]) -> list[Violation]:
    public, _known = _public_subnet_ids(resources)
    out = []
    for ng in _of(resources, "aws:eks/nodeGroup:NodeGroup"):
        bad = sorted(s for s in ng["inputs"].get("subnetIds") or [] if s in public)
        if bad:
            out.append(Violation("nodes-in-private-subnets", ng["name"],
                                 f"node group in public subnets {', '.join(bad)}"))
    for lt in _of(resources, "aws:ec2/launchTemplate:LaunchTemplate"):
        for nic in lt["inputs"].get("networkInterfaces") or []:
            if _true(nic.get("associatePublicIpAddress")):
                out.append(Violation("nodes-in-private-subnets", lt["name"],
                                     "launch template gives nodes a public IP"))
    return out


def imdsv2(resources: list[Resource], _: Mapping[str, str]) -> list[Violation]:
    out = []
    for lt in _of(resources, "aws:ec2/launchTemplate:LaunchTemplate"):
        tokens = (lt["inputs"].get("metadataOptions") or {}).get("httpTokens")
        if tokens != "required":
            out.append(Violation("imdsv2-required", lt["name"],
                                 f"metadataOptions.httpTokens is {tokens!r}, not 'required'"))
    for ng in _of(resources, "aws:eks/nodeGroup:NodeGroup"):
        if not ng["inputs"].get("launchTemplate"):
            out.append(Violation("imdsv2-required", ng["name"],
                                 "node group without a launch template: IMDSv1 stays allowed"))
    return out


def volumes_encrypted(resources: list[Resource], _: Mapping[str, str]) -> list[Violation]:
    out = []
    for lt in _of(resources, "aws:ec2/launchTemplate:LaunchTemplate"):
        for bdm in lt["inputs"].get("blockDeviceMappings") or []:
            if not _true((bdm.get("ebs") or {}).get("encrypted")):
                out.append(Violation("volumes-encrypted", lt["name"],
                                     f"volume {bdm.get('deviceName')} is not encrypted"))
    for v in _of(resources, "aws:ebs/volume:Volume"):
        if not _true(v["inputs"].get("encrypted")):
            out.append(Violation("volumes-encrypted", v["name"], "EBS volume is not encrypted"))
    return out


# --- the cluster API --------------------------------------------------------------------------


def eks_api_restricted(resources: list[Resource], stack_tags: Mapping[str, str]) -> list[Violation]:
    out = []
    for c in _of(resources, "aws:eks/cluster:Cluster"):
        tags = c["inputs"].get("tags") or {}
        production = "production" in (tags.get(ENVIRONMENT_TAG), stack_tags.get("environment"))
        vpc = c["inputs"].get("vpcConfig") or {}
        # AWS's default when the field is absent: a public endpoint open to 0.0.0.0/0
        public = vpc.get("endpointPublicAccess", True)
        cidrs = vpc.get("publicAccessCidrs") or ["0.0.0.0/0"]
        if production and _true(public) and any(str(x).endswith("/0") for x in cidrs):
            out.append(Violation("eks-api-not-open-in-production", c["name"],
                                 "production cluster's API endpoint is open to 0.0.0.0/0"))
    return out


# --- workloads --------------------------------------------------------------------------------


def _file_pointer(env: Mapping[str, Any]) -> bool:
    """`HF_TOKEN_PATH=/var/run/...`: a variable naming the file a secret is mounted at."""
    name, value = str(env.get("name", "")), str(env.get("value", ""))
    return name.endswith(("_PATH", "_FILE")) and value.startswith("/") and not (
        SECRET_VALUE.search(value)
    )


def secrets_by_reference(resources: list[Resource], _: Mapping[str, str]) -> list[Violation]:
    out = []
    for r in resources:
        for c in containers(r):
            for env in c.get("env") or []:
                value = env.get("value")
                if value is None or value == SECRET or _file_pointer(env):
                    continue
                if SECRET_NAME.search(str(env.get("name", ""))) or SECRET_VALUE.search(str(value)):
                    out.append(Violation(
                        "secrets-by-reference", r["name"],
                        f"container {c.get('name')} env {env.get('name')} has a literal value; "
                        "use valueFrom.secretKeyRef"))
        if _kind(r) == "Secret":
            for key in ("data", "stringData"):
                values = r["inputs"].get(key) or {}
                if values == SECRET:  # the whole map is a Pulumi secret
                    continue
                for k, v in values.items():
                    if v != SECRET:
                        out.append(Violation(
                            "secrets-by-reference", r["name"],
                            f"Secret {key}.{k} is plain text in the program; make it a Pulumi "
                            "secret (pulumi.Output.secret / config --secret)"))
    return out


def _is_model_server(r: Resource) -> bool:
    labels = ((r["inputs"].get("metadata") or {}).get("labels")) or {}
    images = [str(c.get("image", "")) for c in containers(r)]
    return labels.get("app.kubernetes.io/name") == "vllm" or any("vllm" in i for i in images)


def _pod_labels(r: Resource) -> Mapping[str, str]:
    spec = r["inputs"].get("spec") or {}
    return ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}


def network_policy_per_model_server(
    resources: list[Resource], _: Mapping[str, str]
) -> list[Violation]:
    policies = [r["inputs"] for r in resources if _kind(r) == "NetworkPolicy"]
    out = []
    for r in resources:
        if _kind(r) != "Deployment" or not _is_model_server(r):
            continue
        ns = (r["inputs"].get("metadata") or {}).get("namespace")
        labels = _pod_labels(r)
        covered = [
            p for p in policies
            if (p.get("metadata") or {}).get("namespace") == ns
            and {"Ingress", "Egress"} <= set((p.get("spec") or {}).get("policyTypes") or [])
            and (((p.get("spec") or {}).get("podSelector") or {}).get("matchLabels") or {}).items()
            <= labels.items()
        ]
        if not covered:
            out.append(Violation("network-policy-per-model-server", r["name"],
                                 f"no NetworkPolicy (Ingress and Egress) selects its pods in {ns}"))
    return out


def health_check_per_routed_record(
    resources: list[Resource], _: Mapping[str, str]
) -> list[Violation]:
    out = []
    for rec in _of(resources, "aws:route53/record:Record"):
        i = rec["inputs"]
        routed = i.get("setIdentifier") or any(i.get(k) for k in ROUTING_POLICIES)
        alias_health = any(_true(a.get("evaluateTargetHealth")) for a in i.get("aliases") or [])
        if routed and not i.get("healthCheckId") and not alias_health:
            out.append(Violation("health-check-per-routed-record", rec["name"],
                                 "a routed record without a health check keeps sending "
                                 "traffic to a failed region"))
    return out


HEALTH_PATHS = ("/health",)
"""Paths a public entry point may serve without authentication: Route53's checkers send no
credentials."""
ALB_AUTH = ("alb.ingress.kubernetes.io/jwt-validation", "alb.ingress.kubernetes.io/auth-type")
ALB_WAF = ("alb.ingress.kubernetes.io/wafv2-acl-name", "alb.ingress.kubernetes.io/wafv2-acl-arn")


def _production(resources: list[Resource], stack_tags: Mapping[str, str]) -> bool:
    tags = [(c["inputs"].get("tags") or {}).get(ENVIRONMENT_TAG)
            for c in _of(resources, "aws:eks/cluster:Cluster")]
    return "production" in (*tags, stack_tags.get("environment"))


def _public_ingresses(resources: list[Resource]) -> list[tuple[Resource, Mapping[str, str]]]:
    out = []
    for r in resources:
        if _kind(r) != "Ingress":
            continue
        annotations = ((r["inputs"].get("metadata") or {}).get("annotations")) or {}
        if annotations.get("alb.ingress.kubernetes.io/scheme") == "internet-facing":
            out.append((r, annotations))
    return out


def _data_paths(ingress: Resource) -> list[str]:
    rules = ((ingress["inputs"].get("spec") or {}).get("rules")) or []
    paths = [p.get("path", "/") for rule in rules
             for p in (rule.get("http") or {}).get("paths") or []]
    return sorted({p for p in paths if p not in HEALTH_PATHS})


def entry_point_authenticated(
    resources: list[Resource], stack_tags: Mapping[str, str]
) -> list[Violation]:
    if not _production(resources, stack_tags):
        return []
    out = []
    for r, notes in _public_ingresses(resources):
        auth = any(notes.get(k) not in (None, "none") for k in ALB_AUTH)
        paths = _data_paths(r)
        if paths and not auth:
            out.append(Violation("public-entry-point-authenticated-in-production", r["name"],
                                 f"internet-facing Ingress serves {', '.join(paths)} without "
                                 "authentication at the load balancer (plan edge.auth)"))
    return out


def entry_point_rate_limited(
    resources: list[Resource], stack_tags: Mapping[str, str]
) -> list[Violation]:
    if not _production(resources, stack_tags):
        return []
    out = []
    for r, notes in _public_ingresses(resources):
        if _data_paths(r) and not any(notes.get(k) not in (None, "none") for k in ALB_WAF):
            out.append(Violation("public-entry-point-rate-limited-in-production", r["name"],
                                 "internet-facing Ingress without an AWS WAF web ACL (plan "
                                 "edge.rate_limit)"))
    return out


def images_pinned(resources: list[Resource], _: Mapping[str, str]) -> list[Violation]:
    return [
        Violation("images-pinned-by-digest", r["name"],
                  f"container {c.get('name')} image {c.get('image')} is not pinned by digest")
        for r in resources
        for c in containers(r)
        if "@sha256:" not in str(c.get("image", ""))
    ]


RULES: tuple[Rule, ...] = (
    Rule("nodes-in-private-subnets", "Nodes run in private subnets without public IPs.",
         "mandatory", "stack", nodes_private),
    Rule("imdsv2-required", "Nodes require IMDSv2 (session tokens) for instance metadata.",
         "mandatory", "resource", imdsv2),
    Rule("volumes-encrypted", "Every EBS volume is encrypted.",
         "mandatory", "resource", volumes_encrypted),
    Rule("eks-api-not-open-in-production",
         "A production cluster's API endpoint is private or limited to given CIDRs.",
         "mandatory", "resource", eks_api_restricted),
    Rule("secrets-by-reference",
         "Secrets reach pods only through Secret references and are Pulumi secrets in the "
         "program.", "mandatory", "resource", secrets_by_reference),
    Rule("network-policy-per-model-server",
         "Every model server Deployment has a NetworkPolicy limiting ingress and egress.",
         "mandatory", "stack", network_policy_per_model_server),
    Rule("health-check-per-routed-record",
         "Every Route53 record with a routing policy has a health check.",
         "mandatory", "resource", health_check_per_routed_record),
    Rule("public-entry-point-authenticated-in-production",
         "A production public entry point authenticates every data-plane request at the "
         "load balancer.", "mandatory", "stack", entry_point_authenticated),
    Rule("public-entry-point-rate-limited-in-production",
         "A production public entry point has a WAF web ACL (a per-client rate limit).",
         "mandatory", "stack", entry_point_rate_limited),
    # advisory until the vLLM image is pinned by digest (the digest of
    # vllm/vllm-openai:v0.33.0 could not be read offline): it reports, it does not block.
    Rule("images-pinned-by-digest", "Container images are pinned by digest, not a tag.",
         "advisory", "resource", images_pinned),
)


def violations(resources: list[Resource], stack_tags: Mapping[str, str] | None = None,
               rules: Iterable[Rule] = RULES) -> list[Violation]:
    """Every rule's violations over a stack's resources."""
    return [v for rule in rules for v in rule.check(list(resources), stack_tags or {})]
