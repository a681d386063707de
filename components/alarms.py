"""AlertTopic and LoadBalancerAlarms: where a region's alerts reach a person, and the
CloudWatch alarms on its load balancer.

- The region's SNS topic `<fleet>-<region>-alerts`, encrypted with a customer managed KMS key
  of its own (`alarm_key_policy`): CloudWatch may publish only to a topic whose key policy
  lets cloudwatch.amazonaws.com decrypt and generate data keys, which the AWS managed
  alias/aws/sns key's policy never can (SNS developer guide, sns-key-management,
  "Enable compatibility between event sources from AWS services and encrypted topics"); an
  unencrypted topic would work but holds alert text in the clear. An e-mail subscription per
  address of the plan's `email` receivers (each address confirms once by mail); without one
  the alarms notify nobody, so they get no action (production requires an e-mail receiver
  with dns: a PagerDuty or Opsgenie e-mail integration address serves).
- Alertmanager publishes to it for `email` receivers: a role trusted by EKS Pod Identity may
  `sns:Publish` to this topic and use its key, associated with Alertmanager's ServiceAccount
  (`cluster_addons.ALERTMANAGER_SERVICE_ACCOUNT`); the association waits for the cluster's
  agent add-on, and the Prometheus stack's release waits for the association
  (`alertmanager_association`: EKS injects credentials when a pod is created). Alertmanager's
  SNS notifier uses the SDK's default credential chain, which includes EKS Pod Identity.
- With an entry point: CloudWatch alarms on the ALB (`RegionPlan.entry_point.alarms`: the
  5xx share by metric math and the p99 target response time), to the topic, each carrying
  its runbook link. The ALB is the load balancer controller's: the alarms find it by the name
  the Ingress gives it (`aws.lb.get_load_balancer` once the Ingress reports its address), so
  they resolve on the first `pulumi up` rather than needing a second.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from components import iam
from components.cluster_addons import ALERTMANAGER_SERVICE_ACCOUNT
from llmfleet.errors import ProgramError
from llmfleet.fleetplan.entry_point import LbAlarm
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.fleetplan.workload import MONITORING_NAMESPACE

CLOUDWATCH = "cloudwatch.amazonaws.com"


def topic_name(fleet: str, region: str) -> str:
    return f"{fleet}-{region}-alerts"


def alarm_key_policy(account: str, region: str) -> str:
    """The alarm topic key's policy: the account administers it (IAM policies then grant
    its use, as Alertmanager's role does), and CloudWatch alarms of this account decrypt and
    generate data keys to publish (SNS developer guide, sns-key-management)."""
    part = iam.partition(region)
    doc = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AccountAdministers",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:{part}:iam::{account}:root"},
                "Action": "kms:*",
                "Resource": "*",
            },
            {
                "Sid": "CloudWatchPublishesAlarms",
                "Effect": "Allow",
                "Principal": {"Service": CLOUDWATCH},
                "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
                "Resource": "*",
                "Condition": {
                    "StringEquals": {"aws:SourceAccount": account},
                    "ArnLike": {"aws:SourceArn": f"arn:{part}:cloudwatch:*:{account}:alarm:*"},
                },
            },
        ],
    }
    return json.dumps(doc, sort_keys=True)


def publish_policy(topic_arn: str, key_arn: str) -> str:
    doc = {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "PublishAlerts", "Effect": "Allow", "Action": "sns:Publish",
             "Resource": topic_arn},
            {"Sid": "UseTheTopicsKey", "Effect": "Allow",
             "Action": ["kms:Decrypt", "kms:GenerateDataKey*"], "Resource": key_arn},
        ],
    }
    return json.dumps(doc, sort_keys=True)


def email_addresses(fleet_plan: FleetPlan) -> list[str]:
    return [a for r in fleet_plan.alerting.receivers if r.email is not None
            for a in r.email.addresses]


def alarm_topic(
    name: str,
    topic: str,
    account: pulumi.Input[str],
    region: str,
    addresses: Sequence[str],
    opts: pulumi.ResourceOptions,
) -> tuple[aws.kms.Key, aws.sns.Topic]:
    """An SNS topic CloudWatch alarms may publish to (`{name}-key`: its customer managed
    key; `{name}`: the topic) with an e-mail subscription per address (`{name}-email-<k>`)."""
    key = aws.kms.Key(
        f"{name}-key",
        description=f"SNS topic {topic}: CloudWatch alarms publish to it",
        enable_key_rotation=True,
        deletion_window_in_days=30,
        policy=pulumi.Output.from_input(account).apply(lambda a: alarm_key_policy(a, region)),
        opts=opts,
    )
    sns = aws.sns.Topic(name, name=topic, kms_master_key_id=key.arn, opts=opts)
    for k, address in enumerate(addresses):
        aws.sns.TopicSubscription(
            f"{name}-email-{k}", topic=sns.arn, protocol="email", endpoint=address, opts=opts
        )
    return key, sns


def alarm_args(
    alarm: LbAlarm,
    lb_name: str,
    lb_arn_suffix: pulumi.Input[str],
    topic_arn: pulumi.Input[str] | None,
) -> dict[str, Any]:
    """Keyword arguments of one `aws.cloudwatch.MetricAlarm` on the ALB (AWS/ApplicationELB:
    HTTPCode_ELB_5XX_Count, HTTPCode_Target_5XX_Count, RequestCount, TargetResponseTime;
    dimension LoadBalancer = the ALB's ARN suffix); no action without a topic that reaches
    someone (None)."""
    dims = {"LoadBalancer": lb_arn_suffix}
    actions = [topic_arn] if topic_arn is not None else []
    common: dict[str, Any] = {
        "name": f"{lb_name}-{alarm.name}",
        "alarm_description": f"{alarm.summary}. {alarm.reason}. Runbook: {alarm.runbook_url}",
        "comparison_operator": "GreaterThanThreshold",
        "threshold": alarm.threshold,
        "evaluation_periods": alarm.evaluation_periods,
        "datapoints_to_alarm": alarm.datapoints_to_alarm,
        "treat_missing_data": "notBreaching",
        "alarm_actions": actions,
        "ok_actions": actions,
    }
    if alarm.kind == "latency-p99":
        return {
            **common,
            "namespace": "AWS/ApplicationELB",
            "metric_name": "TargetResponseTime",
            "dimensions": dims,
            "extended_statistic": "p99",
            "period": alarm.period_s,
        }

    def metric(query_id: str, metric_name: str) -> dict[str, Any]:
        return {
            "id": query_id,
            "return_data": False,
            "metric": {
                "namespace": "AWS/ApplicationELB",
                "metric_name": metric_name,
                "dimensions": dims,
                "period": alarm.period_s,
                "stat": "Sum",
            },
        }

    return {
        **common,
        "metric_queries": [
            {
                "id": "share",
                "label": "5xx share of requests (%)",
                "expression": "100 * (FILL(elb5xx, 0) + FILL(target5xx, 0)) / requests",
                "return_data": True,
            },
            metric("elb5xx", "HTTPCode_ELB_5XX_Count"),
            metric("target5xx", "HTTPCode_Target_5XX_Count"),
            metric("requests", "RequestCount"),
        ],
    }


@dataclass(frozen=True)
class AlertTopicArgs:
    """fleet_plan, region_plan: the receivers. cluster_name: the EKS cluster (Alertmanager's
    Pod Identity). aws_provider: the region's. account: the deploying account (the key's
    policy). depends_on: the cluster's Pod Identity agent."""

    fleet_plan: FleetPlan
    region_plan: RegionPlan
    cluster_name: pulumi.Input[str]
    aws_provider: aws.Provider
    account: pulumi.Input[str]
    depends_on: Sequence[pulumi.Resource] = ()


