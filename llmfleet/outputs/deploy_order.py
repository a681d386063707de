"""`llmfleet rollout`: the stacks `pulumi up` runs for an environment, in order, with the gate
each must pass before the next starts. The shipped deploy workflow reads its JSON, so the
order lives in the plan (`rollout.order`, FleetPlan.rollout) and nowhere else.

Per region stack: the Deployment whose rollout must finish within the region's predicted
cold start (`RegionPlan.cold_start.total_s`, rounded up to a second), and for the canary
(when stacks follow it) the bake time and the alerts that must not fire
(`FleetPlan.rollout`). The global stack goes last and has no gate of its own.

Two rollouts differ (docs/day2.md):
- a new environment's first: the global stack goes first too, once (`bootstrap`): it creates
  the global name's certificate validation record, which every region's certificate waits
  for; `bootstrap_check` fails exactly while that record does not exist;
- a region's retirement (regions[].retire): the global stack first, so the global name stops
  routing to it while its load balancer still serves; then the region's own stack (deletion
  protection off, its weight bucket allowed to empty); then `pulumi destroy` of it, and the
  plan edit that removes it (`retire_steps`)."""

from __future__ import annotations

import math
from collections.abc import Collection
from urllib.parse import urlsplit

from pydantic import Field

from llmfleet.data import Data
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.workload import PROMETHEUS_URL
from llmfleet.plan.schema import CapacityPlan
from llmfleet.plan.stacks import GLOBAL, deploy_stacks, region_stack

GLOBAL_VALIDATION_OUTPUT = "global_validation_fqdn"
"""The global stack's output once the global name's validation record exists (the Pulumi
program exports it): a deploy that finds it missing runs the global stack first (the regions'
certificates need the record)."""


def prometheus_alerts_path() -> str:
    """Prometheus's alerts API (the one KEDA queries, `workload.PROMETHEUS_URL`) through the
    API server's service proxy."""
    url = urlsplit(PROMETHEUS_URL)
    service, namespace = str(url.hostname).split(".")[:2]
    return f"/api/v1/namespaces/{namespace}/services/{service}:{url.port}/proxy/api/v1/alerts"


class DeployStep(Data):
    stack: str
    region: str | None = Field(description="None for the global stack.")
    canary: bool
    namespace: str | None = Field(description="Of the Deployment the gate waits for.")
    deployment: str | None
    ready_timeout_s: int | None = Field(
        description="Its replicas must be Ready within this: the predicted cold start."
    )
    bake_s: int = Field(description="The canary runs this long before its alerts are read.")
    gate_alerts: list[str] = Field(description="Alerts that stop the rollout when firing.")


class StackFile(Data):
    """A file the rollout reads, and whether the project has it."""

    path: str = Field(description="Relative to the project: stacks/Pulumi.<stack>.yaml.")
    stack: str
    present: bool
    required: bool = Field(
        description="False for a region or global stack: resolved from its name "
        "(`ENV.REGION`, `ENV.global`) when it has no file; `pulumi stack select --create` "
        "creates the stack itself."
    )


class RetireStep(Data):
    """After the rollout of a retirement: what removes the region for good."""

    stack: str
    region: str
    commands: list[str]


class DeployOrder(Data):
    environment: str
    canary: str
    steps: list[DeployStep]
    bootstrap: str | None = Field(
        default=None,
        description="A new environment: this (global) stack goes first, once, before steps.",
    )
    bootstrap_check: str | None = Field(
        default=None,
        description="A command that fails while the environment is new (bootstrap needed).",
    )
    retire_steps: list[RetireStep] = Field(
        default_factory=list, description="Retiring regions: destroy, then the plan edit."
    )
    prometheus_alerts_path: str = Field(
        description="Prometheus's alerts API through the Kubernetes API server proxy "
        "(`kubectl get --raw`), where the gate reads the canary's alerts."
    )
    reasons: list[str]
    files: list[StackFile] = Field(
        default_factory=list,
        description="The environment's stack file (the plan) and each deploy stack's.",
    )


def stack_files(env: str, stacks: list[str], present: Collection[str]) -> list[StackFile]:
    """The environment's file, then each deploy stack's (`present`: the stacks with a file)."""
    names = [env, *(s for s in stacks if s != env)]
    return [
        StackFile(path=f"stacks/Pulumi.{s}.yaml", stack=s, present=s in present,
                  required=s == env)
        for s in names
    ]


