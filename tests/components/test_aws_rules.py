"""The preview's rules of AWS services (components.preview.aws_rules) and its checks of what
issue #30 found, each failing on the shape the program had before (kept here as fixtures,
written as `llmfleet preview --json` lists resources) and passing on what replaced it."""

from __future__ import annotations

import json
from typing import Any

from preview_fixtures import ACCOUNT, AWS_PROVIDER, K8S_PROVIDER, base, checks, res, urn

from components.alarms import alarm_key_policy
from components.edge import web_acl_args
from components.weights import CREDENTIALS_TAG
from llmfleet.fleetplan.entry_point import RateRule
from llmfleet.fleetplan.workload import PROMETHEUS_POD_LABELS

TOPIC = "arn:aws:sns:us-east-1:111122223333:fleet-us-east-1-alerts"


def _alarm(*deps: str) -> dict[str, Any]:
    return res("aws:cloudwatch/metricAlarm:MetricAlarm", "fleet-5xx",
               {"name": "fleet-5xx", "alarmActions": [TOPIC]}, provider=AWS_PROVIDER, deps=deps)


def _topic(kms: str, *deps: str) -> dict[str, Any]:
    return res("aws:sns/topic:Topic", "fleet-us-east-1-alerts",
               {"name": "fleet-us-east-1-alerts", "kmsMasterKeyId": kms},
               provider=AWS_PROVIDER, deps=deps)


def _subscription() -> dict[str, Any]:
    return res("aws:sns/topicSubscription:TopicSubscription", "fleet-us-east-1-alerts-email-0",
               {"topic": TOPIC, "protocol": "email", "endpoint": "oncall@example.com"},
               provider=AWS_PROVIDER)


def test_an_alarm_topic_on_the_aws_managed_key_reaches_no_one() -> None:
    """The old shape: kms_master_key_id alias/aws/sns, whose policy CloudWatch cannot use."""
    old = [*base(), _topic("alias/aws/sns"), _subscription(), _alarm()]
    [message] = checks(old, "alarms-reach-someone")
    assert "AWS managed key alias/aws/sns" in message
    key = res("aws:kms/key:Key", "fleet-us-east-1-alerts-key",
              {"policy": alarm_key_policy(ACCOUNT, "us-east-1")}, provider=AWS_PROVIDER)
    new = [*base(), key, _topic("arn:aws:kms:us-east-1:111122223333:key/k", urn(key)),
           _subscription(), _alarm()]
    assert checks(new, "alarms-reach-someone") == []


def test_a_customer_key_that_does_not_let_cloudwatch_in_fails() -> None:
    policy = json.loads(alarm_key_policy(ACCOUNT, "us-east-1"))
    policy["Statement"] = policy["Statement"][:1]  # the account only
    key = res("aws:kms/key:Key", "k", {"policy": json.dumps(policy)}, provider=AWS_PROVIDER)
    found = checks([*base(), key, _topic("arn:k", urn(key)), _subscription(), _alarm()],
                   "alarms-reach-someone")
    assert found and "does not let cloudwatch.amazonaws.com" in found[0]


def test_an_alarm_topic_without_a_subscription_reaches_no_one() -> None:
    """The old shape: the global 'region left DNS' topic, which nothing subscribed to."""
    [message] = checks([*base(), _topic("arn:k"), _alarm()], "alarms-reach-someone")
    assert "nothing subscribes" in message


def _acl(per: str) -> dict[str, Any]:
    rule = RateRule(web_acl_name="fleet-us-east-1", requests=600, window_s=60, per=per,
                    block_status=429)
    args = web_acl_args(rule, {})

    def wire(value: Any) -> Any:  # the preview's wire names: camelCase
        if isinstance(value, dict):
            return {"".join(w.title() if i else w for i, w in enumerate(k.split("_"))): wire(v)
                    for k, v in value.items()}
        return [wire(v) for v in value] if isinstance(value, list) else value

    return res("aws:wafv2/webAcl:WebAcl", "fleet-us-east-1-waf", wire(args),
               provider=AWS_PROVIDER)


