"""The preview's checks fail where AWS or Kubernetes would, on the shapes the program had
before issue #20 fixed them (kept here as fixtures), and pass on what replaced them.

Each fixture is a few resources as `llmfleet preview --json` lists them (type, name, urn,
provider, inputs, dependencies), written out by hand: the old shape exactly as the program
registered it, and the new one."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from preview_fixtures import ACCOUNT, AWS_PROVIDER, K8S_PROVIDER, base, checks, res, urn

from components.preview.checks import CHECKS
from components.preview.run import run_program
from llmfleet.plan.stacks import list_stacks

# --- an identity AWS allows once ----------------------------------------------------------------


def _agent(name: str) -> dict[str, Any]:
    return res("aws:eks/addon:Addon", name,
               {"clusterName": "fleet-us-east-1", "addonName": "eks-pod-identity-agent"},
               provider=AWS_PROVIDER)


def test_the_pod_identity_agent_created_twice_per_cluster_fails_like_eks() -> None:
    """The old shape: InferenceCluster and LoadBalancerController each made the add-on;
    EKS answers the second CreateAddon with 409 ResourceInUseException."""
    old = [*base(), _agent("fleet-us-east-1-pod-identity"), _agent("fleet-us-east-1-lbc-agent")]
    [message] = checks(old, "identity-once")
    assert "409 ResourceInUseException: Addon already exists" in message
    assert checks([*base(), _agent("fleet-us-east-1-pod-identity")], "identity-once") == []


def test_a_second_association_for_one_service_account_fails() -> None:
    assoc = {"clusterName": "fleet-us-east-1", "namespace": "kube-system",
             "serviceAccount": "aws-node", "roleArn": "arn:r"}
    cni = res("aws:eks/addon:Addon", "cni", {
        "clusterName": "fleet-us-east-1", "addonName": "vpc-cni",
        "podIdentityAssociations": [{"roleArn": "arn:r", "serviceAccount": "aws-node"}],
    }, provider=AWS_PROVIDER)
    twice = res("aws:eks/podIdentityAssociation:PodIdentityAssociation", "again", assoc,
                provider=AWS_PROVIDER)
    assert checks([*base(), cni, twice], "identity-once")


def _validation_record(name: str) -> dict[str, Any]:
    return res("aws:route53/record:Record", name, {
        "zoneId": "Z1", "name": "_abc.chat.example.com.", "type": "CNAME", "ttl": 60,
        "records": ["_def.acm-validations.aws."], "allowOverwrite": True,
    })


def test_one_validation_record_owned_by_every_regions_certificate_fails() -> None:
    """The old shape: each region's certificate wrote the global name's ACM record with
    allow_overwrite; removing one region deleted the record the others renew with."""
    old = [_validation_record("us-east-1-cert-validation-0"),
           _validation_record("us-west-2-cert-validation-0")]
    [message] = checks(old, "identity-once")
    assert "deleting either deletes the record" in message
    assert checks([_validation_record("fleet-validation-global")], "identity-once") == []


def test_a_bucket_name_without_the_account_may_be_someone_elses() -> None:
    old = res("aws:s3/bucket:Bucket", "w", {"bucket": "chat-prod-weights-us-east-1"},
              provider=AWS_PROVIDER)
    assert "BucketAlreadyExists" in checks([*base(), old], "global-names-carry-the-account")[0]
    new = copy.deepcopy(old)
    new["inputs"]["bucket"] = f"chat-prod-weights-us-east-1-{ACCOUNT}"
    assert checks([*base(), new], "global-names-carry-the-account") == []


def test_an_explicit_iam_role_name_twice_fails_across_regions() -> None:
    role = {"name": "fleet-karpenter-node", "assumeRolePolicy": "{}"}
    west = "urn:p::aws::pulumi:providers:aws::fleet-us-west-2-aws"
    roles = [res("aws:iam/role:Role", "a", role, provider=AWS_PROVIDER),
             res("aws:iam/role:Role", "b", role, provider=west)]
    assert "EntityAlreadyExists" in checks(roles, "identity-once")[0]


# --- names --------------------------------------------------------------------------------------


def test_an_auto_named_role_counts_pulumis_suffix_against_64_characters() -> None:
    long = "x" * 57  # + "-" + 7 random characters = 65
    role = res("aws:iam/role:Role", long, {"assumeRolePolicy": "{}"}, provider=AWS_PROVIDER)
    assert "65 characters" in checks([role], "name-limits")[0]
    role["name"] = "x" * 56
    assert checks([role], "name-limits") == []


def test_a_load_balancer_name_over_32_characters_fails_the_controller() -> None:
    ingress = res("kubernetes:networking.k8s.io/v1:Ingress", "i", {"metadata": {
        "name": "chat", "namespace": "chat",
        "annotations": {"alb.ingress.kubernetes.io/load-balancer-name": "x" * 33},
    }}, provider=K8S_PROVIDER)
    assert "over 32 characters" in checks([*base(), ingress], "name-limits")[0]


# --- CRDs and webhooks before what needs them ----------------------------------------------------


def _release(name: str, chart: str, deps: tuple[str, ...] = (), **inputs: Any) -> dict[str, Any]:
    return res("kubernetes:helm.sh/v3:Release", name,
               {"chart": chart, "name": name, "namespace": "kube-system", **inputs},
               provider=K8S_PROVIDER, deps=deps)


def test_a_custom_resource_waits_for_the_release_installing_its_crd() -> None:
    keda = _release("keda", "keda")
    scaled = res("kubernetes:keda.sh/v1alpha1:ScaledObject", "so",
                 {"metadata": {"name": "chat", "namespace": "chat"}}, provider=K8S_PROVIDER)
    assert "no matches for kind ScaledObject" in checks([*base(), keda, scaled],
                                                        "crds-before-use")[0]
    scaled["options"]["depends_on_urns"] = [urn(keda)]
    assert checks([*base(), keda, scaled], "crds-before-use") == []


def test_a_chart_whose_crds_helm_never_upgrades_must_skip_them() -> None:
    """The old shape: Karpenter's chart alone (its crds/: installed once, never upgraded)."""
    old = _release("karpenter", "oci://public.ecr.aws/karpenter/karpenter")
    assert "never upgrades" in checks([*base(), old], "crds-upgraded")[0]
    new = _release("karpenter", "oci://public.ecr.aws/karpenter/karpenter", skipCrds=True)
    assert checks([*base(), new], "crds-upgraded") == []


