"""What `__main__.py` runs for each kind of stack (`llmfleet.plan.stacks.StackTarget`).

- An environment stack (`<env>`) builds every region and the global part in one program. A
  multi-region environment deploys as region stacks instead, so its own stack previews
  (the whole sized fleet, what a reviewer wants) but refuses `pulumi up`.
- A region stack (`<env>.<region>`) builds that region only and exports its entry point
  (`ENTRY_POINT_OUTPUT`: the load balancer's name and the capacity alarm's) for the global
  stack.
- The global stack (`<env>.global`) reads every region stack's entry point through a
  `pulumi.StackReference` before it registers anything: with all of them it builds the
  certificate validation, health checks and routed records; with none (a new environment)
  only the global name's certificate validation, which the regions' certificates need
  first; with some but not all it stops with an error naming the missing stacks and
  registers nothing, so the global name is never routed to part of the fleet.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any

import pulumi

from components.fleet import Fleet, FleetArgs
from components.global_endpoint import RegionEntry
from llmfleet.catalog.kubernetes import support_notice
from llmfleet.errors import ProgramError
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.outputs.deploy_order import GLOBAL_VALIDATION_OUTPUT
from llmfleet.plan.stacks import (
    AWS_REGION_KEY,
    ENVIRONMENT_KEY,
    PLAN_KEY,
    REGION_KEY,
    StackTarget,
    deploy_stacks,
    region_stack,
)

ENTRY_POINT_OUTPUT = "entry_point"
"""The region stack output the global stack reads: {region, regional_hostname, lb_hostname,
capacity_alarm_name}."""
ENTRY_KEYS = ("lb_hostname", "capacity_alarm_name")


def stack_config() -> dict[str, Any]:
    """The stack's config keys `resolve_stack` reads, as the stack file spells them."""
    llmfleet, aws = pulumi.Config("llmfleet"), pulumi.Config("aws")
    found = {
        PLAN_KEY: llmfleet.get_object("plan"),
        ENVIRONMENT_KEY: llmfleet.get("environment"),
        REGION_KEY: llmfleet.get("region"),
        AWS_REGION_KEY: aws.get("region"),
    }
    return {k: v for k, v in found.items() if v is not None}


def deploy(
    target: StackTarget,
    fleet_plan: FleetPlan,
    aws_profile: str | None = None,
    hf_token: pulumi.Input[str] | None = None,
) -> None:
    """Register the stack's resources and outputs (`hf_token`: the staging Jobs', for a
    gated checkpoint). Warns, against today's date, when the fleet's Kubernetes version
    leaves EKS standard support within the margin (`support_notice`)."""
    notice = support_notice(fleet_plan.kubernetes_version, fleet_plan.kubernetes_support,
                            date.today())
    if notice:
        pulumi.log.warn(notice)
    if target.scope == "global":
        pulumi.run(lambda: _global(target, fleet_plan))
        return
    if target.scope == "environment" and len(fleet_plan.regions) > 1:
        _refuse_whole_up(target)
    fleet = Fleet(
        fleet_plan.name,
        FleetArgs(
            fleet_plan, aws_profile=aws_profile, regions=target.regions, hf_token=hf_token
        ),
    )
    _export_regions(fleet_plan, fleet, target.regions)
    if target.scope == "region":
        [resources] = fleet.regions.values()
        entry = resources.entry()
        if entry is not None and target.region is not None:
            rp = fleet_plan.region(target.region)
            assert rp.entry_point is not None
            pulumi.export(
                ENTRY_POINT_OUTPUT,
                {
                    "region": rp.region,
                    "regional_hostname": rp.entry_point.regional_hostname,
                    "lb_hostname": entry.lb_hostname,
                    "capacity_alarm_name": entry.capacity_alarm_name,
                },
            )
    _export_global(fleet)


def _refuse_whole_up(target: StackTarget) -> None:
    """`pulumi preview -s <env>` shows the whole fleet; `pulumi up -s <env>` of a
    multi-region environment would build every region a second time beside its region
    stacks."""
    if pulumi.runtime.is_dry_run():
        return
    stacks = deploy_stacks(target.environment, target.plan, target.plan.rollout.order)
    raise ProgramError(
        f"{target.environment} has {len(target.plan.regions)} regions and deploys as the stacks "
        f"{', '.join(stacks)} (in that order; `llmfleet rollout --stack {target.environment}`): "
        f"`pulumi up` one of them. To move an existing {target.environment} stack into them "
        "without recreating anything, see docs/deploy.md: Region stacks"
    )