def deploy_order(
    env: str, plan: CapacityPlan, fleet: FleetPlan, present: Collection[str] = ()
) -> DeployOrder:
    """`present`: the stacks with a file in stacks/ (`DeployOrder.files` says which)."""
    rollout = fleet.rollout
    stacks = deploy_stacks(env, plan, rollout.order)
    retiring = [rp.region for rp in fleet.regions if rp.retiring]
    pairs = list(zip(stacks, [*rollout.order, GLOBAL], strict=False))
    if retiring:  # the global stack first, then only the retiring regions
        pairs = [p for p in pairs if p[1] == GLOBAL] + [p for p in pairs if p[1] in retiring]
    steps = []
    for stack, region in pairs:
        if region == GLOBAL:
            steps.append(
                DeployStep(
                    stack=stack, region=None, canary=False, namespace=None, deployment=None,
                    ready_timeout_s=None, bake_s=0, gate_alerts=[],
                )
            )
            continue
        rp = fleet.region(region)
        canary = region == rollout.canary and not retiring
        gated = canary and len(stacks) > 1  # nothing to protect after a lone stack
        steps.append(
            DeployStep(
                stack=stack,
                region=region,
                canary=canary,
                namespace=rp.workload.namespace,
                deployment=rp.workload.name,
                ready_timeout_s=math.ceil(rp.cold_start.total_s),
                bake_s=rollout.bake_s if gated else 0,
                gate_alerts=list(rollout.gate_alerts) if gated else [],
            )
        )
    global_stack = next((s for s, r in pairs if r == GLOBAL), None)
    bootstrap = global_stack if global_stack is not None and not retiring else None
    return DeployOrder(
        environment=env,
        canary=rollout.canary,
        steps=steps,
        bootstrap=bootstrap,
        bootstrap_check=(
            f"pulumi stack output {GLOBAL_VALIDATION_OUTPUT} --stack {bootstrap}"
            if bootstrap else None
        ),
        retire_steps=[
            RetireStep(stack=region_stack(env, r), region=r, commands=[
                f"pulumi destroy -s {region_stack(env, r)}",
                f"remove {r} from regions (and rollout.order) in stacks/Pulumi.{env}.yaml, "
                "its share going to the others, and `llmfleet diff` the change",
                f"rm stacks/Pulumi.{region_stack(env, r)}.yaml && pulumi stack rm "
                f"{region_stack(env, r)}",
                f"llmfleet rollout --stack {env}: the survivors and {env}.global take the new plan",
            ])
            for r in retiring
        ],
        prometheus_alerts_path=prometheus_alerts_path(),
        reasons=list(rollout.reasons),
        files=stack_files(env, stacks, present),
    )


def deploy_order_text(order: DeployOrder) -> str:
    lines = [
        f"Rollout of {order.environment}: {len(order.steps)} stack(s), in this order (kubectl "
        "with the region's kubeconfig: `pulumi stack output kubeconfigs --show-secrets -s "
        "STACK`)"
    ]
    lines += files_text(order)
    if order.bootstrap:
        lines.append(
            f"  0. a new environment only (`{order.bootstrap_check}` fails): pulumi up -s "
            f"{order.bootstrap} first, once: the global name's certificate validation record, "
            "which every region's certificate waits for"
        )
    retiring = [r.region for r in order.retire_steps]
    for n, step in enumerate(order.steps, 1):
        if step.region is None:
            when = (f"first: the global name stops routing to {', '.join(retiring)}"
                    if retiring else "DNS: after every region")
            lines.append(f"  {n}. pulumi up -s {step.stack}   ({when})")
            continue
        if step.region in retiring:
            lines.append(f"  {n}. pulumi up -s {step.stack}   (retiring: deletion protection "
                         "off, its weight bucket may empty)")
            continue
        gate = (
            f"kubectl -n {step.namespace} rollout status deployment/{step.deployment} "
            f"--timeout {step.ready_timeout_s}s"
        )
        lines.append(f"  {n}. pulumi up -s {step.stack}" + ("   (canary)" if step.canary else ""))
        lines.append(f"     then: {gate}")
        if step.bake_s:
            lines.append(
                f"     then wait {step.bake_s} s and stop if any of "
                f"{', '.join(step.gate_alerts)} fires: kubectl get --raw "
                f"{order.prometheus_alerts_path}"
            )
    for r in order.retire_steps:
        lines.append(f"  then, to remove {r.region}:")
        lines += [f"     {k}. {c}" for k, c in enumerate(r.commands, 1)]
    lines += [f"  - {r}" for r in order.reasons]
    return "\n".join(lines) + "\n"


def files_text(order: DeployOrder) -> list[str]:
    """The files the rollout reads: the plan's (required), each stack's (optional)."""
    lines = []
    for f in order.files:
        if f.required:
            state = "present" if f.present else "MISSING: the plan; nothing deploys without it"
            lines.append(f"  file {f.path}: {state}")
    by_name = [f.stack for f in order.files if not f.required and not f.present]
    own = [f.path for f in order.files if not f.required and f.present]
    if own:
        lines.append(f"  files {', '.join(own)}: present")
    if by_name:
        lines.append(
            f"  no file needed for {', '.join(by_name)}: resolved from the name (ENV.REGION, "
            "ENV.global); create each stack once with `pulumi stack select --create STACK`"
        )
    return lines
