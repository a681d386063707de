"""`llmfleet rollout`: the stacks `pulumi up` runs for an environment, in order, with the gate
each must pass before the next starts. The shipped deploy workflow reads its JSON, so the
order lives in the plan (`rollout.order`, FleetPlan.rollout) and nowhere else.

Per region stack: the Deployment whose rollout must finish within the region's predicted
cold start (`RegionPlan.cold_start.total_s`, rounded up to a second), and for the canary
(when stacks follow it) the bake time and the alerts that must not fire
(`FleetPlan.rollout`). The global stack goes last and has no gate of its own."""

from __future__ import annotations

import math
from urllib.parse import urlsplit

from pydantic import Field

from llmfleet.data import Data
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.workload import PROMETHEUS_URL
from llmfleet.plan.schema import CapacityPlan
from llmfleet.plan.stacks import GLOBAL, deploy_stacks


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


class DeployOrder(Data):
    environment: str
    canary: str
    steps: list[DeployStep]
    prometheus_alerts_path: str = Field(
        description="Prometheus's alerts API through the Kubernetes API server proxy "
        "(`kubectl get --raw`), where the gate reads the canary's alerts."
    )
    reasons: list[str]


def deploy_order(env: str, plan: CapacityPlan, fleet: FleetPlan) -> DeployOrder:
    rollout = fleet.rollout
    stacks = deploy_stacks(env, plan, rollout.order)
    steps = []
    for stack, region in zip(stacks, [*rollout.order, GLOBAL], strict=False):
        if region == GLOBAL:
            steps.append(
                DeployStep(
                    stack=stack, region=None, canary=False, namespace=None, deployment=None,
                    ready_timeout_s=None, bake_s=0, gate_alerts=[],
                )
            )
            continue
        rp = fleet.region(region)
        canary = region == rollout.canary
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
    return DeployOrder(
        environment=env,
        canary=rollout.canary,
        steps=steps,
        prometheus_alerts_path=prometheus_alerts_path(),
        reasons=list(rollout.reasons),
    )


def deploy_order_text(order: DeployOrder) -> str:
    lines = [
        f"Rollout of {order.environment}: {len(order.steps)} stack(s), in this order (kubectl "
        "with the region's kubeconfig: `pulumi stack output kubeconfigs --show-secrets -s "
        "STACK`)"
    ]
    for n, step in enumerate(order.steps, 1):
        if step.region is None:
            lines.append(f"  {n}. pulumi up -s {step.stack}   (DNS: after every region)")
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
    lines += [f"  - {r}" for r in order.reasons]
    return "\n".join(lines) + "\n"