def test_the_load_balancer_controllers_service_webhook_races_every_other_release() -> None:
    """The old shape (aws-load-balancer-controller#4140): the chart's default Service
    mutator, failurePolicy Fail, and KEDA installed in the same `up` without waiting."""
    lbc = _release("lbc", "aws-load-balancer-controller", values={"clusterName": "c"})
    keda = _release("keda", "keda")
    [message] = checks([*base(), lbc, keda], "webhooks-before-use")
    assert "4140" in message
    off = _release("lbc", "aws-load-balancer-controller",
                   values={"enableServiceMutatorWebhook": False})
    assert checks([*base(), off, keda], "webhooks-before-use") == []


def _namespace(labels: dict[str, str]) -> dict[str, Any]:
    return res("kubernetes:core/v1:Namespace", "ns", {"metadata": {"name": "chat",
                                                                   "labels": labels}},
               provider=K8S_PROVIDER)


def _deployment(deps: tuple[str, ...] = ()) -> dict[str, Any]:
    return res("kubernetes:apps/v1:Deployment", "deploy", {
        "metadata": {"name": "chat", "namespace": "chat"},
        "spec": {"template": {"metadata": {"labels": {"app": "vllm"}},
                              "spec": {"serviceAccountName": "chat", "containers": []}}},
    }, provider=K8S_PROVIDER, deps=deps)


