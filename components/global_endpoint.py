"""Regional TLS certificates and the global name.

`GlobalValidation` (global): the ACM DNS-validation record of the global name, created once.
ACM's validation CNAME depends on the domain and the account, not on the certificate or its
region ("the CNAME validation token works for any AWS Region", ACM user guide, DNS
validation), so every region's certificate validates and renews through this one record; a
certificate for the global name in us-east-1 (unattached; ACM certificates are free) reveals
it without waiting for a region. Its lifetime is the global name's, not a region's: removing
a region no longer deletes the record the others renew with.

`RegionCertificate` (region): the region's ACM certificate for the global name and the
region's own name, the validation record of its own name, and `CertificateValidation`
(waiting for both names' records) so the Ingress finds it issued.

`GlobalEndpoint` (global): per region an alias record for the region's own name, a Route53
health check through its ALB (`EntryPoint.health_check`: zero Ready replicas), a
CLOUDWATCH_METRIC check on the region's capacity alarm (`components.capacity_alarm`: fewer
healthy targets than its share needs), a CALCULATED check healthy only while both are, a
CloudWatch alarm on that check (Route53 metrics exist in us-east-1 only) notifying an SNS
topic, and one routed record for the global name with the calculated check attached:
latency (`latency_routing_policies`) or failover (PRIMARY/SECONDARY), `set_identifier` the
region, an alias to the ALB with `evaluate_target_health` (or a CNAME with the plan's TTL).
Route53 is global: its records, checks, alarms and topic use the us-east-1 provider given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.alarms import alarm_topic, email_addresses
from llmfleet.errors import ProgramError
from llmfleet.fleetplan.entry_point import CapacityCheck, EntryPoint, HealthCheck
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.fleetplan.resilience import CNAME_TTL_S
from llmfleet.plan.routing import Dns


def zone_id(dns: Dns, provider: aws.Provider) -> pulumi.Output[str]:
    """The plan's zone id, or the public zone looked up by name."""
    if dns.zone_id is not None:
        return pulumi.Output.from_input(dns.zone_id)
    found = aws.route53.get_zone_output(
        name=dns.zone_name, private_zone=False, opts=pulumi.InvokeOptions(provider=provider)
    )
    return found.zone_id


def entry_point(rp: RegionPlan) -> EntryPoint:
    if rp.entry_point is None:
        raise ProgramError(f"{rp.region}: the FleetPlan has no entry point (plan.dns missing)")
    return rp.entry_point


def health_check_args(check: HealthCheck, name: str) -> dict[str, Any]:
    """Keyword arguments of the region's `aws.route53.HealthCheck`."""
    args: dict[str, Any] = {
        "type": check.type,
        "fqdn": check.fqdn,
        "port": check.port,
        "resource_path": check.resource_path,
        "request_interval": check.request_interval_s,
        "failure_threshold": check.failure_threshold,
        "enable_sni": True,
        "tags": {"Name": name},
    }
    if check.search_string is not None:
        args["search_string"] = check.search_string
    return args


def routed_record_args(
    fleet: FleetPlan,
    rp: RegionPlan,
    zone: pulumi.Input[str],
    lb_hostname: pulumi.Input[str],
    lb_zone_id: pulumi.Input[str],
    health_check_id: pulumi.Input[str],
) -> dict[str, Any]:
    """Keyword arguments of the region's `aws.route53.Record` for the global name."""
    dns = fleet.dns
    if dns is None:
        raise ProgramError("the FleetPlan has no dns")
    args: dict[str, Any] = {
        "zone_id": zone,
        "name": dns.record_name,
        "set_identifier": rp.region,
        "health_check_id": health_check_id,
    }
    if fleet.routing.policy == "failover":
        role = "PRIMARY" if rp.region == fleet.resilience.primary else "SECONDARY"
        args["failover_routing_policies"] = [{"type": role}]
    else:
        args["latency_routing_policies"] = [{"region": rp.region}]
    if dns.record_type == "cname":
        args.update(type="CNAME", records=[lb_hostname], ttl=dns.ttl_s or CNAME_TTL_S)
    else:
        args.update(
            type="A",
            aliases=[{"name": lb_hostname, "zone_id": lb_zone_id, "evaluate_target_health": True}],
        )
    return args


