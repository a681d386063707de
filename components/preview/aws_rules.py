"""Rules of AWS services that neither Pulumi's mocks nor moto enforce, each with its source:
what makes a resource the program created do nothing (an alarm nobody hears, a rate limit some
requests escape) or fail at its first use (a pull through a cache without credentials).

- alarms-reach-someone: a CloudWatch alarm's SNS topic is one CloudWatch may publish to (not
  the AWS managed key alias/aws/sns, whose policy CloudWatch cannot be granted; a customer
  key whose policy lets cloudwatch.amazonaws.com decrypt and generate data keys) and has a
  subscription (SNS developer guide, sns-key-management: "Enable compatibility between event
  sources from AWS services and encrypted topics").
- rate-limits-cover-every-request: a WAF rate-based rule aggregating on a header omits every
  request without it (WAF API RateBasedStatementCustomKey: "Web requests that are missing any
  of the components specified in the aggregation keys are omitted from the rate-based rule
  evaluation and handling"); another rate rule must limit those (WAF developer guide,
  waf-rate-based-example-limit-missing-header).
- pull-through-credentials: a pull-through cache rule of Docker Hub, and a pod image through
  it, need the rule's Secrets Manager secret to hold credentials (ECR user guide, pull-through
  cache: Docker Hub requires authentication; "Creating a pull through cache rule": for an
  upstream that requires authentication the credentials are stored in the secret first, and
  CreatePullThroughCacheRule reads it: its errors include UnableToAccessSecretException and
  UnableToDecryptSecretValueException); a secret this program creates holds none unless a
  SecretVersion fills it or the plan says it was filled by hand (`weights.CREDENTIALS_TAG`).
- least-privilege-policies: managed policies with a narrower AWS replacement
  (`NARROWER_POLICIES`).
- log-delivery-after-policy: a VPC flow log to S3 waits for its bucket's policy (VPC user
  guide, flow-logs-s3: without a policy granting delivery.logs.amazonaws.com, CreateFlowLogs
  writes one of its own, which the program's policy then replaces mid-delivery)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from components.preview.graph import Finding, Graph, Resource
from components.weights import CREDENTIALS_TAG

TOPIC = "aws:sns/topic:Topic"
SUBSCRIPTION = "aws:sns/topicSubscription:TopicSubscription"
ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
KMS_KEY = "aws:kms/key:Key"
WEB_ACL = "aws:wafv2/webAcl:WebAcl"
CACHE_RULE = "aws:ecr/pullThroughCacheRule:PullThroughCacheRule"
SECRET = "aws:secretsmanager/secret:Secret"
SECRET_VERSION = "aws:secretsmanager/secretVersion:SecretVersion"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
FLOW_LOG = "aws:ec2/flowLog:FlowLog"
BUCKET = "aws:s3/bucket:Bucket"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
POD_KINDS = ("Deployment", "Job", "LeaderWorkerSet")

CLOUDWATCH = "cloudwatch.amazonaws.com"
AWS_MANAGED_SNS_KEY = "alias/aws/sns"
CLOUDWATCH_KEY_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey*")
"""What the key policy must allow CloudWatch (SNS developer guide, sns-key-management)."""
NARROWER_POLICIES = {
    "AmazonEC2ContainerRegistryReadOnly": (
        "AmazonEC2ContainerRegistryPullOnly",
        "nodes only pull: PullOnly grants GetAuthorizationToken, BatchGetImage, "
        "GetDownloadUrlForLayer and BatchImportUpstreamImage; ReadOnly adds listing and "
        "describing every repository (Karpenter's CloudFormation template gives its nodes "
        "PullOnly, website/content/en/v1.14/getting-started/.../cloudformation.yaml)",
    ),
}


def _inputs(r: Resource) -> Mapping[str, Any]:
    return r.get("inputs") or {}


def _statements(policy: object) -> list[Mapping[str, Any]]:
    try:
        doc = json.loads(policy) if isinstance(policy, str) else policy
    except ValueError:
        return []
    statements = (doc or {}).get("Statement") or [] if isinstance(doc, dict) else []
    return statements if isinstance(statements, list) else [statements]


def _as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _key_lets_cloudwatch_publish(key: Resource) -> bool:
    granted: set[str] = set()
    for st in _statements(_inputs(key).get("policy")):
        principal = st.get("Principal") or {}
        services = _as_list(principal.get("Service")) if isinstance(principal, dict) else []
        if st.get("Effect") == "Allow" and CLOUDWATCH in services:
            granted |= set(_as_list(st.get("Action")))
    return all(a in granted or "kms:*" in granted for a in CLOUDWATCH_KEY_ACTIONS)


def alarms_reach_someone(g: Graph, _: str | None) -> list[Finding]:
    out: list[Finding] = []
    targets = {str(a) for alarm in g.of_type(ALARM)
               for a in _inputs(alarm).get("alarmActions") or []}
    subscribed = {str(_inputs(s).get("topic")) for s in g.of_type(SUBSCRIPTION)}
    for topic in g.of_type(TOPIC):
        name = str(_inputs(topic).get("name") or topic["name"])
        arns = [t for t in targets if t.endswith(f":{name}")]
        if not arns:
            continue
        key = _inputs(topic).get("kmsMasterKeyId")
        keys = [k for k in g.of_type(KMS_KEY) if g.waits_for(topic, k)]
        if key is not None and str(key).startswith("alias/aws/"):
            out.append(Finding("alarms-reach-someone", topic["name"], (
                f"encrypted with the AWS managed key {key}, whose policy cannot let CloudWatch "
                "use it: every alarm publish fails and no one hears the alarm; use a customer "
                "managed key granting cloudwatch.amazonaws.com kms:Decrypt and "
                "kms:GenerateDataKey* (SNS developer guide, sns-key-management)")))
        for k in keys:
            if not _key_lets_cloudwatch_publish(k):
                out.append(Finding("alarms-reach-someone", topic["name"], (
                    f"its key {k['name']} does not let cloudwatch.amazonaws.com kms:Decrypt and "
                    "kms:GenerateDataKey*: CloudWatch cannot publish the alarms to it")))
        if not any(a in subscribed for a in arns):
            out.append(Finding("alarms-reach-someone", topic["name"], (
                "alarms publish to it but nothing subscribes: they reach no one (subscribe the "
                "plan's e-mail receivers)")))
    return out


def _rate_statement(rule: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return ((rule.get("statement") or {}).get("rateBasedStatement")) or None


def _header_keys(statement: Mapping[str, Any]) -> list[str]:
    if statement.get("aggregateKeyType") != "CUSTOM_KEYS":
        return []
    return [str(k["header"]["name"]).lower() for k in statement.get("customKeys") or []
            if k.get("header")]


def _covers_missing(statement: Mapping[str, Any], header: str) -> bool:
    """Whether a rate rule limits the requests without `header`: it aggregates on what every
    request has (its address, or all of them) and its scope-down, if any, is 'not this
    header'."""
    if statement.get("aggregateKeyType") not in ("IP", "FORWARDED_IP", "CONSTANT"):
        return False
    scope = statement.get("scopeDownStatement")
    if scope is None:
        return statement.get("aggregateKeyType") != "CONSTANT"
    inner = (scope.get("notStatement") or {}).get("statement") or {}
    match = ((inner.get("sizeConstraintStatement") or {}).get("fieldToMatch") or {})
    return str((match.get("singleHeader") or {}).get("name", "")).lower() == header


