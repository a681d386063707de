"""AlertTopic and LoadBalancerAlarms: where a region's alerts reach a person, and the
CloudWatch alarms on its load balancer.

- The region's SNS topic `<fleet>-<region>-alerts` (encrypted with the AWS-managed SNS key),
  with an e-mail subscription per address of the plan's `email` receivers (each address
  confirms once by mail: README, "A real preview").
- Alertmanager publishes to it for `email` receivers: a role trusted by EKS Pod Identity may
  `sns:Publish` to this topic only, associated with Alertmanager's ServiceAccount
  (`cluster_addons.ALERTMANAGER_SERVICE_ACCOUNT`); the association waits for the cluster's
  agent add-on. Alertmanager's SNS notifier uses the SDK's default credential chain, which
  includes EKS Pod Identity.
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

SNS_MANAGED_KEY = "alias/aws/sns"


def topic_name(fleet: str, region: str) -> str:
    return f"{fleet}-{region}-alerts"


def publish_policy(topic_arn: str) -> str:
    doc = {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "PublishAlerts", "Effect": "Allow", "Action": "sns:Publish",
             "Resource": topic_arn}
        ],
    }
    return json.dumps(doc, sort_keys=True)


def alarm_args(
    alarm: LbAlarm, lb_name: str, lb_arn_suffix: pulumi.Input[str], topic_arn: pulumi.Input[str]
) -> dict[str, Any]:
    """Keyword arguments of one `aws.cloudwatch.MetricAlarm` on the ALB (AWS/ApplicationELB:
    HTTPCode_ELB_5XX_Count, HTTPCode_Target_5XX_Count, RequestCount, TargetResponseTime;
    dimension LoadBalancer = the ALB's ARN suffix)."""
    dims = {"LoadBalancer": lb_arn_suffix}
    common: dict[str, Any] = {
        "name": f"{lb_name}-{alarm.name}",
        "alarm_description": f"{alarm.summary}. {alarm.reason}. Runbook: {alarm.runbook_url}",
        "comparison_operator": "GreaterThanThreshold",
        "threshold": alarm.threshold,
        "evaluation_periods": alarm.evaluation_periods,
        "datapoints_to_alarm": alarm.datapoints_to_alarm,
        "treat_missing_data": "notBreaching",
        "alarm_actions": [topic_arn],
        "ok_actions": [topic_arn],
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
    Pod Identity). aws_provider: the region's. depends_on: the cluster's Pod Identity agent."""

    fleet_plan: FleetPlan
    region_plan: RegionPlan
    cluster_name: pulumi.Input[str]
    aws_provider: aws.Provider
    depends_on: Sequence[pulumi.Resource] = ()


class AlertTopic(pulumi.ComponentResource):
    """Children `{name}` (the topic: `topic`), `{name}-email-<k>` and `{name}-alertmanager`
    (role, policy, Pod Identity association)."""

    topic: aws.sns.Topic

    def __init__(
        self, name: str, args: AlertTopicArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:AlertTopic", name, None, opts)
        fp, rp = args.fleet_plan, args.region_plan
        child = pulumi.ResourceOptions(parent=self, provider=args.aws_provider)
        self.topic = aws.sns.Topic(
            name,
            name=topic_name(fp.name, rp.region),
            kms_master_key_id=SNS_MANAGED_KEY,
            opts=child,
        )
        addresses = [
            a for r in fp.alerting.receivers if r.email is not None for a in r.email.addresses
        ]
        for k, address in enumerate(addresses):
            aws.sns.TopicSubscription(
                f"{name}-email-{k}",
                topic=self.topic.arn,
                protocol="email",
                endpoint=address,
                opts=child,
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
            policy=self.topic.arn.apply(publish_policy),
            opts=child,
        )
        aws.eks.PodIdentityAssociation(
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
        topic_arn: pulumi.Input[str],
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