def _export_regions(fleet_plan: FleetPlan, fleet: Fleet, regions: list[str]) -> None:
    pulumi.export(
        "monthly_cost_usd",
        round(sum(fleet_plan.region(r).billed_monthly_cost_usd for r in regions), 2),
    )
    pulumi.export(
        "regions",
        {
            r: {
                "instance_type": fleet_plan.region(r).instance_type,
                "nodes": fleet_plan.region(r).nodes.model_dump(),
                "replicas": fleet_plan.region(r).replicas.model_dump(),
            }
            for r in regions
        },
    )
    pulumi.export(
        "cluster_names", {r: res.cluster.cluster.name for r, res in fleet.regions.items()}
    )
    pulumi.export(
        "kubeconfigs",
        pulumi.Output.secret({r: res.cluster.kubeconfig for r, res in fleet.regions.items()}),
    )


def _export_global(fleet: Fleet) -> None:
    if fleet.global_validation is not None:
        pulumi.export(GLOBAL_VALIDATION_OUTPUT, fleet.global_validation.fqdn)
    endpoint = fleet.global_endpoint
    if endpoint is None:
        return
    pulumi.export("hostname", endpoint.hostname)
    pulumi.export("endpoints", endpoint.endpoints)
    pulumi.export("alarm_topic_arn", endpoint.alarm_topic_arn)


def stack_reference_name(stack: str) -> str:
    """A stack of this project, fully qualified (`org/project/stack`)."""
    return f"{pulumi.get_organization()}/{pulumi.get_project()}/{stack}"


def region_entry(stack: str, value: Any) -> RegionEntry:
    """A region stack's `entry_point` output as a RegionEntry; a clear error if it lacks a
    key (deployed by an older llmfleet, or without `dns`)."""
    if not isinstance(value, Mapping):
        raise ProgramError(f"{stack}: its `{ENTRY_POINT_OUTPUT}` output is not a mapping")
    lacking = [k for k in ENTRY_KEYS if not isinstance(value.get(k), str) or not value.get(k)]
    if lacking:
        raise ProgramError(
            f"{stack}: its `{ENTRY_POINT_OUTPUT}` output has no {', '.join(lacking)}; run "
            f"`pulumi up -s {stack}` with this llmfleet first"
        )
    return RegionEntry(str(value["lb_hostname"]), str(value["capacity_alarm_name"]))


def check_entries(target: StackTarget, found: Mapping[str, Any]) -> dict[str, RegionEntry]:
    """Every region's entry point, or none (a new environment); anything between is an
    error naming the region stacks to deploy first."""
    stacks = {r.name: region_stack(target.environment, r.name) for r in target.plan.regions
              if not r.retire}  # a retiring region leaves the global name first
    missing = [stacks[r] for r in stacks if found.get(r) is None]
    if missing and len(missing) < len(stacks):
        raise ProgramError(
            f"{target.stack}: the region stack(s) {', '.join(missing)} have no "
            f"`{ENTRY_POINT_OUTPUT}` output (not deployed yet?); nothing was changed: the "
            f"global name is routed to every region or to none. Run `pulumi up -s` on "
            f"{', '.join(missing)} first, then `pulumi up -s {target.stack}`"
        )
    return {r: region_entry(stacks[r], found[r]) for r in stacks if found.get(r) is not None}


async def _global(target: StackTarget, fleet_plan: FleetPlan) -> None:
    """The global stack: read every region stack's entry point, then build."""
    found: dict[str, Any] = {}
    for rp in fleet_plan.regions:
        stack = region_stack(target.environment, rp.region)
        ref = pulumi.StackReference(
            f"{fleet_plan.name}-{rp.region}-stack", stack_reference_name(stack)
        )
        details = await ref.get_output_details(ENTRY_POINT_OUTPUT)
        found[rp.region] = details.value if details.value is not None else details.secret_value
    entries = check_entries(target, found)
    if not entries:
        pulumi.log.warn(
            f"{target.stack}: no region stack of {target.environment} is deployed: only the "
            "global name's certificate validation is created (the regions' certificates "
            "need it); deploy the region stacks, then run this stack again"
        )
    fleet = Fleet(fleet_plan.name, FleetArgs(fleet_plan, regions=[], global_entries=entries))
    _export_global(fleet)