def validation_option(
    options: Sequence[aws.acm.outputs.CertificateDomainValidationOption], domain: str
) -> aws.acm.outputs.CertificateDomainValidationOption:
    """The DNS record ACM asks for to validate `domain`."""
    for option in options:
        if option.domain_name == domain:
            return option
    raise ProgramError(f"ACM gave no validation record for {domain}")


def lb_hostname(ingress: pulumi.CustomResource) -> pulumi.Output[str]:
    """The ALB's DNS name the controller writes into the Ingress status."""
    if not isinstance(ingress, k8s.networking.v1.Ingress):
        raise ProgramError(f"{ingress} is not an Ingress")
    return ingress.status.load_balancer.ingress[0].hostname


def capacity_health_check_args(
    check: CapacityCheck, alarm_name: pulumi.Input[str], region: str, name: str
) -> dict[str, Any]:
    """Keyword arguments of the CLOUDWATCH_METRIC `aws.route53.HealthCheck` on the region's
    capacity alarm; `triggers` re-reads the alarm when its threshold changes."""
    return {
        "type": "CLOUDWATCH_METRIC",
        "cloudwatch_alarm_name": alarm_name,
        "cloudwatch_alarm_region": region,
        "insufficient_data_health_status": check.insufficient_data_health_status,
        "triggers": {"min_healthy_targets": str(check.min_healthy_targets)},
        "tags": {"Name": name},
    }


def serving_health_check_args(children: Sequence[pulumi.Input[str]], name: str) -> dict[str, Any]:
    """The CALCULATED check the routed record uses: healthy only while every child is."""
    return {
        "type": "CALCULATED",
        "child_healthchecks": list(children),
        "child_health_threshold": len(children),
        "tags": {"Name": name},
    }


ROUTE53_METRICS_REGION = "us-east-1"
"""Route53 publishes health-check metrics (AWS/Route53) in us-east-1 only (Route53 developer
guide, "Monitoring health check status and getting notifications")."""


def unhealthy_alarm_args(
    health_check_id: pulumi.Input[str], topic_arn: pulumi.Input[str] | None, name: str, what: str
) -> dict[str, Any]:
    """Keyword arguments of the `aws.cloudwatch.MetricAlarm` on a Route53 health check:
    ALARM while Route53 sees the region unhealthy (HealthCheckStatus 0) for a minute; no
    action without a topic that reaches someone (None)."""
    actions = [topic_arn] if topic_arn is not None else []
    return {
        "name": name,
        "namespace": "AWS/Route53",
        "metric_name": "HealthCheckStatus",
        "dimensions": {"HealthCheckId": health_check_id},
        "statistic": "Minimum",
        "period": 60,
        "evaluation_periods": 1,
        "threshold": 1.0,
        "comparison_operator": "LessThanThreshold",
        "treat_missing_data": "breaching",
        "alarm_description": f"Route53 routes no user to {what}: its health check is unhealthy",
        "alarm_actions": actions,
        "ok_actions": actions,
    }


def validation_copy_urn(stack: str, project: str, fleet_name: str, region: str) -> str:
    """The URN of the global name's validation record as each region's certificate wrote it
    before it was created once (`{fleet}-{region}-cert-validation-0`, under RegionCertificate
    under Fleet)."""
    chain = "llmfleet:index:Fleet$llmfleet:index:RegionCertificate$aws:route53/record:Record"
    return f"urn:pulumi:{stack}::{project}::{chain}::{fleet_name}-{region}-cert-validation-0"


def old_validation_urn(fleet_name: str, region: str) -> str:
    """The first region's copy in this stack: the one record aliases it, so an existing stack
    keeps the record in place."""
    return validation_copy_urn(pulumi.get_stack(), pulumi.get_project(), fleet_name, region)


VALIDATION_TTL_S = 60


@dataclass(frozen=True)
class GlobalValidationArgs:
    """fleet_plan: with `dns`. zone_id: the plan's zone. route53_provider: us-east-1."""

    fleet_plan: FleetPlan
    zone_id: pulumi.Input[str]
    route53_provider: aws.Provider


