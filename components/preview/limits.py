"""What AWS and Kubernetes allow, as a table of rules with their sources: which identities
exist once (the key a second create collides on), how long and of which characters a name
may be, and which chart installs the CRDs of which API group.

Pulumi's mocks accept all of it; the real APIs do not. moto covers part of it
(`emulated`), this table the rest."""

from __future__ import annotations

import re
from dataclasses import dataclass

AUTONAME_SUFFIX = 8
"""Pulumi names an auto-named resource `<logical name>-<7 random characters>`: 8 more."""


@dataclass(frozen=True)
class NameLimit:
    type: str
    field: str
    """The input holding the physical name (auto-named when absent: the logical name + 8)."""
    max_len: int
    pattern: str | None
    source: str
    min_len: int = 1
    autonamed: bool = True
    """Whether Pulumi names it when the field is absent."""


NAME_LIMITS: tuple[NameLimit, ...] = (
    NameLimit("aws:iam/role:Role", "name", 64, r"^[\w+=,.@-]+$",
              "IAM API CreateRole: RoleName 1-64, [\\w+=,.@-]+"),
    NameLimit("aws:iam/policy:Policy", "name", 128, r"^[\w+=,.@-]+$",
              "IAM API CreatePolicy: PolicyName 1-128"),
    NameLimit("aws:iam/rolePolicy:RolePolicy", "name", 128, r"^[\w+=,.@-]+$",
              "IAM API PutRolePolicy: PolicyName 1-128"),
    NameLimit("aws:eks/cluster:Cluster", "name", 100, r"^[0-9A-Za-z][A-Za-z0-9\-_]*$",
              "EKS API CreateCluster: name 1-100, ^[0-9A-Za-z][A-Za-z0-9\\-_]*"),
    NameLimit("aws:eks/nodeGroup:NodeGroup", "nodeGroupName", 63, None,
              "EKS API CreateNodegroup: nodegroupName 1-63"),
    NameLimit("aws:s3/bucket:Bucket", "bucket", 63,
              r"^[a-z0-9][a-z0-9.-]*[a-z0-9]$",
              "S3 bucket naming rules: 3-63 characters, lowercase letters, digits, dots and "
              "hyphens, beginning and ending with a letter or digit", min_len=3),
    NameLimit("aws:sqs/queue:Queue", "name", 80, r"^[A-Za-z0-9_-]+$",
              "SQS API CreateQueue: QueueName up to 80 alphanumerics, hyphens, underscores"),
    NameLimit("aws:sns/topic:Topic", "name", 256, r"^[A-Za-z0-9_-]+$",
              "SNS API CreateTopic: Name up to 256 alphanumerics, hyphens, underscores"),
    NameLimit("aws:wafv2/webAcl:WebAcl", "name", 128, r"^[\w-]+$",
              "WAFv2 API CreateWebACL: Name 1-128, ^[\\w\\-]+$"),
    NameLimit("aws:cloudwatch/metricAlarm:MetricAlarm", "name", 255, None,
              "CloudWatch API PutMetricAlarm: AlarmName 1-255"),
    NameLimit("aws:cloudwatch/eventRule:EventRule", "name", 64, r"^[\.\-_A-Za-z0-9]+$",
              "EventBridge API PutRule: Name 1-64, [\\.\\-_A-Za-z0-9]+"),
    NameLimit("aws:cloudwatch/logGroup:LogGroup", "name", 512, None,
              "CloudWatch Logs API CreateLogGroup: logGroupName 1-512"),
    NameLimit("aws:ec2/launchTemplate:LaunchTemplate", "name", 128, None,
              "EC2 API CreateLaunchTemplate: LaunchTemplateName 3-128", min_len=3),
)

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
K8S_LABEL_NAMES = ("Namespace", "Service")
"""Kinds whose name is an RFC 1123 label (63 characters): Kubernetes 'Object Names and
IDs'; every other object's name is a DNS subdomain (253)."""
LOAD_BALANCER_NAME_MAX = 32
"""AWS Load Balancer Controller v3.5.0 annotations: 'Name longer than 32 characters will be
treated as an error' (alb.ingress.kubernetes.io/load-balancer-name)."""


@dataclass(frozen=True)
class Identity:
    """A resource type AWS or Kubernetes holds once per key; a second create fails."""

    type: str
    key: tuple[str, ...]
    """Input fields (wire names) that, with `scope`, identify the object."""
    scope: str
    """region: per region of the provider; account: IAM and S3 names are global; cluster:
    per Kubernetes cluster (the provider)."""
    error: str
    source: str