def rate_limits_cover_every_request(g: Graph, _: str | None) -> list[Finding]:
    out = []
    for acl in g.of_type(WEB_ACL):
        statements = [s for r in _inputs(acl).get("rules") or [] if (s := _rate_statement(r))]
        for s in statements:
            for header in _header_keys(s):
                if not any(_covers_missing(o, header) for o in statements):
                    out.append(Finding("rate-limits-cover-every-request", acl["name"], (
                        f"its rate rule counts requests by the {header} header, and WAF omits "
                        "every request without it: those are never limited; add a rate rule "
                        f"per IP scoped to requests without {header}")))
    return out


def _cache_images(g: Graph) -> list[tuple[Resource, str]]:
    """(workload, image) of every container image in the program's pods."""
    out = []
    for r in g.by_urn.values():
        if str(r["type"]).rsplit(":", 1)[-1] not in POD_KINDS:
            continue
        text = json.dumps(_inputs(r).get("spec") or {})
        for token in text.split('"'):
            if ".dkr.ecr." in token and ".amazonaws.com/" in token:
                out.append((r, token))
    return out


def _empty_secrets(g: Graph, rule: Resource) -> list[Resource]:
    """The secrets `rule` reads that this program creates without credentials."""
    out = []
    for secret in (s for s in g.of_type(SECRET) if g.waits_for(rule, s)):
        tags = _inputs(secret).get("tags") or {}
        filled = tags.get(CREDENTIALS_TAG) == "filled-by-hand"
        if not filled and not any(g.waits_for(v, secret) for v in g.of_type(SECRET_VERSION)):
            out.append(secret)
    return out