class GlobalValidation(pulumi.ComponentResource):
    """Children `{name}` (the us-east-1 Certificate for the global name) and
    `{name}-validation` (its DNS-validation Record, the one every region's certificate of
    the global name validates and renews with). `fqdn`: the record's name."""

    fqdn: pulumi.Output[str]

    def __init__(
        self, name: str, args: GlobalValidationArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:GlobalValidation", name, None, opts)
        fleet = args.fleet_plan
        if fleet.dns is None:
            raise ProgramError(f"{name}: the FleetPlan has no dns")
        child = pulumi.ResourceOptions(parent=self, provider=args.route53_provider)
        cert = aws.acm.Certificate(
            name, domain_name=fleet.dns.record_name, validation_method="DNS", opts=child
        )
        option = cert.domain_validation_options.apply(
            partial(validation_option, domain=fleet.dns.record_name)
        )
        record = aws.route53.Record(
            f"{name}-validation",
            zone_id=args.zone_id,
            name=option.resource_record_name,
            type=option.resource_record_type,
            records=[option.resource_record_value],
            ttl=VALIDATION_TTL_S,
            opts=pulumi.ResourceOptions.merge(
                child,
                pulumi.ResourceOptions(
                    aliases=[old_validation_urn(fleet.name, fleet.regions[0].region)]
                ),
            ),
        )
        self.fqdn = record.fqdn
        self.register_outputs({"fqdn": record.fqdn})


@dataclass(frozen=True)
class RegionCertificateArgs:
    """entry_point: the region's (RegionPlan.entry_point). zone_id: the plan's zone.
    aws_provider: the region's (ACM certificates are regional). route53_provider: us-east-1.
    global_validation_fqdn: the global name's validation record (`GlobalValidation.fqdn`)
    when this program creates it; else (a region stack) the name ACM asks for, whose record
    the global stack owns."""

    entry_point: EntryPoint
    zone_id: pulumi.Input[str]
    aws_provider: aws.Provider
    route53_provider: aws.Provider
    global_validation_fqdn: pulumi.Input[str] | None = None


class RegionCertificate(pulumi.ComponentResource):
    """Children `{name}` (Certificate), `{name}-validation-1` (the Record validating the
    region's own name), `{name}-issued` (CertificateValidation: `issued`)."""

    issued: aws.acm.CertificateValidation

    def __init__(
        self, name: str, args: RegionCertificateArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:RegionCertificate", name, None, opts)
        ep = args.entry_point
        regional = pulumi.ResourceOptions(parent=self, provider=args.aws_provider)
        cert = aws.acm.Certificate(
            name,
            domain_name=ep.hostname,
            subject_alternative_names=[ep.regional_hostname],
            validation_method="DNS",
            opts=regional,
        )
        options = cert.domain_validation_options
        shared = args.global_validation_fqdn
        if shared is None:
            shared = options.apply(
                lambda opts: str(validation_option(opts, ep.hostname).resource_record_name)
                .rstrip(".")  # a record's fqdn, as Route53 returns it
            )
        own = options.apply(partial(validation_option, domain=ep.regional_hostname))
        # `-validation-1`: the name it always had (`-validation-0` was the global name's copy).
        record = aws.route53.Record(
            f"{name}-validation-1",
            zone_id=args.zone_id,
            name=own.resource_record_name,
            type=own.resource_record_type,
            records=[own.resource_record_value],
            ttl=VALIDATION_TTL_S,
            opts=pulumi.ResourceOptions(parent=self, provider=args.route53_provider),
        )
        self.issued = aws.acm.CertificateValidation(
            f"{name}-issued",
            certificate_arn=cert.arn,
            validation_record_fqdns=[shared, record.fqdn],
            opts=regional,
        )
        self.register_outputs({"certificate_arn": cert.arn})


@dataclass(frozen=True)
class RegionEntry:
    """What the global name needs of a deployed region: its ALB's DNS name (the Ingress
    status) and the name of its capacity alarm (`CapacityAlarm.alarm_name`). From the
    region's components in one program, or from its stack's outputs (`StackReference`)."""

    lb_hostname: pulumi.Input[str]
    capacity_alarm_name: pulumi.Input[str]


@dataclass(frozen=True)
class GlobalEndpointArgs:
    """fleet_plan: with `dns` and every region's entry point. zone_id: the plan's zone.
    entries: region -> its RegionEntry, for every region of the plan.
    route53_provider: an AWS provider in us-east-1 (Route53 is global)."""

    fleet_plan: FleetPlan
    zone_id: pulumi.Input[str]
    entries: Mapping[str, RegionEntry]
    route53_provider: aws.Provider


class GlobalEndpoint(pulumi.ComponentResource):
    """Children `{name}-alarms` (SNS topic) and per region r: `{name}-{r}-regional` (alias
    for the region's own name), `{name}-{r}-health` (endpoint check), `{name}-{r}-capacity`
    (CLOUDWATCH_METRIC check), `{name}-{r}-serving` (CALCULATED: both), `{name}-{r}-unhealthy`
    (CloudWatch alarm on it) and `{name}-{r}` (the routed record). Outputs: the global name
    (`hostname`), the per-region names (`endpoints`) and the alarm topic (`alarm_topic_arn`)."""

    health_checks: dict[str, aws.route53.HealthCheck]
    records: dict[str, aws.route53.Record]

    def __init__(
        self, name: str, args: GlobalEndpointArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:GlobalEndpoint", name, None, opts)
        fleet = args.fleet_plan
        if fleet.dns is None:
            raise ProgramError(f"{name}: the FleetPlan has no dns")
        routed = [rp for rp in fleet.regions if not rp.retiring]  # a retiring region leaves
        missing = [rp.region for rp in routed if rp.region not in args.entries]
        if missing:
            raise ProgramError(f"{name}: no entry point for {', '.join(missing)}")
        child = pulumi.ResourceOptions(parent=self, provider=args.route53_provider)
        # The topic of "a region left DNS": its own key (CloudWatch may publish) and the plan's
        # e-mail receivers; without any the alarms get no action (components.alarms).
        account = fleet.account_id or aws.get_caller_identity_output(
            opts=pulumi.InvokeOutputOptions(provider=args.route53_provider)
        ).account_id
        addresses = email_addresses(fleet)
        _, topic = alarm_topic(
            f"{name}-alarms", f"{fleet.name}-dns-alarms", account, ROUTE53_METRICS_REGION,
            addresses, child,
        )
        notify = topic.arn if addresses else None
        self.health_checks, self.records = {}, {}
        for rp in routed:
            ep, entry = entry_point(rp), args.entries[rp.region]
            if ep.capacity_check is None:
                raise ProgramError(f"{rp.region}: the FleetPlan has no capacity check")
            lb = entry.lb_hostname
            lb_zone = aws.lb.get_hosted_zone_id_output(
                load_balancer_type="application",
                region=rp.region,
                opts=pulumi.InvokeOptions(provider=args.route53_provider),
            ).id
            aws.route53.Record(
                f"{name}-{rp.region}-regional",
                zone_id=args.zone_id,
                name=ep.regional_hostname,
                type="A",
                aliases=[{"name": lb, "zone_id": lb_zone, "evaluate_target_health": True}],
                opts=child,
            )
            label = f"{fleet.name}-{rp.region}"
            endpoint = aws.route53.HealthCheck(
                f"{name}-{rp.region}-health",
                **health_check_args(ep.health_check, label),
                opts=child,
            )
            capacity = aws.route53.HealthCheck(
                f"{name}-{rp.region}-capacity",
                **capacity_health_check_args(
                    ep.capacity_check, entry.capacity_alarm_name, rp.region, f"{label}-capacity"
                ),
                opts=child,
            )
            serving = aws.route53.HealthCheck(
                f"{name}-{rp.region}-serving",
                **serving_health_check_args([endpoint.id, capacity.id], f"{label}-serving"),
                opts=child,
            )
            aws.cloudwatch.MetricAlarm(
                f"{name}-{rp.region}-unhealthy",
                **unhealthy_alarm_args(serving.id, notify, f"{label}-dns-unhealthy", label),
                opts=child,
            )
            self.health_checks[rp.region] = serving
            self.records[rp.region] = aws.route53.Record(
                f"{name}-{rp.region}",
                **routed_record_args(fleet, rp, args.zone_id, lb, lb_zone, serving.id),
                opts=child,
            )
        self.hostname = fleet.dns.record_name
        self.endpoints = {rp.region: entry_point(rp).regional_hostname for rp in routed}
        self.alarm_topic_arn = topic.arn
        self.register_outputs(
            {
                "hostname": self.hostname,
                "endpoints": self.endpoints,
                "primary": fleet.resilience.primary,
                "alarm_topic_arn": topic.arn,
            }
        )