IDENTITIES: tuple[Identity, ...] = (
    Identity("aws:eks/addon:Addon", ("clusterName", "addonName"), "region",
             "409 ResourceInUseException: Addon already exists",
             "EKS API CreateAddon; aws/eks-hybrid#316, wandb/terraform-aws-wandb#230"),
    Identity("aws:eks/podIdentityAssociation:PodIdentityAssociation",
             ("clusterName", "namespace", "serviceAccount"), "region",
             "409 ResourceInUseException: one association per service account",
             "EKS API CreatePodIdentityAssociation (ResourceInUseException)"),
    Identity("aws:eks/cluster:Cluster", ("name",), "region",
             "409 ResourceInUseException: Cluster already exists",
             "EKS API CreateCluster"),
    Identity("aws:eks/accessEntry:AccessEntry", ("clusterName", "principalArn"), "region",
             "409 ResourceInUseException", "EKS API CreateAccessEntry"),
    Identity("aws:iam/role:Role", ("name",), "account",
             "409 EntityAlreadyExists", "IAM API CreateRole (IAM names are global)"),
    Identity("aws:iam/policy:Policy", ("name",), "account",
             "409 EntityAlreadyExists", "IAM API CreatePolicy"),
    Identity("aws:s3/bucket:Bucket", ("bucket",), "global",
             "409 BucketAlreadyExists / BucketAlreadyOwnedByYou",
             "S3 API CreateBucket: bucket names are unique across all accounts"),
    Identity("aws:sqs/queue:Queue", ("name",), "region",
             "QueueAlreadyExists (different attributes)", "SQS API CreateQueue"),
    Identity("aws:wafv2/webAcl:WebAcl", ("name", "scope"), "region",
             "WAFDuplicateItemException", "WAFv2 API CreateWebACL"),
    Identity("aws:cloudwatch/metricAlarm:MetricAlarm", ("name",), "region",
             "PutMetricAlarm overwrites the other alarm", "CloudWatch API PutMetricAlarm"),
    Identity("aws:route53/record:Record", ("zoneId", "name", "type", "setIdentifier"), "global",
             "InvalidChangeBatch: Tried to create resource record set ... but it already "
             "exists (with allow_overwrite: one record owned twice, deleted with either)",
             "Route 53 API ChangeResourceRecordSets; hashicorp/terraform-provider-aws#13653"),
    Identity("aws:ecr/pullThroughCacheRule:PullThroughCacheRule", ("ecrRepositoryPrefix",),
             "region", "PullThroughCacheRuleAlreadyExistsException",
             "ECR API CreatePullThroughCacheRule"),
    Identity("aws:secretsmanager/secret:Secret", ("name",), "region",
             "ResourceExistsException", "Secrets Manager API CreateSecret"),
)


@dataclass(frozen=True)
class CrdSource:
    """Where the CRDs of an API group come from in llmfleet's clusters."""

    group: str
    chart: str | None
    """A Helm chart (as the release's `chart` input ends) that renders them as templates."""
    url_part: str | None
    """Or: part of the URL of a CRD manifest applied by a ConfigFile."""
    source: str


CRD_SOURCES: tuple[CrdSource, ...] = (
    CrdSource("keda.sh", "keda", None, "kedacore/charts keda/templates/crds/ (v2.20.2)"),
    CrdSource("karpenter.sh", "karpenter/karpenter-crd", None,
              "aws/karpenter-provider-aws charts/karpenter-crd/templates/ (v1.14.1)"),
    CrdSource("karpenter.k8s.aws", "karpenter/karpenter-crd", None,
              "aws/karpenter-provider-aws charts/karpenter-crd/templates/ (v1.14.1)"),
    CrdSource("monitoring.coreos.com", None, "kube-prometheus-stack",
              "prometheus-community/helm-charts kube-prometheus-stack charts/crds/crds/"),
    CrdSource("elbv2.k8s.aws", None, "aws-load-balancer-controller",
              "kubernetes-sigs/aws-load-balancer-controller helm/.../crds/crds.yaml"),
    CrdSource("leaderworkerset.x-k8s.io", None, "kubernetes-sigs/lws",
              "kubernetes-sigs/lws charts/lws/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml "
              "(v0.10.0), applied by components.multi_node"),
)
"""Which installer each custom resource must wait for."""

LBC_CHART = "aws-load-balancer-controller"
SERVICE_MUTATOR = "enableServiceMutatorWebhook"
"""aws-load-balancer-controller chart (v3.5.0 values.yaml): `enableServiceMutatorWebhook:
true` by default, `serviceMutatorWebhookConfig.failurePolicy: Fail`, all Service CREATEs:
every Service (and every release making one) fails until the controller serves
(aws-load-balancer-controller#4140)."""
READINESS_GATE_LABEL = "elbv2.k8s.aws/pod-readiness-gate-inject"
POD_IDENTITY_AGENT = "eks-pod-identity-agent"
