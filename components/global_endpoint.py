"""Regional TLS certificates and the global name.

`RegionCertificate`: the region's ACM certificate for the global name and the region's own
name, validated by DNS in the plan's zone, waited for by `CertificateValidation` so the
Ingress finds it issued. ACM hands every region the same validation record for the global
name ("the CNAME validation token works for any AWS Region", ACM user guide), so the fleet
creates that one record once (`Fleet`, from any region's certificate) and each region owns
only its own name's record: two resources owning one record (`allow_overwrite`) delete it
with either.

`GlobalEndpoint`: per region a Route53 health check on the region's own name (through its
ALB; `llmfleet.entry_point` says why it reflects serving capacity), an alias record for
that name, and one routed record for the global name: latency (`latency_routing_policies`
with the region) or failover (PRIMARY/SECONDARY), `set_identifier` the region, the health
check attached, an alias to the ALB with `evaluate_target_health` (or a CNAME with the
plan's TTL). Route53 is global: its records and checks use the us-east-1 provider given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from llmfleet.errors import ProgramError
from llmfleet.fleetplan.entry_point import EntryPoint, HealthCheck
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


def entry(rp: RegionPlan) -> EntryPoint:
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


@dataclass(frozen=True)
class RegionCertificateArgs:
    """entry_point: the region's (RegionPlan.entry_point). zone_id: the plan's zone.
    aws_provider: the region's (ACM certificates are regional). route53_provider: us-east-1.
    owns_shared_record: whether this certificate creates the global name's validation
    record. ACM gives every region's certificate the same record for the same name, so the
    fleet creates it once (`shared_validation_record`) and no region owns it: removing a
    region would otherwise delete the record the others renew with."""

    entry_point: EntryPoint
    zone_id: pulumi.Input[str]
    aws_provider: aws.Provider
    route53_provider: aws.Provider
    owns_shared_record: bool = True


def validation_record_args(
    option: pulumi.Output[aws.acm.outputs.CertificateDomainValidationOption],
    zone: pulumi.Input[str],
) -> dict[str, Any]:
    """Keyword arguments of the Route53 record ACM asks for."""
    return {
        "zone_id": zone,
        "name": option.resource_record_name,
        "type": option.resource_record_type,
        "records": [option.resource_record_value],
        "ttl": 60,
    }


class RegionCertificate(pulumi.ComponentResource):
    """Children `{name}` (Certificate), `{name}-validation-{k}` (Records), `{name}-issued`
    (CertificateValidation: `issued`)."""

    issued: aws.acm.CertificateValidation
    certificate: aws.acm.Certificate

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
        self.certificate = cert
        fqdns: list[pulumi.Output[str]] = []
        for k, domain in enumerate([ep.hostname, ep.regional_hostname]):
            option = cert.domain_validation_options.apply(partial(validation_option, domain=domain))
            if domain == ep.hostname and not args.owns_shared_record:
                fqdns.append(option.resource_record_name.apply(lambda n: n.rstrip(".")))
                continue
            record = aws.route53.Record(
                f"{name}-validation-{k}",
                **validation_record_args(option, args.zone_id),
                opts=pulumi.ResourceOptions(parent=self, provider=args.route53_provider),
            )
            fqdns.append(record.fqdn)
        self.issued = aws.acm.CertificateValidation(
            f"{name}-issued",
            certificate_arn=cert.arn,
            validation_record_fqdns=fqdns,
            opts=regional,
        )
        self.register_outputs({"certificate_arn": cert.arn})


@dataclass(frozen=True)
class GlobalEndpointArgs:
    """fleet_plan: with `dns` and every region's entry point. zone_id: the plan's zone.
    lb_hostnames: region -> its ALB's DNS name (the Ingress status).
    route53_provider: an AWS provider in us-east-1 (Route53 is global)."""

    fleet_plan: FleetPlan
    zone_id: pulumi.Input[str]
    lb_hostnames: Mapping[str, pulumi.Input[str]]
    route53_provider: aws.Provider


class GlobalEndpoint(pulumi.ComponentResource):
    """Children per region r: `{name}-{r}-health` (HealthCheck), `{name}-{r}-regional`
    (alias for the region's own name) and `{name}-{r}` (the routed record). Outputs: the
    global name (`hostname`) and the per-region names (`endpoints`)."""

    health_checks: dict[str, aws.route53.HealthCheck]
    records: dict[str, aws.route53.Record]

    def __init__(
        self, name: str, args: GlobalEndpointArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:GlobalEndpoint", name, None, opts)
        fleet = args.fleet_plan
        if fleet.dns is None:
            raise ProgramError(f"{name}: the FleetPlan has no dns")
        child = pulumi.ResourceOptions(parent=self, provider=args.route53_provider)
        self.health_checks, self.records = {}, {}
        for rp in fleet.regions:
            ep = entry(rp)
            lb = args.lb_hostnames[rp.region]
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
            check = aws.route53.HealthCheck(
                f"{name}-{rp.region}-health",
                **health_check_args(ep.health_check, f"{fleet.name}-{rp.region}"),
                opts=child,
            )
            self.health_checks[rp.region] = check
            self.records[rp.region] = aws.route53.Record(
                f"{name}-{rp.region}",
                **routed_record_args(fleet, rp, args.zone_id, lb, lb_zone, check.id),
                opts=child,
            )
        self.hostname = fleet.dns.record_name
        self.endpoints = {rp.region: entry(rp).regional_hostname for rp in fleet.regions}
        self.register_outputs(
            {
                "hostname": self.hostname,
                "endpoints": self.endpoints,
                "primary": fleet.resilience.primary,
            }
        )