class AlertTopic(pulumi.ComponentResource):
    """Children `{name}-key` and `{name}` (the topic: `topic`), `{name}-email-<k>` and
    `{name}-alertmanager` (role, policy, Pod Identity association:
    `alertmanager_association`). `reaches_someone`: whether an address subscribes (the ALB
    alarms publish to the topic only then)."""

    topic: aws.sns.Topic
    alertmanager_association: aws.eks.PodIdentityAssociation
    reaches_someone: bool

    def __init__(
        self, name: str, args: AlertTopicArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:AlertTopic", name, None, opts)
        fp, rp = args.fleet_plan, args.region_plan
        child = pulumi.ResourceOptions(parent=self, provider=args.aws_provider)
        addresses = email_addresses(fp)
        self.reaches_someone = bool(addresses)
        key, self.topic = alarm_topic(
            name, topic_name(fp.name, rp.region), args.account, rp.region, addresses, child
        )
        role = aws.iam.Role(
            f"{name}-alertmanager",
            assume_role_policy=iam.pod_identity_trust(),
            description=f"Alertmanager of {fp.name} in {rp.region}: publish to its alert topic",
            opts=child,
        )
        grant = aws.iam.RolePolicy(
            f"{name}-alertmanager",
            role=role.id,
            policy=pulumi.Output.all(self.topic.arn, key.arn).apply(
                lambda a: publish_policy(a[0], a[1])
            ),
            opts=child,
        )
        self.alertmanager_association = aws.eks.PodIdentityAssociation(
            f"{name}-alertmanager",
            cluster_name=args.cluster_name,
            namespace=MONITORING_NAMESPACE,
            service_account=ALERTMANAGER_SERVICE_ACCOUNT,
            role_arn=role.arn,
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(depends_on=[*args.depends_on, grant])
            ),
        )
        self.register_outputs({"topic_arn": self.topic.arn})


class LoadBalancerAlarms(pulumi.ComponentResource):
    """Children `{name}-<alarm>`: one MetricAlarm per `RegionPlan.entry_point.alarms`, on
    the ALB named `entry_point.load_balancer_name`, looked up once `lb_ready` (the Ingress's
    load balancer address) is known."""

    def __init__(
        self,
        name: str,
        region_plan: RegionPlan,
        topic_arn: pulumi.Input[str] | None,
        lb_ready: pulumi.Output[str],
        aws_provider: aws.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("llmfleet:index:LoadBalancerAlarms", name, None, opts)
        entry = region_plan.entry_point
        if entry is None:
            raise ProgramError(f"{name}: {region_plan.region} has no entry point")
        lb_name = entry.load_balancer_name
        lb = aws.lb.get_load_balancer_output(
            name=lb_ready.apply(lambda _: lb_name),
            opts=pulumi.InvokeOutputOptions(provider=aws_provider),
        )
        for alarm in entry.alarms:
            aws.cloudwatch.MetricAlarm(
                f"{name}-{alarm.name}",
                **alarm_args(alarm, lb_name, lb.arn_suffix, topic_arn),
                opts=pulumi.ResourceOptions(parent=self, provider=aws_provider),
            )
        self.register_outputs({"alarms": [a.name for a in entry.alarms]})