def test_a_rate_limit_by_token_alone_lets_requests_without_one_through() -> None:
    """The old shape: one rule aggregating on the Authorization header, which WAF skips for
    every request without it (/health, a client without a token)."""
    old = _acl("token")
    old["inputs"]["rules"] = old["inputs"]["rules"][:1]
    [message] = checks([*base(), old], "rate-limits-cover-every-request")
    assert "WAF omits every request without it" in message
    assert checks([*base(), _acl("token")], "rate-limits-cover-every-request") == []
    assert checks([*base(), _acl("ip")], "rate-limits-cover-every-request") == []


def _cache(secret_tags: dict[str, str], image_via_cache: bool = True) -> list[dict[str, Any]]:
    secret = res("aws:secretsmanager/secret:Secret", "fleet-docker-hub",
                 {"name": "ecr-pullthroughcache/fleet-docker-hub", "tags": secret_tags},
                 provider=AWS_PROVIDER)
    rule = res("aws:ecr/pullThroughCacheRule:PullThroughCacheRule", "fleet-cache",
               {"ecrRepositoryPrefix": "docker-hub"}, provider=AWS_PROVIDER, deps=(urn(secret),))
    image = ("111122223333.dkr.ecr.us-east-1.amazonaws.com/docker-hub/vllm/vllm-openai:v0.33.0"
             if image_via_cache else "vllm/vllm-openai:v0.33.0")
    job = res("kubernetes:batch/v1:Job", "fleet-stage",
              {"metadata": {"name": "stage", "namespace": "fleet"},
               "spec": {"template": {"spec": {"containers": [{"image": image}]}}}},
              provider=K8S_PROVIDER)
    return [*base(), secret, rule, job]


def test_a_pull_through_the_cache_before_its_secret_holds_credentials_fails() -> None:
    """The old order: the secret created empty in the same `up` whose staging Job pulls."""
    found = checks(_cache({}), "pull-through-credentials")
    assert any("ErrImagePull" in m for m in found)
    assert checks(_cache({CREDENTIALS_TAG: "filled-by-hand"}), "pull-through-credentials") == []


def test_a_cache_rule_created_over_its_empty_secret_fails_at_its_creation() -> None:
    """The shape of h30-deploy: the pods pull from Docker Hub, but the rule is created in the
    same `up` as its empty secret, and ECR reads the secret when it creates the rule."""
    [message] = checks(_cache({}, image_via_cache=False), "pull-through-credentials")
    assert message.startswith("created over the secret ecr-pullthroughcache/fleet-docker-hub")
    filled = _cache({CREDENTIALS_TAG: "filled-by-hand"}, image_via_cache=False)
    assert checks(filled, "pull-through-credentials") == []


def test_node_roles_get_the_pull_only_ecr_policy() -> None:
    def attachment(policy: str) -> dict[str, Any]:
        return res("aws:iam/rolePolicyAttachment:RolePolicyAttachment", f"node-{policy}",
                   {"policyArn": f"arn:aws:iam::aws:policy/{policy}"}, provider=AWS_PROVIDER)

    old = checks([*base(), attachment("AmazonEC2ContainerRegistryReadOnly")],
                 "least-privilege-policies")
    assert old and "AmazonEC2ContainerRegistryPullOnly" in old[0]
    new = [*base(), attachment("AmazonEC2ContainerRegistryPullOnly")]
    assert checks(new, "least-privilege-policies") == []


def test_a_flow_log_waits_for_its_buckets_policy() -> None:
    bucket = res("aws:s3/bucket:Bucket", "logs", {"bucket": f"logs-{ACCOUNT}"},
                 provider=AWS_PROVIDER)
    policy = res("aws:s3/bucketPolicy:BucketPolicy", "logs", {}, provider=AWS_PROVIDER,
                 deps=(urn(bucket),))
    policy["urn"] += "-policy"

    def flow(*deps: str) -> dict[str, Any]:
        return res("aws:ec2/flowLog:FlowLog", "flow", {"logDestinationType": "s3"},
                   provider=AWS_PROVIDER, deps=deps)

    [message] = checks([*base(), bucket, policy, flow(urn(bucket))], "log-delivery-after-policy")
    assert "before its bucket's policy" in message
    fixed = [*base(), bucket, policy, flow(urn(bucket), urn(policy))]
    assert checks(fixed, "log-delivery-after-policy") == []