def test_pods_wait_for_their_ingress_where_readiness_gates_are_injected() -> None:
    ns = _namespace({"elbv2.k8s.aws/pod-readiness-gate-inject": "enabled"})
    ingress = res("kubernetes:networking.k8s.io/v1:Ingress", "ing",
                  {"metadata": {"name": "chat", "namespace": "chat"}}, provider=K8S_PROVIDER)
    assert "no ALB readiness gate" in checks(
        [*base(), ns, ingress, _deployment()], "webhooks-before-use")[0]
    assert checks([*base(), ns, ingress, _deployment((urn(ingress),))],
                  "webhooks-before-use") == []


def test_pods_wait_for_their_pod_identity_association_and_it_for_the_agent() -> None:
    assoc = res("aws:eks/podIdentityAssociation:PodIdentityAssociation", "reader", {
        "clusterName": "fleet-us-east-1", "namespace": "chat", "serviceAccount": "chat",
    }, provider=AWS_PROVIDER)
    found = checks([*base(), assoc, _deployment()], "webhooks-before-use")
    assert any("no Pod Identity credentials" in m for m in found)
    assert any("eks-pod-identity-agent" in m for m in found)
    agent = _agent("agent")
    assoc["options"]["depends_on_urns"] = [urn(agent)]
    assert checks([*base(), agent, assoc, _deployment((urn(assoc),))],
                  "webhooks-before-use") == []


# --- the NetworkPolicy admits what the pod needs --------------------------------------------------

OLD_EGRESS = [
    {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
             "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
     "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]},
    {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [
        "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10"]}}],
     "ports": [{"port": 443, "protocol": "TCP"}]},
]
"""The vLLM pods' egress before #20: DNS, and HTTPS to public addresses only."""
POD_IDENTITY_RULE = {"to": [{"ipBlock": {"cidr": "169.254.170.23/32"}}],
                     "ports": [{"port": 80, "protocol": "TCP"}]}


def _policy(egress: list[dict[str, Any]]) -> dict[str, Any]:
    return res("kubernetes:networking.k8s.io/v1:NetworkPolicy", "np", {
        "metadata": {"name": "chat", "namespace": "chat"},
        "spec": {"podSelector": {"matchLabels": {"app": "vllm"}},
                 "policyTypes": ["Ingress", "Egress"], "egress": egress},
    }, provider=K8S_PROVIDER)


def _serving() -> list[dict[str, Any]]:
    """A vLLM pod streaming from S3 with a Pod Identity association."""
    assoc = res("aws:eks/podIdentityAssociation:PodIdentityAssociation", "reader", {
        "clusterName": "fleet-us-east-1", "namespace": "chat", "serviceAccount": "chat",
    }, provider=AWS_PROVIDER)
    config = res("kubernetes:core/v1:ConfigMap", "cm", {
        "metadata": {"name": "chat-vllm-config", "namespace": "chat"},
        "data": {"config.yaml": "model: s3://b/m\n"},
    }, provider=K8S_PROVIDER)
    deploy = _deployment()
    deploy["inputs"]["spec"]["template"]["spec"]["volumes"] = [
        {"name": "config", "configMap": {"name": "chat-vllm-config"}}]
    return [*base(), assoc, config, deploy]


def test_the_old_egress_blocks_the_pods_own_credentials() -> None:
    """Pod Identity's agent is link-local (169.254.170.23:80): the old policy's except
    169.254.0.0/16 dropped it, so runai_streamer had no S3 credentials."""
    [message] = checks([*_serving(), _policy(OLD_EGRESS)], "network-policy-admits")
    assert "the EKS Pod Identity agent (169.254.170.23 TCP 80)" in message
    fixed = [OLD_EGRESS[0], POD_IDENTITY_RULE, OLD_EGRESS[1]]
    assert checks([*_serving(), _policy(fixed)], "network-policy-admits") == []