def pull_through_credentials(g: Graph, _: str | None) -> list[Finding]:
    rules = g.of_type(CACHE_RULE)
    out = [
        Finding("pull-through-credentials", rule["name"], (
            f"created over the secret {_inputs(secret).get('name')}, which this program creates "
            "empty in the same update: ECR reads the credentials when it creates the rule "
            "(ECR user guide, creating a pull through cache rule), so `pulumi up` fails there; "
            "create the rule once the secret is filled (startup.pull_through_ready)"))
        for rule in rules for secret in _empty_secrets(g, rule)
    ]
    for workload, image in _cache_images(g):
        host, path = image.split(".amazonaws.com/", 1)
        region = host.rsplit(".dkr.ecr.", 1)[-1]
        for rule in rules:
            prefix = str(_inputs(rule).get("ecrRepositoryPrefix"))
            if not path.startswith(f"{prefix}/") or g.region_of(rule) != region:
                continue
            for secret in _empty_secrets(g, rule):
                out.append(Finding("pull-through-credentials", workload["name"], (
                    f"pulls {image} through the cache rule {rule['name']}, whose secret "
                    f"{_inputs(secret).get('name')} this program creates empty: ECR refuses "
                    "Docker Hub without credentials and the pod sits in ErrImagePull; pull "
                    "from Docker Hub until the secret is filled (startup.pull_through_ready)")))
    return out


def least_privilege_policies(g: Graph, _: str | None) -> list[Finding]:
    out = []
    for a in g.of_type(ATTACHMENT):
        name = str(_inputs(a).get("policyArn", "")).rsplit("/", 1)[-1]
        if name in NARROWER_POLICIES:
            narrower, why = NARROWER_POLICIES[name]
            out.append(Finding("least-privilege-policies", a["name"],
                               f"{name} where {narrower} does: {why}"))
    return out


def _waited(g: Graph, r: Resource, types: Iterable[str]) -> list[Resource]:
    return [o for o in g.of_type(*types) if g.waits_for(r, o)]


def log_delivery_after_policy(g: Graph, _: str | None) -> list[Finding]:
    out = []
    for log in g.of_type(FLOW_LOG):
        if _inputs(log).get("logDestinationType") != "s3":
            continue
        buckets = _waited(g, log, [BUCKET])
        policies = [p for p in g.of_type(BUCKET_POLICY) if any(g.waits_for(p, b) for b in buckets)]
        if not any(g.waits_for(log, p) for p in policies):
            out.append(Finding("log-delivery-after-policy", log["name"], (
                "the flow log is created before its bucket's policy: CreateFlowLogs then writes "
                "a policy of its own, which the program's replaces (VPC user guide, "
                "flow-logs-s3); wait for the bucket policy")))
    return out