def _serving(ingress_from: list[dict[str, Any]]) -> list[dict[str, Any]]:
    labels = {"app.kubernetes.io/name": "vllm"}
    deployment = res("kubernetes:apps/v1:Deployment", "fleet-vllm", {
        "metadata": {"name": "fleet", "namespace": "fleet"},
        "spec": {"template": {"metadata": {"labels": labels}, "spec": {
            "containers": [{"name": "vllm", "ports": [{"containerPort": 8000}]}]}}}},
        provider=K8S_PROVIDER)
    policy = res("kubernetes:networking.k8s.io/v1:NetworkPolicy", "fleet-netpol", {
        "metadata": {"name": "fleet", "namespace": "fleet"},
        "spec": {"podSelector": {"matchLabels": labels}, "policyTypes": ["Ingress"],
                 "ingress": [{"from": ingress_from, "ports": [{"port": 8000}]}]}},
        provider=K8S_PROVIDER)
    return [*base(), deployment, policy]


def test_only_prometheus_of_the_monitoring_namespace_reaches_the_model_port() -> None:
    """The old shape: the whole namespace admitted, Grafana and every exporter included."""
    monitoring = {"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "monitoring"}}}
    [message] = checks(_serving([monitoring]), "network-policy-admits")
    assert "any pod of monitoring (Grafana, exporters) may call port 8000" in message
    prometheus = {**monitoring, "podSelector": {"matchLabels": PROMETHEUS_POD_LABELS}}
    assert checks(_serving([prometheus]), "network-policy-admits") == []


def test_a_chart_waits_for_the_pod_identity_of_the_service_account_its_values_name() -> None:
    """The old shape: kube-prometheus-stack (Alertmanager's ServiceAccount) installed without
    waiting for Alertmanager's association: its pods start with no credentials."""
    agent = res("aws:eks/addon:Addon", "agent", {"clusterName": "fleet-us-east-1",
                                                  "addonName": "eks-pod-identity-agent"},
                provider=AWS_PROVIDER)
    assoc = res("aws:eks/podIdentityAssociation:PodIdentityAssociation", "alertmanager",
                {"clusterName": "fleet-us-east-1", "namespace": "monitoring",
                 "serviceAccount": "kube-prometheus-stack-alertmanager"},
                provider=AWS_PROVIDER, deps=(urn(agent),))

    def release(*deps: str) -> dict[str, Any]:
        return res("kubernetes:helm.sh/v3:Release", "kps", {
            "chart": "kube-prometheus-stack", "name": "kube-prometheus-stack",
            "namespace": "monitoring",
            "values": {"alertmanager": {"serviceAccount": {
                "name": "kube-prometheus-stack-alertmanager"}}}},
            provider=K8S_PROVIDER, deps=deps)

    found = checks([*base(), agent, assoc, release()], "webhooks-before-use")
    assert any("get no Pod Identity credentials" in m for m in found)
    assert checks([*base(), agent, assoc, release(urn(assoc))], "webhooks-before-use") == []


def test_the_lws_crd_and_rbac_objects_raise_no_false_alarm() -> None:
    """The old false alarms: the CRD table lacked leaderworkerset.x-k8s.io (installed by a
    ConfigFile from the lws tag) and the core groups rbac.authorization.k8s.io."""
    crd = res("kubernetes:yaml/v2:ConfigFile", "lws-crds", {
        "file": "https://raw.githubusercontent.com/kubernetes-sigs/lws/v0.10.0/charts/lws/crds/"
        "leaderworkerset.x-k8s.io_leaderworkersets.yaml"}, provider=K8S_PROVIDER)
    lws = res("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet", "lws",
              {"metadata": {"name": "fleet", "namespace": "fleet"}}, provider=K8S_PROVIDER,
              deps=(urn(crd),))
    role = res("kubernetes:rbac.authorization.k8s.io/v1:Role", "role",
               {"metadata": {"name": "router", "namespace": "fleet"}}, provider=K8S_PROVIDER)
    assert checks([*base(), crd, lws, role], "crds-before-use") == []
    [message] = checks([*base(), {**lws, "options": {"depends_on_urns": []}}], "crds-before-use")
    assert "nothing on its cluster installs the leaderworkerset.x-k8s.io CRDs" in message