def test_a_policy_without_dns_or_https_blocks_dns_and_s3() -> None:
    found = checks([*_serving(), _policy([POD_IDENTITY_RULE])], "network-policy-admits")
    assert {m.split(" (")[0] for m in found} == {
        "its NetworkPolicy blocks DNS", "its NetworkPolicy blocks S3"}


# --- what moto's APIs refuse ---------------------------------------------------------------------


@pytest.mark.slow  # whole plans, drills or renders: program-check
def test_moto_refuses_a_subnet_outside_its_vpc_and_a_malformed_policy() -> None:
    vpc = res("aws:ec2/vpc:Vpc", "vpc", {"cidrBlock": "10.40.0.0/16"}, provider=AWS_PROVIDER,
              resource_id="vpc-id")
    subnet = res("aws:ec2/subnet:Subnet", "sub", {"vpcId": "vpc-id", "cidrBlock": "10.41.0.0/20",
                                                  "availabilityZoneId": "use1-az1"},
                 provider=AWS_PROVIDER)
    role = res("aws:iam/role:Role", "role", {"name": "r", "assumeRolePolicy": TRUST},
               provider=AWS_PROVIDER, resource_id="r")
    no_resource = '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*"}]}'
    policy = res("aws:iam/rolePolicy:RolePolicy", "grant", {"role": "r", "policy": no_resource},
                 provider=AWS_PROVIDER)
    found = checks([*base(), vpc, subnet, role, policy], "aws-api")
    assert any(m.startswith("InvalidSubnet.Range") for m in found)
    assert any(m.startswith("MalformedPolicyDocument") for m in found)


TRUST = ('{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": '
         '{"Service": "pods.eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]}')


@pytest.mark.parametrize("name", ["ab", "x" * 64])
def test_moto_refuses_a_bucket_name_of_the_wrong_length(name: str) -> None:
    bucket = res("aws:s3/bucket:Bucket", "b", {"bucket": name}, provider=AWS_PROVIDER)
    assert checks([*base(), bucket], "aws-api")[0].startswith("InvalidBucketName")


EU_PROVIDER = "urn:p::aws::pulumi:providers:aws::fleet-eu-north-1-aws"


def _vpc(name: str, cidr: str) -> dict[str, Any]:
    return res("aws:ec2/vpc:Vpc", name, {"cidrBlock": cidr}, provider=AWS_PROVIDER,
               resource_id=f"{name}-id")


def _subnet(name: str, vpc: str, cidr: str, zone_id: str = "use1-az1") -> dict[str, Any]:
    return res("aws:ec2/subnet:Subnet", name, {"vpcId": f"{vpc}-id", "cidrBlock": cidr,
                                                "availabilityZoneId": zone_id},
               provider=AWS_PROVIDER)


def _refused(resources: list[dict[str, Any]]) -> list[str]:
    """The error codes the replay into moto reports, one per refused resource."""
    return [m.split(":")[0] for m in checks([*base(), *resources], "aws-api")]


def test_ec2_refuses_overlapping_subnets_a_vpc_too_large_and_an_unknown_zone() -> None:
    assert _refused([_vpc("vpc", "10.40.0.0/16"), _subnet("a", "vpc", "10.40.0.0/18"),
                     _subnet("b", "vpc", "10.40.32.0/20", zone_id="use1-az2")]) == [
        "InvalidSubnet.Conflict"]
    assert _refused([_vpc("vpc", "10.0.0.0/8")]) == ["InvalidVpc.Range"]
    assert _refused([_vpc("vpc", "10.40.0.0/16"),
                     _subnet("a", "vpc", "10.40.0.0/18", zone_id="use1-az9")]) == [
        "InvalidParameterValue"]
    # subnets that fit their VPC side by side, in zones that exist
    assert _refused([_vpc("vpc", "10.40.0.0/16"), _subnet("a", "vpc", "10.40.0.0/18"),
                     _subnet("b", "vpc", "10.40.64.0/18", zone_id="use1-az2")]) == []


