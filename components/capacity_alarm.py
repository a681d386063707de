"""CapacityAlarm: a region's serving capacity as a CloudWatch alarm, the input of the Route53
health check that takes the region out of DNS when it falls below what its share needs.

The alarm watches the ALB the AWS Load Balancer Controller made from the region's Ingress:
`HealthyHostCount` (Minimum over the load balancer's nodes) of its target group below
`EntryPoint.capacity_check.min_healthy_targets`, a number the core decided. Neither the
ALB nor its target group is a Pulumi resource, so both are looked up by the tags the
controller puts on them (`elbv2.k8s.aws/cluster`, plus the Ingress's own
`alb.ingress.kubernetes.io/tags`) once the Ingress exists: the lookups depend on it, so a
first preview shows them unknown and `pulumi up` runs them after the Ingress has its load
balancer. The alarm lives in the region (CloudWatch alarms read metrics of their own
region); its name is the region stack's `entry_point.capacity_alarm_name` output, which the
global stack's Route53 health check reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from llmfleet.errors import ProgramError
from llmfleet.fleetplan.entry_point import ALB, CapacityCheck
from llmfleet.fleetplan.region import RegionPlan

CLUSTER_TAG = "elbv2.k8s.aws/cluster"
"""The controller tags every AWS resource it creates with the cluster's name."""
RESOURCE_TAG = "ingress.k8s.aws/resource"
LOAD_BALANCER = "LoadBalancer"
"""The controller's `ingress.k8s.aws/resource` value on the load balancer itself."""


def capacity_alarm_name(fleet_name: str, region: str) -> str:
    """The alarm's physical name: the Route53 health check names it (and its region)."""
    return f"{fleet_name}-{region}-serving-capacity"


def ingress_tags(region_plan: RegionPlan) -> dict[str, str]:
    """The tags the Ingress whose targets are the vLLM pods asks the controller to put on
    its ALB and target groups (`alb.ingress.kubernetes.io/tags`: `k=v,k=v`): the API
    Ingress's, or behind a prefix-aware router the health Ingress's
    (`EntryPoint.capacity_target`)."""
    ep = region_plan.entry_point
    if ep is None:
        raise ProgramError(f"{region_plan.region}: no entry point (plan.dns missing)")
    annotations = ep.health_annotations if ep.capacity_target == "health" else (
        ep.ingress_annotations)
    text = annotations.get(f"{ALB}/tags", "")
    pairs = [item.split("=", 1) for item in text.split(",") if item]
    return {k.strip(): v.strip() for k, v in pairs}


def alarm_args(
    check: CapacityCheck,
    name: str,
    load_balancer: pulumi.Input[str],
    target_group: pulumi.Input[str],
) -> dict[str, Any]:
    """Keyword arguments of the region's `aws.cloudwatch.MetricAlarm`."""
    return {
        "name": name,
        "namespace": check.namespace,
        "metric_name": check.metric_name,
        "dimensions": {"LoadBalancer": load_balancer, "TargetGroup": target_group},
        "statistic": check.statistic,
        "period": check.period_s,
        "evaluation_periods": check.evaluation_periods,
        "datapoints_to_alarm": check.datapoints_to_alarm,
        "threshold": float(check.min_healthy_targets),
        "comparison_operator": check.comparison_operator,
        "treat_missing_data": check.treat_missing_data,
        "alarm_description": check.reason,
    }


@dataclass(frozen=True)
class CapacityAlarmArgs:
    """fleet_name: the plan's name. region_plan: with an entry point and its capacity check.
    cluster_name: the region's EKS cluster (the controller's tag). ingress: the region's
    Ingress (the lookups wait for it). aws_provider: the region's provider."""

    fleet_name: str
    region_plan: RegionPlan
    cluster_name: pulumi.Input[str]
    ingress: pulumi.Resource
    aws_provider: aws.Provider


class CapacityAlarm(pulumi.ComponentResource):
    """Child `{name}` (MetricAlarm). `alarm_name`: its physical name."""

    alarm_name: pulumi.Output[str]

    def __init__(
        self, name: str, args: CapacityAlarmArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:CapacityAlarm", name, None, opts)
        rp = args.region_plan
        if rp.entry_point is None or rp.entry_point.capacity_check is None:
            raise ProgramError(f"{rp.region}: the FleetPlan has no capacity check (plan.dns)")
        own = ingress_tags(rp)
        tags = pulumi.Output.from_input(args.cluster_name).apply(
            lambda cluster: {CLUSTER_TAG: cluster, **own}
        )
        lookup = pulumi.InvokeOutputOptions(
            parent=self, provider=args.aws_provider, depends_on=[args.ingress]
        )
        lb = aws.lb.get_load_balancer_output(
            tags=tags.apply(lambda t: {**t, RESOURCE_TAG: LOAD_BALANCER}), opts=lookup
        )
        tg = aws.lb.get_target_group_output(tags=tags, opts=lookup)
        alarm = aws.cloudwatch.MetricAlarm(
            name,
            **alarm_args(
                rp.entry_point.capacity_check,
                capacity_alarm_name(args.fleet_name, rp.region),
                lb.arn_suffix,
                tg.arn_suffix,
            ),
            opts=pulumi.ResourceOptions(parent=self, provider=args.aws_provider),
        )
        self.alarm_name = alarm.name
        self.register_outputs({"alarm_name": alarm.name})