def test_iam_refuses_a_role_name_twice() -> None:
    roles = [res("aws:iam/role:Role", f"role-{k}", {"name": "r", "assumeRolePolicy": TRUST},
                 provider=AWS_PROVIDER) for k in (1, 2)]
    assert _refused(roles) == ["EntityAlreadyExists"]


def test_s3_refuses_a_bucket_created_twice_except_in_us_east_1() -> None:
    """CreateBucket for a bucket the account owns answers 200 in us-east-1 (the legacy
    region) and BucketAlreadyOwnedByYou elsewhere."""
    eu = {**res("pulumi:providers:aws", "fleet-eu-north-1-aws", {"region": "eu-north-1"}),
          "urn": EU_PROVIDER}
    name = f"t-weights-{ACCOUNT}"
    twice_in_us = [res("aws:s3/bucket:Bucket", f"b{k}", {"bucket": name}, provider=AWS_PROVIDER)
                   for k in (1, 2)]
    twice_in_eu = [res("aws:s3/bucket:Bucket", f"b{k}", {"bucket": name}, provider=EU_PROVIDER)
                   for k in (1, 2)]
    assert _refused(twice_in_us) == []
    assert _refused([eu, *twice_in_eu]) == ["BucketAlreadyOwnedByYou"]


def test_sqs_and_sns_refuse_the_names_aws_refuses() -> None:
    queue = res("aws:sqs/queue:Queue", "q", {"name": "fleet.interruptions"},
                provider=AWS_PROVIDER)
    topic = res("aws:sns/topic:Topic", "t", {"name": "fleet alerts"}, provider=AWS_PROVIDER)
    assert _refused([queue, topic]) == ["InvalidParameterValue", "InvalidParameter"]
    fine = [res("aws:sqs/queue:Queue", "q", {"name": "fleet-interruptions",
                                             "messageRetentionSeconds": 300},
                provider=AWS_PROVIDER),
            res("aws:sns/topic:Topic", "t", {"name": "fleet-alerts"}, provider=AWS_PROVIDER)]
    assert _refused(fine) == []


def _record(name: str, record: str, value: str = "1.2.3.4") -> dict[str, Any]:
    return res("aws:route53/record:Record", name, {"zoneId": "Z1", "name": record, "type": "A",
                                                   "ttl": 60, "records": [value]},
               provider=AWS_PROVIDER)


def test_route53_refuses_a_record_outside_its_zone_and_one_created_twice() -> None:
    assert _refused([_record("a", "llm.example.com"), _record("b", "llm.example.org")]) == [
        "InvalidChangeBatch"]
    assert _refused([_record("a", "llm.example.com"), _record("b", "llm.example.com")]) == [
        "InvalidChangeBatch"]
    assert _refused([_record("a", "llm.example.com"), _record("b", "api.example.com")]) == []


# --- every stack -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_aws")
@pytest.mark.parametrize("env", list_stacks())
def test_every_stack_passes_every_check(env: str) -> None:
    result = run_program(env)
    assert [f"{f.check} {f.resource}: {f.message}" for f in result.findings()] == []


def test_every_check_has_an_old_shape_here_that_fails_it() -> None:
    covered = {
        "identity-once", "global-names-carry-the-account", "name-limits", "crds-before-use",
        "crds-upgraded", "webhooks-before-use", "network-policy-admits", "aws-api",
        # tests/components/test_aws_rules.py
        "alarms-reach-someone", "rate-limits-cover-every-request", "pull-through-credentials",
        "least-privilege-policies", "log-delivery-after-policy",
        # tests/components/test_wiring_checks.py
        "ingress-backends-exist", "discovery-permitted", "pdb-allows-a-drain",
    }
    assert set(CHECKS) == covered
